// Checks a check-mode run against the execution model: no link above its capacity at any
// instant, every invocation executed once, dependencies and message order respected, the
// FIFO depth honoured. Failures name the slot and micro-batch.
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "sim/program.hpp"
#include "sim/simulator.hpp"

namespace weft::sim::testing {

inline void expect_invariants(const Simulator& sim, const SimReport& r, int32_t depth = 4) {
  const Program& p = sim.program();
  const size_t n = static_cast<size_t>(r.microbatches);
  const double eps = 1e-6 * (1.0 + r.time_us);
  ASSERT_EQ(r.inv_count.size(), p.slots.size() * n) << "run the simulation with SimOptions::check";
  EXPECT_LE(r.max_link_load, 1.0 + 1e-9) << "a resource carried more than its capacity";
  for (const LinkStat& l : r.links) EXPECT_LE(l.max_load, 1.0 + 1e-9) << l.name;
  size_t bad_count = 0;
  for (size_t i = 0; i < r.inv_count.size(); ++i)
    if (r.inv_count[i] != 1 && bad_count++ < 5)
      ADD_FAILURE() << p.describe_slot(static_cast<int32_t>(i / n)) << " micro-batch " << i % n << " ran " << r.inv_count[i] << " times";
  // Dependencies: invocation k starts after every dependency's invocation k ended.
  size_t bad_dep = 0;
  for (size_t s = 0; s < p.slots.size(); ++s)
    for (uint32_t d = p.slots[s].dep_begin; d < p.slots[s].dep_end; ++d)
      for (size_t k = 0; k < n; ++k) {
        const double dep_end = r.inv_end_us[static_cast<size_t>(p.deps[d]) * n + k];
        const double ready = r.inv_ready_us[s * n + k];
        if (dep_end > ready + eps && bad_dep++ < 5)
          ADD_FAILURE() << p.describe_slot(static_cast<int32_t>(s)) << " micro-batch " << k << " was ready at " << ready
                        << " us before its dependency " << p.describe_slot(p.deps[d]) << " ended at " << dep_end;
      }
  // Messages: pair the m-th send and the m-th receive of each connection in walk order.
  std::vector<std::vector<size_t>> sends(p.conns.size()), recvs(p.conns.size());
  for (const ProgTb& tb : p.tbs) {
    auto walk = [&](int32_t slot, size_t k) {
      const ProgSlot& ps = p.slots[static_cast<size_t>(slot)];
      const size_t inv = static_cast<size_t>(slot) * n + k;
      if (ps.send_conn >= 0) sends[static_cast<size_t>(ps.send_conn)].push_back(inv);
      if (ps.recv_conn >= 0) recvs[static_cast<size_t>(ps.recv_conn)].push_back(inv);
    };
    if (p.execution == ExecutionModel::Task) {
      for (int32_t s = tb.slot_begin; s < tb.slot_end; ++s)
        for (size_t k = 0; k < n; ++k) walk(s, k);
    } else {
      for (size_t k = 0; k < n; ++k)
        for (int32_t s = tb.slot_begin; s < tb.slot_end; ++s) walk(s, k);
    }
  }
  size_t bad_msg = 0;
  for (size_t c = 0; c < p.conns.size(); ++c) {
    ASSERT_EQ(sends[c].size(), recvs[c].size());
    for (size_t m = 0; m < sends[c].size(); ++m) {
      const size_t si = sends[c][m], ri = recvs[c][m];
      // The last byte lands `latency` after the sender's flow ended.
      if (r.inv_end_us[ri] + eps < r.inv_end_us[si] + p.conns[c].latency_us && bad_msg++ < 5)
        ADD_FAILURE() << "message " << m << " of connection " << p.conns[c].src << "->" << p.conns[c].dst << " was received at "
                      << r.inv_end_us[ri] << " us, before it could land";
      // Staging: message m starts after message m - depth was consumed.
      if (m >= static_cast<size_t>(depth)) {
        const size_t freed = recvs[c][m - static_cast<size_t>(depth)];
        if (r.inv_start_us[si] + eps < r.inv_end_us[freed] && bad_msg++ < 5)
          ADD_FAILURE() << "message " << m << " of connection " << p.conns[c].src << "->" << p.conns[c].dst
                        << " started before its staging slot was free";
      }
    }
  }
}

}  // namespace weft::sim::testing
