// The host-side state machine of one partitioned request (MPI-4 partitioned semantics),
// kept apart from CUDA so that every misuse rule is tested without a GPU.
//
// A request is persistent: init once, then per epoch start -> pbuf_prepare -> pready (send)
// or parrived (receive) -> wait / test. Misuse is a weft::Error (InvalidUsage or
// InvalidArgument) naming the request, never corruption:
//   start while the previous epoch is still active;   pbuf_prepare or pready before start;
//   pready twice for one partition in one epoch;       a partition index out of range;
//   pready on a receive request, parrived on a send;   partition count / size / type
//   that differ from the peer's (check_match, at the first pbuf_prepare).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "weft/part/common.hpp"  // DeviceErrorCode
#include "ir/datatype.hpp"

namespace weft::part {

enum class Direction { Send, Recv };

/// What a request was initialized with; the peer's twin must agree (check_match).
struct RequestDesc {
  Direction dir = Direction::Send;
  int peer = 0;            ///< the other rank
  int tag = 0;
  uint32_t partitions = 0; ///< user partitions
  uint64_t count = 0;      ///< elements per partition
  int dtype = 0;           ///< weftDataType_t
  uint32_t elem_bytes = 0;  ///< dtype_bytes(dtype) (ir/datatype.hpp)
  uint64_t partition_bytes() const { return count * elem_bytes; }
  uint64_t total_bytes() const { return partition_bytes() * partitions; }
};

/// "rank 0: psend to rank 1 (tag 7)" and the like, for messages.
std::string describe(const RequestDesc& d, int rank);

/// Checks the arguments of psend_init / precv_init (InvalidArgument naming the bad one).
void check_init(const RequestDesc& d, int rank, int nranks);
/// Checks that a send and a receive request match (partitions, count, type); the message
/// names both sides' values. `local` is this rank's request, `remote` what the peer sent.
void check_match(const RequestDesc& local, const RequestDesc& remote, int rank);

/// Transport partitions for `partitions` user partitions aggregated `threshold` at a time.
inline uint32_t transport_partitions(uint32_t partitions, uint32_t threshold) {
  return threshold == 0 ? 0 : (partitions + threshold - 1) / threshold;
}

/// Words of a receive request's flag block that a host test across nodes copies, given the
/// threshold it last saw there: the header alone before any (nothing can be complete), else the
/// header and the flags of that threshold's transport partitions (at most all of them).
inline uint64_t flag_words_to_read(uint32_t partitions, uint64_t threshold) {
  if (threshold == 0) return kFlagFirst;
  const uint64_t t = threshold >= partitions ? 1 : (partitions + threshold - 1) / threshold;
  return kFlagFirst + t;
}

class RequestState {
 public:
  RequestState(RequestDesc desc, int rank) : desc_(desc), rank_(rank), readied_(desc.partitions, 0) {}

  const RequestDesc& desc() const { return desc_; }
  bool active() const { return active_; }
  /// The current (or last) epoch; the first start makes it 1.
  uint64_t epoch() const { return epoch_; }
  bool set_up() const { return set_up_; }
  bool prepared() const { return prepared_ == epoch_ && epoch_ != 0; }

  /// Begins the next epoch. Error: still active.
  void start();
  /// Before pbuf_prepare's work. Error: not active. Returns true on the first call ever
  /// (setup with the peer is needed).
  bool begin_prepare();
  void setup_done() { set_up_ = true; }
  void prepare_done() { prepared_ = epoch_; }
  /// Host pready of partition `p`. Errors: a receive request, not active, not prepared,
  /// out of range, twice in this epoch. Returns how many of this epoch's partitions are ready.
  uint32_t pready(uint32_t p);
  /// Checks a parrived call for partition `p`: a receive request, out of range.
  void check_parrived(uint32_t p) const;
  /// Checks a wait or test call: the request must have been started (an inactive request
  /// completes at once, as MPI's do).
  void complete() { active_ = false; }
  /// Checks a wait or test call: an active request must have been prepared (pbuf_prepare),
  /// or nothing can ever arrive.
  void check_wait() const;
  /// Checks that the request may be freed (not active).
  void check_free() const;
  /// The partition-index error message (also used for device-side errors).
  std::string out_of_range(uint64_t p, const char* call) const;

 private:
  RequestDesc desc_;
  int rank_ = 0;
  bool active_ = false;
  bool set_up_ = false;
  uint64_t epoch_ = 0;
  uint64_t prepared_ = 0;
  uint32_t ready_count_ = 0;
  std::vector<uint64_t> readied_;  ///< per partition: the epoch of its last host pready
};

/// The message for a device-side error record of `d`'s request.
std::string describe_device_error(const RequestDesc& d, int rank, uint32_t code, uint64_t partition, uint64_t epoch);

}  // namespace weft::part
