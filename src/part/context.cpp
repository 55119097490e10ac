#include "part/context.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "net/node_layout.hpp"
#include "part/engine_net.hpp"
#include "runtime/communicator.hpp"
#include "util/cuda_check.hpp"
#include "util/driver_entry.hpp"
#include "bootstrap/host_identity.hpp"
#include "util/config.hpp"
#include "util/log.hpp"

namespace weft::part {

namespace {

/// What each rank tells the others when a context is created.
struct RankInfo {
  int32_t pid;
  int32_t device;
  uint64_t host;
  uint64_t mailbox;
  cudaIpcMemHandle_t handle;
  char shm_name[64];  ///< its shared segment of ready-to-receive words
};

/// Maps shared segment `name` (`bytes`); null on failure (errno set).
uint64_t* map_segment(const char* name, bool create, size_t bytes) {
  const int fd = shm_open(name, create ? O_CREAT | O_EXCL | O_RDWR : O_RDWR, 0600);
  if (fd < 0) return nullptr;
  if (create && ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    close(fd);
    return nullptr;
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  return p == MAP_FAILED ? nullptr : static_cast<uint64_t*>(p);
}

/// The host's key as the communicator computes it (bootstrap/host_identity.hpp: host name and
/// boot id, or WEFT_HOST_ID), so both agree on which ranks share a host.
uint64_t host_id() { return local_host_identity().key; }

using GetRange = int (*)(unsigned long long*, size_t*, unsigned long long);
GetRange address_range_fn() {
  static const GetRange fn = driver_entry<GetRange>("cuMemGetAddressRange");
  return fn;
}

/// IPC mappings of this process, shared by every context: (device, handle bytes) -> mapping.
struct Mapping {
  char* base = nullptr;
  int refs = 0;
};
std::mutex g_mappings_mu;
std::map<std::string, Mapping>& mappings() {
  static auto* m = new std::map<std::string, Mapping>();  // never destroyed: used until exit
  return *m;
}

}  // namespace

std::unique_ptr<Context> Context::create(Communicator& comm) { return std::make_unique<ContextImpl>(comm); }
std::unique_ptr<Context> Context::create(Communicator& comm, int path) {
  return std::make_unique<ContextImpl>(comm, path);
}

ContextImpl::ContextImpl(Communicator& comm, int path)
    : rank_(comm.rank()),
      nranks_(comm.nranks()),
      device_(comm.device()),
      timeout_s_(comm.timeout_seconds()),
      path_(resolve_transfer_path(path)) {
  comm.check_usable();
  trace_epochs_ = config::get_int("WEFT_PART_TRACE");
  DeviceGuard guard(device_);
  const uint64_t bytes = static_cast<uint64_t>(nranks_) * 2 * kSlots * kMessageBytes;
  WEFT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  WEFT_CUDA_CHECK(cudaHostAlloc(&staging_, kMessageBytes, cudaHostAllocDefault));
  WEFT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&mailbox_), bytes));
  WEFT_CUDA_CHECK(cudaMemsetAsync(mailbox_, 0, bytes, stream_));
  WEFT_CUDA_CHECK(cudaStreamSynchronize(stream_));
  RankInfo mine{};
  mine.pid = static_cast<int32_t>(getpid());
  mine.device = device_;
  mine.host = host_id();
  mine.mailbox = reinterpret_cast<uint64_t>(mailbox_);
  WEFT_CUDA_CHECK(cudaIpcGetMemHandle(&mine.handle, mailbox_));
  const size_t shm_bytes = segment_bytes();
  std::snprintf(mine.shm_name, sizeof(mine.shm_name), "/weft-part-%d-%llx", mine.pid,
                static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(this) ^ mine.mailbox));
  shm_.assign(static_cast<size_t>(nranks_), nullptr);
  shm_[static_cast<size_t>(rank_)] = map_segment(mine.shm_name, true, shm_bytes);
  if (shm_[static_cast<size_t>(rank_)] == nullptr)
    fail(ErrorCode::System, "rank " + std::to_string(rank_) + ": cannot create shared memory " + mine.shm_name +
                                " for partitioned ready-to-receive words: " + std::strerror(errno));
  register_segment(mine.shm_name);
  std::vector<RankInfo> all(static_cast<size_t>(nranks_));
  all[static_cast<size_t>(rank_)] = mine;
  const double wait_s = config::wait_seconds(timeout_s_);
  comm.bootstrap().allgather(all.data(), sizeof(RankInfo), wait_s);
  peer_mailbox_.assign(static_cast<size_t>(nranks_), nullptr);
  peer_local_.assign(static_cast<size_t>(nranks_), false);
  peer_opened_.assign(static_cast<size_t>(nranks_), false);
  for (int p = 0; p < nranks_; ++p) {
    const RankInfo& ri = all[static_cast<size_t>(p)];
    if (p == rank_) {
      peer_mailbox_[static_cast<size_t>(p)] = mailbox_;
      peer_local_[static_cast<size_t>(p)] = true;
      continue;
    }
    if (ri.host != mine.host)
      fail(ErrorCode::InvalidUsage, "rank " + std::to_string(rank_) + ": partitioned communication with rank " +
                                        std::to_string(p) +
                                        " on another host is not available: requests are set up through CUDA IPC "
                                        "mappings and shared memory within one host (both paths; WEFT_PART_PATH); "
                                        "the communicator's collectives and p2p do work across hosts");
    shm_[static_cast<size_t>(p)] = map_segment(ri.shm_name, false, shm_bytes);
    if (shm_[static_cast<size_t>(p)] == nullptr)
      fail(ErrorCode::System, "rank " + std::to_string(rank_) + ": cannot map rank " + std::to_string(p) +
                                  "'s shared memory " + std::string(ri.shm_name, strnlen(ri.shm_name, sizeof(ri.shm_name))) +
                                  ": " + std::strerror(errno));
    if (ri.pid == mine.pid) {
      peer_local_[static_cast<size_t>(p)] = true;
      peer_mailbox_[static_cast<size_t>(p)] = reinterpret_cast<char*>(ri.mailbox);
    } else {
      void* ptr = nullptr;
      cudaError_t err = cudaIpcOpenMemHandle(&ptr, ri.handle, cudaIpcMemLazyEnablePeerAccess);
      if (err != cudaSuccess)
        fail(ErrorCode::UnhandledCuda, "rank " + std::to_string(rank_) + ": cannot map rank " + std::to_string(p) +
                                           "'s partitioned mailbox through CUDA IPC (" + cudaGetErrorName(err) + ")");
      peer_mailbox_[static_cast<size_t>(p)] = static_cast<char*>(ptr);
      peer_opened_[static_cast<size_t>(p)] = true;
    }
  }
  if (path_ == TransferPath::Proxy) {
    // Peers on other emulated nodes (WEFT_EMULATE_NODES) are reached over the network
    // transport; every rank computes the same layout, so all or none create it.
    std::vector<uint64_t> hosts;
    for (const RankInfo& ri : all) hosts.push_back(ri.host);
    node_of_ = net::node_layout(hosts).node_of_rank;
    bool any = false;
    for (int a = 0; a < nranks_; ++a) any = any || node_of_[static_cast<size_t>(a)] != node_of_[0];
    if (any) {
      const std::string what = "rank " + std::to_string(rank_) +
                               ": the progression engine between emulated nodes (WEFT_EMULATE_NODES) needs the network "
                               "transport: ";
      try {
        ucx_ = net::transport_over(comm.bootstrap(), wait_s, timeout_s_);
      } catch (const Error& e) {
        fail(e.code(), what + e.what());
      }
      // Where UCX cannot register GPU memory (built without CUDA support), or when asked to,
      // the engines stage every transfer through page-locked host memory.
      stage_network_ = !ucx_->supports_cuda_memory() || config::get_bool("WEFT_PART_STAGE");
      WEFT_LOG(Info, "PART", "rank " << rank_ << ": progression engine between emulated nodes "
                                     << (stage_network_ ? (ucx_->supports_cuda_memory()
                                                               ? "staged through page-locked memory (WEFT_PART_STAGE=1)"
                                                               : "staged through page-locked memory (this UCX cannot "
                                                                 "register CUDA memory)")
                                                        : "puts GPU memory directly (UCX with CUDA support)"));
      drive_with(engine(), ucx_.get());
    }
  }
  offers_posted_.assign(static_cast<size_t>(nranks_), 0);
  offers_seen_.assign(static_cast<size_t>(nranks_), {});
  offers_matched_.assign(static_cast<size_t>(nranks_), {});
  // Nobody writes into a mailbox before its owner has zeroed it; every rank has mapped every
  // segment, so the names can go (the mappings stay).
  comm.bootstrap().barrier(wait_s);
  shm_unlink(mine.shm_name);
}

