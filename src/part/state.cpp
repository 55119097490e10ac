#include "part/state.hpp"

#include "util/error.hpp"

namespace weft::part {

std::string describe(const RequestDesc& d, int rank) {
  return "rank " + std::to_string(rank) + ": " + (d.dir == Direction::Send ? "psend to rank " : "precv from rank ") +
         std::to_string(d.peer) + " (tag " + std::to_string(d.tag) + ")";
}

void check_init(const RequestDesc& d, int rank, int nranks) {
  const std::string who = describe(d, rank);
  if (d.peer < 0 || d.peer >= nranks)
    fail(ErrorCode::InvalidArgument, who + ": peer " + std::to_string(d.peer) + " is not a rank of this communicator (" +
                                         std::to_string(nranks) + " ranks)");
  if (d.partitions == 0) fail(ErrorCode::InvalidArgument, who + ": partitions must be at least 1");
  if (d.count == 0) fail(ErrorCode::InvalidArgument, who + ": count (elements per partition) must be at least 1");
  if (dtype_bytes(d.dtype) == 0)
    fail(ErrorCode::InvalidArgument, who + ": datatype " + std::to_string(d.dtype) + " is not a weftDataType_t");
  if (d.tag < 0) fail(ErrorCode::InvalidArgument, who + ": tag " + std::to_string(d.tag) + " is negative");
  if (d.count > (uint64_t{1} << 40) / d.partitions)
    fail(ErrorCode::InvalidArgument, who + ": partitions x count is too large");
}

void check_match(const RequestDesc& local, const RequestDesc& remote, int rank) {
  const std::string who = describe(local, rank);
  auto side = [](const RequestDesc& d) {
    return std::to_string(d.partitions) + " partitions of " + std::to_string(d.count) + " elements of type " +
           std::to_string(d.dtype);
  };
  if (local.dir == remote.dir)
    fail(ErrorCode::Internal, who + ": matched with a request of the same direction");
  if (local.tag != remote.tag)
    fail(ErrorCode::Internal, who + ": matched with tag " + std::to_string(remote.tag));
  if (local.partitions != remote.partitions || local.count != remote.count || local.dtype != remote.dtype)
    fail(ErrorCode::InvalidUsage, who + " does not match its peer: this side has " + side(local) + ", rank " +
                                      std::to_string(local.peer) + " has " + side(remote) +
                                      "; partition counts, sizes and types must agree");
}

void RequestState::start() {
  if (active_)
    fail(ErrorCode::InvalidUsage, describe(desc_, rank_) + ": start while active (epoch " + std::to_string(epoch_) +
                                      " has not completed; wait or test it first)");
  ++epoch_;
  active_ = true;
  ready_count_ = 0;
}

bool RequestState::begin_prepare() {
  if (!active_)
    fail(ErrorCode::InvalidUsage, describe(desc_, rank_) + ": pbuf_prepare on an inactive request (call start first)");
  return !set_up_;
}

std::string RequestState::out_of_range(uint64_t p, const char* call) const {
  return describe(desc_, rank_) + ": " + call + " of partition " + std::to_string(p) + ", out of range (" +
         std::to_string(desc_.partitions) + " partitions: 0.." + std::to_string(desc_.partitions - 1) + ")";
}

uint32_t RequestState::pready(uint32_t p) {
  // The message is built only on a misuse: a correct call allocates nothing.
  auto who = [&] { return describe(desc_, rank_); };
  if (desc_.dir != Direction::Send) fail(ErrorCode::InvalidUsage, who() + ": pready on a receive request");
  if (!active_) fail(ErrorCode::InvalidUsage, who() + ": pready on an inactive request (call start first)");
  if (p >= desc_.partitions) fail(ErrorCode::InvalidArgument, out_of_range(p, "pready"));
  if (prepared_ != epoch_)
    fail(ErrorCode::InvalidUsage, who() + ": pready before pbuf_prepare in epoch " + std::to_string(epoch_) +
                                      " (the peer may not be ready to receive)");
  if (readied_[p] == epoch_)
    fail(ErrorCode::InvalidUsage, who() + ": pready twice for partition " + std::to_string(p) + " in epoch " +
                                      std::to_string(epoch_));
  readied_[p] = epoch_;
  return ++ready_count_;
}

void RequestState::check_parrived(uint32_t p) const {
  if (desc_.dir != Direction::Recv) fail(ErrorCode::InvalidUsage, describe(desc_, rank_) + ": parrived on a send request");
  if (p >= desc_.partitions) fail(ErrorCode::InvalidArgument, out_of_range(p, "parrived"));
}

void RequestState::check_wait() const {
  if (active_ && prepared_ != epoch_)
    fail(ErrorCode::InvalidUsage, describe(desc_, rank_) + ": wait or test in epoch " + std::to_string(epoch_) +
                                      " before pbuf_prepare (nothing can arrive until the receiver is ready)");
}

void RequestState::check_free() const {
  if (active_)
    fail(ErrorCode::InvalidUsage, describe(desc_, rank_) + ": free of an active request (epoch " +
                                      std::to_string(epoch_) + " has not completed)");
}

std::string describe_device_error(const RequestDesc& d, int rank, uint32_t code, uint64_t partition, uint64_t epoch) {
  const std::string who = describe(d, rank) + ": device pready";
  switch (code) {
    case kDevOutOfRange:
      return who + " of partition " + std::to_string(partition) + ", out of range (" + std::to_string(d.partitions) +
             " partitions: 0.." + std::to_string(d.partitions - 1) + "); nothing was sent for it";
    case kDevTwice:
      return who + " twice for partition " + std::to_string(partition) + " in epoch " + std::to_string(epoch) +
             "; the second call sent nothing";
    case kDevNotStarted:
      return who + " of partition " + std::to_string(partition) + " while the request was not started";
    case kDevNotPrepared:
      return who + " of partition " + std::to_string(partition) + " in epoch " + std::to_string(epoch) +
             " before pbuf_prepare returned (the receiver may not be ready); nothing was sent for it";
    default: return who + ": unknown device error code " + std::to_string(code);
  }
}

}  // namespace weft::part
