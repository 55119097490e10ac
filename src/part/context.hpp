// The runtime behind weft/partitioned.hpp (internal).
//
// Context: per communicator, a mailbox of device memory on every rank, mapped into every
// other rank at creation (the one collective step). Pairs of requests are set up through
// it: the sender writes an offer (its description and its ready-to-receive word) into the receiver's
// mailbox; the receiver matches it (per peer and tag, in order), checks that both sides
// agree, and writes a reply (its receive buffer and flag block) into the sender's mailbox.
// A mailbox entry is written payload first, then its sequence word, each by a synchronous
// copy, and read sequence word first.
//
// Memory of another process is mapped with CUDA IPC, once per allocation and device in this
// process (CUDA refuses to open one allocation twice), counted per user; memory of a
// rank in this process is used directly. Every request's per-epoch words live in shared host
// memory (one POSIX shared-memory segment per rank, mapped by every rank of the host and
// unlinked once they all have, and registered with CUDA by its owner so that the owner's GPU
// reads and writes it): a 64-byte slot per request (weft/part/common.hpp, kWord*). The
// receiver's pbuf_prepare stores its epoch into the sender's ready word, the sender's GPU
// stores the epoch into the sender's done word when the last partition is delivered, and both
// hosts load them: after setup an epoch makes no CUDA call and no allocation.
#pragma once

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "net/ucx_transport.hpp"
#include "part/engine.hpp"
#include "part/poll.hpp"
#include "part/progress.hpp"
#include "part/trace.hpp"
#include "part/state.hpp"
#include "util/error.hpp"
#include "weft/partitioned.hpp"

namespace weft::part {

/// Device memory to hand to a peer: an IPC handle of its allocation and the offset in it,
/// and the raw pointer (used by a peer in this process).
struct ExportedMemory {
  cudaIpcMemHandle_t handle{};
  uint64_t offset = 0;
  uint64_t ptr = 0;
};

/// A mailbox entry (offer or reply).
struct MailMessage {
  uint64_t seq = 0;  ///< index + 1; written last
  int32_t tag = 0;
  int32_t dtype = 0;
  uint32_t partitions = 0;
  uint32_t elem_bytes = 0;
  uint64_t count = 0;
  int32_t status = 0;  ///< reply: 0 matched, 1 the descriptions differ
  uint32_t word_slot = 0;   ///< offer: the sender's slot of host words (words())
  uint32_t key_slot = 0;    ///< reply, across emulated nodes: 1 + the receiver's key slot (key_slot()); 0 none
  uint32_t staged = 0;      ///< across emulated nodes: offer, the sender stages; reply, the pair stages
  uint64_t mirror = 0, ring = 0;  ///< reply, staged: the receiver's page-locked mirror and signal ring
  ExportedMemory data;  ///< reply: the receive buffer
  ExportedMemory ctrl;  ///< reply: the receiver's flag block
};

class ContextImpl : public Context {
 public:
  static constexpr uint32_t kSlots = 256;      ///< offers per (sender, receiver) over the context's life
  static constexpr uint64_t kMessageBytes = 512;

  /// `path`: a TransferPath value (Default: WEFT_PART_PATH).
  ContextImpl(Communicator& comm, int path = 0);
  ~ContextImpl() override;

  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  int device() const { return device_; }
  double timeout_s() const { return timeout_s_; }
  /// WEFT_PART_TRACE's value at creation (0: no trace; part/trace.hpp).
  int64_t trace_epochs() const { return trace_epochs_; }
  TransferPath path() const { return path_; }
  /// The progression engine (started with the first request on the proxy path).
  ProgressEngine& engine();
  const volatile uint32_t* abort_flag() const { return nullptr; }

  std::unique_ptr<Request> psend_init(const void* buf, uint32_t partitions, uint64_t count, int dtype, int peer,
                                      int tag) override;
  std::unique_ptr<Request> precv_init(void* buf, uint32_t partitions, uint64_t count, int dtype, int peer,
                                      int tag) override;
  void pbuf_prepare_all(const std::vector<Request*>& requests) override;
  std::unique_ptr<Collective> pallreduce_init(void* buf, uint32_t partitions, uint64_t count, int dtype, int op,
                                              int tag) override;
  std::unique_ptr<Collective> pbcast_init(void* buf, uint32_t partitions, uint64_t count, int dtype, int root,
                                          int tag) override;

