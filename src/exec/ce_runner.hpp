// The copy-engine runner: runs the programs of plan/ce_plan.hpp on a communicator
// (docs/port-channels.md, "Copy-engine collectives").
//
// AllReduce: on the caller's stream, a one-thread trigger kernel posts the program's signals
// and puts to this rank's proxy FIFO and waits, bounded, for the peers' signals and a final
// flush; local copies are cudaMemcpyAsync (copy engines); the reduction is a kernel of at
// most ce::kMaxReduceBlocks thread blocks. The proxy (one host thread) turns each put into a
// cudaMemcpyAsync on a stream of its own per peer, straight into the peer's registered
// receive buffer or scratch, and each signal into an 8-byte copy behind the data.
// AllGather, AllToAll and Broadcast take the direct path instead (run_direct below): the
// calling thread issues every copy itself, no proxy. No thread block moves data between GPUs.
//
// Zero copy needs every rank's receive buffer inside a range registered with
// weftCommRegister or a memory window (it is mapped by the peers through CUDA IPC at the
// first call that uses it, and stays mapped until the communicator is destroyed or the
// peer's allocation is seen replaced by a new one over its addresses). Each call exchanges
// one small record per rank over the bootstrap (its buffers, registered or not); when any
// rank cannot take part, every rank returns false and the caller runs the decision's
// fallback instead. Calls on symmetric windows skip that exchange (decide()'s
// CopyEngineDirect: the communicator calls run_direct with the window's peer addresses).
//
// Graphs: everything on the host (the exchange, mappings, the proxy's tables) happens when
// the call is made or captured; a replay runs the captured kernels, whose counters live in
// device memory and keep counting, and the proxy follows their triggers.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "exec/exec_plan.hpp"
#include "ir/algorithm.hpp"
#include "plan/ce_plan.hpp"
#include "weft/device/port_channel.hpp"

namespace weft {

class Bootstrap;
namespace proxy {
class Proxy;
class Endpoint;
}  // namespace proxy

/// What the communicator lends the executor.
struct CeContext {
  int rank = 0, nranks = 0, device = 0;
  Bootstrap* boot = nullptr;
  double timeout_s = 0;             ///< WEFT_TIMEOUT (0: no deadline)
  std::vector<int> peer_device;     ///< by rank: its device if it lives in this process, else -1
  exec::ErrorRecord* error = nullptr;
  uint32_t* error_claim = nullptr;
  uint32_t* abort = nullptr;
  /// The registered range [*base, *base + *bytes) holding [ptr, ptr + len), if any.
  std::function<bool(const void* ptr, uint64_t len, uint64_t* base, uint64_t* bytes)> registered;
  /// Called once, from the proxy thread, with its first failure.
  std::function<void(const std::string&)> on_error;
};

class CeRunner {
 public:
  /// Collective (the first copy-engine call of every rank): maps the peers' signal words and
  /// starts the proxy.
  explicit CeRunner(CeContext ctx);
  ~CeRunner();
  CeRunner(const CeRunner&) = delete;
  CeRunner& operator=(const CeRunner&) = delete;

  /// Collective: runs c on `stream` by copy engines and returns true, or returns false on
  /// every rank (nothing launched) when some rank cannot (a receive buffer not registered,
  /// a registration of 4 GiB or more, more than ce::kMaxRanks ranks...), logging why at INFO.
  /// `root`: Broadcast's.
  bool run(Collective c, const void* send, void* recv, uint64_t count, int dtype, int op, bool in_place,
           cudaStream_t stream, int root = 0);

