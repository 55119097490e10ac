#include "net/tcp_rendezvous.hpp"

#include <sstream>
#include <vector>

#include "util/config.hpp"

namespace weft::net {

namespace {
/// One lane's description ("lane[0]: 1:tcp/lo.0 md[0] -> ... am am_bw#0 ..."): its
/// transport ("tcp") and whether it carries active messages. A connection manager's lane
/// ("lane[1]: cm tcp") carries none.
bool lane_carries_tcp_data(const std::string& lane) {
  const size_t colon = lane.find("]:");
  if (colon == std::string::npos) return false;
  std::istringstream words(lane.substr(colon + 2));
  std::string resource, w;
  if (!(words >> resource) || resource == "cm") return false;
  const size_t id = resource.find(':'), slash = resource.find('/');
  if (id == std::string::npos || slash == std::string::npos || slash < id) return false;
  const bool tcp = resource.substr(id + 1, slash - id - 1) == "tcp";
  bool am = false;
  while (words >> w) {
    while (!w.empty() && w.back() == ';') w.pop_back();  // describe_peer's separator
    am |= w == "am" || w.rfind("am_bw#", 0) == 0;
  }
  return tcp && am;
}
}  // namespace

bool data_over_tcp(const std::string& lanes) {
  for (size_t at = lanes.find("lane["); at != std::string::npos;) {
    const size_t next = lanes.find("lane[", at + 5);
    if (lane_carries_tcp_data(lanes.substr(at, next == std::string::npos ? std::string::npos : next - at))) return true;
    at = next;
  }
  return false;
}

bool rendezvous_allowed(bool over_tcp) { return !over_tcp || config::get_bool("WEFT_NET_TCP_RNDV"); }

}  // namespace weft::net