  /// Sender: posts an offer to `peer`; returns its index (the reply comes at the same one).
  uint32_t post_offer(int peer, MailMessage m);
  /// Sender: waits for the reply to offer `index` from `peer`.
  MailMessage wait_reply(int peer, uint32_t index, const std::string& who);
  /// Receiver: waits for the next unmatched offer from `peer` with `tag`; returns its index.
  uint32_t match_offer(int peer, int tag, MailMessage* out, const std::string& who);
  /// Receiver: answers offer `index` of `peer`.
  void post_reply(int peer, uint32_t index, MailMessage m);

  /// True when `peer` is on another (emulated) node: the progression engine reaches it over
  /// the network transport (only on the proxy path; WEFT_EMULATE_NODES).
  bool crosses_network(int peer) const;
  /// The network transport (null unless the proxy path has a peer on another node).
  net::UcxTransport* ucx() const { return ucx_.get(); }
  /// Across emulated nodes, stage through page-locked host memory: this UCX cannot register
  /// CUDA memory, or WEFT_PART_STAGE=1.
  bool stage_network() const { return stage_network_; }
  /// Page-locked host memory (cudaHostAlloc, portable), zeroed; freed when the context is
  /// destroyed, after the network transport (which may hold a registration of it).
  void* alloc_pinned(uint64_t bytes);
  /// A slot of this rank's shared segment for a receive request's UCX memory keys.
  static constexpr uint32_t kKeySlots = 64, kKeySlotBytes = 4096;
  uint32_t alloc_key_slot();
  /// Slot `index` of rank `owner`'s shared segment (kKeySlotBytes); Remote when out of range.
  char* key_slot(int owner, uint32_t index) const;

  /// A slot of host words (kSlotWords, zeroed) of this rank's shared segment for a request.
  static constexpr uint32_t kWordSlots = 8192;
  uint32_t alloc_words();
  /// Slot `index` of rank `owner`'s shared segment, mapped here; Remote when out of range.
  uint64_t* words(int owner, uint32_t index) const;
  /// Slot `index` of this rank's segment as this rank's GPU addresses it.
  uint64_t* words_device(uint32_t index) const;

  ExportedMemory export_memory(const void* ptr) const;
  /// Maps memory `peer` exported; release with unmap().
  char* map(int peer, const ExportedMemory& m);
  void unmap(int peer, char* p);

  /// Host access to device memory on the context's private stream (synchronous).
  void read(void* host, const void* dev, uint64_t bytes);
  void write(void* dev, const void* host, uint64_t bytes);
  void copy(void* dst, const void* src, uint64_t bytes);
  /// Device memory, zeroed; freed with free_device.
  void* alloc_device(uint64_t bytes);
  void free_device(void* p);

 private:
  static size_t segment_bytes();
  void register_segment(const char* name);  ///< unlinks `name` on failure
  char* mailbox(int owner_view_peer, bool offers, uint32_t index, bool local);
  void write_message(char* dst, const MailMessage& m);
  bool read_message(const char* src, uint64_t seq, MailMessage* out);

  int rank_ = 0, nranks_ = 0, device_ = 0;
  double timeout_s_ = 0;
  TransferPath path_ = TransferPath::Kernel;
  std::unique_ptr<ProgressEngine> engine_;
  char* mailbox_ = nullptr;
  std::vector<char*> peer_mailbox_;
  std::vector<bool> peer_local_;   ///< rank lives in this process
  std::vector<bool> peer_opened_;  ///< mailbox opened by IPC
  cudaStream_t stream_ = nullptr;
  void* staging_ = nullptr;        ///< pinned, kMessageBytes
  std::vector<uint64_t*> shm_;     ///< by rank: its shared segment, mapped here
  uint64_t* shm_dev_ = nullptr;    ///< this rank's segment as its GPU addresses it (registered)
  int64_t trace_epochs_ = 0;
  uint32_t word_slots_used_ = 0;
  uint32_t key_slots_used_ = 0;
  std::vector<int> node_of_;                   ///< proxy path: node of each rank
  std::unique_ptr<net::UcxTransport> ucx_;
  bool stage_network_ = false;
  std::vector<void*> pinned_;                  ///< alloc_pinned's
  std::vector<uint32_t> offers_posted_;                ///< by peer
  std::vector<std::vector<MailMessage>> offers_seen_;  ///< by peer
  std::vector<std::vector<bool>> offers_matched_;      ///< by peer
  std::recursive_mutex mu_;
};

}  // namespace weft::part
