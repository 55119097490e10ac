#include "exec/plan_check.hpp"

#include <algorithm>
#include <cstring>

#include "exec/collective_reference.hpp"
#include "exec/host_reduce.hpp"
#include "exec/plan_emulator.hpp"
#include "util/error.hpp"
#include "weft/weft.h"

namespace weft {

void check_plan_on_emulator(const LoweredPlan& lp, int depth, exec::Protocol protocol, uint32_t mb_window) {
  const Plan& p = lp.plan;
  const int R = p.num_ranks;
  if (p.collective == Collective::Custom) return;
  // int32 sums are exact in any order; 1,003 elements do not divide into chunks or parts,
  // and 64-byte staging slots give several micro-batches per chunk (LL128: two lines per
  // piece, 240 data bytes, the second one partly padding at the chunks' ends).
  const int dtype = weftInt32, op = weftSum;
  const size_t esz = 4, count = 1003;
  int32_t max_count = 1;
  for (const auto& [cnt, inst] : lp.comm_shapes) max_count = std::max(max_count, cnt);
  const uint64_t per_piece = protocol == exec::kLL128 ? 2 * device::kLL128LineBytes : 64;
  // A window of micro-batches (WEFT_MB_WINDOW) is checked over two whole windows and a part of one.
  const uint32_t min_nmb = mb_window > 1 ? 2 * mb_window + 1 : 1;
  exec::Geometry g = make_geometry(lp, count, esz, per_piece * static_cast<uint64_t>(max_count), 0, protocol, min_nmb);
  const Collective c = p.collective;
  const size_t ns = host::send_elems(c, count, R), nr = host::recv_elems(c, count, R);
  // Guard bands around every buffer catch writes out of bounds.
  const size_t guard = 64;
  std::vector<std::vector<uint8_t>> sends(static_cast<size_t>(R)), send_mem(static_cast<size_t>(R)),
      recv_mem(static_cast<size_t>(R)), scratch(static_cast<size_t>(R)), untouched(static_cast<size_t>(R));
  std::vector<EmuBuffers> bufs(static_cast<size_t>(R));
  for (int r = 0; r < R; ++r) {
    auto& s = sends[static_cast<size_t>(r)];
    s.resize(ns * esz);
    host::fill_random(dtype, op, s.data(), ns, 77 + static_cast<uint64_t>(r));
    auto& sm = send_mem[static_cast<size_t>(r)];
    auto& rm = recv_mem[static_cast<size_t>(r)];
    scratch[static_cast<size_t>(r)].assign(scratch_bytes(lp, g) + 16, 0x5A);
    bufs[static_cast<size_t>(r)].buf[2] = scratch[static_cast<size_t>(r)].data();
    sm.assign(ns * esz + 2 * guard, 0xC3);
    rm.assign(nr * esz + 2 * guard, 0xC3);
    if (!p.in_place) {
      std::memcpy(sm.data() + guard, s.data(), s.size());
      bufs[static_cast<size_t>(r)].buf[0] = sm.data() + guard;
      bufs[static_cast<size_t>(r)].buf[1] = rm.data() + guard;
      untouched[static_cast<size_t>(r)].assign(rm.begin() + guard, rm.begin() + static_cast<std::ptrdiff_t>(guard + nr * esz));
    } else if (c == Collective::AllGather) {
      std::memcpy(rm.data() + guard + static_cast<size_t>(r) * count * esz, s.data(), s.size());
      bufs[static_cast<size_t>(r)].buf[1] = rm.data() + guard;
      bufs[static_cast<size_t>(r)].buf[0] = rm.data() + guard + static_cast<size_t>(r) * count * esz;
    } else if (c == Collective::ReduceScatter) {
      std::memcpy(sm.data() + guard, s.data(), s.size());
      bufs[static_cast<size_t>(r)].buf[0] = sm.data() + guard;
      bufs[static_cast<size_t>(r)].buf[1] = sm.data() + guard + static_cast<size_t>(r) * count * esz;
    } else {
      std::memcpy(rm.data() + guard, s.data(), s.size());
      bufs[static_cast<size_t>(r)].buf[0] = bufs[static_cast<size_t>(r)].buf[1] = rm.data() + guard;
      untouched[static_cast<size_t>(r)] = s;
    }
  }
  EmuResult res = emulate(lp, g, depth, bufs, dtype, op, protocol, mb_window);
  if (!res.ok) fail(ErrorCode::Verify, res.error);
  auto want = host::reference(c, dtype, op, p.root, count, sends, untouched);
  for (int r = 0; r < R; ++r) {
    const uint8_t* got = (p.in_place && c == Collective::ReduceScatter) ? bufs[static_cast<size_t>(r)].buf[1]
                                                                         : recv_mem[static_cast<size_t>(r)].data() + guard;
    const auto& w = want[static_cast<size_t>(r)];
    for (size_t i = 0; i < w.size(); ++i)
      if (got[i] != w[i])
        fail(ErrorCode::Verify, "plan '" + p.algorithm + "' (" + (p.in_place ? "in place" : "out of place") +
                                    ") gives rank " + std::to_string(r) + " a wrong element " + std::to_string(i / esz) +
                                    " of its receive buffer on the emulator" +
                                    (c == Collective::Reduce && r != p.root ? " (Reduce must leave non-root receive buffers untouched)" : ""));
    if (!p.in_place && std::memcmp(send_mem[static_cast<size_t>(r)].data() + guard, sends[static_cast<size_t>(r)].data(),
                                   sends[static_cast<size_t>(r)].size()) != 0)
      fail(ErrorCode::Verify, "plan '" + p.algorithm + "' (out of place) writes rank " + std::to_string(r) +
                                  "'s send buffer on the emulator");
    for (const auto* mem : {&send_mem[static_cast<size_t>(r)], &recv_mem[static_cast<size_t>(r)]})
      for (size_t i = 0; i < guard; ++i)
        if ((*mem)[i] != 0xC3 || (*mem)[mem->size() - 1 - i] != 0xC3)
          fail(ErrorCode::Verify, "plan '" + p.algorithm + "' writes outside rank " + std::to_string(r) + "'s buffers on the emulator");
  }
}

}  // namespace weft