  /// The direct path (exec/ce_direct.cpp): AllGather, AllToAll and Broadcast by copies
  /// this thread issues on the caller's stream, straight into the peers' receive buffers
  /// (one batch, cudaMemcpyBatchAsync, or WEFT_CE_STREAMS batches on forked streams),
  /// between two one-thread rendezvous kernels: before the copies every peer has reached
  /// the call (its buffer may be written) with the same tag, after them every peer's
  /// copies into this rank have landed. No proxy, no thread block moving data.
  struct Direct {
    Collective c = Collective::AllGather;
    const char* send = nullptr;
    char* recv = nullptr;
    uint64_t bytes = 0;            ///< one block: count x element size
    int root = 0;                  ///< Broadcast
    bool in_place = false;
    std::array<char*, ce::kMaxRanks> peer_recv{};  ///< by rank: rank q's receive buffer as mapped here (this rank's: recv)
    uint64_t tag = 0;              ///< the call's fingerprint, the same on every rank (ce::call_tag)
  };
  /// Collective (every rank makes the same call): launches `d` on `stream`.
  void run_direct(const Direct& d, cudaStream_t stream);

  /// Maps rank `peer`'s allocation (its IPC handle, its address there and its size) into this
  /// process once (cached with the mappings of the calls above) and returns where that
  /// address lies here; ranks of this process are reached at their own addresses. Throws
  /// UnhandledCuda when the driver refuses.
  char* map_peer(int peer, const cudaIpcMemHandle_t& handle, uint64_t address, uint64_t bytes, uint64_t alloc_bytes);

  /// Thread blocks the last call launched: trigger kernels (one thread each, no data) and
  /// the reduce kernel's blocks.
  struct Blocks {
    int trigger_launches = 0;
    int reduce_blocks = 0;  ///< the most one reduce launch used
  };
  Blocks last_blocks() const { return blocks_; }

 private:
  struct Record;
  struct LocalMem {
    const char* base = nullptr;
    uint32_t id = 0;
  };
  void add_memories(const std::function<void()>& adds);
  LocalMem local_memory(const void* ptr, uint64_t bytes, std::vector<std::function<void()>>& adds);
  void map_call(Collective c, const std::vector<Record>& all, uint64_t scratch_need, const void* recv, uint64_t recv_bytes,
                const void* in_ptr, uint64_t in_bytes, std::vector<std::function<void()>>& adds, LocalMem* out_mem,
                LocalMem* in_mem, std::vector<std::array<uint32_t, 3>>* dst_mem, std::vector<uint64_t>* dst_base);
  uint32_t remote_memory(int peer, char* ptr, uint64_t bytes, std::vector<std::function<void()>>& adds);
  void note_fallback(const std::string& why);
  /// Where this call's programs read and write: this rank's buffers and the peers'.
  struct CallMemories {
    LocalMem out, in;
    std::vector<std::array<uint32_t, 3>> dst;  ///< by peer and buffer: the proxy's memory ids
    std::vector<uint64_t> dst_base;            ///< by peer: its receive buffer's offset in its memory
  };
  /// A run of local steps with one destination: dst := a (op) sources.
  struct LocalRun {
    char* dst = nullptr;
    const char* a = nullptr;
    uint64_t bytes = 0;
    std::vector<const char*> src;
  };
  /// This rank's record for the call (its receive buffer holds `recv_total` bytes; grows
  /// the scratch as every rank does); returns why this rank cannot run it by copy engines,
  /// empty when it can.
  std::string local_record(Collective c, const void* recv, uint64_t recv_total, const ce::Geometry& g, Record* mine);
  /// Maps what the records name; false on every rank (logged) when some rank cannot.
  bool map_agreed(Collective c, const std::vector<Record>& all, const ce::Geometry& g, const void* recv,
                  const char* in_ptr, CallMemories* mem);
  /// After a call's records were exchanged and this rank mapped what they name (failing
  /// with `map_error`, empty if not): true when every rank mapped them (all run the call),
  /// false on every rank otherwise. Exchanges only when the records changed since the last
  /// call every rank mapped.
  bool agree_mapped(const std::vector<Record>& all, const std::string& map_error, Collective c);
  /// The direct path after the exchange: maps the peers' receive buffers and runs the call;
  /// false on every rank (logged) when some rank cannot map them.
  bool run_direct_exchanged(Collective c, const std::vector<Record>& all, const void* send, void* recv, uint64_t bytes,
                            bool in_place, int root, cudaStream_t stream);
  /// The copies of one direct call, issued on `stream` (and the side streams).
  struct Copy {
    void* dst;
    const void* src;
    size_t bytes;
  };
  void issue_copies(std::vector<Copy> copies, cudaStream_t stream);
  void batch(const std::vector<Copy>& copies, size_t first, size_t n, cudaStream_t stream, bool capturing);
  const char* staged_input(const Direct& d, cudaStream_t stream);
  /// A direct call's copies on `stream`, phase by phase, each phase after a rendezvous of every
  /// rank (the first checks the call's tag) and a last rendezvous after them; returns the
  /// number of copies.
  size_t run_phases(std::vector<std::vector<Copy>> phases, uint64_t tag, cudaStream_t stream);
  /// A Broadcast on more than 2 ranks from kTwoPhaseBroadcastBytes (ce_direct.cpp), as two
  /// phases: the root scatters parts, then every rank forwards its part.
  std::vector<std::vector<Copy>> broadcast_phases(const Direct& d, const char* in) const;
  /// The side streams and events of WEFT_CE_STREAMS, made at the first direct call.
  void make_side_streams();
  /// Launches this rank's program: trigger kernels for the proxy's steps, copies and reduce
  /// kernels for the local ones.
  void launch_program(const std::vector<ce::Step>& prog, const ce::Geometry& g, const char* in_ptr, void* recv, int dtype,
                      int op, const CallMemories& mem, cudaStream_t stream);
  /// Runs the pending local run (a copy, or reduce kernels) and empties it.
  void finish_local(LocalRun* run, int dtype, int op, cudaStream_t stream);