ContextImpl::~ContextImpl() {
  engine_.reset();  // stops its thread before the memory below goes
  ucx_.reset();
  try {
    DeviceGuard guard(device_);
    for (void* p : pinned_) cudaFreeHost(p);
    if (shm_dev_ != nullptr) cudaHostUnregister(shm_[static_cast<size_t>(rank_)]);
    for (size_t p = 0; p < peer_mailbox_.size(); ++p)
      if (peer_opened_[p]) cudaIpcCloseMemHandle(peer_mailbox_[p]);
    for (uint64_t* w : shm_)
      if (w) munmap(w, segment_bytes());
    if (mailbox_) cudaFree(mailbox_);
    if (staging_) cudaFreeHost(staging_);
    if (stream_) cudaStreamDestroy(stream_);
    cudaGetLastError();
  } catch (...) {
  }
}

// Mailbox of rank X: [peer][offers|replies][slot] entries of kMessageBytes.
char* ContextImpl::mailbox(int peer, bool offers, uint32_t index, bool local) {
  // local: this rank's mailbox, area of `peer`; else peer's mailbox, area of this rank.
  char* base = local ? mailbox_ : peer_mailbox_[static_cast<size_t>(peer)];
  const int area = local ? peer : rank_;
  return base + ((static_cast<uint64_t>(area) * 2 + (offers ? 0 : 1)) * kSlots + index) * kMessageBytes;
}

