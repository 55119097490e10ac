#include "util/config.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "util/error.hpp"

namespace weft::config {

namespace {

/// Logging, timeouts, data and tables, the selection overrides, partitioned communication,
/// topology and nodes.
std::vector<Variable> general_variables() {
  return {
    {"WEFT_LOG_LEVEL", Type::String, "WARN",
     "Least severe log level printed: TRACE, DEBUG, INFO, WARN, ERROR or NONE."},
    {"WEFT_LOG_SUBSYS", Type::String, "ALL",
     "Comma-separated subsystems to log (INIT, BOOT, COLL, PLAN, API, CE, WIN, GEN, PART, PROXY, NET, NCCL) or ALL."},
    {"WEFT_LOG_FILE", Type::String, "",
     "Log to this file instead of stderr; %h is replaced by the host name, %p by the pid."},
    {"WEFT_DEBUG", Type::String, "",
     "Alias of WEFT_LOG_LEVEL kept for NCCL users (WEFT_DEBUG=INFO)."},
    {"WEFT_TIMEOUT", Type::Seconds, "600",
     "Longest wait for a live peer, host or device (from the start of each kernel or host wait; 0: no deadline): "
     "a peer that does not answer in time is an error. A peer process that exits is detected within a second "
     "whatever this is.",
     0, 1e6},
    {"WEFT_BOOTSTRAP_TIMEOUT", Type::Seconds, "60",
     "Deadline for all ranks to meet during communicator initialization.", 0.001, 86400},
    {"WEFT_SOCKET_IFNAME", Type::String, "",
     "Network interface (or prefix) whose address the bootstrap root advertises; empty picks the first non-loopback one, else loopback."},
    {"WEFT_MEMORY_BUDGET", Type::String, "",
     "Memory the compiler and the simulator may take (e.g. 64G); empty: three quarters of the machine's memory, under "
     "ulimit -v or -d what is left of the limit. --memory-budget overrides it."},
    {"WEFT_DATA_DIR", Type::String, "",
     "Directory holding algorithms/ and topologies/; empty means next to the binary, then the source tree."},
    {"WEFT_MICROBATCH_BYTES", Type::Int, "0",
     "Micro-batch size in bytes per chunk slot; 0 lets the selection row choose (its microbatch_bytes, else the staging slots' size).", 0, 1ll << 40},
    {"WEFT_ALGO", Type::String, "",
     "Algorithms instead of the selection table: comma-separated 'name' or 'Collective:name'; a name is a hand-built plan (ring, allpairs, chain), oneshot (the one-shot kernel: bare for AllReduce, AllGather and ReduceScatter; Broadcast, Reduce and AllToAll only as Collective:oneshot), ce (copy engines into registered buffers: AllGather, AllReduce), an algorithm of algorithms/ (ring_allreduce, ...) or a file."},
    {"WEFT_SCHEDULER", Type::String, "",
     "The compiler's scheduler for the sources WEFT_ALGO names (hpds, algo, stage, rr, gc3, as-given for an .xml file, "
     "or auto: chosen per size bucket by the simulator, docs/runtime.md); empty: each selection row's."},
    {"WEFT_SELECTION", Type::String, "",
     "Path of a selection table (JSON, docs/runtime.md) to use instead of weft's default, read when a communicator "
     "is created; a malformed table is an error there naming the file and line."},
    {"WEFT_PROTO", Type::String, "",
     "Force a protocol: Simple, LL or LL128 (across the network LL and LL128 run as Simple; another value is an error "
     "at the first collective)."},
    {"WEFT_PYTHON", Type::String, "",
     "Python interpreter that runs a .py algorithm for weft compile, simulate and verify (docs/python.md); it "
     "must import weft's module. Empty: the interpreter the build found, else python3."},
    {"WEFT_PART_PATH", Type::String, "kernel",
     "Transfer path of partitioned point-to-point sends (docs/partitioned.md), read when a partitioned context is "
     "created: kernel (the device pready copies) or proxy (a progression engine thread copies; paper 002)."},
    {"WEFT_PART_STAGE", Type::Bool, "0",
     "Partitioned progression engine between emulated nodes (WEFT_PART_PATH=proxy, WEFT_EMULATE_NODES): 1 stages "
     "every transfer through page-locked host memory even where UCX registers CUDA memory (it does so anyway where "
     "UCX cannot; docs/partitioned.md), read when a partitioned context is created."},
    {"WEFT_PART_MEMOPS", Type::Bool, "0",
     "Partitioned progression engine within a node (WEFT_PART_PATH=proxy): 1 writes a pass's flag words, the done "
     "word and the mark as one batch of CUDA stream memory operations; 0 (the default: measured faster at 64 and "
     "256 blocks, docs/partitioned.md) uses a page-locked copy per run's flags, an event per pass and the engine "
     "thread's store of the done word. Read when a copy-engine endpoint is created."},
    {"WEFT_PART_TRACE", Type::Int, "0",
     "Partitioned requests print host timestamps of epochs 2 to N+1 on stderr, one line per request and epoch "
     "(start, pbuf_prepare, the caller's time, wait and its polls; docs/partitioned.md), read when a partitioned "
     "context is created; 0: off.", 0, 1000000},
    {"WEFT_TOPOLOGY", Type::String, "",
     "Machine the runtime compiles algorithms for: a topology file, a preset name (weft topology --list) or "
     "'detect' (this machine's GPUs, NVLink and NICs, detected once per process: weft topology --detect --summary); "
     "empty: the h200-1x8 preset's figures. A topology whose GPU count differs from the communicator's is used as "
     "one node of its ranks with its figures. It shapes instance choice and scheduling, not which transport runs."},
    {"WEFT_GPUS_PER_NODE", Type::Int, "0",
     "GPUPerNode given to compiled algorithms (hm_allreduce, ...): the size of their inner level; 0 means the size of the emulated nodes under WEFT_EMULATE_NODES, else the communicator's rank count (one node). It only shapes the algorithm: the ranks still talk over NVLink unless WEFT_EMULATE_NODES puts them on different nodes.", 0, 1 << 20},
    {"WEFT_EMULATE_NODES", Type::Int, "0",
     "Splits each host's ranks into this many emulated nodes (contiguous runs in rank order: 4 ranks as 2 nodes are "
     "{0,1} and {2,3}); a communicator sends every message between ranks on different nodes through the proxy and "
     "the UCX network transport (libucp.so.0, else creation fails saying so) instead of CUDA IPC, Simple protocol "
     "only (no LL, no one-shot kernel), and compiled algorithms see nodes of nranks / N GPUs. Users' memory "
     "channels still map their peers through CUDA IPC. 0 or 1: one node per host.", 0, 1024},
    {"WEFT_HOST_ID", Type::String, "",
     "Testing aid: this process's host identity instead of the host name and boot id (1 to 63 of letters, digits "
     "and ._:-). Ranks of one machine given different values form a multi-host communicator through the real "
     "network path (UCX between hosts, no CUDA IPC); docs/multi-node.md. Empty: the real host."},
  };
}

/// Execution (instances, blocks, FIFOs, the bulk path), the network and its proxy, the
/// bootstrap, generated code, CTA policies and the NCCL fallback.
std::vector<Variable> execution_variables() {
  return {
    {"WEFT_INSTANCES", Type::Int, "0",
     "Parallel thread blocks per link, taken as given; 0 lets the selection table choose (for a compiled plan that "
     "would then need more than 72 thread blocks per rank, the compiler derives them from the topology within 72).",
     0, 1024},
    {"WEFT_BLOCK_ROLES", Type::Int, "1",
     "Plan thread blocks one CUDA block of the interpreter may run (1 to 4): where a rank's plan has more than 24 "
     "thread blocks, Simple and LL plans run ceil(blocks / 24) of them (at most this many) per CUDA block, each on "
     "its own warps with its own named barrier; 1: one thread block per CUDA block. Read when a plan is first used.",
     1, 4},
    {"WEFT_CONNECTIONS", Type::Int, "32",
     "Connections (staging FIFOs) per ordered pair of ranks: the most instances a plan may use between two ranks.", 1,
     1024},
    {"WEFT_FIFO_DEPTH", Type::Int, "4",
     "Staging slots per connection FIFO (2 to 64): how many messages a sender may run ahead of its receiver; plans "
     "are checked for deadlock at this depth.",
     2, 64},
    {"WEFT_SLOT_BYTES", Type::Int, "524288",
     "Bytes of one Simple-protocol staging slot (a multiple of 16 in 4 KiB..64 MiB): the largest message, so the "
     "micro-batch part of one thread block. LL128 messages use these slots too (120 data bytes per 128; it needs a "
     "multiple of 128).",
     4096, 64 << 20},
    {"WEFT_MB_WINDOW", Type::Int, "1",
     "Simple plans of algorithm-level execution (rings): each thread block runs every slot over a window of this "
     "many micro-batches before the next slot, and chunks are cut into at least this many micro-batches (where each "
     "block's piece keeps 64 KiB), so that a ring step's message was posted a micro-batch before it is needed "
     "(NCCL's two slices per chunk); 1: every slot once per micro-batch. A plan that would deadlock so (a ring "
     "with a window as deep as WEFT_FIFO_DEPTH) runs with 1. Every rank must use the same; read at creation "
     "(docs/runtime.md, 'Large messages against NCCL').",
     1, 64},
    {"WEFT_POST_WARP", Type::Bool, "0",
     "Simple plans in the interpreter, one thread block per CUDA block, within a node: one more warp per block "
     "publishes each message (the system fence and the posted count), acks and bumps counters while the block's "
     "512 threads move the next one (NCCL's extra warp for Simple). Read when a plan is first used."},
    {"WEFT_FUSE_COPY", Type::Bool, "1",
     "Simple plans: a send followed in its thread block by a local copy of the same chunks moves both in one pass "
     "(the Broadcast root), a thread block that only copies the chunks another block sends is folded into that "
     "send (out-of-place AllGather), and a receive-reduce-copy-send into scratch nothing reads becomes "
     "receive-reduce-send (ReduceScatter rings); 0: plans as compiled. Read when a plan is first used."},
    {"WEFT_POST_THREAD", Type::Bool, "0",
     "Simple plans within a node: thread 32 of each thread block publishes its messages (the system fence and the "
     "posted count, the ack, the slot's counter) instead of thread 0, so that one message's fence overlaps thread "
     "0's waits for the next; no extra warp (WEFT_POST_WARP, which wins where both apply). Read when a plan is "
     "first used."},
    {"WEFT_MOVER_WIDE", Type::Bool, "0",
     "Simple moves keep 8 loads in flight per thread on copies and 8 of each input on reductions (NCCL's unroll on "
     "sm_90) instead of 6 and 3. Read when a plan is first used."},
    {"WEFT_ONESHOT_POLL", Type::String, "all",
     "The one-shot kernel (small AllReduce, AllGather, ReduceScatter; Broadcast and Reduce on 2 ranks): all runs calls of at most one 8-byte word per "
     "thread with every peer's packet polled at once (one memory latency after the last packet lands); seq runs "
     "every call with up to four words per thread and the peers polled in rank order (before issue 32: a latency "
     "per peer). The wire format is the same. Read at creation."},
    {"WEFT_ONESHOT_THREADS", Type::Int, "512",
     "The one-shot kernel's threads per block while a call fits one word per thread (a multiple of 32): fewer "
     "threads give a call more blocks (at most 64), so more multiprocessors send and poll at once. Every rank must "
     "use the same (the blocks' epochs depend on it). Read at creation.",
     32, 512},
    {"WEFT_ONESHOT_PDL", Type::Bool, "1",
     "1: the one-shot kernel, in calls of at most 8 thread blocks, is launched as a programmatic dependent of the "
     "stream's previous kernel (on sm_90 and later; ignored before), so that in a CUDA graph of back-to-back calls the next call's blocks are launched "
     "while the previous one ends; every call still waits for the previous kernel's end and memory before its "
     "first load. 0: plain launches. Read at creation."},
    {"WEFT_EXEC_WARM", Type::Bool, "0",
     "The plan interpreter: at the start of a launch the block's threads read every 64-byte line of the launch's "
     "parameters at once, so that the per-slot chain of reads of the plan that travels in them hits the constant "
     "cache (small calls; docs/runtime.md, 'Where a small plan call's time goes'). Read when a plan is first used."},
    {"WEFT_EXEC_LL_KERNEL", Type::Bool, "0",
     "LL plans in the interpreter, within a node, untraced: run the interpreter built for LL alone (the protocol a "
     "constant: its branches fold and the Simple and LL128 paths leave the code a call runs through). Read when a "
     "plan is first used."},
    {"WEFT_LL_SLOT_BYTES", Type::Int, "65536",
     "Bytes of one LL staging slot (half of them data; a multiple of 16 in 1 KiB..16 MiB).", 1024, 16 << 20},
    {"WEFT_NET_TRACE", Type::String, "",
     "File prefix: every proxy records its network path's events (triggers taken, puts, signals held and written, "
     "landings, flushes, staging copies, peers' signals arriving) and writes PREFIX.<owner>.<pid>.tsv when it stops, "
     "with a summary line in the log (docs/port-channels.md, 'Tracing the network path'). Empty: no trace, no cost."},
    {"WEFT_NET_TRACE_EVENTS", Type::Int, "1000000", "The most events one proxy's trace keeps (WEFT_NET_TRACE).", 1,
     100000000},
    {"WEFT_NET_ORDER", Type::String, "landed",
     "How a signal is ordered after its data on the network: landed (the proxy holds it until a non-blocking flush "
     "shows the channel's puts landed, and keeps posting meanwhile) or fence (a UCX worker fence before each "
     "signal, which UCX 1.15+ makes a flush before the next operation)."},
    {"WEFT_NET_PROTO", Type::String, "am",
     "How the network transport moves data: am (UCX active messages: the receiving proxy writes each message where "
     "it belongs and applies a signal once the data its sender sent before it has landed, so the sender never waits "
     "for its puts to land; used where UCX cannot register CUDA memory, else put) or put (UCX RMA puts, which UCX's TCP transport emulates "
     "with 8 KiB active messages and an acknowledgement each, and signals ordered by WEFT_NET_ORDER)."},
    {"WEFT_NET_LANES", Type::Int, "-1",
     "WEFT_NET_PROTO=am: lanes of the network transport, each a UCX worker with its own connection to every peer and "
     "a thread that posts the sends queued on it and receives what arrives on it (copies into place included), so "
     "sending and receiving run on several threads while the proxy's thread only takes triggers; 0: the proxy's "
     "thread sends and receives on one worker; -1 (the default): chosen when the transport is created, the same on "
     "every rank: the smallest over the ranks of min(8, CPUs the rank may use / ranks on its machine - 2), 0 where "
     "that is below 2 (docs/port-channels.md, 'Lanes'). Alike on every rank.", -1, 16},
    {"WEFT_NET_LANE_SPLIT", Type::Bool, "1",
     "WEFT_NET_LANES >= 2: data to higher ranks on the even lanes, to lower ranks on the odd ones, so on 2 ranks "
     "every lane's thread works one direction; 0: every lane carries both."},
    {"WEFT_NET_STRIPE_BYTES", Type::Int, "131072",
     "WEFT_NET_LANES >= 2: a put of at least twice this many bytes is cut into pieces (4 KiB multiples, at most one "
     "per data lane) sent on different lanes at once.", 4096, int64_t{1} << 32},
    {"WEFT_NET_RNDV_BYTES", Type::Int, "4194304",
     "WEFT_NET_PROTO=am: messages of at least this many bytes go by UCX's rendezvous, smaller ones eagerly (over "
     "TCP: sent from where they are, copied into place on arrival); to a peer reached over TCP only with "
     "WEFT_NET_TCP_RNDV=1.", 1, int64_t{1} << 40},
    {"WEFT_NET_TCP_RNDV", Type::Bool, "0",
     "WEFT_NET_PROTO=am: 1 lets messages of WEFT_NET_RNDV_BYTES or more to a peer whose data goes over UCX's TCP "
     "transport go by rendezvous (received into place); 0 (the default) sends them eagerly, because a peer that "
     "dies while a rendezvous to it is in flight makes a UCX built with assertions abort the surviving process "
     "inside its TCP transport instead of reporting the failure (docs/port-channels.md)."},
    {"WEFT_NET_TCP_SEG_BYTES", Type::Int, "1048576",
     "UCX's TCP segment sizes weft asks for (UCX_TCP_TX_SEG_SIZE and UCX_TCP_RX_SEG_SIZE, whose defaults of 8 and 64 "
     "KiB cut every message into pieces of one system call each, and for RMA puts one acknowledgement each); unused "
     "where either UCX variable is set; 0: UCX's own.", 0, 64 << 20},
    {"WEFT_NET_GPU_MEMORY", Type::String, "auto",
     "Where the network FIFOs' slots live: auto (in GPU memory, put directly, where UCX registers CUDA memory; "
     "else page-locked host memory), host (always page-locked host memory, the staged path) or gpu (GPU memory, "
     "an error where UCX cannot register it). The log (NET, INFO) says which one runs."},
    {"WEFT_PROXY_CPUS", Type::String, "auto",
     "CPUs a proxy thread runs on: auto (the CPUs near its GPU, from the PCI bus id's local_cpulist, within the "
     "process's own affinity; best effort), none (no pinning) or a list such as 0-7,16."},
    {"WEFT_PROXY_SPIN_US", Type::Int, "20000",
     "Microseconds a proxy keeps polling without pause after its last work (a trigger, a transfer in flight, "
     "network progress) before it yields, then sleeps; 0: back off at once.", 0, 10000000},
    {"WEFT_BOOTSTRAP_ADDR", Type::String, "",
     "host:port of the bootstrap root for weftCommInitFromEnv; rank 0 listens there (default MASTER_ADDR and MASTER_PORT + 1)."},
    {"WEFT_BOOTSTRAP_DIR", Type::String, "/tmp",
     "Directory under which weftCommInitFromEnv's rank 0 leaves the unique id (with its secret) for the other ranks, "
     "in a private folder weft-<uid>/ (0700, file 0600), when WEFT_BOOTSTRAP_SECRET is not set."},
    {"WEFT_BOOTSTRAP_SECRET", Type::String, "",
     "32 to 128 hex digits: the communicator's secret for weftCommInitFromEnv, set alike on every rank by the launcher; "
     "unset, rank 0 draws one and hands it over through WEFT_BOOTSTRAP_DIR (same host or a shared folder). Never "
     "printed: weft env shows 'set (hidden)', and no log line carries it.",
     0, 0, true},
    {"WEFT_EXECUTOR", Type::String, "interp",
     "Which kernels run plans (docs/generated-kernels.md), read when a communicator is created: interp (the "
     "plan interpreter) or gen (a kernel generated per plan and rank, compiled with NVRTC at first use; needs "
     "libnvrtc; under WEFT_EMULATE_NODES the interpreter runs)."},
    {"WEFT_CACHE_DIR", Type::String, "",
     "Folder of the generated kernels' disk cache; empty: $XDG_CACHE_HOME/weft, else ~/.cache/weft. An "
     "unwritable folder is a warning: kernels are then compiled in memory, once per process."},
    {"WEFT_CTA_POLICY", Type::String, "",
     "A new communicator's CTA policy (docs/runtime.md, \"CTA policies\"): 0 or DEFAULT, 1 or EFFICIENCY (at most 16 "
     "thread blocks per rank), 2 or ZERO (AllGather, AllToAll and Broadcast by copy engines where their buffers are "
     "windows or registered); names may be joined by '|'. Every rank must use the same. Empty: default. The NCCL "
     "library's NCCL_CTA_POLICY and ncclConfig_t.CTAPolicy take precedence."},
    {"WEFT_CE_STREAMS", Type::Int, "1",
     "Streams the copy-engine collectives spread one call's copies over (1 to 8): 1 issues them as one batch on "
     "the caller's stream; more forks the caller's stream into that many, copies of 4 MiB or more cut into as many "
     "pieces, each stream one batch. Read when a communicator's first copy-engine call runs.", 1, 8},
    {"WEFT_NCCL_FALLBACK", Type::String, "",
     "Path of a real libnccl.so.2 to which the NCCL-compatible library forwards what weft does not handle."},
  };
}

}  // namespace

const std::vector<Variable>& registry() {
  static const std::vector<Variable> vars = [] {
    std::vector<Variable> v = general_variables();
    const std::vector<Variable> more = execution_variables();
    v.insert(v.end(), more.begin(), more.end());
    return v;
  }();
  return vars;
}

const Variable& lookup(std::string_view name) {
  for (const auto& v : registry())
    if (v.name == name) return v;
  fail(ErrorCode::Internal, "configuration variable " + std::string(name) + " is not declared in util/config.cpp");
}

std::string get_string(std::string_view name) {
  const Variable& var = lookup(name);
  if (var.secret)
    fail(ErrorCode::Internal, std::string(name) + " is a secret: read it with getenv into auth::Secret, never as a string");
  const char* env = std::getenv(std::string(name).c_str());
  if (env != nullptr) return env;
  return std::string(var.default_value);
}

namespace {

std::string range_text(double min, double max) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.15g..%.15g", min, max);
  return buf;
}

[[noreturn]] void bad_value(std::string_view name, const std::string& text, const std::string& why) {
  fail(ErrorCode::InvalidArgument, std::string(name) + "='" + text + "' " + why);
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

int64_t parse_int(std::string_view name, const std::string& text, int64_t min, int64_t max) {
  const bool negative = !text.empty() && text[0] == '-';
  const std::string digits = negative ? text.substr(1) : text;
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), is_digit))
    bad_value(name, text, "is not an integer (decimal digits only)");
  if (digits.size() > 1 && digits[0] == '0')
    bad_value(name, text, "has a leading zero; write the decimal value (weft reads no octal)");
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v, 10);
  if (ec == std::errc::result_out_of_range || end != text.data() + text.size() || v < min || v > max)
    bad_value(name, text, "is outside " + std::to_string(min) + ".." + std::to_string(max));
  return v;
}

