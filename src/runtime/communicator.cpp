#include "runtime/communicator.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <random>
#include <thread>

#include "exec/ce.hpp"
#include "exec/device_memory.hpp"
#include "net/node_layout.hpp"
#include "exec/ce_runner.hpp"
#include "tune/cta_policy.hpp"
#include "proxy/copy_engine.hpp"
#include "net/ucx_transport.hpp"
#include "plan/hand_built.hpp"
#include "net/net_fifos.hpp"
#include "tune/net_selection.hpp"
#include "exec/plan_check.hpp"
#include "plan/plan_source.hpp"
#include "tune/auto_schedule.hpp"
#include "sim/call_model.hpp"
#include "util/cuda_check.hpp"
#include "exec/executor.hpp"
#include "bootstrap/host_identity.hpp"
#include "bootstrap/peer_check.hpp"
#include "gen/kernels.hpp"
#include "util/config.hpp"
#include "util/log.hpp"
#include "weft/weft.h"

namespace weft {

namespace {

/// A random number drawn once per process: ranks that send the same one (and the same host)
/// share this process. A pid alone does not say so: two containers of one machine may run
/// ranks under the same pid in different pid namespaces.
uint64_t process_token() {
  static const uint64_t token = [] {
    std::random_device rd;
    uint64_t t = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(getpid());
    return t == 0 ? 1 : t;
  }();
  return token;
}

/// What each rank tells the others at initialization.
struct PeerInfo {
  uint32_t version;
  int32_t rank;
  HostIdentity host;      ///< plan/placement.hpp: which host it runs on
  uint64_t process;       ///< process_token() of its process
  int32_t pid;
  int32_t device;
  CommConfig cfg;
  cudaIpcMemHandle_t handle;
  uint64_t arena;
  uint64_t start_time;  ///< of its process (peer_watchdog.hpp): tells a reused pid from it
  uint64_t done_flag;   ///< id of its DoneFlag, for ranks in the same process
  int32_t emulate_nodes;  ///< WEFT_EMULATE_NODES: every rank must use the same
  int32_t cta_policy;     ///< WEFT_CTA_POLICY (tune/cta_policy.hpp): every rank must use the same
};

/// The longest destroy waits for the other ranks to reach it (each of its two meetings).
constexpr double kDestroyMeetSeconds = 60;

const char* prim_name(int p) {
  static const char* names[] = {"send", "recv", "rrc", "rcs", "rrcs", "rrs", "copy", "reduce", "nop"};
  return p >= 0 && p <= 8 ? names[p] : "?";
}

}  // namespace

CommConfig CommConfig::from_env() {
  // The registry (util/config.cpp) holds each value's range; only the alignment is left.
  CommConfig c;
  c.connections = static_cast<int32_t>(config::get_int("WEFT_CONNECTIONS"));
  c.depth = static_cast<int32_t>(config::get_int("WEFT_FIFO_DEPTH"));
  int64_t slot = config::get_int("WEFT_SLOT_BYTES"), ll = config::get_int("WEFT_LL_SLOT_BYTES");
  if (slot % 16 != 0)
    fail(ErrorCode::InvalidArgument, "WEFT_SLOT_BYTES='" + std::to_string(slot) + "' is not a multiple of 16");
  if (ll % 16 != 0)
    fail(ErrorCode::InvalidArgument, "WEFT_LL_SLOT_BYTES='" + std::to_string(ll) + "' is not a multiple of 16");
  c.slot_bytes = static_cast<uint32_t>(slot);
  c.ll_slot_bytes = static_cast<uint32_t>(ll);
  c.mb_window = static_cast<uint32_t>(config::get_int("WEFT_MB_WINDOW"));
  return c;
}


void Communicator::read_oneshot_knobs() {
  const std::string poll = config::get_string("WEFT_ONESHOT_POLL");
  if (poll != "all" && poll != "seq")
    fail(ErrorCode::InvalidArgument, "WEFT_ONESHOT_POLL='" + poll + "': the values are all and seq");
  oneshot_seq_ = poll == "seq";
  oneshot_threads_ = static_cast<int>(config::get_int("WEFT_ONESHOT_THREADS"));
  oneshot_pdl_ = config::get_bool("WEFT_ONESHOT_PDL");
  if (oneshot_threads_ % 32 != 0)
    fail(ErrorCode::InvalidArgument,
         "WEFT_ONESHOT_THREADS=" + std::to_string(oneshot_threads_) + ": a multiple of 32 (whole warps) is needed");
}

std::unique_ptr<Communicator> Communicator::create(const UniqueId& id, int nranks, int rank, int device) {
  auto c = std::unique_ptr<Communicator>(new Communicator());
  c->rank_ = rank;
  c->nranks_ = nranks;
  c->device_ = device;
  // Every WEFT_* value is checked here, so a bad one is an error now rather than at the
  // first collective that reads it (or never).
  config::validate_environment();
  sweep_deferred();
  c->timeout_s_ = config::get_seconds("WEFT_TIMEOUT");
  c->read_oneshot_knobs();
  // The selection table and the environment decide() reads, once (tune/decide.hpp).
  c->table_ = selection_table_for_environment();
  c->decide_env_ = DecideEnv::from_environment();
  c->gen_ = gen::executor_is_gen();
  if (c->gen_) gen::require_nvrtc();  // says what is missing, and that WEFT_EXECUTOR=interp runs without it
  c->decide_env_.generated = c->gen_;
  int ndev = 0;
  WEFT_CUDA_CHECK(cudaGetDeviceCount(&ndev));
  if (device < 0 || device >= ndev)
    fail(ErrorCode::InvalidArgument, "rank " + std::to_string(rank) + ": CUDA device " + std::to_string(device) +
                                         " does not exist (" + std::to_string(ndev) + " visible)");
  DeviceGuard guard(device);
  WEFT_CUDA_CHECK(cudaDeviceGetAttribute(&c->sm_count_, cudaDevAttrMultiProcessorCount, device));
  int cc_major = 0;
  WEFT_CUDA_CHECK(cudaDeviceGetAttribute(&cc_major, cudaDevAttrComputeCapabilityMajor, device));
  c->oneshot_pdl_ = c->oneshot_pdl_ && cc_major >= 9;  // programmatic dependent launch: sm_90 and later
  c->max_blocks_ = std::max(1, executor_blocks_per_sm(kExecThreadsSimple)) * c->sm_count_;
  c->boot_ = Bootstrap::join(id, rank, nranks);
  try {
    c->init_memory();
  } catch (...) {
    c->free_all(false);
    throw;
  }
  WEFT_LOG(Info, "INIT", "rank " << rank << " of " << nranks << " ready on device " << device << " ("
                                  << c->layout_.total() / (1 << 20) << " MiB of connection state)");
  return c;
}

Communicator::~Communicator() {
  if (!freed_) {
    try {
      free_all(false);
    } catch (...) {
    }
  }
}

void Communicator::alloc_device_memory() {
  layout_.ranks = nranks_;
  layout_.cfg = CommConfig::from_env();
  preload_kernels();  // before any rank of this process can spin in a kernel (exec/executor.hpp)
  exec::preload_ce_kernels();
  WEFT_CUDA_CHECK(cudaStreamCreateWithFlags(&setup_stream_, cudaStreamNonBlocking));
  WEFT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&arena_), layout_.total()));
  peer_check::register_arena(arena_, layout_.total());
  WEFT_CUDA_CHECK(cudaMemsetAsync(arena_, 0, layout_.total(), setup_stream_));
  WEFT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&error_claim_), sizeof(uint32_t)));
  WEFT_CUDA_CHECK(cudaMemsetAsync(error_claim_, 0, sizeof(uint32_t), setup_stream_));
  WEFT_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&error_host_), sizeof(exec::ErrorRecord), cudaHostAllocMapped));
  std::memset(static_cast<void*>(error_host_), 0, sizeof(exec::ErrorRecord));
  WEFT_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&error_dev_), error_host_, 0));
  WEFT_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&abort_host_), sizeof(uint32_t), cudaHostAllocMapped));
  *abort_host_ = 0;
  WEFT_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&abort_dev_), abort_host_, 0));
  WEFT_CUDA_CHECK(cudaStreamSynchronize(setup_stream_));
}