void ContextImpl::write_message(char* dst, const MailMessage& m) {
  static_assert(sizeof(MailMessage) <= kMessageBytes);
  MailMessage body = m;
  const uint64_t seq = m.seq;
  body.seq = 0;
  write(dst, &body, sizeof(body));
  write(dst, &seq, sizeof(seq));
}

bool ContextImpl::read_message(const char* src, uint64_t seq, MailMessage* out) {
  uint64_t got = 0;
  read(&got, src, sizeof(got));
  if (got != seq) return false;
  read(out, src, sizeof(MailMessage));
  out->seq = seq;
  return true;
}

uint32_t ContextImpl::post_offer(int peer, MailMessage m) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  uint32_t& n = offers_posted_[static_cast<size_t>(peer)];
  if (n >= kSlots)
    fail(ErrorCode::InvalidUsage, "rank " + std::to_string(rank_) + ": more than " + std::to_string(kSlots) +
                                      " partitioned send requests set up toward rank " + std::to_string(peer) +
                                      " in one context (create a new context)");
  m.seq = n + 1;
  write_message(mailbox(peer, true, n, false), m);
  return n++;
}

MailMessage ContextImpl::wait_reply(int peer, uint32_t index, const std::string& who) {
  HostDeadline d(timeout_s_);
  MailMessage m;
  for (;;) {
    {
      std::lock_guard<std::recursive_mutex> lock(mu_);
      if (read_message(mailbox(peer, false, index, true), index + 1, &m)) return m;
    }
    if (d.passed())
      fail(ErrorCode::Timeout, who + ": the peer did not answer the setup within " + std::to_string(d.seconds()) +
                                   " s (WEFT_TIMEOUT): no matching receive was prepared on rank " +
                                   std::to_string(peer));
    std::this_thread::yield();
  }
}

uint32_t ContextImpl::match_offer(int peer, int tag, MailMessage* out, const std::string& who) {
  HostDeadline d(timeout_s_);
  for (;;) {
    {
      std::lock_guard<std::recursive_mutex> lock(mu_);
      auto& seen = offers_seen_[static_cast<size_t>(peer)];
      auto& matched = offers_matched_[static_cast<size_t>(peer)];
      for (size_t i = 0; i < seen.size(); ++i)
        if (!matched[i] && seen[i].tag == tag) {
          matched[i] = true;
          *out = seen[i];
          return static_cast<uint32_t>(i);
        }
      // Read every new offer (they may carry other tags).
      for (MailMessage m; seen.size() < kSlots &&
                          read_message(mailbox(peer, true, static_cast<uint32_t>(seen.size()), true), seen.size() + 1, &m);) {
        seen.push_back(m);
        matched.push_back(false);
        if (m.tag == tag) {
          matched.back() = true;
          *out = m;
          return static_cast<uint32_t>(seen.size() - 1);
        }
      }
    }
    if (d.passed())
      fail(ErrorCode::Timeout, who + ": no partitioned send with this tag came from rank " + std::to_string(peer) +
                                   " within " + std::to_string(d.seconds()) + " s (WEFT_TIMEOUT)");
    std::this_thread::yield();
  }
}

