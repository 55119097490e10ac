// ResCCLang: header values as integer expressions over the parameters written before them,
// evaluated after --param overrides; and every error they can raise (forward references,
// cycles, names the header lacks, non-integer results, arithmetic faults, derived values
// out of range), each checked for file:line:column, sentence, echoed line and caret.
#include <gtest/gtest.h>

#include "resccl_test_util.hpp"

namespace weft {
namespace {

using test::expect_error_at;
using test::parse;
using test::parse_error;
using test::program;

/// The value of `expr` in a body under `header`, observed as a transfer's chunk.
int32_t body_value(const std::string& header, const std::string& expr, const ParamMap& overrides = {}) {
  Algorithm a = parse(program(header, {"transfer(0, 0, 0, " + expr + ", recv)"}), overrides);
  EXPECT_EQ(a.transfers.size(), 1u);
  return a.transfers.empty() ? INT32_MIN : a.transfers[0].src_index;
}

TEST(ResCCLHeaderExprs, ValuesAreComputedInOrder) {
  Algorithm a = parse(program("nRanks=8, GPUPerNode=2 * 2, nChunks=GPUPerNode*2, nScratch=nRanks, "
                              "OpType=\"Allreduce\"",
                              {"x = 1"}));
  EXPECT_EQ(a.ranks, 8);
  EXPECT_EQ(a.gpus_per_node, 4);
  EXPECT_EQ(a.input_chunks, 8);
  EXPECT_EQ(a.output_chunks, 8);
  EXPECT_EQ(a.scratch_chunks, 8);
  // User parameters too, with every operator, parentheses and unary minus; all visible in the body.
  const std::string h = "nRanks=12, G=4, nNodes=nRanks/G, K=-(nNodes - 5) * 2 % 7 + nRanks % 5, OpType=\"Custom\"";
  EXPECT_EQ(body_value(h, "nNodes"), 3);
  EXPECT_EQ(body_value(h, "K"), 4 % 7 + 2);
  // Python's modulo in the header as in the body: the result takes the divisor's sign.
  EXPECT_EQ(body_value("nRanks=4, M=0 - 7, R=M % 3, OpType=\"Custom\"", "R"), 2);
  // Integer literals still work, negative ones included (as a user parameter's value).
  EXPECT_EQ(body_value("nRanks=4, Off=-3, OpType=\"Custom\"", "Off + 3"), 0);
}

TEST(ResCCLHeaderExprs, OverridesApplyBeforeTheExpressions) {
  const std::string h = "nRanks=8, nScratch=nRanks, GPUPerNode=4, nNodes=nRanks/GPUPerNode, OpType=\"Allreduce\"";
  Algorithm a = parse(program(h, {"x = nNodes"}), {{"nRanks", "16"}});
  EXPECT_EQ(a.ranks, 16);
  EXPECT_EQ(a.scratch_chunks, 16);
  EXPECT_EQ(body_value(h, "nNodes", {{"nRanks", "16"}}), 4);
  EXPECT_EQ(body_value(h, "nNodes", {{"nRanks", "32"}, {"GPUPerNode", "8"}}), 4);
  // Overriding a computed parameter replaces its expression.
  a = parse(program(h, {"x = 1"}), {{"nRanks", "16"}, {"nScratch", "3"}});
  EXPECT_EQ(a.scratch_chunks, 3);
  // A parameter the header computes may be restated in the body, not changed.
  EXPECT_EQ(parse(program(h, {"nScratch = nRanks"}), {{"nRanks", "4"}}).scratch_chunks, 4);
  std::string text = program(h, {"nScratch = 8"});
  expect_error_at(text, parse_error(text, {{"nRanks", "4"}}), 2, 5,
                  "this assignment would change header parameter nScratch from 4 to 8");
}

TEST(ResCCLHeaderExprs, HeaderOverSeveralLines) {
  const std::string text =
      "ResCCLAlgo(nRanks=8,\n"
      "           GPUPerNode=2,\n"
      "           nChunks=nRanks * GPUPerNode,\n"
      "           OpType=\"Allgather\"):\n"
      "    x = 1\n";
  Algorithm a = parse(text);
  EXPECT_EQ(a.output_chunks, 16);
  EXPECT_EQ(a.input_chunks, 2);
}

struct ErrorCase {
  const char* name;
  std::string header;  ///< inside ResCCLAlgo(...), on line 1 (column 12 is its first character)
  int column;
  const char* sentence;
  ParamMap overrides = {};
};

void check(const ErrorCase& c) {
  SCOPED_TRACE(c.name);
  std::string text = program(c.header, {"x = 1"});
  expect_error_at(text, parse_error(text, c.overrides), 1, c.column, c.sentence);
}

TEST(ResCCLHeaderExprs, ReferenceErrors) {
  const ErrorCase cases[] = {
      {"forward reference", "nRanks=4, nChunks=GPUPerNode, GPUPerNode=4, OpType=\"Allreduce\"", 30,
       "the value of nChunks uses GPUPerNode, which is written after it (line 1, column 42); a header value may "
       "use only the parameters written before it"},
      {"itself", "nRanks=4, K=K + 1, OpType=\"Custom\"", 24,
       "the value of K uses K itself, a cycle; a header value may use only the parameters written before it"},
      {"cycle of two", "nRanks=4, A=B, B=A * 2, OpType=\"Custom\"", 24,
       "the value of A uses B, which depends on it in turn, a cycle (A -> B -> A)"},
      {"cycle of three", "nRanks=4, A=1 + C, B=A, C=B, OpType=\"Custom\"", 28,
       "the value of A uses C, which depends on it in turn, a cycle (A -> C -> B -> A)"},
      {"first bad reference in file order", "nRanks=4, A=nRanks + Q + Z, Q=1, OpType=\"Custom\"", 33,
       "the value of A uses Q, which is written after it"},
      {"default not written", "nRanks=4, nChunks=GPUPerNode * 2, OpType=\"Allreduce\"", 30,
       "the value of nChunks uses GPUPerNode, which this header does not write (a default cannot be used here: "
       "write GPUPerNode=... before nChunks)"},
      {"unknown name", "nRanks=4, nChunks=nRank, OpType=\"Allreduce\"", 30,
       "the value of nChunks uses 'nRank', which is not a parameter of this header"},
      {"string parameter", "nRanks=4, AlgoName=\"x\", K=AlgoName, OpType=\"Custom\"", 38,
       "AlgoName is a string header parameter; expressions compute with integers only"},
      {"no value", "nRanks=, OpType=\"Custom\"", 19,
       "expected an integer expression or a string as the value of nRanks, found ','"},
      {"incomplete expression", "nRanks=4 *, OpType=\"Custom\"", 22,
       "expected an expression (a number, a name, '-' or '('), found ','"},
  };
  for (const auto& c : cases) check(c);
}

TEST(ResCCLHeaderExprs, ValueErrors) {
  const ErrorCase cases[] = {
      {"not an integer", "nRanks=8, G=3, nNodes=nRanks / G, OpType=\"Custom\"", 41,
       "in the value of nNodes: 8 / 3 is not an integer; a header value must divide exactly"},
      {"not an integer after --param", "nRanks=8, G=4, nNodes=nRanks / G, OpType=\"Custom\"", 41,
       "in the value of nNodes: 12 / 8 is not an integer; a header value must divide exactly (with nRanks=12, "
       "G=8 set by --param)",
       {{"nRanks", "12"}, {"G", "8"}}},
      {"division by zero", "nRanks=8, Z=0, K=nRanks / Z, OpType=\"Custom\"", 36, "in the value of K: division by zero (8 / 0)"},
      {"modulo by zero", "nRanks=8, Z=0, K=nRanks % Z, OpType=\"Custom\"", 36, "in the value of K: modulo by zero (8 % 0)"},
      {"overflow", "nRanks=8, B=4611686018427387904, K=B * 2, OpType=\"Custom\"", 49,
       "in the value of K: 4611686018427387904 * 2 overflows 64 bits"},
      {"computed value out of range", "nRanks=8, nScratch=nRanks - 9, OpType=\"Allreduce\"", 22,
       "nScratch is -1, but must be at least 0"},
      {"computed value out of range after --param", "nRanks=8, nScratch=nRanks - 9, OpType=\"Allreduce\"", 22,
       "nScratch is -6, but must be at least 0 and fit in 32 bits (computed from nRanks=3, set by --param)",
       {{"nRanks", "3"}}},
      {"computed nChunks not a multiple", "nRanks=4, nChunks=nRanks + 2, OpType=\"Allgather\"", 22,
       "nChunks (6) must be a multiple of nRanks (4) for AllGather"},
  };
  for (const auto& c : cases) check(c);
}

TEST(ResCCLHeaderExprs, AnOverriddenCountOutOfRangeIsReportedBeforeItIsUsed) {
  // GPUPerNode=0 is reported as such, not as the division by zero it would cause.
  const std::string text = program("nRanks=8, GPUPerNode=4, nNodes=nRanks/GPUPerNode, OpType=\"Allreduce\"", {"x = 1"});
  expect_error_at(text, parse_error(text, {{"GPUPerNode", "0"}}), 1, 1,
                  "GPUPerNode is 0, but must be at least 1 and fit in 32 bits (set by --param)");
}

}  // namespace
}  // namespace weft
