// The ResCCLang files: the built-ins under algorithms/ (through load_algorithm, at their
// defaults and at every shape the tests cover, compared with the C++ constructions), the
// Figure 16 file, and the broken corpus under tests/data/broken.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include "builders.hpp"
#include "compile/verify.hpp"
#include "lang/load.hpp"
#include "util/error.hpp"
#include "util/text.hpp"

namespace weft {
namespace {

namespace fs = std::filesystem;
using namespace weft::test;

const fs::path kRoot = WEFT_TEST_DATA_DIR;

std::string explain(const VerifyResult& r) {
  std::string s;
  for (const auto& e : r.errors) s += "\n  " + e;
  return s;
}

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

auto key(const Transfer& t) {
  return std::tuple(t.step, t.src_rank, t.dst_rank, static_cast<int>(t.src_buffer), t.src_index,
                    static_cast<int>(t.dst_buffer), t.dst_index, t.count, static_cast<int>(t.op));
}

std::vector<Transfer> sorted(std::vector<Transfer> v) {
  std::sort(v.begin(), v.end(), [](const Transfer& a, const Transfer& b) { return key(a) < key(b); });
  return v;
}

/// slot -> sorted contributions, merging expectations on one slot.
std::map<std::tuple<int, int, int>, std::vector<std::pair<int32_t, int32_t>>> postcondition(const Algorithm& a) {
  std::map<std::tuple<int, int, int>, std::vector<std::pair<int32_t, int32_t>>> m;
  for (const Expectation& e : a.custom_postcondition) {
    auto& v = m[{e.slot.rank, static_cast<int>(e.slot.buffer), e.slot.index}];
    v.insert(v.end(), e.contributions.begin(), e.contributions.end());
    std::sort(v.begin(), v.end());
  }
  return m;
}

/// Loads built-in `name` with `params`, checks it verifies and equals `expected` (the C++
/// construction) in shape, transfers and postcondition.
void check_builtin(const std::string& name, const ParamMap& params, const Algorithm& expected) {
  std::string where = name;
  for (auto& [k, v] : params) where += " " + k + "=" + v;
  SCOPED_TRACE(where);
  Algorithm a;
  try {
    a = load_algorithm(name, params);
  } catch (const Error& e) {
    FAIL() << e.what();
  }
  VerifyResult r = verify(a);
  EXPECT_TRUE(r.ok) << explain(r);
  EXPECT_EQ(a.name, name);
  EXPECT_EQ(a.collective, expected.collective);
  EXPECT_EQ(a.ranks, expected.ranks);
  EXPECT_EQ(a.input_chunks, expected.input_chunks);
  EXPECT_EQ(a.output_chunks, expected.output_chunks);
  EXPECT_EQ(a.scratch_chunks, expected.scratch_chunks);
  EXPECT_EQ(a.in_place, expected.in_place);
  EXPECT_EQ(a.root, expected.root);
  EXPECT_EQ(a.transfer_locations.size(), a.transfers.size());
  EXPECT_TRUE(sorted(a.transfers) == sorted(expected.transfers))
      << "the file's transfers differ from the C++ construction";
  EXPECT_EQ(postcondition(a), postcondition(expected));
}

ParamMap p(std::initializer_list<std::pair<const std::string, int>> kv) {
  ParamMap m;
  for (auto& [k, v] : kv) m[k] = std::to_string(v);
  return m;
}

TEST(VerifyFiles, EveryBuiltinVerifiesAtItsDefaults) {
  std::vector<std::string> names = builtin_algorithm_names();
  EXPECT_EQ(names, (std::vector<std::string>{"allpairs_allgather", "allpairs_allreduce", "allpairs_broadcast",
                                             "allpairs_reduce", "allpairs_reducescatter", "alltoall_direct",
                                             "alltoall_twostep", "alltonext", "chain_broadcast", "chain_reduce",
                                             "direct_broadcast", "direct_reduce", "hm_allgather", "hm_allreduce",
                                             "peerwise_allgather", "peerwise_alltoall", "pipe_broadcast", "pipe_reduce",
                                             "ring_allgather", "ring_allreduce", "ring_reducescatter", "scatter_broadcast",
                                             "scatter_reduce", "twoshot_allreduce", "twoshot_reducescatter"}));
  for (const std::string& n : names) {
    Algorithm a = load_algorithm(n);
    VerifyResult r = verify(a);
    EXPECT_TRUE(r.ok) << n << explain(r);
    EXPECT_EQ(a.ranks, 8) << n;  // a sensible default size
  }
}

TEST(VerifyFiles, FlatBuiltinsMatchAndVerifyAtEveryRankCount) {
  for (int R : {1, 2, 4, 8, 16, 32}) {
    check_builtin("ring_allgather", p({{"nRanks", R}}), ring_allgather(R));
    check_builtin("ring_reducescatter", p({{"nRanks", R}}), ring_reducescatter(R));
    check_builtin("ring_allreduce", p({{"nRanks", R}}), ring_allreduce(R));
    check_builtin("allpairs_allgather", p({{"nRanks", R}}), allpairs_allgather(R));
    check_builtin("allpairs_allreduce", p({{"nRanks", R}}), allpairs_allreduce(R));
    check_builtin("allpairs_reducescatter", p({{"nRanks", R}}), allpairs_reducescatter(R));
    check_builtin("alltoall_direct", p({{"nRanks", R}}), alltoall_direct(R));
    for (int root : {0, R / 2, R - 1}) {
      check_builtin("chain_broadcast", p({{"nRanks", R}, {"Root", root}}), chain_broadcast(R, root));
      check_builtin("chain_reduce", p({{"nRanks", R}, {"Root", root}}), chain_reduce(R, root));
    }
  }
}

TEST(VerifyFiles, RuntimeDefaultsVerifyAtEveryRankCountAndRoot) {
  // The one-chunk algorithms of the runtime's default table (docs/algorithms.md).
  for (int R : {1, 2, 3, 5, 8, 16}) {
    for (const char* n : {"peerwise_allgather", "peerwise_alltoall"}) {
      VerifyResult r = verify(load_algorithm(n, p({{"nRanks", R}})));
      EXPECT_TRUE(r.ok) << n << " R=" << R << explain(r);
    }
    for (int root = 0; root < R; ++root)
      for (const char* n : {"allpairs_broadcast", "allpairs_reduce", "pipe_broadcast", "pipe_reduce"}) {
        Algorithm a = load_algorithm(n, p({{"nRanks", R}, {"Root", root}}));
        EXPECT_EQ(a.input_chunks, 1) << n;
        VerifyResult r = verify(a);
        EXPECT_TRUE(r.ok) << n << " R=" << R << " root " << root << explain(r);
      }
  }
}

TEST(VerifyFiles, MidSizeBuiltinsVerifyFrom2To16RanksAtEveryRoot) {
  // The direct algorithms for mid sizes (docs/algorithms.md, "Direct algorithms for mid
  // sizes"): shape, transfers and steps as the table there says, verified at every rank count
  // from 2 to 16 and every root (rooted ones); the scatter forms need 2 ranks or more.
  struct Expect {
    const char* name;
    Collective c;
    bool rooted;
    int min_ranks;
  };
  const Expect all[] = {{"twoshot_allreduce", Collective::AllReduce, false, 1},
                        {"twoshot_reducescatter", Collective::ReduceScatter, false, 1},
                        {"direct_broadcast", Collective::Broadcast, true, 1},
                        {"direct_reduce", Collective::Reduce, true, 1},
                        {"scatter_broadcast", Collective::Broadcast, true, 2},
                        {"scatter_reduce", Collective::Reduce, true, 2}};
  int verified = 0;
  for (const Expect& e : all)
    for (int R = e.min_ranks; R <= 16; ++R)
      for (int root = 0; root < (e.rooted ? R : 1); ++root) {
        SCOPED_TRACE(std::string(e.name) + " R=" + std::to_string(R) + " root " + std::to_string(root));
        ParamMap params = p({{"nRanks", R}});
        if (e.rooted) params["Root"] = std::to_string(root);
        Algorithm a = load_algorithm(e.name, params);
        VerifyResult r = verify(a);
        EXPECT_TRUE(r.ok) << explain(r);
        EXPECT_EQ(a.collective, e.c);
        EXPECT_EQ(a.root, root);
        const std::string n = e.name;
        size_t transfers = 0;
        int steps = 0, chunks = R, scratch = 0;
        if (n == "twoshot_allreduce") transfers = 2 * R * (R - 1), steps = R > 1 ? R : 0;
        if (n == "twoshot_reducescatter") transfers = R * (R - 1), steps = R - 1;
        if (n == "direct_broadcast") transfers = R - 1, steps = R > 1 ? 1 : 0, chunks = 1;
        if (n == "direct_reduce") transfers = 2 * (R - 1), steps = R > 1 ? R : 0, chunks = 1, scratch = R;
        if (n == "scatter_broadcast") transfers = (R - 1) * (R - 1), steps = R > 2 ? 2 : 1, chunks = R - 1;
        if (n == "scatter_reduce") transfers = R * (R - 1), steps = R, chunks = R - 1;
        EXPECT_EQ(a.transfers.size(), transfers);
        EXPECT_EQ(a.num_steps(), steps);
        EXPECT_EQ(a.input_chunks, e.c == Collective::ReduceScatter ? R : chunks);
        EXPECT_EQ(a.scratch_chunks, scratch);
        // Every transfer between two ranks crosses one link once: the direct forms have no relays
        // but the scatter forms' owners, and the ones of rank to itself are direct_reduce's sums.
        for (const Transfer& t : a.transfers)
          if (t.src_rank == t.dst_rank) EXPECT_EQ(n, "direct_reduce");
        ++verified;
      }
  EXPECT_EQ(verified, 2 * 16 + 2 * 136 + 2 * 135);
}

TEST(VerifyFiles, HierarchicalBuiltinsMatchAndVerifyAtEveryShape) {
  const std::pair<int, int> shapes[] = {{1, 1}, {1, 2}, {1, 8}, {2, 1}, {2, 2}, {2, 4}, {2, 8},
                                        {4, 1}, {4, 2}, {4, 4}, {4, 8}, {8, 2}, {8, 4}, {16, 2}};
  for (auto [N, G] : shapes) {
    int R = N * G;
    check_builtin("hm_allgather", p({{"nRanks", R}, {"GPUPerNode", G}}), hm_allgather(N, G));
    check_builtin("hm_allreduce", p({{"nRanks", R}, {"GPUPerNode", G}}), hm_allreduce(N, G));
    check_builtin("alltoall_twostep", p({{"nRanks", R}, {"GPUPerNode", G}}), alltoall_twostep(N, G));
    check_builtin("alltonext", p({{"nRanks", R}, {"GPUPerNode", G}}), alltonext(N, G));
  }
}

TEST(VerifyFiles, EveryBuiltinVerifiesWithOnlyItsShapeOverridden) {
  // Scratch and chunk counts follow from nRanks and GPUPerNode in the headers, so the shape
  // is all a user gives. A built-in added later is covered here too: the hierarchical ones
  // are those whose header writes GPUPerNode.
  for (const std::string& name : builtin_algorithm_names()) {
    std::string text = read(kRoot / "algorithms" / (name + ".rccl"));
    bool hierarchical = text.find("GPUPerNode=") != std::string::npos;
    for (int R : {2, 4, 8, 16, 32}) {
      std::vector<ParamMap> shapes;
      if (!hierarchical) shapes.push_back(p({{"nRanks", R}}));
      for (int G : {1, 2, 4, 8})
        if (hierarchical && G <= R) shapes.push_back(p({{"nRanks", R}, {"GPUPerNode", G}}));
      for (const ParamMap& shape : shapes) {
        std::string where = name;
        for (auto& [k, v] : shape) where += " " + k + "=" + v;
        SCOPED_TRACE(where);
        Algorithm a;
        try {
          a = load_algorithm(name, shape);
        } catch (const Error& e) {
          ADD_FAILURE() << e.what();
          continue;
        }
        EXPECT_EQ(a.ranks, R);
        VerifyResult r = verify(a);
        EXPECT_TRUE(r.ok) << explain(r);
      }
    }
  }
}

TEST(VerifyFiles, AShapeThatDoesNotDivideIsAHeaderError) {
  // nNodes = nRanks / GPUPerNode in the header: 12 ranks on nodes of 8 are refused at load,
  // at the header's division, with the values that came from --param.
  for (const char* name : {"hm_allgather", "hm_allreduce", "alltoall_twostep", "alltonext"}) {
    SCOPED_TRACE(name);
    try {
      load_algorithm(name, p({{"nRanks", 12}, {"GPUPerNode", 8}}));
      ADD_FAILURE() << "loading succeeded";
    } catch (const Error& e) {
      std::string m = e.what();
      EXPECT_EQ(e.code(), ErrorCode::Parse);
      EXPECT_NE(m.find(std::string(name) + ".rccl:"), std::string::npos) << m;
      EXPECT_NE(m.find(": in the value of nNodes: 12 / 8 is not an integer; a header value must divide exactly (with "
                       "nRanks=12, GPUPerNode=8 set by --param)\n"),
                std::string::npos)
          << m;
      // The echoed header line, and the caret under its '/'.
      std::vector<std::string> lines = text::split(m, '\n');
      ASSERT_EQ(lines.size(), 3u) << m;
      EXPECT_EQ(lines[2], std::string(lines[1].find("nRanks/GPUPerNode") + 6, ' ') + "^") << m;
    }
  }
}

TEST(VerifyFiles, HierarchicalAllReduceFileAt1024Ranks) {
  Algorithm a = load_algorithm("hm_allreduce", p({{"nRanks", 1024}, {"GPUPerNode", 8}}));
  EXPECT_EQ(a.transfers.size(), size_t(2 * 1024 * 128 * 7 + 2 * 1024 * 127));
  EXPECT_EQ(a.num_steps(), 262);
  VerifyResult r = verify(a);
  EXPECT_TRUE(r.ok) << explain(r);
}

TEST(VerifyFiles, Figure16At32And1024Ranks) {
  fs::path f = kRoot / "tests/data/figure16_hm_allreduce.rccl";
  Algorithm a = load_algorithm(f.string());
  EXPECT_EQ(a.ranks, 32);
  VerifyResult r = verify(a);
  EXPECT_TRUE(r.ok) << explain(r);
  // The same transfers as hm_allreduce, in more steps.
  std::vector<Transfer> mine = hm_allreduce(4, 8).transfers, theirs = a.transfers;
  for (Transfer& t : mine) t.step = 0;
  for (Transfer& t : theirs) t.step = 0;
  EXPECT_TRUE(sorted(mine) == sorted(theirs));

  Algorithm big = load_algorithm(f.string(), p({{"nRanks", 1024}}));
  EXPECT_EQ(big.ranks, 1024);
  EXPECT_EQ(big.transfers.size(), size_t(2 * 1024 * 128 * 7 + 2 * 1024 * 127));
  r = verify(big);
  EXPECT_TRUE(r.ok) << explain(r);
}

TEST(VerifyFiles, CorruptedFigure16FailsWithItsLocation) {
  // Turn the inter-node ReduceScatter's rrc into recv: the partial sums get overwritten.
  fs::path src = kRoot / "tests/data/figure16_hm_allreduce.rccl";
  std::string text = read(src);
  const std::string from = "% nChunks, rrc)";
  size_t first = text.find(from), second = text.find(from, first + 1);
  ASSERT_NE(second, std::string::npos);
  text.replace(second, from.size(), "% nChunks, recv)");
  fs::path bad = fs::temp_directory_path() / "weft_corrupted_figure16.rccl";
  std::ofstream(bad) << text;
  Algorithm a = load_algorithm(bad.string());
  VerifyResult r = verify(a);
  fs::remove(bad);
  ASSERT_FALSE(r.ok);
  // Every wrong slot names the transfer that wrote it last, at its file:line:column.
  EXPECT_EQ(r.errors[0].find("at the end, rank 0's output chunk 0 holds 8 contributions, 8 of the 32 expected"), 0u)
      << r.errors[0];
  EXPECT_NE(r.errors[0].find("(last written at step 31 by transfer 1064 at " + bad.string() + ":40:17)"),
            std::string::npos)
      << r.errors[0];

  // A step renumbered into a race is reported at its file:line:column.
  text = read(src);
  const std::string step = "step = nNodes * (nGpusperNode - 1) + baseStep";
  size_t at = text.find(step);
  ASSERT_NE(at, std::string::npos);
  text.replace(at, step.size(), "step = nNodes * (nGpusperNode - 1)");
  std::ofstream(bad) << text;
  r = verify(load_algorithm(bad.string()));
  fs::remove(bad);
  ASSERT_FALSE(r.ok);
  EXPECT_EQ(r.errors[0].find(bad.string() + ":"), 0u) << r.errors[0];
  EXPECT_NE(r.errors[0].find("(a race)"), std::string::npos) << r.errors[0];
}

TEST(VerifyFiles, BrokenCorpusGivesTheExpectedErrors) {
  fs::path dir = kRoot / "tests/data/broken";
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".rccl") continue;
    ++files;
    SCOPED_TRACE(entry.path().filename().string());
    std::string text = read(entry.path());
    const std::string tag = "# expect-error: ";
    size_t at = text.find(tag);
    ASSERT_NE(at, std::string::npos) << "no '# expect-error:' line";
    std::string want = text.substr(at + tag.size(), text.find('\n', at) - at - tag.size());
    VerifyResult r = verify(load_algorithm(entry.path().string()));
    ASSERT_FALSE(r.ok);
    // Messages name files by the path given; compare with the directory removed.
    std::string got = r.errors[0];
    for (size_t p; (p = got.find(dir.string() + "/")) != std::string::npos;) got.erase(p, dir.string().size() + 1);
    EXPECT_EQ(got, want);
  }
  EXPECT_GE(files, 10);
}

}  // namespace
}  // namespace weft
