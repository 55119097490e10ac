// The simulator's cost model: what a flow, a local copy and a primitive invocation cost.
//
// Every figure comes from the Topology (docs/cost-model.md says where each default comes
// from); CostModel only gathers them, applies command-line overrides and defines the few
// formulas the engine uses, so that tests can compute closed-form times from the same
// numbers the engine sees.
//
// The model, in short (docs/cost-model.md has the whole of it):
// * A transfer is a flow over the resources of Topology::route (NVLink pair and ports
//   inside a node; NIC, rack links across). The sending thread block drives it at most at
//   its per-TB rate (tb_copy_GBps over NVLink, tb_net_GBps through a NIC).
// * A resource asked for D GB/s by its active flows (the sum of their per-TB rates) while
//   it carries C: when D <= C every flow runs at its own rate; past saturation (z = D/C > 1)
//   the resource delivers C * eff(z), eff(z) = 1 / (1 + gamma * (z - 1)) (paper 001 Eq. 1,
//   Fig. 4: bandwidth falls when the TBs ask for more than the link carries), shared in
//   proportion to the flows' rates. A flow runs at its rate times the smallest share factor
//   along its path.
// * Each primitive invocation costs a fixed alpha (primitive_overhead_us); data lands
//   `latency` after it leaves; receivers copy or reduce out of their staging slot at the
//   per-TB local rate, limited by the GPU's HBM bandwidth shared by its thread blocks.
// * Small messages (a call's launch, the one-shot kernel, LL and the runtime's Simple
//   protocol): measured constants in sim/call_model.hpp (CallCosts), with their sources.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ir/plan.hpp"
#include "ir/topology.hpp"

namespace weft::sim {

/// The figures the engine uses. Built from a Topology; rates in GB/s (1e9 B/s), times in us.
struct CostModel {
  double alpha_us = 0;          ///< fixed cost of one primitive invocation
  double gamma = 0;             ///< contention penalty per unit of oversubscription past 1
  double tb_copy_GBps = 0;      ///< one TB driving an NVLink flow
  double tb_net_GBps = 0;       ///< one TB driving a NIC flow
  double tb_local_GBps = 0;     ///< HBM traffic one TB moves in a local copy / reduction
  double hbm_GBps = 0;          ///< one GPU's HBM, shared by its thread blocks' local work

  /// Reads the figures of `topo` (which must validate). tb_local_GBps comes from the
  /// topology when set there, else the documented default of 4 x tb_copy_GBps.
  static CostModel from_topology(const Topology& topo);

  /// Delivered fraction of a resource's capacity when its flows ask z times what it
  /// carries: 1 for z <= 1, 1 / (1 + gamma (z - 1)) beyond.
  double efficiency(double z) const { return efficiency(z, gamma); }
  static double efficiency(double z, double g) { return z <= 1.0 ? 1.0 : 1.0 / (1.0 + g * (z - 1.0)); }

  /// Share factor of a resource of capacity `cap_GBps` asked for `demand_GBps`: the
  /// fraction of its own rate each flow through it gets (1 when not saturated).
  double share_factor(double cap_GBps, double demand_GBps) const { return share_factor(cap_GBps, demand_GBps, gamma); }
  /// The same with contention penalty `g` instead of gamma.
  static double share_factor(double cap_GBps, double demand_GBps, double g) {
    if (demand_GBps <= cap_GBps) return 1.0;
    return cap_GBps * efficiency(demand_GBps / cap_GBps, g) / demand_GBps;
  }

  /// HBM bytes moved per payload byte by the receive side of a primitive (or by a local
  /// primitive): 2 for a copy out of staging (read + write), 3 for a reduction (two reads,
  /// one write), 0 for primitives that forward instead of storing (their local store runs
  /// at the pace of the outgoing flow) and for Send / Nop.
  static double local_traffic_factor(Primitive p);
};

/// Names of the topology fields that `apply_cost_overrides` accepts.
std::vector<std::string> cost_parameter_names();

/// Applies name=value overrides (from `--cost`) to a topology's cost figures, e.g.
/// {"nic_bandwidth_GBps": "50"}. Throws InvalidArgument naming an unknown field or a value
/// that is not a non-negative number; the topology is validated afterwards.
void apply_cost_overrides(Topology& topo, const std::map<std::string, std::string>& overrides);

}  // namespace weft::sim
