#include "util/config.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <sstream>

#include "util/error.hpp"

namespace weft::config {

const std::vector<Variable>& registry() {
  static const std::vector<Variable> vars = {
      {"WEFT_LOG_LEVEL", Type::String, "WARN",
       "Least severe log level printed: TRACE, DEBUG, INFO, WARN, ERROR or NONE."},
      {"WEFT_LOG_SUBSYS", Type::String, "ALL",
       "Comma-separated subsystems to log (INIT, BOOT, MEM, COLL, PLAN, PROXY, NCCL) or ALL."},
      {"WEFT_LOG_FILE", Type::String, "",
       "Log to this file instead of stderr; %h is replaced by the host name, %p by the pid."},
      {"WEFT_DEBUG", Type::String, "",
       "Alias of WEFT_LOG_LEVEL kept for NCCL users (WEFT_DEBUG=INFO)."},
      {"WEFT_TIMEOUT", Type::Seconds, "60",
       "Deadline of every bounded wait, host or device: a peer that does not answer in time is an error."},
      {"WEFT_BOOTSTRAP_TIMEOUT", Type::Seconds, "60",
       "Deadline for all ranks to meet during communicator initialization."},
      {"WEFT_SOCKET_IFNAME", Type::String, "",
       "Network interface (or prefix) whose address the bootstrap root advertises; empty picks the first non-loopback one, else loopback."},
      {"WEFT_MEMORY_BUDGET", Type::String, "",
       "Memory the compiler and the simulator may take (e.g. 64G); empty: three quarters of the machine's memory. --memory-budget overrides it."},
      {"WEFT_DATA_DIR", Type::String, "",
       "Directory holding algorithms/ and topologies/; empty means next to the binary, then the source tree."},
      {"WEFT_MICROBATCH_BYTES", Type::Int, "0",
       "Micro-batch size in bytes per chunk slot; 0 lets the tuning table choose."},
      {"WEFT_ALGO", Type::String, "",
       "Algorithms instead of the selection table: comma-separated 'name' or 'Collective:name'; a name is a built-in plan (ring, allpairs, chain), an algorithm of algorithms/ (ring_allreduce, ...) or a file."},
      {"WEFT_PROTO", Type::String, "",
       "Force a protocol: Simple or LL (the interpreter runs no LL128; another value is an error at the first collective)."},
      {"WEFT_GPUS_PER_NODE", Type::Int, "0",
       "GPUPerNode given to compiled algorithms (hm_allreduce, ...): the size of their inner level; 0 means the communicator's rank count (one node). The ranks still talk over NVLink: no inter-node transport exists yet."},
      {"WEFT_INSTANCES", Type::Int, "0",
       "Parallel thread blocks per link, taken as given; 0 lets the selection table choose (for a compiled plan that "
       "would then need more than 72 thread blocks per rank, the compiler derives them from the topology within 72)."},
      {"WEFT_CONNECTIONS", Type::Int, "32",
       "Connections (staging FIFOs) per ordered pair of ranks: the most instances a plan may use between two ranks."},
      {"WEFT_FIFO_DEPTH", Type::Int, "4",
       "Staging slots per connection FIFO (at least 2): how many messages a sender may run ahead of its receiver."},
      {"WEFT_SLOT_BYTES", Type::Int, "524288",
       "Bytes of one Simple-protocol staging slot: the largest message, so the micro-batch part of one thread block."},
      {"WEFT_LL_SLOT_BYTES", Type::Int, "65536",
       "Bytes of one LL staging slot (half of them data)."},
      {"WEFT_BOOTSTRAP_ADDR", Type::String, "",
       "host:port of the bootstrap root for weftCommInitFromEnv; rank 0 listens there (default MASTER_ADDR and MASTER_PORT + 1)."},
      {"WEFT_BOOTSTRAP_DIR", Type::String, "/tmp",
       "Directory where weftCommInitFromEnv's rank 0 leaves the unique id for the other ranks when no address is given."},
      {"WEFT_NCCL_FALLBACK", Type::String, "",
       "Path of a real libnccl.so.2 to which the NCCL-compatible library forwards what weft does not handle."},
  };
  return vars;
}

const Variable& lookup(std::string_view name) {
  for (const auto& v : registry())
    if (v.name == name) return v;
  fail(ErrorCode::Internal, "configuration variable " + std::string(name) + " is not declared in util/config.cpp");
}

std::string get_string(std::string_view name) {
  const Variable& var = lookup(name);
  const char* env = std::getenv(std::string(name).c_str());
  if (env != nullptr) return env;
  return std::string(var.default_value);
}

int64_t get_int(std::string_view name) {
  std::string s = get_string(name);
  try {
    size_t pos = 0;
    int64_t v = std::stoll(s, &pos, 0);
    if (pos != s.size()) throw std::invalid_argument(s);
    return v;
  } catch (const std::exception&) {
    fail(ErrorCode::InvalidArgument, std::string(name) + "='" + s + "' is not an integer");
  }
}

bool get_bool(std::string_view name) {
  std::string s = get_string(name);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  if (s == "1" || s == "true" || s == "yes" || s == "on") return true;
  if (s.empty() || s == "0" || s == "false" || s == "no" || s == "off") return false;
  fail(ErrorCode::InvalidArgument, std::string(name) + "='" + s + "' is not a boolean (use 0 or 1)");
}

double get_seconds(std::string_view name) {
  std::string s = get_string(name);
  try {
    size_t pos = 0;
    double v = std::stod(s, &pos);
    if (pos != s.size() || v < 0) throw std::invalid_argument(s);
    return v;
  } catch (const std::exception&) {
    fail(ErrorCode::InvalidArgument, std::string(name) + "='" + s + "' is not a number of seconds");
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
    out << v.name << "  (" << type_name(v.type) << ", default '" << v.default_value << "'"
        << (env ? std::string(", set to '") + env + "'" : std::string()) << ")\n    " << v.description << "\n";
  }
  return out.str();
}

}  // namespace weft::config