void ContextImpl::post_reply(int peer, uint32_t index, MailMessage m) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  m.seq = index + 1;
  write_message(mailbox(peer, false, index, false), m);
}

ProgressEngine& ContextImpl::engine() {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  if (!engine_)
    engine_ = std::make_unique<ProgressEngine>(timeout_s_,
                                               "rank " + std::to_string(rank_) + "'s partitioned progression engine");
  return *engine_;
}

bool ContextImpl::crosses_network(int peer) const {
  return ucx_ != nullptr && node_of_[static_cast<size_t>(peer)] != node_of_[static_cast<size_t>(rank_)];
}

uint32_t ContextImpl::alloc_key_slot() {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  if (key_slots_used_ >= kKeySlots)
    fail(ErrorCode::InvalidUsage, "rank " + std::to_string(rank_) + ": more than " + std::to_string(kKeySlots) +
                                      " partitioned receive requests from other nodes in one context (create a new "
                                      "context)");
  return key_slots_used_++;
}

char* ContextImpl::key_slot(int owner, uint32_t index) const {
  if (index >= kKeySlots)
    fail(ErrorCode::Remote, "rank " + std::to_string(rank_) + ": rank " + std::to_string(owner) +
                                " sent memory-key slot " + std::to_string(index) + ", out of range (" +
                                std::to_string(kKeySlots) + ")");
  return reinterpret_cast<char*>(shm_[static_cast<size_t>(owner)] + size_t{kWordSlots} * kSlotWords) +
         size_t{index} * kKeySlotBytes;
}

uint32_t ContextImpl::alloc_words() {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  if (word_slots_used_ >= kWordSlots)
    fail(ErrorCode::InvalidUsage, "rank " + std::to_string(rank_) + ": more than " + std::to_string(kWordSlots) +
                                      " partitioned requests (collectives count two per neighbour) in one context "
                                      "(create a new context)");
  uint64_t* w = words(rank_, word_slots_used_);
  for (uint32_t i = 0; i < kSlotWords; ++i) __atomic_store_n(w + i, uint64_t{0}, __ATOMIC_RELEASE);
  return word_slots_used_++;
}

uint64_t* ContextImpl::words(int owner, uint32_t index) const {
  if (index >= kWordSlots)
    fail(ErrorCode::Remote, "rank " + std::to_string(rank_) + ": rank " + std::to_string(owner) +
                                " named host-word slot " + std::to_string(index) + ", out of range (" +
                                std::to_string(kWordSlots) + ")");
  return shm_[static_cast<size_t>(owner)] + size_t{index} * kSlotWords;
}

uint64_t* ContextImpl::words_device(uint32_t index) const { return shm_dev_ + size_t{index} * kSlotWords; }

size_t ContextImpl::segment_bytes() {
  return size_t{kWordSlots} * kSlotWords * sizeof(uint64_t) + size_t{kKeySlots} * kKeySlotBytes;
}

void ContextImpl::register_segment(const char* name) {
  // The owner's GPU reads the prepared epochs from the segment and stores the done epochs
  // into it: register it (mapped, for every device of this process).
  uint64_t* seg = shm_[static_cast<size_t>(rank_)];
  cudaError_t err = cudaHostRegister(seg, segment_bytes(), cudaHostRegisterMapped | cudaHostRegisterPortable);
  const bool registered = err == cudaSuccess;
  if (registered) err = cudaHostGetDevicePointer(reinterpret_cast<void**>(&shm_dev_), seg, 0);
  if (err != cudaSuccess) {
    cudaGetLastError();
    if (registered) cudaHostUnregister(seg);
    munmap(seg, segment_bytes());
    shm_[static_cast<size_t>(rank_)] = nullptr;
    shm_dev_ = nullptr;
    shm_unlink(name);
    fail(ErrorCode::UnhandledCuda, "rank " + std::to_string(rank_) +
                                       ": cannot register the shared segment of partitioned host words with CUDA (" +
                                       cudaGetErrorName(err) + ")");
  }
}