void Communicator::make_decider() {
  // Links between nodes (tune/net_selection.hpp): the multi-node table, unless WEFT_SELECTION.
  if (net_) {
    table_ = multi_node_table_for_environment();
    WEFT_LOG(Info, "INIT", "rank " << rank_ << ": links between nodes go through UCX; selection from " << table_->origin);
  }
  CommShape shape;
  shape.nranks = nranks_;
  shape.multi_node = net_ != nullptr;
  shape.connections = layout_.cfg.connections;
  shape.slot_bytes = layout_.cfg.slot_bytes;
  shape.ll_slot_bytes = layout_.cfg.ll_slot_bytes;
  shape.cta_policy = cta_policy_;
  decider_ = std::make_unique<Decider>(table_, shape, decide_env_);
  // The efficiency policy's block count: the plan, lowered (and cached) as it would run;
  // the most thread blocks of any rank, so that every rank derives the same instances.
  decider_->set_plan_blocks([this](const Call& call, const Launch& l) {
    const CachedPlan& cp = plan_for(call, l, call.root);
    size_t blocks = 0;
    for (const LoweredRank& lr : cp.lp.ranks) blocks = std::max(blocks, lr.tbs.size());
    return static_cast<int>(blocks);
  });
}

void Communicator::upload_p2p_table() {
  // The table point-to-point launches index: ((peer * 2 + send) * K + connection).
  make_fifos();
  std::vector<exec::ChannelHandle> table;
  table.reserve(fifo_.size());
  // Point-to-point messages take the layout's channel: the network FIFOs across nodes.
  for (size_t i = 0; i < fifo_.size(); ++i) {
    const int p = static_cast<int>(i / (2 * static_cast<size_t>(layout_.cfg.connections)));
    table.push_back((default_channel(p) == ChannelKind::PortNetwork ? net_fifo_[i] : fifo_[i]).device_handle());
  }
  WEFT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p2p_conns_), table.size() * sizeof(exec::ChannelHandle)));
  WEFT_CUDA_CHECK(cudaMemcpyAsync(p2p_conns_, table.data(), table.size() * sizeof(exec::ChannelHandle),
                                  cudaMemcpyHostToDevice, setup_stream_));
  WEFT_CUDA_CHECK(cudaStreamSynchronize(setup_stream_));
}