  CeContext ctx_;
  std::unique_ptr<proxy::Proxy> proxy_;
  std::vector<std::shared_ptr<proxy::Endpoint>> conns_;  ///< by rank; null for this one
  std::vector<device::PortChannelDeviceHandle> channels_;  ///< by rank
  uint64_t* sig_ = nullptr;            ///< device: inbound[R], waited[R], then the direct path's inbox[2R], epoch
  std::vector<uint64_t*> peer_sig_;    ///< by rank: its sig_ as mapped here (null for this rank)
  std::vector<cudaStream_t> side_;     ///< WEFT_CE_STREAMS - 1 streams the direct path forks into
  cudaEvent_t fork_ = nullptr;
  std::vector<cudaEvent_t> join_;
  bool batch_ok_ = true;               ///< cudaMemcpyBatchAsync worked (else one cudaMemcpyAsync per copy)
  std::vector<void*> stage_;           ///< in-place AllToAll's copy of the input; the last is current
  uint64_t stage_bytes_ = 0;
  std::vector<void*> scratch_;         ///< the last is current; earlier ones stay mapped by peers
  uint64_t scratch_bytes_ = 0;
  cudaIpcMemHandle_t scratch_handle_{};
  std::map<std::tuple<int, std::string>, char*> mapped_;            ///< (peer, IPC handle) -> mapping
  std::map<std::tuple<int, uint64_t, uint64_t>, uint32_t> remote_;  ///< (peer, address, bytes) -> memory id
  std::map<std::pair<uint64_t, uint64_t>, uint32_t> local_;         ///< (address, bytes) -> memory id
  std::vector<ce::PeerMapping> maps_;  ///< the IPC mappings open (closed at destroy), oldest first
  std::string agreed_;                 ///< the records of the last call every rank mapped
  uint32_t memories_ = 0;              ///< ids used in the proxy's table
  std::map<std::tuple<int, bool, int>, std::vector<std::vector<ce::Step>>> programs_;  ///< (c, in place, pieces)
  std::map<std::string, int> fallbacks_;  ///< reasons logged
  Blocks blocks_;
};

}  // namespace weft
