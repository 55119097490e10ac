// The device counts of a send request (or collective) as they stand after `completed`
// epochs of correct use (CUDA-free, unit tested: tests/unit/part/test_part_transport.cpp).
// A device request starts from them, and a start that follows a misused epoch writes them
// again (a misuse leaves stamps, counters or the sent count off by the calls it refused or
// the partitions it never saw, and the claim's election words at the misused epoch).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "part/state.hpp"
#include "weft/part/common.hpp"

namespace weft::part {

/// Per user partition: one pready per completed epoch (the claim's stamp).
inline std::vector<uint64_t> resync_stamps(uint32_t partitions, uint64_t completed) {
  return std::vector<uint64_t>(partitions, completed);
}
/// Per transport partition: its user partitions' preadies over the completed epochs (a
/// transport partition of one user partition never reads its counter: it completes at once).
inline std::vector<uint64_t> resync_transport_counters(uint32_t partitions, uint32_t threshold, uint64_t completed) {
  const uint32_t T = transport_partitions(partitions, threshold);
  std::vector<uint64_t> v(T);
  for (uint32_t t = 0; t < T; ++t) v[t] = transport_size(partitions, threshold, t) * completed;
  return v;
}
/// The sent counter (kCtlSent): transport partitions over the completed epochs.
inline uint64_t resync_sent(uint32_t partitions, uint32_t threshold, uint64_t completed) {
  return uint64_t{transport_partitions(partitions, threshold)} * completed;
}
/// The control words from kCtlReader to kCtlSent, one copy: the claim's election words at the
/// completed epochs (a misused epoch leaves them at the misused pready's epoch, above the
/// next one, and the next epoch's blocks would each read the host words) and the sent count.
static_assert(kCtlChecked == kCtlReader + 1 && kCtlSent == kCtlReader + 2, "one copy writes them");
inline std::array<uint64_t, 3> resync_ctl(uint64_t sent, uint64_t completed) { return {completed, completed, sent}; }

}  // namespace weft::part