void Communicator::init_memory() {
  RelaxedCapture relaxed;
  alloc_device_memory();
  done_ = make_done_flag();
  PeerInfo mine{};
  mine.version = bootstrap_version();
  mine.rank = rank_;
  mine.host = local_host_identity();
  mine.process = process_token();
  mine.pid = static_cast<int32_t>(getpid());
  mine.device = device_;
  mine.cfg = layout_.cfg;
  WEFT_CUDA_CHECK(cudaIpcGetMemHandle(&mine.handle, arena_));
  mine.arena = reinterpret_cast<uint64_t>(arena_);
  mine.start_time = process_start_time(mine.pid);
  mine.done_flag = done_->id;
  mine.emulate_nodes = static_cast<int32_t>(config::get_int("WEFT_EMULATE_NODES"));
  mine.cta_policy = std::max(0, parse_cta_policy(config::get_string("WEFT_CTA_POLICY"), "WEFT_CTA_POLICY"));
  cta_policy_ = mine.cta_policy;
  std::vector<PeerInfo> all(static_cast<size_t>(nranks_));
  all[static_cast<size_t>(rank_)] = mine;
  const double wait_s = config::wait_seconds(timeout_s_);
  boot_->allgather(all.data(), sizeof(PeerInfo), wait_s);

  peer_arena_.assign(static_cast<size_t>(nranks_), nullptr);
  peer_ipc_opened_.assign(static_cast<size_t>(nranks_), false);
  peer_device_.assign(static_cast<size_t>(nranks_), -1);
  int ndev = 0;
  WEFT_CUDA_CHECK(cudaGetDeviceCount(&ndev));
  for (int p = 0; p < nranks_; ++p) {
    // Every field a peer sends is bounded before it indexes or points at anything.
    const PeerInfo& pi = all[static_cast<size_t>(p)];
    peer_check::field_in_range(rank_, p, "rank", pi.rank, p, p);
    const bool local = pi.process == mine.process && pi.host.key == mine.host.key;
    if (local) peer_check::field_in_range(rank_, p, "device", pi.device, 0, ndev - 1);
    if (local) peer_device_[static_cast<size_t>(p)] = pi.device;
  }
  // Whether any two ranks of this communicator share a process: every rank computes it from
  // the same records, so all agree without a word (the copy-engine path needs it).
  ranks_share_process_ = false;
  for (int p = 0; p < nranks_ && !ranks_share_process_; ++p)
    for (int q = p + 1; q < nranks_; ++q) {
      const PeerInfo& a = all[static_cast<size_t>(p)];
      const PeerInfo& b = all[static_cast<size_t>(q)];
      if (a.process == b.process && a.host.key == b.host.key) {
        ranks_share_process_ = true;
        break;
      }
    }
  // Hosts and nodes: ranks on other hosts (or other emulated nodes) are reached through the
  // network transport, and nothing of theirs is mapped here.
  {
    std::vector<HostIdentity> ids(static_cast<size_t>(nranks_));
    for (int p = 0; p < nranks_; ++p) ids[static_cast<size_t>(p)] = all[static_cast<size_t>(p)].host;
    placement_.hosts = map_hosts(rank_, ids);
  }
  peer_arena_[static_cast<size_t>(rank_)] = arena_;
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank_) continue;
    const PeerInfo& pi = all[static_cast<size_t>(p)];
    const std::string who = "rank " + std::to_string(rank_) + ": rank " + std::to_string(p);
    if (pi.version != mine.version) fail(ErrorCode::Remote, who + " runs another weft version");
    if (pi.cfg.connections != mine.cfg.connections || pi.cfg.depth != mine.cfg.depth ||
        pi.cfg.slot_bytes != mine.cfg.slot_bytes || pi.cfg.ll_slot_bytes != mine.cfg.ll_slot_bytes ||
        pi.cfg.mb_window != mine.cfg.mb_window)
      fail(ErrorCode::InvalidUsage, who + " has other WEFT_CONNECTIONS / WEFT_FIFO_DEPTH / WEFT_SLOT_BYTES / "
                                          "WEFT_LL_SLOT_BYTES / WEFT_MB_WINDOW values; every rank must use the same");
    if (pi.cta_policy != mine.cta_policy)
      fail(ErrorCode::InvalidUsage, who + " has WEFT_CTA_POLICY " + cta_policy_name(pi.cta_policy) + ", this rank " +
                                          cta_policy_name(mine.cta_policy) + "; every rank must use the same");
    if (pi.emulate_nodes != mine.emulate_nodes)
      fail(ErrorCode::InvalidUsage, who + " has WEFT_EMULATE_NODES=" + std::to_string(pi.emulate_nodes) + ", this rank " +
                                          std::to_string(mine.emulate_nodes) + "; every rank must use the same");
    // Another host: no CUDA IPC handle is opened, no peer access checked; its links go
    // through the network FIFOs (init_network).
    if (placement_.crosses_hosts(rank_, p)) continue;
    if (peer_device_[static_cast<size_t>(p)] >= 0) {
      peer_check::check_local_arena(rank_, p, pi.arena, layout_.total());
      peer_arena_[static_cast<size_t>(p)] = reinterpret_cast<char*>(pi.arena);
      if (pi.device != device_) {
        int can = 0;
        WEFT_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, device_, pi.device));
        if (!can)
          fail(ErrorCode::InvalidUsage, who + " is on device " + std::to_string(pi.device) + ", which device " +
                                            std::to_string(device_) + " cannot access directly (no P2P)");
        cudaError_t err = cudaDeviceEnablePeerAccess(pi.device, 0);
        if (err == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError();
        else if (err != cudaSuccess) cuda_fail(err, "cudaDeviceEnablePeerAccess", __FILE__, __LINE__);
      }
    } else {
      void* ptr = nullptr;
      cudaError_t err = cudaIpcOpenMemHandle(&ptr, pi.handle, cudaIpcMemLazyEnablePeerAccess);
      if (err != cudaSuccess)
        fail(ErrorCode::UnhandledCuda, who + ": cannot map its memory through CUDA IPC (" +
                                           std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err) +
                                           "); the GPUs need peer access");
      peer_arena_[static_cast<size_t>(p)] = static_cast<char*>(ptr);
      peer_ipc_opened_[static_cast<size_t>(p)] = true;
    }
  }

  init_network(mine.emulate_nodes);
  if (gen_ && net_) {
    gen_ = false;
    WEFT_LOG(Info, "GEN", "rank " << rank_ << ": WEFT_EXECUTOR=gen with links across nodes: the "
                                  "interpreter runs (generated kernels have no network instantiation)");
  }
  make_decider();
  upload_p2p_table();
  boot_->barrier(wait_s);

  // Who may write into this rank's arena: every peer of this host. One in this process
  // stops when its done flag says so; one in another process when it has exited, which this
  // process can see only for a pid it sees as that process (else only the grace time ends
  // the wait).
  // A process is watched by its pid only on this host and in this pid namespace: a rank on
  // another host (or in another process that has this one's pid) counts as pid 0, which
  // names no process (peer_watchdog.hpp); its bootstrap connection is still watched.
  std::vector<PeerProcess> procs(static_cast<size_t>(nranks_));
  for (int p = 0; p < nranks_; ++p) {
    const PeerInfo& pi = all[static_cast<size_t>(p)];
    const bool same_process = p == rank_ || peer_device_[static_cast<size_t>(p)] >= 0;
    const bool watchable = same_process || (!placement_.crosses_hosts(rank_, p) && pi.pid != mine.pid);
    procs[static_cast<size_t>(p)] = watchable ? PeerProcess{pi.pid, pi.start_time} : PeerProcess{0, 0};
    // A rank on another host never writes into the arena (its messages land in the network
    // FIFOs' region, which net_ keeps while a peer may still write).
    if (p == rank_ || placement_.crosses_hosts(rank_, p)) continue;
    if (same_process) {
      if (auto f = find_done_flag(pi.done_flag)) arena_writers_.local.push_back(f);
    } else {
      const PeerProcess& pp = procs[static_cast<size_t>(p)];
      arena_writers_.remote.push_back({process_visible(pp.pid, pp.start_time) ? pp.pid : 0, pp.start_time});
    }
  }
  procs_ = procs;
  start_watchdog(watch_list(rank_, procs, boot_->next_fd(), boot_->prev_fd()));
}

