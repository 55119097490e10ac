// Communicator: one rank's handle on a group of GPUs (the object behind weftComm_t).
//
// It owns the bootstrap connection, an arena of device memory holding this rank's
// connection state (per peer and connection: control counters and the staging FIFO that
// peer writes into), the peers' arenas mapped through CUDA IPC (or peer access within one
// process), host-mapped error and abort flags, the plans it has compiled and uploaded
// (cached per collective, algorithm, protocol, instances, in-place flag and root), and the
// user buffers registered with it (registration is local to the rank, as NCCL's is: no
// peer maps them). Everything is freed by destroy() or abort(), except the arena while a
// peer may still write into it (runtime/deferred_free.hpp).
//
// A peer watchdog (bootstrap/peer_watchdog.hpp) runs while the communicator is usable: when a
// peer process exits or its bootstrap connection closes, it marks the communicator broken
// (an error naming that rank, ErrorCode::Remote) and raises the abort flag, so kernels
// waiting for that peer end within a second instead of at WEFT_TIMEOUT.
//
// Arena layout of a rank with R ranks, K connections per pair, FIFO depth D:
//   control[p][c]  256 bytes at (p*K + c)*256: posted (written by p), acked (written by
//                  p), send position, receive position, each on its own 64 bytes (the
//                  network FIFO's positions 8 bytes after the memory FIFO's);
//   staging[p][c]  after the control area: D Simple slots, then D LL slots, for messages
//                  from rank p on connection c;
//   one-shot area  the small-message path's packet regions and epoch counters
//                  (exec/oneshot.hpp), 2 MiB per rank;
//   mailboxes      last: 256 bytes per sending rank (mailbox_post: a message that needs no
//                  other rank, as ncclCommShrink's new id from its first surviving rank).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "exec/exec_plan.hpp"
#include "exec/channel_end.hpp"
#include "exec/oneshot.hpp"
#include "ir/algorithm.hpp"
#include "bootstrap/bootstrap.hpp"
#include "runtime/deferred_free.hpp"
#include "bootstrap/peer_watchdog.hpp"
#include "plan/placement.hpp"
#include "exec/plan_lowering.hpp"
#include "tune/decide.hpp"
#include "runtime/windows.hpp"
#include "util/error.hpp"

namespace weft {

class NetFifos;
class CeRunner;

/// Sizes every rank of a communicator must agree on (from WEFT_CONNECTIONS,
/// WEFT_FIFO_DEPTH, WEFT_SLOT_BYTES, WEFT_LL_SLOT_BYTES, WEFT_MB_WINDOW: the order of a
/// connection's messages depends on the window).
struct CommConfig {
  int32_t connections = 32;
  int32_t depth = 4;
  uint32_t slot_bytes = 512 << 10;
  uint32_t ll_slot_bytes = 64 << 10;
  uint32_t mb_window = 1;
  static CommConfig from_env();
};

struct ArenaLayout {
  int32_t ranks = 0;
  CommConfig cfg;
  uint64_t control(int peer, int conn) const { return (static_cast<uint64_t>(peer) * cfg.connections + conn) * 256; }
  uint64_t control_bytes() const { return (control(ranks, 0) + 4095) / 4096 * 4096; }
  uint64_t staging(int peer, int conn) const {
    return control_bytes() + (static_cast<uint64_t>(peer) * cfg.connections + conn) * cfg.depth *
                                 (static_cast<uint64_t>(cfg.slot_bytes) + cfg.ll_slot_bytes);
  }
  uint64_t ll_staging(int peer, int conn) const {
    return staging(peer, conn) + static_cast<uint64_t>(cfg.depth) * cfg.slot_bytes;
  }
  /// Start of the one-shot area (exec/oneshot.hpp gives its layout).
  uint64_t oneshot() const { return staging(ranks, 0); }
  /// Start of the mailboxes (Communicator::mailbox_post): one slot per sending rank.
  uint64_t mailbox() const { return oneshot() + exec::oneshot_area_bytes(ranks); }
  uint64_t total() const { return mailbox() + static_cast<uint64_t>(ranks) * kMailboxSlot; }
  static constexpr uint64_t kMailboxSlot = 256;
  static constexpr uint64_t kPosted = 0, kAcked = 64, kSendPos = 128, kRecvPos = 192;
  /// The positions of the network FIFO's ends for the same pair and connection (across
  /// nodes), beside the memory FIFO's on their lines.
  static constexpr uint64_t kNetSendPos = kSendPos + 8, kNetRecvPos = kRecvPos + 8;
};

/// A point-to-point operation of a group (weftSend / weftRecv).
struct P2POp {
  bool send = false;
  int peer = 0;
  void* buf = nullptr;
  uint64_t bytes = 0;
  cudaStream_t stream = nullptr;
};

class Communicator {
 public:
  /// Joins the communicator `id` as `rank` of `nranks` on CUDA device `device`.
  static std::unique_ptr<Communicator> create(const UniqueId& id, int nranks, int rank, int device);
  ~Communicator();

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  int device() const { return device_; }