ExportedMemory ContextImpl::export_memory(const void* ptr) const {
  ExportedMemory e;
  e.ptr = reinterpret_cast<uint64_t>(ptr);
  GetRange range = address_range_fn();
  if (range == nullptr) fail(ErrorCode::UnhandledCuda, "the driver offers no cuMemGetAddressRange");
  unsigned long long base = 0;
  size_t size = 0;
  if (range(&base, &size, reinterpret_cast<unsigned long long>(ptr)) != 0)
    fail(ErrorCode::InvalidArgument, "rank " + std::to_string(rank_) + ": buffer " +
                                         std::to_string(reinterpret_cast<uintptr_t>(ptr)) +
                                         " is not device memory of this process (partitioned buffers must be)");
  e.offset = reinterpret_cast<uint64_t>(ptr) - base;
  DeviceGuard guard(device_);
  WEFT_CUDA_CHECK(cudaIpcGetMemHandle(&e.handle, reinterpret_cast<void*>(base)));
  return e;
}

char* ContextImpl::map(int peer, const ExportedMemory& m) {
  if (peer_local_[static_cast<size_t>(peer)]) return reinterpret_cast<char*>(m.ptr);
  std::lock_guard<std::mutex> lock(g_mappings_mu);
  const std::string key =
      std::to_string(device_) + ":" + std::string(reinterpret_cast<const char*>(&m.handle), sizeof(m.handle));
  Mapping& mp = mappings()[key];
  if (mp.refs == 0) {
    DeviceGuard guard(device_);
    void* ptr = nullptr;
    cudaError_t err = cudaIpcOpenMemHandle(&ptr, m.handle, cudaIpcMemLazyEnablePeerAccess);
    if (err != cudaSuccess) {
      mappings().erase(key);
      fail(ErrorCode::UnhandledCuda, "rank " + std::to_string(rank_) + ": cannot map rank " + std::to_string(peer) +
                                         "'s partitioned buffer through CUDA IPC (" + cudaGetErrorName(err) + ")");
    }
    mp.base = static_cast<char*>(ptr);
  }
  ++mp.refs;
  return mp.base + m.offset;
}

void ContextImpl::unmap(int peer, char* p) {
  if (p == nullptr || peer_local_[static_cast<size_t>(peer)]) return;
  std::lock_guard<std::mutex> lock(g_mappings_mu);
  // The mapping of this device whose base is the closest one at or below p holds it.
  const std::string prefix = std::to_string(device_) + ":";
  auto best = mappings().end();
  for (auto it = mappings().begin(); it != mappings().end(); ++it)
    if (it->first.compare(0, prefix.size(), prefix) == 0 && it->second.base <= p &&
        (best == mappings().end() || it->second.base > best->second.base))
      best = it;
  if (best == mappings().end()) return;
  if (--best->second.refs == 0) {
    DeviceGuard guard(device_);
    cudaIpcCloseMemHandle(best->second.base);
    mappings().erase(best);
  }
}

void ContextImpl::read(void* host, const void* dev, uint64_t bytes) {
  DeviceGuard guard(device_);
  if (bytes > kMessageBytes) {
    WEFT_CUDA_CHECK(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDefault, stream_));
    WEFT_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return;
  }
  WEFT_CUDA_CHECK(cudaMemcpyAsync(staging_, dev, bytes, cudaMemcpyDefault, stream_));
  WEFT_CUDA_CHECK(cudaStreamSynchronize(stream_));
  std::memcpy(host, staging_, bytes);
}

void ContextImpl::write(void* dev, const void* host, uint64_t bytes) {
  DeviceGuard guard(device_);
  if (bytes > kMessageBytes) {
    WEFT_CUDA_CHECK(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyDefault, stream_));
    WEFT_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return;
  }
  std::memcpy(staging_, host, bytes);
  WEFT_CUDA_CHECK(cudaMemcpyAsync(dev, staging_, bytes, cudaMemcpyDefault, stream_));
  WEFT_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void ContextImpl::copy(void* dst, const void* src, uint64_t bytes) {
  DeviceGuard guard(device_);
  WEFT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_));
  WEFT_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void* ContextImpl::alloc_pinned(uint64_t bytes) {
  DeviceGuard guard(device_);
  void* p = nullptr;
  WEFT_CUDA_CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocPortable));
  std::memset(p, 0, bytes);
  std::lock_guard<std::recursive_mutex> lock(mu_);
  pinned_.push_back(p);
  return p;
}

void* ContextImpl::alloc_device(uint64_t bytes) {
  DeviceGuard guard(device_);
  void* p = nullptr;
  WEFT_CUDA_CHECK(cudaMalloc(&p, bytes));
  WEFT_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream_));
  WEFT_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return p;
}

void ContextImpl::free_device(void* p) {
  if (p == nullptr) return;
  DeviceGuard guard(device_);
  cudaFree(p);
}

}  // namespace weft::part