void Communicator::start_watchdog(const std::vector<WatchedPeer>& peers) {
  watchdog_ = std::make_unique<PeerWatchdog>(peers,
                                             [this](int peer, const std::string& why) { on_peer_lost(peer, why); });
}

void Communicator::on_peer_lost(int peer, const std::string& why) {
  // Across hosts the watchdog often hears of a loss only through a neighbour's closed
  // bootstrap connection, which names the neighbour; the network transport names the rank
  // whose endpoint failed, usually within milliseconds. Unless the watchdog saw the peer's
  // own process exit here, give the transport a moment to speak first (its message wins).
  const PeerProcess pp = peer >= 0 && peer < static_cast<int>(procs_.size()) ? procs_[static_cast<size_t>(peer)]
                                                                             : PeerProcess{};
  const bool seen_exit = pp.pid > 0 && !process_alive(pp.pid, pp.start_time);
  if (net_ && !seen_exit) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
    while (std::chrono::steady_clock::now() < end) {
      {
        std::lock_guard<std::mutex> lock(error_mu_);
        if (broken_ != ErrorCode::Success) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  {
    std::lock_guard<std::mutex> lock(error_mu_);
    if (broken_ == ErrorCode::Success) {
      broken_ = ErrorCode::Remote;
      broken_message_ = "rank " + std::to_string(rank_) + ": " + why +
                        "; the communicator's collectives cannot complete, so it is unusable: abort or destroy it";
    }
  }
  WEFT_LOG(Warn, "INIT", "rank " << rank_ << ": lost rank " << peer << ": " << why << "; aborting its kernels");
  // The watchdog is stopped before abort_host_ is freed, so it is valid here.
  if (abort_host_ != nullptr) *reinterpret_cast<volatile uint32_t*>(abort_host_) = 1;
}

void Communicator::on_network_error(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(error_mu_);
    if (broken_ == ErrorCode::Success) {
      broken_ = ErrorCode::Remote;
      broken_message_ = "rank " + std::to_string(rank_) + ": the network transport failed: " + why +
                        "; the communicator's collectives cannot complete, so it is unusable: abort or destroy it";
    }
  }
  // Called from the proxy thread, which free_all stops before abort_host_ is freed.
  if (abort_host_ != nullptr) *reinterpret_cast<volatile uint32_t*>(abort_host_) = 1;
}

void Communicator::init_network(int emulate_nodes) {
  std::vector<uint64_t> host_of_rank;
  for (int h : placement_.hosts.host_of_rank) host_of_rank.push_back(static_cast<uint64_t>(h));
  const net::NodeLayout nodes = net::node_layout(host_of_rank, emulate_nodes);
  placement_.node_of_rank = nodes.node_of_rank;
  if (nodes.nodes <= 1) return;
  // Every rank runs the same check, so all fail alike, before any of them waits for the
  // others in the transport's exchange (a rank whose host lacks UCX makes every rank fail:
  // the exchange breaks off when it leaves).
  const std::string why = net::ucx_unavailable_reason();
  if (!why.empty()) {
    if (placement_.hosts.hosts() > 1) {
      int other = 0;
      while (other < nranks_ && !placement_.crosses_hosts(rank_, other)) ++other;
      fail(ErrorCode::InvalidUsage, "rank " + std::to_string(rank_) + " on host '" +
                                        placement_.hosts.host_names[static_cast<size_t>(
                                            placement_.hosts.host_of_rank[static_cast<size_t>(rank_)])] +
                                        "': the communicator spans " + std::to_string(placement_.hosts.hosts()) +
                                        " hosts (" + placement_.where(other) +
                                        " is on another), whose links need weft's network transport, which cannot run: " +
                                        why);
    }
    fail(ErrorCode::InvalidUsage, "rank " + std::to_string(rank_) + ": WEFT_EMULATE_NODES=" + std::to_string(emulate_nodes) +
                                      " sends the links between nodes through the network transport, which cannot run: " + why);
  }
  NetLayout nl;
  nl.connections = layout_.cfg.connections;
  nl.depth = static_cast<uint32_t>(layout_.cfg.depth);
  nl.slot_bytes = layout_.cfg.slot_bytes;
  nl.node_of_rank = nodes.node_of_rank;
  // The region in page-locked memory mapped into the GPU, the handles in device memory.
  NetFifoMemory mem;
  const int dev = device_;
  mem.alloc_region = [this, dev](uint64_t bytes) {
    DeviceGuard g(dev);
    char* p = nullptr;
    WEFT_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&p), bytes, cudaHostAllocMapped | cudaHostAllocPortable));
    std::memset(p, 0, bytes);
    void* d = nullptr;
    WEFT_CUDA_CHECK(cudaHostGetDevicePointer(&d, p, 0));
    if (d != p) {
      cudaFreeHost(p);
      fail(ErrorCode::UnhandledCuda, "rank " + std::to_string(rank_) +
                                         ": page-locked memory has another address on the GPU (no unified addressing)");
    }
    return p;
  };
  mem.free_region = [](char* p) {
    cudaFreeHost(p);
    cudaGetLastError();
  };
  // Where UCX registers CUDA memory (net/net_fifos.hpp, WEFT_NET_GPU_MEMORY): the region in
  // GPU memory, which UCX puts from and into directly.
  mem.alloc_device_region = [dev](uint64_t bytes) {
    DeviceGuard g(dev);
    char* p = nullptr;
    WEFT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p), bytes));
    WEFT_CUDA_CHECK(cudaMemset(p, 0, bytes));
    WEFT_CUDA_CHECK(cudaDeviceSynchronize());
    return p;
  };
  mem.free_device_region = [](char* p) {
    cudaFree(p);
    cudaGetLastError();
  };
  {
    char bus[32] = {};
    if (cudaDeviceGetPCIBusId(bus, sizeof bus, dev) == cudaSuccess) mem.pci_bus_id = bus;
    cudaGetLastError();
  }
  mem.fifo = proxy::cuda_fifo_memory(dev);
  mem.upload = [dev](const void* data, size_t bytes) {
    DeviceGuard g(dev);
    void* p = nullptr;
    WEFT_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(bytes, 16)));
    if (bytes > 0) WEFT_CUDA_CHECK(cudaMemcpy(p, data, bytes, cudaMemcpyHostToDevice));
    return p;
  };
  mem.free_upload = [](void* p) {
    cudaFree(p);
    cudaGetLastError();
  };
  mem.read_head = [dev](const uint64_t* head) {
    DeviceGuard g(dev);
    uint64_t h = 0;
    if (cudaMemcpy(&h, head, sizeof h, cudaMemcpyDeviceToHost) != cudaSuccess) {
      cudaGetLastError();
      return ~uint64_t{0};  // unknown: drain gives up at its deadline
    }
    return h;
  };
  net_ = std::make_unique<NetFifos>(*boot_, std::move(mem), nl, timeout_s_,
                                    [this](const std::string& message) { on_network_error(message); });
}