  /// Waits for this communicator's work (bounded: every device wait ends at WEFT_TIMEOUT
  /// or when a peer is lost), meets the other ranks twice (their kernels have ended, then
  /// they have unmapped this rank's memory) and frees everything. Where the meeting fails
  /// the arena waits until its writers are done (deferred_free.hpp). Errors while doing so
  /// are logged, not thrown.
  void destroy();
  /// Stops this communicator's kernels at their next wait, closes the bootstrap (the peers'
  /// watchdogs see it at once), and frees everything but the arena, which waits until no
  /// peer can write into it any more.
  void abort();

  /// The error a kernel of this communicator recorded, if any (the communicator is unusable
  /// after one); Success otherwise.
  ErrorCode async_error(std::string* message);
  /// Throws the recorded error, if any.
  void check_usable();

  /// Runs a collective on `stream` (see weft.h for the buffers each collective takes).
  void collective(Collective c, const void* send, void* recv, uint64_t count, int dtype, int op, int root,
                  cudaStream_t stream);
  /// Runs a group of point-to-point operations as one launch.
  void p2p(const std::vector<P2POp>& ops);

  /// Registers [ptr, ptr + bytes), device memory of this process, with this rank only (no
  /// other rank takes part, as with NCCL); returns a handle. Collectives do not need it:
  /// they stage through the arena whether a buffer is registered or not, except the
  /// copy-engine ones (WEFT_ALGO=ce), which run only where every receive buffer is.
  void* register_buffer(void* ptr, uint64_t bytes);
  void deregister_buffer(void* handle);

  /// Memory windows (runtime/windows.hpp, weftCommWindowRegister). Collective: every rank
  /// registers [ptr, ptr + bytes) with the same flags, in the same order; the verdict is the
  /// same on every rank (runtime/window_rules.hpp) and one failure fails every rank.
  weftWindow* register_window(void* ptr, uint64_t bytes, int flags);
  /// Local; InvalidArgument for a window not registered here, InvalidUsage while a
  /// collective that used it has not completed.
  void deregister_window(weftWindow* w);
  /// The CTA policy (tune/cta_policy.hpp), which decide() reads. Collective: every rank
  /// passes the same policy (flags 0 to 3), else every rank fails naming the ranks.
  void set_cta_policy(int policy);
  int cta_policy() const { return cta_policy_; }

  /// Mailboxes (runtime/mailbox.cpp): a message from this rank to one peer of this host that
  /// needs no other rank and works on a broken communicator (ncclCommShrink). Writes `bytes`
  /// (at most kMailboxPayload) of `data` as message `seq` (> 0, rising) into `peer`'s slot
  /// for this rank through its arena mapped here; InvalidUsage when the peer's memory is not
  /// mapped (another host).
  void mailbox_post(int peer, uint64_t seq, const void* data, size_t bytes);
  /// Waits, bounded by WEFT_TIMEOUT (0: WEFT_BOOTSTRAP_TIMEOUT), for message `seq` from
  /// `from` in this rank's mailbox and copies its `bytes` to `data`; Timeout naming `from`.
  void mailbox_wait(int from, uint64_t seq, void* data, size_t bytes);
  static constexpr size_t kMailboxPayload = 192;
  /// Whether `peer`'s memory is mapped here (same host), so that mailbox_post reaches it.
  bool reaches(int peer) const;
  /// Stops this communicator's kernels at their next wait (the abort flag) and marks it
  /// unusable with `why` (ncclCommShrink with NCCL_SHRINK_ABORT); destroy or abort it next.
  void revoke(const std::string& why);