double parse_seconds(std::string_view name, const std::string& text, double min, double max) {
  size_t i = 0;
  while (i < text.size() && is_digit(text[i])) ++i;
  const size_t int_digits = i;
  if (i < text.size() && text[i] == '.') {
    ++i;
    while (i < text.size() && is_digit(text[i])) ++i;
  }
  if (int_digits == 0 || i != text.size())
    bad_value(name, text, "is not a number of seconds (digits with an optional fraction, e.g. 30 or 2.5)");
  const double v = std::strtod(text.c_str(), nullptr);
  if (!(v >= min && v <= max)) bad_value(name, text, "is outside " + range_text(min, max) + " seconds");
  return v;
}

int64_t get_int(std::string_view name) {
  const Variable& var = lookup(name);
  return parse_int(name, get_string(name), static_cast<int64_t>(var.min), static_cast<int64_t>(var.max));
}

bool get_bool(std::string_view name) {
  std::string s = get_string(name);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  if (s == "1" || s == "true" || s == "yes" || s == "on") return true;
  if (s.empty() || s == "0" || s == "false" || s == "no" || s == "off") return false;
  fail(ErrorCode::InvalidArgument, std::string(name) + "='" + s + "' is not a boolean (use 0 or 1)");
}

double get_seconds(std::string_view name) {
  const Variable& var = lookup(name);
  return parse_seconds(name, get_string(name), var.min, var.max);
}

void validate_environment() {
  for (const Variable& v : registry()) {
    if (std::getenv(std::string(v.name).c_str()) == nullptr) continue;
    switch (v.type) {
      case Type::Int: get_int(v.name); break;
      case Type::Bool: get_bool(v.name); break;
      case Type::Seconds: get_seconds(v.name); break;
      case Type::String: break;
    }
  }
}

std::string format_table() {
  auto type_name = [](Type t) {
    switch (t) {
      case Type::String: return "string";
      case Type::Int: return "int";
      case Type::Bool: return "bool";
      case Type::Seconds: return "seconds";
    }
    return "?";
  };
  std::ostringstream out;
  for (const auto& v : registry()) {
    const char* env = std::getenv(std::string(v.name).c_str());
    std::string value;
    if (env != nullptr) value = v.secret ? std::string(", set (hidden)") : std::string(", set to '") + env + "'";
    out << v.name << "  (" << type_name(v.type) << ", default '" << v.default_value << "'" << value << ")\n    "
        << v.description << "\n";
  }
  return out.str();
}

}  // namespace weft::config