void Communicator::make_fifos() {
  const int K = layout_.cfg.connections;
  const exec::FifoShape shape{static_cast<uint32_t>(layout_.cfg.depth), layout_.cfg.slot_bytes,
                              layout_.cfg.ll_slot_bytes};
  auto at = [](char* base, uint64_t off) { return reinterpret_cast<uint64_t*>(base + off); };
  fifo_.assign(static_cast<size_t>(nranks_) * 2 * static_cast<size_t>(K), exec::ChannelEnd());
  net_fifo_.assign(fifo_.size(), exec::ChannelEnd());
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank_) continue;
    if (net_ && net_->crosses(p)) {
      // Another node: the proxy and the network transport carry this pair's messages. Their
      // positions are words of their own: plans may use the memory FIFO of the same pair and
      // connection too (between emulated nodes), whose counters are separate.
      for (int k = 0; k < K; ++k) {
        net_fifo_[(static_cast<size_t>(p) * 2 + 1) * K + k] =
            net_->send_end(p, k, at(arena_, layout_.control(p, k) + ArenaLayout::kNetSendPos));
        net_fifo_[(static_cast<size_t>(p) * 2) * K + k] =
            net_->recv_end(p, k, at(arena_, layout_.control(p, k) + ArenaLayout::kNetRecvPos));
      }
    }
    // A memory channel wherever the peer's arena is mapped (this host): a plan may record
    // one between emulated nodes of one host.
    char* peer = peer_arena_[static_cast<size_t>(p)];
    if (peer == nullptr) continue;
    for (int k = 0; k < K; ++k) {
      // To p: p's slots and posted counter for messages from this rank, this rank's acked.
      exec::FifoMemory to{peer + layout_.staging(rank_, k), peer + layout_.ll_staging(rank_, k),
                          at(peer, layout_.control(rank_, k) + ArenaLayout::kPosted),
                          at(arena_, layout_.control(p, k) + ArenaLayout::kAcked),
                          at(arena_, layout_.control(p, k) + ArenaLayout::kSendPos)};
      // From p: this rank's slots and posted counter for messages from p, p's acked.
      exec::FifoMemory from{arena_ + layout_.staging(p, k), arena_ + layout_.ll_staging(p, k),
                            at(arena_, layout_.control(p, k) + ArenaLayout::kPosted),
                            at(peer, layout_.control(rank_, k) + ArenaLayout::kAcked),
                            at(arena_, layout_.control(p, k) + ArenaLayout::kRecvPos)};
      fifo_[(static_cast<size_t>(p) * 2 + 1) * K + k] = exec::ChannelEnd::fifo_send(p, shape, to);
      fifo_[(static_cast<size_t>(p) * 2) * K + k] = exec::ChannelEnd::fifo_recv(p, shape, from);
    }
  }
}

const exec::ChannelEnd& Communicator::fifo(const ConnRef& ref, ChannelKind kind) const {
  const size_t K = static_cast<size_t>(layout_.cfg.connections);
  const size_t i = (static_cast<size_t>(ref.peer) * 2 + (ref.send ? 1 : 0)) * K + static_cast<size_t>(ref.pool_index);
  // check_plan_channels has refused every kind this rank cannot build for the pair.
  return kind == ChannelKind::PortNetwork ? net_fifo_.at(i) : fifo_.at(i);
}

ChannelKind Communicator::default_channel(int peer) const {
  return net_ && net_->crosses(peer) ? ChannelKind::PortNetwork : ChannelKind::Memory;
}

