// Program: a Plan flattened into arrays for the discrete-event engine.
//
// Slots of every thread block of every rank are numbered globally; each slot knows its
// thread block, the connections it sends and receives on, and its dependencies (global
// slot ids). Connections (src rank, dst rank, channel) carry the resources of their route,
// their latency and the per-TB rate of the sending side. Resources are numbered densely.
// Building a Program validates the plan against the topology: every message names the
// rank, thread block and slot at fault.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/plan.hpp"
#include "ir/topology.hpp"
#include "sim/cost_model.hpp"

namespace weft::sim {

struct ProgSlot {
  Primitive prim = Primitive::Nop;
  int32_t tb = 0;          ///< global thread block id
  int32_t local = 0;       ///< index of the slot in its thread block
  int32_t send_conn = -1;  ///< connection id, or -1
  int32_t recv_conn = -1;
  uint32_t dep_begin = 0;  ///< range in Program::deps
  uint32_t dep_end = 0;
  double scale = 1;        ///< payload bytes per invocation = scale * micro-batch bytes (count / instances x weight)
  double traffic = 0;      ///< HBM bytes per payload byte of the local (receive-side) work
};

struct ProgTb {
  int32_t rank = 0;
  int32_t local = 0;       ///< index among its rank's thread blocks (of its first member when merged)
  int32_t weight = 1;      ///< plan thread blocks it stands for (instance siblings merged into one)
  int32_t slot_begin = 0;  ///< global slot range
  int32_t slot_end = 0;
};

struct ProgConn {
  int32_t src = 0, dst = 0, channel = 0;
  int32_t sender_tb = -1;    ///< the one thread block sending on it
  int32_t receiver_tb = -1;  ///< the one thread block receiving on it
  uint32_t res_begin = 0;    ///< range in Program::conn_res
  uint32_t res_end = 0;
  double latency_us = 0;
  double cap_GBps = 0;       ///< per-TB rate of the sending side on this path, x the sender's weight
};

struct ProgResource {
  ResourceId id{ResourceKind::NvlinkPair, 0};
  double capacity_GBps = 0;
  /// A link in paper 001's sense (the resources whose sharing is a communication
  /// dependency: a GPU pair inside a node, a NIC direction, a rack link). Utilization is
  /// reported over these; NVLink ports are resources but not links.
  bool is_link = false;
  /// The most its flows can ask for at once: the per-TB rates of all the distinct thread
  /// blocks that send through it, added up (GB/s, at the topology's rates).
  double demand_GBps = 0;
  /// Whether that demand passes its capacity. The engine tracks the flows of saturable
  /// resources only (with its run's rate and capacity scales applied to both figures); the
  /// others never slow anyone.
  bool saturable = true;
};

struct Program {
  ExecutionModel execution = ExecutionModel::Task;
  Collective collective = Collective::Custom;
  int32_t num_ranks = 0;
  int32_t chunks = 0;  ///< chunk slots of the larger buffer: call bytes / chunks = slot bytes
  std::vector<ProgSlot> slots;
  std::vector<ProgTb> tbs;
  std::vector<ProgConn> conns;
  std::vector<int32_t> deps;      ///< global slot ids
  std::vector<int32_t> dep_tbs;   ///< the thread block of each entry of `deps`
  std::vector<int32_t> conn_res;  ///< dense resource ids
  std::vector<ProgResource> resources;
  std::vector<int32_t> rank_tbs;  ///< thread blocks per rank in the plan (before merging)
  int64_t plan_tbs = 0;           ///< thread blocks in the plan
  int64_t plan_slots = 0;         ///< slots in the plan

  /// "rank 3 tb 2 slot 5 (send)": how messages name a slot.
  std::string describe_slot(int32_t slot) const;
};

/// Flattens and checks a plan: ranks match the topology, then the plan-structure core's rules
/// (validate_plan, pair_connections in ir/plan_core.hpp). Throws Error(Verify) otherwise.
///
/// With `merge_instances`, instance siblings are then merged (merge_instance_siblings).
Program build_program(const Plan& plan, const Topology& topo, bool merge_instances = true);

/// Merges instance siblings: thread blocks of one rank that run the same slots (same
/// primitives, peers, chunks and logical channel) as instances 0..k-1 of k, whose
/// dependencies lead to the same (merged) slots and whose connections meet sibling groups
/// at the other end. Such blocks start together, share the same resources in equal parts
/// and so run in lockstep: one block of weight k moving all k parts, at k times the
/// per-TB rate, gives the same times exactly (docs/simulator.md, "Instances"). Everything
/// else is left as it is. `plan` is the plan `prog` was built from.
Program merge_instance_siblings(const Plan& plan, Program prog);

}  // namespace weft::sim