  /// Users' memory channels (weftCommConnectMemoryChannels, runtime/user_channel.cpp).
  /// Collective: every rank calls it together, each with its own list of peers (possibly
  /// empty) and its own buffer [buf, buf + bytes), device memory of this process. Returns
  /// one channel per listed peer: `local` is buf, `remote` the buffer that peer passed
  /// (mapped here), a semaphore pair with it, and LL packet buffers of `packet_bytes`
  /// (rounded up to 16) each way when packet_bytes > 0. The channels of one call share one
  /// allocation and the peers' mappings, released with the last of them.
  std::vector<exec::ChannelEnd> connect_memory_channels(const std::vector<int>& peers, void* buf, uint64_t bytes,
                                                           uint64_t packet_bytes);

  /// The bootstrap, for collective setup steps of layers built on the communicator
  /// (partitioned communication's context, src/part); WEFT_TIMEOUT in seconds (0: none).
  Bootstrap& bootstrap() { return *boot_; }

  /// Measured traces (runtime/trace_capture.cpp, docs/traces.md): the next collective call
  /// records the interpreter's timestamps, at most `records_per_block` per thread block
  /// (1 to 1,000,000). Only float32 calls on one node are traced; another call still runs
  /// and its trace says why it holds nothing.
  void arm_trace(uint32_t records_per_block);
  /// Waits for `stream`, then returns the armed call's trace as one line of JSON
  /// (sim/measured_trace.hpp); InvalidUsage when no armed call has run since arm_trace.
  std::string take_trace(cudaStream_t stream);
  double timeout_seconds() const { return timeout_s_; }

