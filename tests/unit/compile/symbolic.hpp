// A small symbolic executor for the compiler's tests: runs an Algorithm on sets of
// (rank, input chunk) contributions and checks the postcondition of AllReduce, AllGather,
// ReduceScatter, AllToAll and Broadcast, plus races inside one step and the rule that an
// out-of-place run never writes the input buffer. Independent of the project's verifier so
// that a bug there cannot hide one here.
#pragma once

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "ir/algorithm.hpp"

namespace weft::test {

using Contribs = std::vector<std::pair<int, int>>;  // sorted (rank, input chunk)

/// Returns "" when `a` meets its collective's postcondition, else the first problem.
inline std::string symbolic_check(const Algorithm& a) {
  using Key = std::tuple<int, int, int>;  // rank, buffer, index (canonical)
  std::map<Key, Contribs> state;
  auto key = [&](SlotRef s) {
    SlotRef c = canonical_slot(a, s);
    return Key{c.rank, static_cast<int>(c.buffer), c.index};
  };
  for (int r = 0; r < a.ranks; ++r)
    for (int i = 0; i < a.input_chunks; ++i) state[key({r, Buffer::Input, i})] = {{r, i}};
  std::vector<Transfer> ts = a.transfers;
  std::stable_sort(ts.begin(), ts.end(), [](const Transfer& x, const Transfer& y) { return x.step < y.step; });
  for (size_t i = 0; i < ts.size();) {
    size_t j = i;
    std::map<Key, Contribs> writes;
    std::map<Key, int> written, read;
    for (; j < ts.size() && ts[j].step == ts[i].step; ++j) {
      const Transfer& t = ts[j];
      if (!a.in_place && t.dst_buffer == Buffer::Input) return "transfer writes the input buffer out of place";
      for (int o = 0; o < t.count; ++o) {
        Key s = key({t.src_rank, t.src_buffer, t.src_index + o}), d = key({t.dst_rank, t.dst_buffer, t.dst_index + o});
        ++read[s];
        if (written[d]++) return "two writes of one slot in step " + std::to_string(t.step);
        Contribs v = state[s];
        if (t.op == TransferOp::Reduce) {
          Contribs acc = state[d];
          for (auto c : v) {
            if (std::find(acc.begin(), acc.end(), c) != acc.end())
              return "contribution counted twice at step " + std::to_string(t.step);
            acc.push_back(c);
          }
          std::sort(acc.begin(), acc.end());
          v = acc;
        }
        writes[d] = v;
      }
    }
    for (auto& [k, n] : written)
      if (read.count(k)) return "race: a slot read and written in step " + std::to_string(ts[i].step);
    for (auto& [k, v] : writes) state[k] = v;
    i = j;
  }
  auto out = [&](int r, int i) { return state[key({r, Buffer::Output, i})]; };
  for (int r = 0; r < a.ranks; ++r)
    for (int i = 0; i < a.output_chunks; ++i) {
      Contribs want;
      switch (a.collective) {
        case Collective::AllReduce:
          for (int q = 0; q < a.ranks; ++q) want.push_back({q, i});
          break;
        case Collective::AllGather:
          want = {{i / a.input_chunks, i % a.input_chunks}};
          break;
        case Collective::ReduceScatter:
          for (int q = 0; q < a.ranks; ++q) want.push_back({q, r * a.output_chunks + i});
          break;
        case Collective::AllToAll: {
          int c = a.input_chunks / a.ranks;
          want = {{i / c, r * c + i % c}};
          break;
        }
        case Collective::Broadcast:
          want = {{a.root, i}};
          break;
        default:
          return "";
      }
      if (out(r, i) != want) {
        std::string got;
        for (auto [q, c] : out(r, i)) got += "(" + std::to_string(q) + "," + std::to_string(c) + ")";
        return "rank " + std::to_string(r) + " output chunk " + std::to_string(i) + " holds {" + got + "}";
      }
    }
  return "";
}

}  // namespace weft::test
