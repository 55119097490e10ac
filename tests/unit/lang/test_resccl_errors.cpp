// ResCCLang: every error path. Each message is checked for file:line:column, its
// sentence, the echoed source line and the caret under the column.
#include <gtest/gtest.h>

#include "resccl_test_util.hpp"

namespace weft {
namespace {

using test::expect_error_at;
using test::parse_error;

constexpr const char* kHead = "ResCCLAlgo(nRanks=4, OpType=\"Allreduce\"):\n";

struct ErrorCase {
  const char* name;
  std::string text;
  int line;
  int column;
  const char* sentence;
  ParamMap overrides = {};
};

/// A body under the standard header; line 2 is the body's first line.
std::string body(const std::string& b) { return kHead + b; }

void check(const ErrorCase& c, const resccl::Limits& limits = {}) {
  SCOPED_TRACE(c.name);
  std::string message = parse_error(c.text, c.overrides, limits);
  expect_error_at(c.text, message, c.line, c.column, c.sentence);
}

TEST(ResCCLErrors, Lexer) {
  const ErrorCase cases[] = {
      {"tab in indentation", body("\tx = 1\n"), 2, 1, "a tab is not allowed in indentation"},
      {"tab after spaces", body("  \tx = 1\n"), 2, 3, "a tab is not allowed in indentation"},
      {"tab inside a line", body("    x =\t1\n"), 2, 8, "a tab is not allowed here"},
      {"dedent to no level", body("    for i in range(2):\n        x = 1\n      y = 2\n"), 4, 7,
       "indented by 6 spaces, which matches no enclosing block (4 spaces)"},
      {"letters in a number", body("    x = 12ab\n"), 2, 9, "invalid number '12a'"},
      {"number too large", body("    x = 99999999999999999999\n"), 2, 9, "does not fit in 64 bits"},
      {"unclosed string", "ResCCLAlgo(nRanks=4, OpType=\"Allreduce):\n    x = 1\n", 1, 29,
       "this string is not closed on its line"},
      {"unexpected character", body("    x = 1 @ 2\n"), 2, 11, "unexpected character '@'"},
      {"control byte", body("    x = 1\x01\n"), 2, 10, "unexpected character '\\x01'"},
      {"unmatched close", body("    x = 1)\n"), 2, 10, "this ')' closes no '('"},
      {"never closed", body("    transfer(0, 1, 0, 0, recv\n    x = 1\n"), 2, 13, "this '(' is never closed"},
  };
  for (const auto& c : cases) check(c);
}

TEST(ResCCLErrors, NestingLimits) {
  // Blocks deeper than 100 levels.
  std::string deep = kHead;
  for (int d = 0; d < 101; ++d) deep += std::string(d + 1, ' ') + "for i" + std::to_string(d) + " in range(1):\n";
  deep += std::string(102, ' ') + "x = 1\n";
  check({"deep blocks", deep, 102, 102, "blocks nest more than 100 levels deep"});
  // 101 levels of blocks are fine: 100 loops plus the header's block.
  std::string ok = kHead;
  for (int d = 0; d < 99; ++d) ok += std::string(d + 1, ' ') + "for i" + std::to_string(d) + " in range(1):\n";
  ok += std::string(100, ' ') + "transfer(0, 1, 0, 0, recv)\n";
  EXPECT_EQ(test::parse(ok).transfers.size(), 1u);
  // Parentheses.
  std::string parens = body("    x = " + std::string(1001, '(') + "1" + std::string(1001, ')') + "\n");
  check({"deep parentheses", parens, 2, 1009, "parentheses nest more than 1000 deep"});
  std::string nested = body("    x = " + std::string(300, '(') + "1" + std::string(300, ')') + "\n");
  check({"deep expression", nested, 2, 209, "this expression nests more than 200 levels deep"});
  std::string minus = body("    x = " + std::string(300, '-') + "y\n");
  check({"deep unary minus", minus, 2, 208, "nests more than 200 levels deep"});
  std::string chain = "    x = 1";
  for (int k = 0; k < 1000; ++k) chain += "+1";
  check({"long chain", body(chain + "\n"), 2, 10 + 2 * 999, "this expression is too large (more than 1000"});
}

TEST(ResCCLErrors, Header) {
  const ErrorCase cases[] = {
      {"empty file", "", 1, 1, "expected the header ResCCLAlgo("},
      {"only comments", "# nothing\n\n", 3, 1, "expected the header ResCCLAlgo("},
      {"indented header", "  ResCCLAlgo(nRanks=4, OpType=\"Allreduce\"):\n    x = 1\n", 1, 3,
       "must not be indented"},
      {"wrong function name", "def MyAlgo(nRanks=4):\n    x = 1\n", 1, 5, "expected the header ResCCLAlgo("},
      {"no parenthesis", "ResCCLAlgo:\n    x = 1\n", 1, 11, "expected '(' after ResCCLAlgo"},
      {"parameter twice", "ResCCLAlgo(nRanks=4, nRanks=8, OpType=\"Allreduce\"):\n    x = 1\n", 1, 22,
       "parameter nRanks is given twice (first on line 1)"},
      {"no equals", "ResCCLAlgo(nRanks 4):\n    x = 1\n", 1, 19, "expected '=' after the parameter name nRanks"},
      {"bad value", "ResCCLAlgo(nRanks=x):\n    x = 1\n", 1, 19,
       "the value of nRanks uses 'x', which is not a parameter of this header"},
      {"string where integer", "ResCCLAlgo(nRanks=\"4\", OpType=\"Allreduce\"):\n    x = 1\n", 1, 12,
       "nRanks must be an integer, not a string"},
      {"user string", "ResCCLAlgo(nRanks=4, Foo=\"a\", OpType=\"Allreduce\"):\n    x = 1\n", 1, 22,
       "Foo must be an integer, not a string"},
      {"integer where string", "ResCCLAlgo(nRanks=4, OpType=3):\n    x = 1\n", 1, 22, "OpType must be a string"},
      {"missing comma", "ResCCLAlgo(nRanks=4 OpType=\"Allreduce\"):\n    x = 1\n", 1, 21,
       "expected ',' or ')' in the header"},
      {"missing colon", "ResCCLAlgo(nRanks=4, OpType=\"Allreduce\")\n    x = 1\n", 1, 41,
       "expected ':' after the header"},
      {"no body", "ResCCLAlgo(nRanks=4, OpType=\"Allreduce\"):\n", 2, 1, "expected an indented block after ':'"},
      {"body not indented", "ResCCLAlgo(nRanks=4, OpType=\"Allreduce\"):\nx = 1\n", 2, 1,
       "expected an indented block after ':', found 'x'"},
      {"statement after body", body("    x = 1\ny = 2\n"), 3, 1, "comes after the algorithm's body"},
      {"missing nRanks", "ResCCLAlgo(OpType=\"Allreduce\"):\n    x = 1\n", 1, 1, "the header must set nRanks"},
      {"missing OpType", "ResCCLAlgo(nRanks=4):\n    x = 1\n", 1, 1, "the header must set OpType"},
      {"unknown OpType", "ResCCLAlgo(nRanks=4, OpType=\"Gather\"):\n    x = 1\n", 1, 22,
       "OpType \"Gather\" is not a collective"},
      {"zero ranks", "ResCCLAlgo(nRanks=0, OpType=\"Allreduce\"):\n    x = 1\n", 1, 12,
       "nRanks is 0, but must be at least 1"},
      {"negative ranks", "ResCCLAlgo(nRanks=-2, OpType=\"Allreduce\"):\n    x = 1\n", 1, 12,
       "nRanks is -2, but must be at least 1"},
      {"huge ranks", "ResCCLAlgo(nRanks=4294967296, OpType=\"Allreduce\"):\n    x = 1\n", 1, 12,
       "must be at least 1 and fit in 32 bits"},
      {"zero channels", "ResCCLAlgo(nRanks=4, nChannels=0, OpType=\"Allreduce\"):\n    x = 1\n", 1, 22,
       "nChannels is 0"},
      {"zero warps", "ResCCLAlgo(nRanks=4, nWarps=0, OpType=\"Allreduce\"):\n    x = 1\n", 1, 22, "nWarps is 0"},
      {"zero GPUs per node", "ResCCLAlgo(nRanks=4, GPUPerNode=0, OpType=\"Allreduce\"):\n    x = 1\n", 1, 22,
       "GPUPerNode is 0"},
      {"negative NICs", "ResCCLAlgo(nRanks=4, NICPerNode=-1, OpType=\"Allreduce\"):\n    x = 1\n", 1, 22,
       "NICPerNode is -1"},
      {"zero chunks", "ResCCLAlgo(nRanks=4, nChunks=0, OpType=\"Allreduce\"):\n    x = 1\n", 1, 22, "nChunks is 0"},
      {"negative scratch", "ResCCLAlgo(nRanks=4, nScratch=-1, OpType=\"Allreduce\"):\n    x = 1\n", 1, 22,
       "nScratch is -1"},
      {"root out of range", "ResCCLAlgo(nRanks=4, Root=4, OpType=\"Broadcast\"):\n    x = 1\n", 1, 22,
       "Root is 4, but must be in [0, 3]"},
      {"in place not 0 or 1", "ResCCLAlgo(nRanks=4, InPlace=2, OpType=\"Allreduce\"):\n    x = 1\n", 1, 22,
       "InPlace is 2, but must be in [0, 1]"},
      {"chunks not a multiple", "ResCCLAlgo(nRanks=4, nChunks=6, OpType=\"Allgather\"):\n    x = 1\n", 1, 22,
       "nChunks (6) must be a multiple of nRanks (4) for AllGather"},
      {"chunks default not a multiple", "ResCCLAlgo(nRanks=4, OpType=\"Reducescatter\"):\n    x = 1\n", 1, 1,
       "nChunks (6) must be a multiple of nRanks (4) for ReduceScatter, whose ranks each own nChunks/nRanks chunks (set by --param)", {{"nChunks", "6"}}},
      {"bad protocol", "ResCCLAlgo(nRanks=4, Protocol=\"LL64\", OpType=\"Allreduce\"):\n    x = 1\n", 1, 22,
       "Protocol \"LL64\" is not one of Simple, LL or LL128"},
  };
  for (const auto& c : cases) check(c);
}

TEST(ResCCLErrors, Overrides) {
  const std::string text = "ResCCLAlgo(nRanks=4, OpType=\"Allreduce\", Hops=1):\n    x = Hops\n";
  const ErrorCase cases[] = {
      {"unknown name", text, 1, 1, "--param sets 'Hopz', which is not a parameter of this header (it declares nRanks, "
                                   "OpType, Hops)",
       {{"Hopz", "3"}}},
      {"not an integer", text, 1, 1, "--param nRanks='abc' is not an integer", {{"nRanks", "abc"}}},
      {"empty", text, 1, 1, "--param Hops='' is not an integer", {{"Hops", ""}}},
      {"too long", text, 1, 1, "is not an integer (at most 18 digits)", {{"Hops", "1234567890123456789"}}},
      {"out of range", text, 1, 1, "nRanks is 0, but must be at least 1 and fit in 32 bits (set by --param)",
       {{"nRanks", "0"}}},
      {"bad OpType", text, 1, 1, "OpType \"Foo\" is not a collective", {{"OpType", "Foo"}}},
  };
  for (const auto& c : cases) check(c);
}

TEST(ResCCLErrors, Statements) {
  const ErrorCase cases[] = {
      {"for after colon", body("    for i in range(2): for j in range(2):\n        x = 1\n"), 2, 24,
       "a for loop cannot follow ':' on the same line"},
      {"name alone", body("    x\n"), 2, 6, "expected '=' or '(' after 'x', found the end of the line"},
      {"over-indented", body("    x = 1\n        y = 2\n"), 3, 9,
       "this line is indented more than the block it belongs to"},
      {"not a statement", body("    3 = x\n"), 2, 5, "expected a statement"},
      {"two statements on a line", body("    x = 1 y = 2\n"), 2, 11,
       "expected the end of the statement, found 'y'"},
      {"assign string parameter", body("    OpType = 3\n"), 2, 5,
       "OpType is a string header parameter and cannot be assigned"},
      {"loop over parameter", body("    for nRanks in range(2):\n        x = 1\n"), 2, 9,
       "the loop variable nRanks is a header parameter"},
      {"loop over user parameter", "ResCCLAlgo(nRanks=4, OpType=\"Allreduce\", K=2):\n    for K in range(2):\n"
                                   "        x = 1\n",
       2, 9, "the loop variable K is a header parameter"},
      {"no loop variable", body("    for 3 in range(2):\n        x = 1\n"), 2, 9, "expected a loop variable after 'for'"},
      {"no in", body("    for i range(2):\n        x = 1\n"), 2, 11, "expected 'in' after the loop variable"},
      {"no range", body("    for i in rnge(2):\n        x = 1\n"), 2, 14, "expected range(...) after 'in', found 'rnge'"},
      {"range without parenthesis", body("    for i in range 2:\n        x = 1\n"), 2, 20, "expected '(' after range"},
      {"range of nothing", body("    for i in range():\n        x = 1\n"), 2, 19, "range takes 1 to 3 arguments"},
      {"range of four", body("    for i in range(1, 2, 3, 4):\n        x = 1\n"), 2, 29,
       "range takes 1 to 3 arguments (start, stop, step), not 4"},
      {"range keyword", body("    for i in range(stop=2):\n        x = 1\n"), 2, 20, "keyword arguments are not accepted"},
      {"no colon after range", body("    for i in range(2)\n        x = 1\n"), 2, 22, "expected ':' after range(...)"},
      {"range outside for", body("    range(3)\n"), 2, 5, "range(...) may only follow 'for ... in'"},
      {"unknown function", body("    send(0, 1, 0, 0)\n"), 2, 5, "unknown function 'send'"},
      {"expect arity", "ResCCLAlgo(nRanks=4, OpType=\"Custom\"):\n    expect(0, 1, 2)\n", 2, 5,
       "expect takes 4 arguments (dstRank, dstChunk, srcRank, srcChunk), not 3"},
      {"expect keyword", "ResCCLAlgo(nRanks=4, OpType=\"Custom\"):\n    expect(0, 1, 2, x=3)\n", 2, 21,
       "keyword arguments are not accepted here"},
      {"expect outside Custom", body("    expect(0, 1, 2, 3)\n"), 2, 5,
       "expect(...) states the postcondition of a Custom collective, but this algorithm's OpType is AllReduce"},
  };
  for (const auto& c : cases) check(c);
}

TEST(ResCCLErrors, Transfer) {
  const ErrorCase cases[] = {
      {"too few", body("    transfer(0, 1, 0, recv)\n"), 2, 5,
       "transfer takes 5 arguments (src, dst, step, chunk, recv|rrc), not 4"},
      {"too many", body("    transfer(0, 1, 0, 0, 0, recv)\n"), 2, 5, "transfer takes 5 arguments"},
      {"none", body("    transfer()\n"), 2, 5, "not 0"},
      {"comm type too early", body("    transfer(0, 1, rrc, 0, 0)\n"), 2, 20,
       "argument 3 of transfer is the step, an integer expression"},
      {"expression as comm type", body("    transfer(0, 1, 0, 0, 1 + 1)\n"), 2, 26,
       "the fifth argument of transfer is the communication type"},
      {"unknown comm type", body("    transfer(0, 1, 0, 0, send)\n"), 2, 26,
       "unknown communication type 'send'; expected recv (copy) or rrc (reduce)"},
      {"unknown quoted comm type", body("    transfer(0, 1, 0, 0, \"copy\")\n"), 2, 26,
       "unknown communication type 'copy'"},
      {"positional after keyword", body("    transfer(0, 1, 0, 0, recv, count=2, 3)\n"), 2, 41,
       "a positional argument cannot follow a keyword argument"},
      {"unknown keyword", body("    transfer(0, 1, 0, 0, recv, size=2)\n"), 2, 32,
       "unknown keyword argument 'size' of transfer; expected dstChunk, count, srcBuf or dstBuf"},
      {"keyword twice", body("    transfer(0, 1, 0, 0, recv, count=2, count=3)\n"), 2, 41,
       "keyword argument count is given twice"},
      {"bad buffer", body("    transfer(0, 1, 0, 0, recv, srcBuf=temp)\n"), 2, 39,
       "srcBuf must be data, input, output or scratch, not 'temp'"},
      {"number as buffer", body("    transfer(0, 1, 0, 0, recv, dstBuf=3)\n"), 2, 39,
       "dstBuf must be data, input, output or scratch, not 3"},
      {"missing close", body("    transfer(0, 1, 0, 0, recv x)\n"), 2, 31, "expected ',' or ')' in transfer(...)"},
      {"out of place data", "ResCCLAlgo(nRanks=2, OpType=\"Alltoall\", InPlace=0):\n"
                            "    transfer(0, 1, 0, 0, recv, srcBuf=input)\n",
       2, 5, "this algorithm is out of place (InPlace=0), so the data buffer does not exist: give dstBuf="},
  };
  for (const auto& c : cases) check(c);
}

TEST(ResCCLErrors, Expressions) {
  const ErrorCase cases[] = {
      {"missing operand", body("    x = 1 +\n"), 2, 12, "expected an expression (a number, a name, '-' or '('), found "
                                                       "the end of the line"},
      {"unary plus", body("    x = +1\n"), 2, 9, "expected an expression"},
      {"missing paren", body("    x = (1 + 2\n    y = 1\n"), 2, 9, "this '(' is never closed"},
      {"comparison", body("    x = 1 == 2\n"), 2, 11, "expected the end of the statement, found '='"},
      {"string parameter", body("    x = OpType + 1\n"), 2, 9,
       "OpType is a string header parameter; expressions compute with integers only"},
      {"string literal", body("    x = \"a\"\n"), 2, 9, "expected an expression (a number, a name, '-' or '('), found "
                                                       "the string \"a\""},
      {"keyword in expression", body("    x = for\n"), 2, 9, "expected an expression"},
  };
  for (const auto& c : cases) check(c);
}

TEST(ResCCLErrors, Evaluation) {
  const ErrorCase cases[] = {
      {"undefined", body("    x = y + 1\n"), 2, 9, "variable y is used before it is assigned"},
      {"used before assignment", body("    x = y\n    y = 1\n"), 2, 9, "variable y is used before it is assigned"},
      {"loop variable of an empty loop", body("    for i in range(0):\n        x = 1\n    y = i\n"), 4, 9,
       "variable i is used before it is assigned"},
      {"division by zero", body("    z = 0\n    x = 4 / z\n"), 3, 11, "division by zero (4 / 0)"},
      {"modulo by zero", body("    x = 4 % (2 - 2)\n"), 2, 11, "modulo by zero (4 % 0)"},
      {"add overflow", body("    x = 9223372036854775807 + 1\n"), 2, 29, "9223372036854775807 + 1 overflows 64 bits"},
      {"sub overflow", body("    x = -9223372036854775807 - 2\n"), 2, 30, "overflows 64 bits"},
      {"mul overflow", body("    x = 4294967296 * 4294967296\n"), 2, 20, "4294967296 * 4294967296 overflows 64 bits"},
      {"div overflow", body("    m = -9223372036854775807 - 1\n    x = m / -1\n"), 3, 11,
       "-9223372036854775808 / -1 overflows 64 bits"},
      {"negation overflow", body("    m = -9223372036854775807 - 1\n    x = -m\n"), 3, 9,
       "negating -9223372036854775808 overflows 64 bits"},
      {"range step zero", body("    for i in range(0, 4, 2 - 2):\n        x = 1\n"), 2, 28,
       "range's step is 0, which would never reach the stop"},
      {"rank beyond 32 bits", body("    transfer(4294967296, 1, 0, 0, recv)\n"), 2, 14,
       "the source rank is 4294967296, which does not fit in 32 bits"},
      {"dst beyond 32 bits", body("    transfer(0, -2147483649, 0, 0, recv)\n"), 2, 17,
       "the destination rank is -2147483649"},
      {"step beyond 32 bits", body("    transfer(0, 1, 2147483648, 0, recv)\n"), 2, 20, "the step is 2147483648"},
      {"chunk beyond 32 bits", body("    transfer(0, 1, 0, 2147483647 + 1, recv)\n"), 2, 34, "the chunk is 2147483648"},
      {"count beyond 32 bits", body("    transfer(0, 1, 0, 0, recv, count=2147483648)\n"), 2, 38, "the count is"},
      {"dstChunk beyond 32 bits", body("    transfer(0, 1, 0, 0, recv, dstChunk=2147483648)\n"), 2, 41,
       "the destination chunk is"},
      {"expect beyond 32 bits", "ResCCLAlgo(nRanks=4, OpType=\"Custom\"):\n    expect(0, 0, 0, 2147483648)\n", 2, 21,
       "the source chunk is 2147483648"},
      {"changing a parameter", body("    nRanks = 8\n"), 2, 5,
       "this assignment would change header parameter nRanks from 4 to 8"},
      {"changing a default parameter", body("    nChunks = nRanks * 2\n"), 2, 5,
       "would change header parameter nChunks from 4 to 8"},
  };
  for (const auto& c : cases) check(c);
}

TEST(ResCCLErrors, Limits) {
  EXPECT_EQ(resccl::Limits{}.max_statements, 100'000'000u);
  EXPECT_EQ(resccl::Limits{}.max_records, 50'000'000u);
  resccl::Limits small;
  small.max_statements = 1000;
  small.max_records = 10;
  check({"statements", body("    for i in range(1000000000000):\n        x = i\n"), 3, 9,
         "the program executes more than 1000 statements, weft's limit"},
        small);
  check({"nested empty loops", body("    for i in range(1000000000000):\n        for j in range(0):\n"
                                    "            x = 1\n"),
         3, 9, "more than 1000 statements"},
        small);
  check({"transfers", body("    for i in range(100):\n        transfer(0, 1, i, 0, recv)\n"), 3, 9,
         "the program records more than 10 transfers and expects, weft's limit"},
        small);
  check({"expects", "ResCCLAlgo(nRanks=4, OpType=\"Custom\"):\n    for i in range(100):\n        expect(0, 0, 0, i)\n",
         3, 9, "more than 10 transfers and expects"},
        small);
}

TEST(ResCCLErrors, TheFirstErrorIsReported) {
  // The division by zero comes before the loop that exceeds the statement limit, and is
  // the error reported, although the assignment plays no part in any loop's bounds.
  resccl::Limits small;
  small.max_statements = 1000;
  check({"error before a limit", body("    y = 1 / 0\n    for i in range(1000000000000):\n        z = i\n"), 2, 11,
         "division by zero"},
        small);
  check({"transfer error before a limit",
         body("    transfer(0, 1, 0, 2147483648, recv)\n    for i in range(1000000000000):\n        z = i\n"), 2, 23,
         "the chunk is 2147483648"},
        small);
}

TEST(ResCCLErrors, NoPartialResult) {
  // An error after transfers were recorded yields no Algorithm at all: parse_resccl throws.
  std::string text = body("    transfer(0, 1, 0, 0, recv)\n    x = 1 / 0\n");
  EXPECT_THROW(test::parse(text), Error);
}

TEST(ResCCLErrors, EchoedLineMasksNonPrintableBytes) {
  std::string text = body("    x = 1 \x7f 2\n");
  std::string message = parse_error(text);
  expect_error_at(text, message, 2, 11, "unexpected character '\\x7f'");
  EXPECT_EQ(text::split(message, '\n').at(1), "    x = 1 ? 2");
}

}  // namespace
}  // namespace weft