 private:
  /// A plan lowered for this communicator and uploaded: the arrays live in `mem`.
  struct CachedPlan {
    LoweredPlan lp;
    char* mem = nullptr;
    const exec::DevTB* tbs = nullptr;
    const exec::DevSlot* slots = nullptr;
    const int32_t* deps = nullptr;
    const int32_t* dep_tbs = nullptr;
    const exec::ChannelHandle* conns = nullptr;
    uint64_t* counters = nullptr;
    int num_tbs = 0;
    int num_blocks = 0;                ///< CUDA blocks: num_tbs, or fewer with roles > 1
    int roles = 1;                     ///< plan thread blocks per CUDA block (RoleGroups)
    const int16_t* block_tbs = nullptr;  ///< roles > 1: RoleGroups::tb_of, in mem
    bool fits_inline = false;          ///< small enough for ExecArgs' inline arrays
    int conn_cache = 0;                ///< ExecArgs::conn_cache: the most connections of one thread block
    uint32_t mb_window = 1;            ///< ExecArgs::mb_window: WEFT_MB_WINDOW, or 1 (bulk_options)
    bool post_warp = false;            ///< ExecArgs::post_warp: WEFT_POST_WARP where it applies
    bool mover_wide = false;           ///< ExecArgs::mover_wide: WEFT_MOVER_WIDE on a Simple plan
    bool warm = false;                 ///< ExecArgs::warm: WEFT_EXEC_WARM
    bool ll_kernel = false;            ///< ExecArgs::ll_kernel: WEFT_EXEC_LL_KERNEL on an LL plan, the interpreter
    bool post_thread = false;          ///< ExecArgs::post_thread: WEFT_POST_THREAD on a Simple plan within a node
    std::vector<exec::ChannelHandle> conns_host;
    /// Executor::Generated: the plan's generated kernels, by [weftDataType_t][op], made at first use.
    bool gen = false;              ///< generated kernels run this plan (decide() chose Executor::Generated)
    const void* gen_kernels[10][5] = {};
  };
  struct Registration {
    void* ptr = nullptr;
    uint64_t bytes = 0;
  };
  Communicator() = default;
  /// Collective: the arena, the error and abort words, the peers' arenas mapped, the
  /// network, the decider, the FIFOs and the watchdog.
  void init_memory();
  /// The Simple bulk path's switches for a plan just lowered (WEFT_FUSE_COPY, WEFT_MB_WINDOW,
  /// WEFT_POST_WARP; docs/runtime.md, "Large messages against NCCL"): fuses, checks the window
  /// on the emulator (a plan that would deadlock keeps windows of 1), sets cp's launch choices;
  /// `simple`: the plan runs the Simple protocol (nothing applies to the others).
  void bulk_options(CachedPlan& cp, bool simple);
  /// init_memory's parts: this rank's device memory and mapped words (before any peer is
  /// met); the per-call Decider, once the nodes are known; the FIFOs and the table of
  /// point-to-point connections on the GPU.
  void alloc_device_memory();
  void make_decider();
  void upload_p2p_table();
  /// Starts the peer watchdog from what the ranks told each other at initialization.
  void start_watchdog(const std::vector<WatchedPeer>& peers);
  /// The watchdog's report: marks the communicator broken and raises the abort flag.
  void on_peer_lost(int peer, const std::string& why);
  /// The network proxy's failure (net_fifos.hpp): the same, with the proxy's message.
  void on_network_error(const std::string& why);
  /// Fills placement_'s nodes (its hosts, split by WEFT_EMULATE_NODES) and builds net_ when
  /// the ranks form several nodes, on several hosts or emulated (collective).
  void init_network(int emulate_nodes);
  /// Frees everything. `graceful`: meet the other ranks first (destroy); otherwise (abort,
  /// a failed creation) do not. The arena is freed once no peer can write into it.
  void free_all(bool graceful);
  /// The plan of launch `l` for `call` (root: Broadcast's and Reduce's), lowered and uploaded
  /// at its first use; found by a PlanKey of integers after.
  CachedPlan& plan_for(const Call& call, const Launch& l, int root);
  /// The FIFO end a plan's connection reference names, of the channel kind its link records
  /// (fifo_ or net_fifo_ below).
  const exec::ChannelEnd& fifo(const ConnRef& ref, ChannelKind kind) const;
  /// The channel of a link to or from `peer` where a plan records none, and for p2p: the
  /// network across nodes, else memory.
  ChannelKind default_channel(int peer) const;
  /// Builds fifo_ (every end of every connection with every peer whose arena is mapped)
  /// and net_fifo_ (with every peer on another node).
  void make_fifos();
  void* scratch(uint64_t bytes);
  /// The base of the allocation holding [ptr, ptr + bytes); fails (naming `fn`) if that is
  /// not device memory of this process, or runs past its allocation.
  static uint64_t allocation_base(const void* ptr, uint64_t bytes, const std::string& fn);
  /// A plan launch `l` of `call` (the interpreter or the plan's generated kernel): its cached
  /// plan, the geometry of `count` elements of `esz` bytes, the launch.
  void launch_plan_call(const Call& call, const Launch& l, const char* send, char* recv, uint64_t count, size_t esz,
                        int dtype, int op, int root, cudaStream_t stream);
  /// WEFT_ONESHOT_POLL and WEFT_ONESHOT_THREADS, checked (at creation).
  void read_oneshot_knobs();
  /// The one-shot kernel (exec/oneshot.hpp) for `bytes` per rank and peer (`root`: Broadcast, Reduce).
  void launch_oneshot_call(Collective c, const void* send, void* recv, uint64_t bytes, int dtype, int op, int blocks,
                           int root, cudaStream_t stream);
  void note_launch(cudaStream_t stream);
  /// A traced call (arm_trace): the buffer and what the trace names, set in `a`; or, when
  /// `cp` is null (no interpreter launch), why nothing is recorded.
  void start_trace(exec::ExecArgs* a, const CachedPlan* cp, Collective c, const Choice& ch, uint64_t payload,
                   const std::string& why_not, cudaStream_t stream);
  /// The copy-engine runner (exec/ce_runner.hpp, built at its first call:
  /// runtime/communicator_ce.cpp); false on every rank when the call cannot run by copy
  /// engines.
  bool run_copy_engine(Collective c, const void* send, void* recv, uint64_t count, int dtype, int op, bool in_place,
                       cudaStream_t stream, int root = 0);
  /// The copy-engine runner, made at its first use (collective: every rank gets here together).
  CeRunner& ensure_ce();
  /// The window holding [ptr, ptr + bytes) (the first registered, if several), or null.
  const weftWindow* window_of(const void* ptr, uint64_t bytes) const;
  /// After a collective whose buffers overlap windows: records an event on `stream` that
  /// deregistration queries (nothing while the stream is being captured). Never throws.
  void note_window_use(const void* send, uint64_t send_bytes, const void* recv, uint64_t recv_bytes,
                       cudaStream_t stream) noexcept;
  /// decide()'s CopyEngineDirect (runtime/zero_copy.cpp): c (AllGather, AllToAll or
  /// Broadcast, `bytes` per block) by copy engines straight into the peers' symmetric window
  /// `w`, which holds this rank's receive buffer `recv` (every rank's at the same offset).
  void run_window_direct(Collective c, const weftWindow& w, const char* send, char* recv, uint64_t bytes, int root,
                         bool in_place, cudaStream_t stream);
  std::string format_device_error(const exec::ErrorRecord& e) const;