Communicator::CachedPlan& Communicator::plan_for(const Call& call, const Launch& l, int root) {
  const PlanKey key = plan_key(call, l, root);
  auto it = plans_.find(key);
  if (it != plans_.end()) return *it->second;
  const Collective c = call.collective;
  const bool gen = l.executor == algo::Executor::Generated;
  const algo::Algorithm& a = algo::registry().at(l.algorithm);
  const std::string name = describe(l) + (c == Collective::Broadcast || c == Collective::Reduce
                                              ? " root " + std::to_string(key.root) : std::string()) +
                           (call.in_place ? " in place" : "");
  if (gen && !gen_) gen::require_nvrtc();  // a table row asked for gen: say what is missing, if anything
  auto cp = std::make_unique<CachedPlan>();
  cp->gen = gen;
  const std::string protocol(algo::to_string(l.protocol));
  Plan plan;
  if (a.auto_schedule()) {  // one choice per size bucket (the key's), logged with its reason
    const uint64_t slot = sim::runtime_slot_data_bytes(l.protocol, layout_.cfg.slot_bytes, layout_.cfg.ll_slot_bytes);
    AutoChoice ch = choose_auto_schedule(c, nranks_, a.name(), protocol, l.instances, call.in_place, key.root,
                                         layout_.cfg.depth, a.allocator(), placement_.node_of_rank, call.bytes, slot);
    WEFT_LOG(Info, "PLAN", "rank " << rank_ << ": " << name << ": scheduler auto chose " << ch.reason);
    plan = std::move(ch.plan);
  } else {
    plan = make_plan(c, nranks_, a.name(), protocol, l.instances, call.in_place, key.root, layout_.cfg.depth, a.scheduler(),
                     a.allocator(), placement_.node_of_rank);  // hand-built: no scheduler
  }
  cp->lp = lower_plan(std::move(plan), nranks_, layout_.cfg.connections);
  // Each link runs on the channel the plan records (plan/placement.hpp); one the
  // communicator cannot build for these ranks' hosts and nodes refuses the plan, on every
  // rank alike.
  check_plan_channels(cp->lp.plan, placement_);
  // WEFT_FUSE_COPY, WEFT_MB_WINDOW, WEFT_POST_WARP, WEFT_MOVER_WIDE (bulk_options.cpp)
  bulk_options(*cp, l.protocol == algo::Protocol::Simple);
  // Small-call latency switches of the interpreter (docs/runtime.md, "Where a small plan
  // call's time goes"): launch choices, the plan and its wire protocol unchanged.
  cp->warm = config::get_bool("WEFT_EXEC_WARM");
  cp->ll_kernel = config::get_bool("WEFT_EXEC_LL_KERNEL") && l.protocol == algo::Protocol::LL && !gen;
  // Every plan runs on the CPU emulator once before it reaches the GPU (deadlock, result,
  // stray writes); every rank checks the same plan, so all fail alike.
  check_plan_on_emulator(cp->lp, layout_.cfg.depth, static_cast<exec::Protocol>(l.protocol));
  const LoweredRank& lr = cp->lp.ranks[static_cast<size_t>(rank_)];
  cp->num_tbs = static_cast<int>(lr.tbs.size());
  // Several thread blocks per CUDA block (WEFT_BLOCK_ROLES) for the protocols whose movers
  // take a thread group (Simple, LL): a launch choice, the plan and its wire protocol unchanged.
  RoleGroups groups;
  groups.blocks = cp->num_tbs;
  if (!gen && l.protocol != algo::Protocol::LL128)  // Simple, LL; generated kernels: one per CUDA block
    groups = group_thread_blocks(lr, static_cast<int32_t>(config::get_int("WEFT_BLOCK_ROLES")));
  cp->roles = groups.roles;
  cp->num_blocks = groups.blocks;
  for (const exec::DevTB& tb : lr.tbs) cp->conn_cache = std::max(cp->conn_cache, static_cast<int>(tb.nconns));
  if (cp->conn_cache > exec::kMaxConnsPerTB)
    fail(ErrorCode::InvalidUsage, "rank " + std::to_string(rank_) + ": plan '" + name + "' has a thread block with " +
                                      std::to_string(cp->conn_cache) + " connections, more than the interpreter's " +
                                      std::to_string(exec::kMaxConnsPerTB) + " (lower WEFT_INSTANCES)");
  if (cp->num_blocks > max_blocks_)
    fail(ErrorCode::InvalidUsage, "rank " + std::to_string(rank_) + ": plan '" + name + "' needs " +
                                      std::to_string(cp->num_blocks) + " CUDA blocks at once, more than the " +
                                      std::to_string(max_blocks_) + " this GPU holds (lower WEFT_INSTANCES)");
  std::vector<exec::ChannelHandle> conns;
  for (const ConnRef& r : lr.conns)
    conns.push_back(fifo(r, built_channel(cp->lp.plan, placement_, r.send ? rank_ : r.peer, r.send ? r.peer : rank_))
                        .device_handle());
  cp->conns_host = conns;
  cp->fits_inline = lr.tbs.size() <= static_cast<size_t>(exec::kInlineTBs) &&
                    lr.slots.size() <= static_cast<size_t>(exec::kInlineSlots) &&
                    conns.size() <= static_cast<size_t>(exec::kInlineConns);
  auto align = [](uint64_t x) { return (x + 255) / 256 * 256; };
  const uint64_t o_tbs = 0, n_tbs = lr.tbs.size() * sizeof(exec::DevTB);
  const uint64_t o_slots = align(o_tbs + n_tbs), n_slots = lr.slots.size() * sizeof(exec::DevSlot);
  const uint64_t o_deps = align(o_slots + n_slots), n_deps = lr.deps.size() * sizeof(int32_t);
  const uint64_t o_dtbs = align(o_deps + n_deps);
  const uint64_t o_conns = align(o_dtbs + n_deps), n_conns = conns.size() * sizeof(exec::ChannelHandle);
  const uint64_t o_ctr = align(o_conns + n_conns), n_ctr = std::max<size_t>(1, lr.slots.size()) * sizeof(uint64_t);
  const uint64_t o_roles = align(o_ctr + n_ctr), n_roles = groups.tb_of.size() * sizeof(int16_t);
  const uint64_t total = align(o_roles + n_roles);
  std::vector<char> host(total, 0);
  auto put = [&](uint64_t off, const void* src, uint64_t n) {
    if (n) std::memcpy(host.data() + off, src, n);
  };
  put(o_tbs, lr.tbs.data(), n_tbs);
  put(o_slots, lr.slots.data(), n_slots);
  put(o_deps, lr.deps.data(), n_deps);
  put(o_dtbs, lr.dep_tbs.data(), n_deps);
  put(o_conns, conns.data(), n_conns);
  put(o_roles, groups.tb_of.data(), n_roles);
  {
    RelaxedCapture relaxed;
    WEFT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&cp->mem), total));
    WEFT_CUDA_CHECK(cudaMemcpyAsync(cp->mem, host.data(), total, cudaMemcpyHostToDevice, setup_stream_));
    WEFT_CUDA_CHECK(cudaStreamSynchronize(setup_stream_));
  }
  cp->tbs = reinterpret_cast<const exec::DevTB*>(cp->mem + o_tbs);
  cp->slots = reinterpret_cast<const exec::DevSlot*>(cp->mem + o_slots);
  cp->deps = reinterpret_cast<const int32_t*>(cp->mem + o_deps);
  cp->dep_tbs = reinterpret_cast<const int32_t*>(cp->mem + o_dtbs);
  cp->conns = reinterpret_cast<const exec::ChannelHandle*>(cp->mem + o_conns);
  cp->counters = reinterpret_cast<uint64_t*>(cp->mem + o_ctr);
  if (cp->roles > 1) cp->block_tbs = reinterpret_cast<const int16_t*>(cp->mem + o_roles);
  WEFT_LOG(Info, "PLAN", "rank " << rank_ << ": uploaded plan " << name << " (" << cp->num_tbs << " thread blocks in " << cp->num_blocks << " CUDA blocks, "
                                 << lr.slots.size() << " slots)");
  auto& ref = *cp;
  plans_[key] = std::move(cp);
  return ref;
}

