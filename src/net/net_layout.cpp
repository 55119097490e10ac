#include "net/net_layout.hpp"

#include "util/error.hpp"

namespace weft {

bool NetLayout::crosses(int a, int b) const {
  return node_of_rank.at(static_cast<size_t>(a)) != node_of_rank.at(static_cast<size_t>(b));
}

std::vector<int> NetLayout::cross_peers(int rank) const {
  std::vector<int> out;
  for (int q = 0; q < static_cast<int>(node_of_rank.size()); ++q)
    if (q != rank && crosses(rank, q)) out.push_back(q);
  return out;
}

int NetLayout::cross_index(int rank, int peer) const {
  if (peer == rank || !crosses(rank, peer)) return -1;
  int i = 0;
  for (int q = 0; q < peer; ++q)
    if (q != rank && crosses(rank, q)) ++i;
  return i;
}

uint64_t NetLayout::counter_bytes(int rank) const {
  const uint64_t n = cross_peers(rank).size() * static_cast<uint64_t>(connections) * 128;
  return (n + 4095) / 4096 * 4096;
}

namespace {
uint64_t index_of(const NetLayout& l, int rank, int peer, int k, const char* what) {
  const int i = l.cross_index(rank, peer);
  if (i < 0 || k < 0 || k >= l.connections)
    fail(ErrorCode::Internal, std::string("network FIFO layout: no ") + what + " for rank " + std::to_string(rank) +
                                  ", peer " + std::to_string(peer) + ", connection " + std::to_string(k));
  return static_cast<uint64_t>(i) * static_cast<uint64_t>(l.connections) + static_cast<uint64_t>(k);
}
}  // namespace

uint64_t NetLayout::posted(int rank, int peer, int k) const { return index_of(*this, rank, peer, k, "counters") * 128; }

uint64_t NetLayout::out(int rank, int peer, int k) const {
  return counter_bytes(rank) + index_of(*this, rank, peer, k, "staging") * depth * static_cast<uint64_t>(slot_bytes);
}

uint64_t NetLayout::in(int rank, int peer, int k) const {
  const uint64_t fifos = cross_peers(rank).size() * static_cast<uint64_t>(connections);
  return counter_bytes(rank) + (fifos + index_of(*this, rank, peer, k, "slots")) * depth * static_cast<uint64_t>(slot_bytes);
}

uint64_t NetLayout::total(int rank) const {
  const uint64_t fifos = cross_peers(rank).size() * static_cast<uint64_t>(connections);
  return counter_bytes(rank) + 2 * fifos * depth * static_cast<uint64_t>(slot_bytes);
}

int NetLayout::channels(int rank) const { return static_cast<int>(cross_peers(rank).size()) * connections * 2; }

void NetLayout::check(int rank, int max_channels) const {
  const std::string who = "rank " + std::to_string(rank) + ": ";
  const size_t peers = cross_peers(rank).size();
  if (channels(rank) > max_channels)
    fail(ErrorCode::InvalidUsage, who + std::to_string(peers) + " peers on other nodes x " + std::to_string(connections) +
                                      " connections x 2 directions need " + std::to_string(channels(rank)) +
                                      " port channels, more than a proxy's " + std::to_string(max_channels) +
                                      ": lower WEFT_CONNECTIONS");
  if (total(rank) >= (1ull << 32))
    fail(ErrorCode::InvalidUsage, who + "the staging memory for " + std::to_string(peers) +
                                      " peers on other nodes would be " + std::to_string(total(rank) >> 20) +
                                      " MiB, more than the network transport's 4 GiB - 1 per memory: lower "
                                      "WEFT_CONNECTIONS, WEFT_FIFO_DEPTH or WEFT_SLOT_BYTES");
}

}  // namespace weft