  int rank_ = 0, nranks_ = 0, device_ = 0;
  int sm_count_ = 0;
  int max_blocks_ = 0;
  double timeout_s_ = 600;                  ///< WEFT_TIMEOUT; 0: no deadline
  bool oneshot_seq_ = false;                ///< WEFT_ONESHOT_POLL=seq: the one-shot kernel polls peers in rank order
  int oneshot_threads_ = exec::kOneShotThreads;  ///< WEFT_ONESHOT_THREADS: most threads of a one-word block
  bool oneshot_pdl_ = false;                ///< WEFT_ONESHOT_PDL: programmatic dependent launches
  std::shared_ptr<const SelectionTable> table_;  ///< WEFT_SELECTION's table, else the default
  bool gen_ = false;            ///< WEFT_EXECUTOR=gen (and no emulated nodes): generated kernels
  DecideEnv decide_env_;        ///< WEFT_ALGO, WEFT_PROTO, ... as read at creation
  /// The one decision per call (tune/decide.hpp), made once the communicator's nodes are known.
  std::unique_ptr<Decider> decider_;
  std::unique_ptr<Bootstrap> boot_;
  ArenaLayout layout_;
  char* arena_ = nullptr;
  std::vector<char*> peer_arena_;       ///< by rank; own rank -> arena_
  std::vector<bool> peer_ipc_opened_;   ///< true when opened with cudaIpcOpenMemHandle
  std::vector<int> peer_device_;        ///< device of each rank living in this process, else -1
  exec::ErrorRecord* error_host_ = nullptr;  ///< host-mapped
  exec::ErrorRecord* error_dev_ = nullptr;   ///< its device address
  uint32_t* abort_host_ = nullptr;
  uint32_t* abort_dev_ = nullptr;
  uint32_t* error_claim_ = nullptr;         ///< device memory
  /// Some two ranks of this communicator live in one process (the same on every rank).
  bool ranks_share_process_ = false;
  /// The host halves of the connection FIFOs, ((peer*2+send)*K + conn); empty for this rank
  /// and for peers on other hosts (nothing of theirs is mapped).
  std::vector<exec::ChannelEnd> fifo_;
  /// The same across the network, for peers on other nodes (net_); empty elsewhere.
  std::vector<exec::ChannelEnd> net_fifo_;
  /// Hosts and nodes of every rank (plan/placement.hpp).
  Placement placement_;
  /// Every rank's process as the watchdog sees it (pid 0: not watchable from here).
  std::vector<PeerProcess> procs_;
  exec::ChannelHandle* p2p_conns_ = nullptr;  ///< fifo_'s device handles, uploaded for p2p
  /// FIFOs to ranks on other (emulated) nodes, through the proxy and UCX; null on one node.
  std::unique_ptr<NetFifos> net_;
  /// Copy-engine collectives (WEFT_ALGO=ce); null until the first such call.
  std::unique_ptr<CeRunner> ce_;
  cudaStream_t setup_stream_ = nullptr;
  bool launched_ = false;
  std::mutex error_mu_;                     ///< guards broken_, broken_message_ and reading error_host_
  ErrorCode broken_ = ErrorCode::Success;
  std::string broken_message_;
  std::unordered_map<PlanKey, std::unique_ptr<CachedPlan>, PlanKeyHash> plans_;
  std::vector<void*> scratch_;              ///< the last one is current; earlier ones may still be in use
  uint64_t scratch_bytes_ = 0;
  std::map<void*, std::unique_ptr<Registration>> registrations_;
  std::map<weftWindow*, std::unique_ptr<weftWindow>> windows_;
  uint64_t windows_registered_ = 0;         ///< windows registered so far (ids)
  int cta_policy_ = 0;                      ///< tune/cta_policy.hpp; WEFT_CTA_POLICY at creation
  std::unique_ptr<PeerWatchdog> watchdog_;
  std::shared_ptr<DoneFlag> done_;          ///< set once this rank's kernels have ended for good
  Writers arena_writers_;                   ///< who may write into arena_: every peer
  bool freed_ = false;
  uint32_t trace_cap_ = 0;                  ///< armed: records per block of the next call; 0: not armed
  char* trace_buf_ = nullptr;               ///< device memory of the traced call's records
  uint64_t trace_bytes_ = 0;
  uint32_t trace_buf_cap_ = 0;              ///< records per block region of trace_buf_
  std::string trace_meta_;                  ///< the traced call's MeasuredRank (JSON) before its blocks; empty: none
  std::mutex mu_;
};

}  // namespace weft
