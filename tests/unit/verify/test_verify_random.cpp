// Differential test: the verifier against a naive reference (std::set per slot, races found
// by listing every access of a step) on thousands of small algorithms, random or mutated
// from the built-ins. Both must agree on whether each algorithm is correct; neither may
// crash on any input.
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <map>
#include <random>
#include <set>

#include "builders.hpp"
#include "compile/verify.hpp"
#include "random_soak.hpp"
#include "util/error.hpp"

namespace weft {
namespace {

using Contrib = std::pair<int32_t, int32_t>;
using Key = std::tuple<int32_t, int, int32_t>;

Key key(const Algorithm& a, SlotRef s) {
  SlotRef c = canonical_slot(a, s);
  return {c.rank, static_cast<int>(c.buffer), c.index};
}

/// The naive reference: whether `a` is correct under docs/verify.md's semantics.
bool reference_ok(const Algorithm& a) {
  try {
    check_shape(a);
  } catch (const Error&) {
    return false;
  }
  std::map<Key, std::set<Contrib>> state;
  for (int32_t r = 0; r < a.ranks; ++r)
    for (int32_t i = 0; i < a.input_chunks; ++i) state[key(a, {r, Buffer::Input, i})] = {{r, i}};
  std::map<int32_t, std::vector<size_t>> by_step;
  for (size_t i = 0; i < a.transfers.size(); ++i) by_step[a.transfers[i].step].push_back(i);
  for (auto& [step, ids] : by_step) {
    std::map<Key, std::set<size_t>> readers, writers;
    for (size_t t : ids) {
      const Transfer& x = a.transfers[t];
      for (int32_t k = 0; k < x.count; ++k) {
        readers[key(a, {x.src_rank, x.src_buffer, x.src_index + k})].insert(t);
        Key d = key(a, {x.dst_rank, x.dst_buffer, x.dst_index + k});
        // One transfer writing a slot twice (overlapping ranges) is as bad as two.
        if (writers[d].count(t)) return false;
        writers[d].insert(t);
      }
      Key s0 = key(a, x.src()), d0 = key(a, x.dst());
      if (std::get<0>(s0) == std::get<0>(d0) && std::get<1>(s0) == std::get<1>(d0) && s0 != d0 &&
          std::abs(std::get<2>(s0) - std::get<2>(d0)) < x.count)
        return false;  // partly overlapping ranges
    }
    for (auto& [slot, w] : writers) {
      if (w.size() > 1) return false;
      auto r = readers.find(slot);
      if (r != readers.end())
        for (size_t reader : r->second)
          if (reader != *w.begin()) return false;
    }
    for (size_t t : ids) {
      const Transfer& x = a.transfers[t];
      for (int32_t k = 0; k < x.count; ++k) {
        std::set<Contrib> from = state[key(a, {x.src_rank, x.src_buffer, x.src_index + k})];
        std::set<Contrib>& into = state[key(a, {x.dst_rank, x.dst_buffer, x.dst_index + k})];
        if (from.empty()) return false;
        if (x.op == TransferOp::Copy) {
          into = from;
          continue;
        }
        if (into.empty()) return false;
        for (const Contrib& c : from)
          if (!into.insert(c).second) return false;
      }
    }
  }
  auto holds = [&](int32_t r, int32_t i, const std::set<Contrib>& want) {
    return state[key(a, {r, Buffer::Output, i})] == want;
  };
  const int32_t R = a.ranks, in = a.input_chunks, out = a.output_chunks;
  auto all = [&](int32_t chunk) {
    std::set<Contrib> s;
    for (int32_t q = 0; q < R; ++q) s.insert({q, chunk});
    return s;
  };
  for (int32_t r = 0; r < R; ++r)
    for (int32_t i = 0; i < out; ++i) switch (a.collective) {
        case Collective::AllGather:
          if (!holds(r, i, {{i / in, i % in}})) return false;
          break;
        case Collective::ReduceScatter:
          if (!holds(r, i, all(r * out + i))) return false;
          break;
        case Collective::AllReduce:
          if (!holds(r, i, all(i))) return false;
          break;
        case Collective::Reduce:
          if (r == a.root && !holds(r, i, all(i))) return false;
          break;
        case Collective::Broadcast:
          if (!holds(r, i, {{a.root, i}})) return false;
          break;
        case Collective::AllToAll: {
          if (in % R != 0) return false;
          int32_t k = in / R;
          if (!holds(r, i, {{i / k, r * k + i % k}})) return false;
          break;
        }
        case Collective::Custom:
          break;
      }
  if (a.collective == Collective::Custom) {
    std::map<Key, std::set<Contrib>> want;
    for (const Expectation& e : a.custom_postcondition) {
      if (e.slot.rank < 0 || e.slot.rank >= R || e.slot.index < 0) return false;
      auto& w = want[key(a, e.slot)];
      for (auto c : e.contributions) {
        if (c.first < 0 || c.first >= R || c.second < 0 || c.second >= in) return false;
        w.insert(c);
      }
    }
    for (auto& [slot, w] : want)
      if (state[slot] != w) return false;
  }
  return true;
}

/// A small mutation of `a`: drop, duplicate, re-step, re-op or re-index one transfer.
void mutate(Algorithm& a, std::mt19937& rng) {
  if (a.transfers.empty()) return;
  auto pick = [&](int n) { return static_cast<int32_t>(std::uniform_int_distribution<int>(0, n - 1)(rng)); };
  size_t i = pick(static_cast<int>(a.transfers.size()));
  Transfer& t = a.transfers[i];
  switch (pick(8)) {
    case 0:
      a.transfers.erase(a.transfers.begin() + i);
      break;
    case 1:
      a.transfers.push_back(t);
      break;
    case 2:
      t.step = std::max(0, t.step + (pick(2) ? 1 : -1));
      break;
    case 3:
      t.op = t.op == TransferOp::Copy ? TransferOp::Reduce : TransferOp::Copy;
      break;
    case 4:
      t.src_index += pick(2) ? 1 : -1;
      break;
    case 5:
      t.dst_index = (t.dst_index + 1) % std::max(1, a.output_chunks);
      break;
    case 6:
      t.dst_rank = pick(a.ranks + 1);
      break;
    case 7:
      std::swap(a.transfers[i].step, a.transfers[pick(static_cast<int>(a.transfers.size()))].step);
      break;
  }
}

/// An arbitrary small algorithm (mostly wrong, sometimes out of range).
Algorithm random_algorithm(std::mt19937& rng) {
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  Algorithm a;
  a.name = "random";
  a.collective = static_cast<Collective>(pick(7));
  a.ranks = 1 + pick(3);
  a.input_chunks = 1 + pick(3);
  int32_t want = expected_output_chunks(a.collective, a.ranks, a.input_chunks);
  a.output_chunks = want >= 0 ? want : 1 + pick(3);
  a.scratch_chunks = pick(3);
  a.in_place = pick(2) && (a.collective != Collective::Custom || a.input_chunks == a.output_chunks);
  a.root = pick(a.ranks);
  int n = pick(10);
  for (int i = 0; i < n; ++i) {
    Transfer t;
    t.src_rank = pick(a.ranks);
    t.dst_rank = pick(a.ranks);
    t.src_buffer = static_cast<Buffer>(pick(3));
    t.dst_buffer = static_cast<Buffer>(pick(3));
    t.src_index = pick(3);
    t.dst_index = pick(3);
    t.count = 1 + pick(2);
    t.op = pick(2) ? TransferOp::Copy : TransferOp::Reduce;
    t.step = pick(3);
    a.transfers.push_back(t);
  }
  if (a.collective == Collective::Custom)
    for (int e = pick(3); e > 0; --e)
      a.custom_postcondition.push_back(
          {{pick(a.ranks), Buffer::Output, pick(a.output_chunks)}, {{pick(a.ranks), pick(a.input_chunks)}}});
  return a;
}

TEST(VerifyRandom, AgreesWithANaiveReference) {
  const test::RandomSoak soak = test::random_soak(6000, 20250101u);
  const int iters = soak.iters;
  std::mt19937 rng(soak.seed);
  using namespace weft::test;
  const std::vector<Algorithm> seeds = {ring_allgather(3),     ring_reducescatter(4),  ring_allreduce(3),
                                        hm_allgather(2, 2),    hm_allreduce(2, 2),     hm_allreduce(3, 2),
                                        allpairs_allreduce(3), allpairs_allgather(3),  allpairs_reducescatter(3),
                                        alltoall_direct(3),    alltoall_twostep(2, 2), alltonext(2, 2),
                                        alltonext(3, 1),       chain_broadcast(3, 1),  chain_reduce(4, 2)};
  const std::vector<Algorithm> seeds_big = {ring_allreduce(67), hm_allreduce(5, 14), chain_reduce(66, 7),
                                            allpairs_allreduce(65)};
  int agreed_ok = 0, agreed_bad = 0;
  for (int iter = 0; iter < iters; ++iter) {
    Algorithm a;
    if (iter % 1000 == 0) {
      // Now and then more than 64 ranks, so that bitsets span several words.
      a = seeds_big[(iter / 1000) % seeds_big.size()];
      for (int m = (iter / 1000) % 3; m > 0; --m) mutate(a, rng);
    } else if (iter % 3 == 2) {
      a = random_algorithm(rng);
    } else {
      a = seeds[iter % seeds.size()];
      for (int m = iter % 4; m > 0; --m) mutate(a, rng);
    }
    VerifyResult r = verify(a);  // must not throw
    bool want = reference_ok(a);
    ASSERT_EQ(r.ok, want) << "iteration " << iter << " (" << a.name << "): verifier says "
                          << (r.ok ? "ok" : r.errors[0]);
    ASSERT_EQ(r.ok, r.error_count == 0);
    (want ? agreed_ok : agreed_bad)++;
  }
  // Both outcomes are exercised.
  EXPECT_GT(agreed_ok, iters / 6);
  EXPECT_GT(agreed_bad, iters / 6);
}

TEST(VerifyRandom, ExtremeValuesAreErrorsNotCrashes) {
  Algorithm a = test::ring_allgather(4);
  for (auto edit : std::vector<std::function<void(Transfer&)>>{
           [](Transfer& t) { t.src_index = INT32_MAX - 1; },
           [](Transfer& t) { t.count = INT32_MAX; },
           [](Transfer& t) { t.dst_index = INT32_MIN; },
           [](Transfer& t) { t.step = INT32_MAX; },
           [](Transfer& t) { t.src_rank = INT32_MIN; },
           [](Transfer& t) { t.src_buffer = Buffer::Scratch; },
       }) {
    Algorithm b = a;
    edit(b.transfers[0]);
    VerifyResult r = verify(b);
    EXPECT_FALSE(r.ok);
  }
  Algorithm huge = a;
  huge.ranks = INT32_MAX;
  huge.output_chunks = INT32_MAX;
  huge.collective = Collective::Custom;
  huge.in_place = false;
  VerifyResult r = verify(huge);
  ASSERT_FALSE(r.ok);
  EXPECT_NE(r.errors[0].find("too large to verify"), std::string::npos) << r.errors[0];
}

}  // namespace
}  // namespace weft
