#include "part/progress.hpp"

#include <algorithm>

#include "part/state.hpp"
#include "util/config.hpp"
#include "util/error.hpp"
#include "weft/part/common.hpp"

namespace weft::part {

TransferPath parse_transfer_path(const std::string& text) {
  if (text.empty() || text == "kernel") return TransferPath::Kernel;
  if (text == "proxy") return TransferPath::Proxy;
  fail(ErrorCode::InvalidArgument, "WEFT_PART_PATH='" + text + "' is not a transfer path (kernel or proxy)");
}

TransferPath resolve_transfer_path(int requested) {
  switch (requested) {
    case static_cast<int>(TransferPath::Default):
      return parse_transfer_path(config::get_string("WEFT_PART_PATH"));
    case static_cast<int>(TransferPath::Kernel):
      return TransferPath::Kernel;
    case static_cast<int>(TransferPath::Proxy):
      return TransferPath::Proxy;
    default:
      fail(ErrorCode::InvalidArgument, "partitioned transfer path " + std::to_string(requested) +
                                           " is not one (0 default, 1 kernel, 2 proxy)");
  }
}

const char* transfer_path_name(TransferPath p) {
  return p == TransferPath::Proxy ? "proxy" : p == TransferPath::Kernel ? "kernel" : "default";
}

void check_progress_job(const ProgressJobDesc& d) {
  if (d.threshold == 0 || d.threshold > d.partitions)
    fail(ErrorCode::InvalidUsage, d.who + ": progression engine: threshold " + std::to_string(d.threshold) +
                                      " outside 1.." + std::to_string(d.partitions));
  const uint64_t total = d.partition_bytes * d.partitions;
  if (d.partition_bytes != 0 && total / d.partition_bytes != d.partitions)
    fail(ErrorCode::InvalidUsage, d.who + ": progression engine: partitions x bytes overflow");
  if (total > d.send_bytes)
    fail(ErrorCode::InvalidUsage, d.who + ": progression engine: " + std::to_string(total) +
                                      " bytes of partitions exceed the send buffer's " + std::to_string(d.send_bytes));
  if (total > d.remote_bytes)
    fail(ErrorCode::Remote, d.who + ": the receiver's buffer holds " + std::to_string(d.remote_bytes) +
                                " bytes, less than the " + std::to_string(total) + " bytes of its partitions");
  const uint64_t transports = transport_partitions(d.partitions, d.threshold);
  if (d.staged) {
    if (d.remote_flag_words < uint64_t{kRecordWords} * d.partitions)
      fail(ErrorCode::Remote, d.who + ": the receiver's signal ring holds " + std::to_string(d.remote_flag_words) +
                                  " words, fewer than the " + std::to_string(uint64_t{kRecordWords} * d.partitions) +
                                  " of " + std::to_string(d.partitions) + " signal records");
    return;
  }
  if (d.remote_flag_words < kFlagFirst + transports)
    fail(ErrorCode::Remote, d.who + ": the receiver's flag block holds " + std::to_string(d.remote_flag_words) +
                                " words, fewer than the " + std::to_string(kFlagFirst + transports) +
                                " its transport partitions need");
}

TransportPut plan_transport_put(const ProgressJobDesc& d, uint32_t t, uint64_t value, uint64_t epoch, bool* pending) {
  *pending = false;
  const uint32_t transports = transport_partitions(d.partitions, d.threshold);
  if (t >= transports)
    fail(ErrorCode::Internal, d.who + ": progression engine: transport partition " + std::to_string(t) +
                                  " out of range (" + std::to_string(transports) + ")");
  if (value > epoch)
    fail(ErrorCode::Internal, d.who + ": progression engine: transport partition " + std::to_string(t) +
                                  " marked ready for epoch " + std::to_string(value) + " while the request is in epoch " +
                                  std::to_string(epoch));
  TransportPut p;
  p.offset = static_cast<uint64_t>(t) * d.threshold * d.partition_bytes;
  p.bytes = transport_size(d.partitions, d.threshold, t) * d.partition_bytes;
  p.flag_word = kFlagFirst + t;
  p.epoch = epoch;
  // Staged, remote_flag_words is the receiver's signal ring (kRecordWords per partition, checked
  // by check_progress_job), not a flag block: p.flag_word is not written there (one partition:
  // a ring of 2 words, flag word kFlagFirst = 2).
  const bool flag_outside = !d.staged && p.flag_word >= d.remote_flag_words;
  if (p.offset + p.bytes > d.remote_bytes || p.offset + p.bytes > d.send_bytes || flag_outside)
    fail(ErrorCode::Remote, d.who + ": transport partition " + std::to_string(t) + " (" + std::to_string(p.bytes) +
                                " bytes at " + std::to_string(p.offset) + ") does not fit the receiver's buffer (" +
                                std::to_string(d.remote_bytes) + " bytes)" +
                                (d.staged ? std::string()
                                          : " or flag block (" + std::to_string(d.remote_flag_words) + " words)"));
  *pending = value == epoch && epoch != 0;
  return p;
}

void encode_arrival(const TransportRun& run, uint32_t threshold, uint64_t record[kRecordWords]) {
  record[0] = (static_cast<uint64_t>(run.first) << 32) | run.count;
  record[1] = threshold;
}

TransportRun decode_arrival(const ProgressJobDesc& d, const uint64_t record[kRecordWords], uint64_t arrived,
                            bool* complete, uint32_t* threshold) {
  *complete = record[0] != 0 && record[1] != 0;
  TransportRun r;
  if (!*complete) return r;
  const uint64_t thr = record[1];
  r.first = static_cast<uint32_t>(record[0] >> 32);
  r.count = static_cast<uint32_t>(record[0] & 0xffffffffu);
  const uint64_t transports = thr <= d.partitions ? transport_partitions(d.partitions, static_cast<uint32_t>(thr)) : 0;
  if (thr > d.partitions || r.count == 0 || uint64_t{r.first} + r.count > transports || arrived + r.count > transports)
    fail(ErrorCode::Remote, d.who + ": the sender's signal names transport partitions " + std::to_string(r.first) +
                                ".." + std::to_string(uint64_t{r.first} + r.count) + " with threshold " +
                                std::to_string(thr) + " (" + std::to_string(arrived) + " already arrived this epoch; " +
                                std::to_string(d.partitions) + " partitions): not a run of this request");
  *threshold = static_cast<uint32_t>(thr);
  const uint64_t end = std::min<uint64_t>(d.partitions, (uint64_t{r.first} + r.count) * thr);
  r.offset = uint64_t{r.first} * thr * d.partition_bytes;
  r.bytes = (end - uint64_t{r.first} * thr) * d.partition_bytes;
  return r;
}

}  // namespace weft::part