void* Communicator::scratch(uint64_t bytes) {
  if (bytes <= scratch_bytes_ && !scratch_.empty()) return scratch_.back();
  RelaxedCapture relaxed;
  void* p = nullptr;
  uint64_t want = std::max<uint64_t>(bytes, scratch_bytes_ * 2);
  WEFT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p), want));
  // Earlier scratch buffers may still be read by queued kernels: they are freed at destroy.
  scratch_.push_back(p);
  scratch_bytes_ = want;
  return p;
}

void Communicator::note_launch(cudaStream_t) { launched_ = true; }

std::string Communicator::format_device_error(const exec::ErrorRecord& e) const {
  if (e.what == exec::kCeCallMismatch)
    return "rank " + std::to_string(e.rank) + ": rank " + std::to_string(e.peer) +
           " is in another copy-engine call than this rank (another collective, size or root, or its receive buffer "
           "at another offset of its symmetric window; call tags " + std::to_string(e.expected) + " here, " +
           std::to_string(e.seen) + " there). Every rank makes the same calls with its buffers at the same offsets "
           "of its windows. Destroy or abort this communicator.";
  std::string what;
  switch (e.what) {
    case exec::kWaitDependency:
      what = "for thread block " + std::to_string(e.dep_tb) + " of this rank to finish micro-batch " +
             std::to_string(e.mb) + " (it finished " + std::to_string(e.seen) + ")";
      break;
    case exec::kWaitData:
      what = "for data from rank " + std::to_string(e.peer) + " (message " + std::to_string(e.expected) +
             " of the connection; " + std::to_string(e.seen) + " posted so far)";
      break;
    case exec::kWaitCredit:
      what = "for rank " + std::to_string(e.peer) + " to free a staging slot (it has consumed " +
             std::to_string(e.seen) + " messages, " + std::to_string(e.expected) + " needed)";
      break;
    case exec::kWaitPacket: what = "for LL packets from rank " + std::to_string(e.peer); break;
    case exec::kWaitProxy:
      what = "for the network proxy to take message " + std::to_string(e.expected) + " of the connection with rank " +
             std::to_string(e.peer) + " (its FIFO stayed full: the proxy is stuck or the network is slow)";
      break;
    case exec::kWaitCeSync:
      what = "for rank " + std::to_string(e.peer) + " to reach the same copy-engine call (phase " +
             std::to_string(e.expected) + "; it reached " + std::to_string(e.seen) + ")";
      break;
    case exec::kWaitCopyEngine:
      what = e.peer >= 0 ? "for the copy-engine proxy to take a trigger or for signal " + std::to_string(e.expected) +
                               " from rank " + std::to_string(e.peer) + " (" + std::to_string(e.seen) + " seen)"
                         : std::string("for the copy-engine proxy to finish this rank's copies (flush)");
      break;
    default: what = "(unknown)"; break;
  }
  char secs[32];
  std::snprintf(secs, sizeof(secs), "%.1f", e.waited_s);
  return "rank " + std::to_string(e.rank) + ": a collective kernel timed out after " + secs +
         " s (WEFT_TIMEOUT) in thread block " + std::to_string(e.tb) + ", slot " + std::to_string(e.slot) + " (" +
         prim_name(e.prim) + ", micro-batch " + std::to_string(e.mb) + ") waiting " + what +
         "; a peer stopped or is stuck. Destroy or abort this communicator.";
}

ErrorCode Communicator::async_error(std::string* message) {
  // Called from any thread (weftCommGetAsyncError, e.g. a framework's watchdog) while
  // another may be inside a collective: the error state has its own lock, never mu_.
  std::lock_guard<std::mutex> lock(error_mu_);
  if (broken_ == ErrorCode::Success && error_host_ != nullptr && error_host_->valid != 0) {
    broken_ = error_host_->what == exec::kCeCallMismatch ? ErrorCode::InvalidUsage : ErrorCode::Timeout;
    broken_message_ = format_device_error(*error_host_);
  }
  if (message != nullptr) *message = broken_message_;
  return broken_;
}

void Communicator::check_usable() {
  if (freed_) fail(ErrorCode::InvalidUsage, "rank " + std::to_string(rank_) + ": the communicator was destroyed");
  // Every call passes here: the message is copied only when there is an error to report.
  if (async_error(nullptr) == ErrorCode::Success) return;
  std::string m;
  const ErrorCode c = async_error(&m);
  if (c != ErrorCode::Success) fail(c, m);
}

void Communicator::destroy() {
  std::lock_guard<std::mutex> lock(mu_);
  if (freed_) return;
  free_all(true);
}

void Communicator::abort() {
  std::lock_guard<std::mutex> lock(mu_);
  if (freed_) return;
  if (abort_host_ != nullptr) *reinterpret_cast<volatile uint32_t*>(abort_host_) = 1;
  // The peers' watchdogs see the bootstrap close and stop their kernels too.
  if (watchdog_) watchdog_->stop();
  if (boot_) boot_->close();
  free_all(false);
}

