#include "part/schedule.hpp"

#include <algorithm>
#include <map>
#include <tuple>

#include "util/error.hpp"

namespace weft::part {

namespace {

uint32_t count_slots(const std::vector<Step>& steps, int peer, bool in) {
  uint32_t n = 0;
  for (const Step& s : steps)
    for (const Message& m : in ? s.in : s.out) n += m.peer == peer;
  return n;
}

std::vector<int> peers(const std::vector<Step>& steps, bool in) {
  std::set<int> p;
  for (const Step& s : steps)
    for (const Message& m : in ? s.in : s.out) p.insert(m.peer);
  return {p.begin(), p.end()};
}

[[noreturn]] void bad(const std::string& m) { fail(ErrorCode::Verify, "partitioned schedule: " + m); }

void run_steps(const std::vector<Schedule>& all, Contributions& data);

}  // namespace

uint32_t Schedule::slots_from(int peer) const { return count_slots(steps, peer, true); }
uint32_t Schedule::slots_to(int peer) const { return count_slots(steps, peer, false); }
std::vector<int> Schedule::in_peers() const { return peers(steps, true); }
std::vector<int> Schedule::out_peers() const { return peers(steps, false); }

Schedule ring_allreduce(int rank, int nranks) {
  Schedule s;
  s.rank = rank;
  s.nranks = nranks;
  s.chunks = static_cast<uint32_t>(nranks);
  if (nranks == 1) {
    s.steps.push_back(Step{});
    return s;
  }
  const int P = nranks, prev = (rank + P - 1) % P, next = (rank + 1) % P;
  uint32_t sent = 0, received = 0;
  for (int i = 0; i <= 2 * (P - 1); ++i) {
    Step st;
    const int chunk = ((rank - i) % P + P) % P;
    if (i > 0) {
      st.in.push_back({prev, received++});
      st.recv_chunk = chunk;
      st.op = i <= P - 1 ? StepOp::Reduce : StepOp::Copy;
    }
    if (i < 2 * (P - 1)) {
      st.out.push_back({next, sent++});
      st.send_chunk = chunk;
    }
    s.steps.push_back(st);
  }
  return s;
}

Schedule chain_broadcast(int rank, int nranks, int root) {
  Schedule s;
  s.rank = rank;
  s.nranks = nranks;
  s.chunks = 1;
  const int P = nranks, pos = ((rank - root) % P + P) % P;
  Step st;
  if (pos > 0) {
    st.in.push_back({(rank + P - 1) % P, 0});
    st.recv_chunk = 0;
    st.op = StepOp::Copy;
  }
  if (pos < P - 1) {
    st.out.push_back({(rank + 1) % P, 0});
    st.send_chunk = 0;
  }
  s.steps.push_back(st);
  return s;
}

void check_schedules(const std::vector<Schedule>& all) {
  const int P = static_cast<int>(all.size());
  // (sender, receiver, slot) -> (chunk, sender step) and the receiving side.
  std::map<std::tuple<int, int, uint32_t>, std::pair<int, int>> sends, recvs;
  for (int r = 0; r < P; ++r) {
    const Schedule& s = all[static_cast<size_t>(r)];
    const std::string who = "rank " + std::to_string(r);
    if (s.rank != r || s.nranks != P) bad(who + ": schedule is for rank " + std::to_string(s.rank) + " of " +
                                          std::to_string(s.nranks));
    if (s.chunks == 0) bad(who + ": zero chunks");
    std::map<std::pair<int, bool>, uint32_t> next_slot;
    for (size_t i = 0; i < s.steps.size(); ++i) {
      const Step& st = s.steps[i];
      const std::string at = who + " step " + std::to_string(i);
      auto chunk_ok = [&](int c, const char* what) {
        if (c < 0 || c >= static_cast<int>(s.chunks))
          bad(at + ": " + what + " chunk " + std::to_string(c) + " out of range (" + std::to_string(s.chunks) +
              " chunks)");
      };
      if (!st.in.empty()) {
        chunk_ok(st.recv_chunk, "receive");
        if (st.op == StepOp::None) bad(at + ": receives with no operation");
      }
      if (!st.out.empty()) chunk_ok(st.send_chunk, "send");
      for (bool in : {true, false})
        for (const Message& m : in ? st.in : st.out) {
          if (m.peer < 0 || m.peer >= P || m.peer == r) bad(at + ": bad peer " + std::to_string(m.peer));
          uint32_t& want = next_slot[{m.peer, in}];
          if (m.slot != want)
            bad(at + ": slot " + std::to_string(m.slot) + " with rank " + std::to_string(m.peer) + ", expected " +
                std::to_string(want) + " (slots count up in step order)");
          ++want;
          auto key = in ? std::make_tuple(m.peer, r, m.slot) : std::make_tuple(r, m.peer, m.slot);
          auto& map = in ? recvs : sends;
          if (!map.emplace(key, std::make_pair(in ? st.recv_chunk : st.send_chunk, static_cast<int>(i))).second)
            bad(at + ": message slot " + std::to_string(m.slot) + " used twice");
        }
    }
  }
  for (const auto& [key, v] : sends) {
    auto [src, dst, slot] = key;
    auto it = recvs.find(key);
    const std::string msg = "message " + std::to_string(slot) + " from rank " + std::to_string(src) + " to rank " +
                            std::to_string(dst);
    if (it == recvs.end()) bad(msg + " is never received");
    if (it->second.first != v.first)
      bad(msg + " carries chunk " + std::to_string(v.first) + " but lands in chunk " + std::to_string(it->second.first));
  }
  for (const auto& [key, v] : recvs)
    if (!sends.count(key))
      bad("rank " + std::to_string(std::get<1>(key)) + " step " + std::to_string(v.second) + " waits for message " +
          std::to_string(std::get<2>(key)) + " from rank " + std::to_string(std::get<0>(key)) + ", which is never sent");
  // Deadlock: run every rank's steps in order, on empty contribution sets.
  Contributions none(static_cast<size_t>(P));
  for (int r = 0; r < P; ++r) none[static_cast<size_t>(r)].resize(all[static_cast<size_t>(r)].chunks);
  run_steps(all, none);
}

namespace {

void run_steps(const std::vector<Schedule>& all, Contributions& data) {
  const size_t P = all.size();
  std::map<std::tuple<int, int, uint32_t>, std::set<int>> in_flight;
  std::vector<size_t> pc(P, 0);
  for (bool moved = true; moved;) {
    moved = false;
    for (size_t r = 0; r < P; ++r) {
      const Schedule& s = all[r];
      while (pc[r] < s.steps.size()) {
        const Step& st = s.steps[pc[r]];
        bool ready = std::all_of(st.in.begin(), st.in.end(), [&](const Message& m) {
          return in_flight.count({m.peer, static_cast<int>(r), m.slot}) != 0;
        });
        if (!ready) break;
        for (const Message& m : st.in) {
          auto node = in_flight.extract({m.peer, static_cast<int>(r), m.slot});
          std::set<int>& dst = data[r][static_cast<size_t>(st.recv_chunk)];
          if (st.op == StepOp::Copy) {
            dst = node.mapped();
          } else {
            for (int c : node.mapped())
              if (!dst.insert(c).second)
                bad("rank " + std::to_string(r) + " step " + std::to_string(pc[r]) + ": reduces the contribution of rank " +
                    std::to_string(c) + " into chunk " + std::to_string(st.recv_chunk) + " twice");
          }
        }
        for (const Message& m : st.out)
          in_flight[{static_cast<int>(r), m.peer, m.slot}] = data[r][static_cast<size_t>(st.send_chunk)];
        ++pc[r];
        moved = true;
      }
    }
  }
  for (size_t r = 0; r < P; ++r)
    if (pc[r] < all[r].steps.size())
      bad("deadlock: rank " + std::to_string(r) + " waits forever in step " + std::to_string(pc[r]));
}

}  // namespace

Contributions simulate(const std::vector<Schedule>& all, Contributions data) {
  check_schedules(all);
  if (data.size() != all.size()) bad("simulate: contribution sets for " + std::to_string(data.size()) + " ranks");
  for (size_t r = 0; r < all.size(); ++r)
    if (data[r].size() != all[r].chunks) bad("simulate: rank " + std::to_string(r) + " has the wrong chunk count");
  run_steps(all, data);
  return data;
}

}  // namespace weft::part