void Communicator::free_all(bool graceful) {
  if (freed_) return;
  freed_ = true;
  DeviceGuard guard(device_);
  if (launched_) {
    // This rank's kernels end at their next wait once aborted, when the watchdog reports a
    // lost peer, or at WEFT_TIMEOUT; so the wait is bounded as far as weft is concerned.
    cudaError_t err = cudaDeviceSynchronize();
    if (err != cudaSuccess)
      WEFT_LOG(Warn, "INIT", "rank " << rank_ << ": device error at destroy: " << cudaGetErrorString(err));
  }
  // Every trigger this rank's kernels pushed is taken by the proxy before the meeting, so
  // that its last transfers (acks) are under way while the peers still progress theirs.
  if (net_ && launched_ && !net_->drain(5))
    WEFT_LOG(Warn, "INIT", "rank " << rank_ << ": the network proxy did not take every trigger before destroy");
  ce_.reset();  // its proxy, copy-engine streams, mappings of the peers' buffers
  // None of this rank's kernels runs any more, and none will: peers in this process may
  // free memory this rank wrote into.
  if (done_) done_->done = true;
  // Stopped before the meeting: once it is over, the peers close their connections.
  if (watchdog_) watchdog_->stop();
  // The meetings only decide whether the arena can be freed now; a rank that comes later
  // than this costs memory until it exits, not a destroy that hangs (NCCL's destroy does
  // not wait for its peers at all).
  const double wait_s = std::min(config::wait_seconds(timeout_s_), kDestroyMeetSeconds);
  auto meet = [&](const char* what) {
    try {
      boot_->barrier(wait_s);
      return true;
    } catch (const Error& e) {
      WEFT_LOG(Warn, "INIT", "rank " << rank_ << ": the other ranks did not all " << what << ": " << e.what());
      return false;
    }
  };
  // Ranks that share a process with another rank are often destroyed in turn by one thread
  // (weftCommInitAll, nccl-tests' -g), which cannot meet: there the done flags say when a
  // peer in this process has stopped, and the others' exit or deadline when they have.
  bool shares_process = false;
  for (int p = 0; p < static_cast<int>(peer_device_.size()); ++p)
    shares_process |= p != rank_ && peer_device_[static_cast<size_t>(p)] >= 0;
  const bool meets = graceful && !shares_process && boot_ && nranks_ > 1;
  // 1. Every rank's kernels have ended: nobody writes into anyone's arena any more.
  const bool stopped = meets && meet("reach destroy");
  for (size_t p = 0; p < peer_arena_.size(); ++p)
    if (peer_ipc_opened_[p] && peer_arena_[p] != nullptr) cudaIpcCloseMemHandle(peer_arena_[p]);
  peer_arena_.clear();
  // 2. Every rank has unmapped the others' arenas: each may free its own.
  const bool unmapped = stopped && meet("finish destroy");
  // The network's staging region is written by the peers' transfers: freed with the
  // transport once every rank met here, else kept (as the arena is, below).
  if (net_) {
    net_->close(unmapped);
    if (!unmapped) net_->keep_region();
    net_.reset();
  }
  for (auto& [key, cp] : plans_)
    if (cp->mem) cudaFree(cp->mem);
  plans_.clear();
  for (void* p : scratch_) cudaFree(p);
  scratch_.clear();
  if (trace_buf_) cudaFree(trace_buf_);  // a traced call's records never taken
  trace_buf_ = nullptr;
  registrations_.clear();
  if (p2p_conns_) cudaFree(p2p_conns_);
  fifo_.clear();
  if (error_claim_) cudaFree(error_claim_);
  {
    std::lock_guard<std::mutex> lock(error_mu_);
    if (error_host_) cudaFreeHost(error_host_);
    error_host_ = nullptr;
  }
  if (abort_host_) cudaFreeHost(abort_host_);
  if (setup_stream_) cudaStreamDestroy(setup_stream_);
  p2p_conns_ = nullptr;
  error_claim_ = nullptr;
  abort_host_ = nullptr;
  setup_stream_ = nullptr;
  cudaGetLastError();
  if (boot_) boot_->close();
  if (arena_ != nullptr) {
    // The peers write into the arena: free it once none can any more (at once when they
    // all met us, or when every peer has stopped, exited, or outlived its deadline).
    Writers w = arena_writers_;
    if (unmapped) w.remote.clear();
    if (timeout_s_ > 0)
      w.grace_end = std::chrono::steady_clock::now() +
                    std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                        std::chrono::duration<double>(timeout_s_ + 5));
    // No communicator created from now on may take this arena for a peer's.
    peer_check::unregister_arena(arena_);
    char* arena = arena_;
    const int device = device_;
    const uint64_t bytes = layout_.total();
    arena_ = nullptr;
    const bool freed = free_when_done(w, [arena, device] {
      DeviceGuard g(device);
      cudaFree(arena);
      cudaGetLastError();
    });
    if (!freed)
      WEFT_LOG(Info, "INIT", "rank " << rank_ << ": " << bytes / (1 << 20)
                                      << " MiB of connection state stay allocated until no peer can write into them");
  }
  sweep_deferred();
}

uint64_t Communicator::allocation_base(const void* ptr, uint64_t bytes, const std::string& fn) {
  uint64_t base = 0, size = 0;
  try {
    if (!exec::allocation_range(ptr, &base, &size))
      fail(ErrorCode::InvalidArgument, fn + ": " + std::to_string(reinterpret_cast<uintptr_t>(ptr)) +
                                           " is not device memory of this process");
  } catch (const Error& e) {
    if (e.code() != ErrorCode::UnhandledCuda) throw;
    fail(ErrorCode::UnhandledCuda, fn + ": " + e.what());
  }
  const uint64_t offset = reinterpret_cast<uint64_t>(ptr) - base;
  if (bytes > size - offset) fail(ErrorCode::InvalidArgument, fn + ": the range runs past its allocation");
  return base;
}

void* Communicator::register_buffer(void* ptr, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  check_usable();
  if (ptr == nullptr || bytes == 0) fail(ErrorCode::InvalidArgument, "weftCommRegister: null buffer or zero size");
  DeviceGuard guard(device_);
  allocation_base(ptr, bytes, "weftCommRegister");
  // Local, as NCCL's registration is: no other rank takes part, so ranks may register
  // different buffers, in any order, or not at all.
  auto reg = std::make_unique<Registration>();
  reg->ptr = ptr;
  reg->bytes = bytes;
  void* handle = reg.get();
  registrations_[handle] = std::move(reg);
  return handle;
}

void Communicator::deregister_buffer(void* handle) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = registrations_.find(handle);
  if (it == registrations_.end()) fail(ErrorCode::InvalidArgument, "weftCommDeregister: unknown handle");
  registrations_.erase(it);
}

}  // namespace weft
