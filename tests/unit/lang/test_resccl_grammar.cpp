// ResCCLang: every grammar rule of paper 001 Figure 14 and weft's extensions, on success.
#include <gtest/gtest.h>

#include "resccl_test_util.hpp"

namespace weft {
namespace {

using test::lines;
using test::parse;
using test::program;

/// The value of `expr` in a body whose header is `header`, observed as a transfer's chunk.
int32_t value_of(const std::string& expr, const std::string& header = "nRanks=4, OpType=\"Allreduce\"",
                 std::initializer_list<std::string> before = {}) {
  std::string text = "ResCCLAlgo(" + header + "):\n";
  for (const auto& l : before) text += "    " + l + "\n";
  text += "    transfer(0, 1, 0, " + expr + ", recv)\n";
  Algorithm a = parse(text);
  EXPECT_EQ(a.transfers.size(), 1u);
  return a.transfers.empty() ? INT32_MIN : a.transfers[0].src_index;
}

TEST(ResCCLHeader, BothSpellings) {
  Algorithm a = parse("def ResCCLAlgo(nRanks=2, OpType=\"Allgather\"):\n    transfer(0, 1, 0, 0, recv)\n");
  Algorithm b = parse("ResCCLAlgo(nRanks=2, OpType=\"Allgather\"):\n    transfer(0, 1, 0, 0, recv)\n");
  EXPECT_EQ(a.ranks, 2);
  EXPECT_EQ(a.collective, Collective::AllGather);
  EXPECT_EQ(a.transfers, b.transfers);
  EXPECT_EQ(a.name, b.name);
}

TEST(ResCCLHeader, EveryParameter) {
  Algorithm a = parse(program(
      "nRanks=16, nChannels=4, nWarps=8, AlgoName=\"ring\", OpType=\"Allreduce\", GPUPerNode=8, NICPerNode=2, "
      "nChunks=32, nScratch=3, Root=5, InPlace=1, Protocol=\"ll128\", Width=7",
      {"transfer(0, 1, 0, Width, recv)"}));
  EXPECT_EQ(a.ranks, 16);
  EXPECT_EQ(a.channels, 4);
  EXPECT_EQ(a.warps, 8);
  EXPECT_EQ(a.name, "ring");
  EXPECT_EQ(a.collective, Collective::AllReduce);
  EXPECT_EQ(a.gpus_per_node, 8);
  EXPECT_EQ(a.nics_per_node, 2);
  EXPECT_EQ(a.input_chunks, 32);
  EXPECT_EQ(a.output_chunks, 32);
  EXPECT_EQ(a.scratch_chunks, 3);
  EXPECT_EQ(a.root, 5);
  EXPECT_TRUE(a.in_place);
  EXPECT_EQ(a.protocol, "LL128");
  EXPECT_EQ(a.transfers.at(0).src_index, 7);
  EXPECT_EQ(a.source_file, "t.rccl");
}

TEST(ResCCLHeader, ParametersInAnyOrderAndTrailingComma) {
  Algorithm a = parse(program("OpType=\"Reducescatter\", GPUPerNode=2, nRanks=4,", {"x = 1"}));
  EXPECT_EQ(a.ranks, 4);
  EXPECT_EQ(a.collective, Collective::ReduceScatter);
  EXPECT_EQ(a.gpus_per_node, 2);
}

TEST(ResCCLHeader, Defaults) {
  Algorithm a = parse_resccl(program("nRanks=6, OpType=\"Allreduce\"", {"x = 1"}), "dir/my_algo.rccl");
  EXPECT_EQ(a.channels, 1);
  EXPECT_EQ(a.warps, 16);
  EXPECT_EQ(a.gpus_per_node, 6);
  EXPECT_EQ(a.nics_per_node, 0);
  EXPECT_EQ(a.name, "my_algo");
  EXPECT_EQ(a.input_chunks, 6);
  EXPECT_EQ(a.output_chunks, 6);
  EXPECT_EQ(a.scratch_chunks, 0);
  EXPECT_EQ(a.root, 0);
  EXPECT_TRUE(a.in_place);
  EXPECT_EQ(a.protocol, "");
  EXPECT_TRUE(a.transfers.empty());
  EXPECT_TRUE(a.transfer_locations.empty());
  // Defaults are variables of the body too.
  const std::string h = "nRanks=6, OpType=\"Allreduce\"";
  EXPECT_EQ(value_of("nChannels", h), 1);
  EXPECT_EQ(value_of("nWarps", h), 16);
  EXPECT_EQ(value_of("GPUPerNode", h), 6);
  EXPECT_EQ(value_of("NICPerNode", h), 0);
  EXPECT_EQ(value_of("nChunks", h), 6);
  EXPECT_EQ(value_of("nScratch", h), 0);
  EXPECT_EQ(value_of("Root", h), 0);
  EXPECT_EQ(value_of("InPlace", h), 1);
  EXPECT_EQ(value_of("nRanks", h), 6);
}

TEST(ResCCLHeader, EveryOpType) {
  struct Case {
    const char* spelling;
    Collective c;
  } cases[] = {{"Allgather", Collective::AllGather},       {"Allreduce", Collective::AllReduce},
               {"Reducescatter", Collective::ReduceScatter}, {"Alltoall", Collective::AllToAll},
               {"Broadcast", Collective::Broadcast},       {"Reduce", Collective::Reduce},
               {"Custom", Collective::Custom},             {"all_reduce", Collective::AllReduce},
               {"ALLGATHER", Collective::AllGather},       {"Reduce_Scatter", Collective::ReduceScatter}};
  for (const auto& c : cases) {
    Algorithm a = parse(program(std::string("nRanks=4, OpType='") + c.spelling + "'", {"x = 1"}));
    EXPECT_EQ(a.collective, c.c) << c.spelling;
  }
}

TEST(ResCCLHeader, DataBufferPerCollective) {
  const std::string body = "transfer(1, 2, 0, 3, recv)";
  Algorithm ag = parse(program("nRanks=4, nChunks=8, OpType=\"Allgather\"", {body}));
  EXPECT_EQ(ag.input_chunks, 2);
  EXPECT_EQ(ag.output_chunks, 8);
  EXPECT_EQ(ag.transfers[0].src_buffer, Buffer::Output);
  EXPECT_EQ(ag.transfers[0].dst_buffer, Buffer::Output);
  Algorithm rs = parse(program("nRanks=4, nChunks=8, OpType=\"Reducescatter\"", {body}));
  EXPECT_EQ(rs.input_chunks, 8);
  EXPECT_EQ(rs.output_chunks, 2);
  EXPECT_EQ(rs.transfers[0].src_buffer, Buffer::Input);
  EXPECT_EQ(rs.transfers[0].dst_buffer, Buffer::Input);
  for (const char* op : {"Allreduce", "Alltoall", "Broadcast", "Reduce", "Custom"}) {
    Algorithm a = parse(program(std::string("nRanks=4, nChunks=8, OpType=\"") + op + "\"", {body}));
    EXPECT_EQ(a.input_chunks, 8) << op;
    EXPECT_EQ(a.output_chunks, 8) << op;
    EXPECT_EQ(a.transfers[0].src_buffer, Buffer::Output) << op;
    EXPECT_EQ(a.transfers[0].dst_buffer, Buffer::Output) << op;
    EXPECT_TRUE(a.in_place);
  }
}

TEST(ResCCLOverrides, ChangeParametersAndWhatFollows) {
  const std::string text =
      program("nRanks=8, GPUPerNode=4, OpType=\"Allreduce\", Hops=2",
              {"nNodes = nRanks / GPUPerNode", "transfer(0, 1, 0, nNodes, recv)", "transfer(0, 1, 1, Hops, recv)",
               "transfer(0, 1, 2, nChunks, recv)"});
  Algorithm a = parse(text);
  EXPECT_EQ(a.transfers[0].src_index, 2);
  Algorithm b = parse(text, {{"nRanks", "64"}, {"GPUPerNode", "8"}, {"Hops", "-3"}});
  EXPECT_EQ(b.ranks, 64);
  EXPECT_EQ(b.gpus_per_node, 8);
  EXPECT_EQ(b.input_chunks, 64);  // nChunks defaults to nRanks after the override
  EXPECT_EQ(b.transfers[0].src_index, 8);
  EXPECT_EQ(b.transfers[1].src_index, -3);
  EXPECT_EQ(b.transfers[2].src_index, 64);
  // Known parameters the header leaves out can be set too, strings included.
  Algorithm c = parse(text, {{"nChannels", "2"}, {"OpType", "Allgather"}, {"AlgoName", "\"x\""},
                             {"Protocol", "LL"}});
  EXPECT_EQ(c.channels, 2);
  EXPECT_EQ(c.collective, Collective::AllGather);
  EXPECT_EQ(c.name, "x");
  EXPECT_EQ(c.protocol, "LL");
}

TEST(ResCCLStatements, Assignment) {
  EXPECT_EQ(value_of("a", "nRanks=4, OpType=\"Allreduce\"", {"a = 3", "b = a * 2", "a = b + a"}), 9);
  // Restating a header parameter with its own value is allowed (Figure 16 does so).
  EXPECT_EQ(value_of("nChunks", "nRanks=4, OpType=\"Allreduce\"", {"nChunks = 2 * 2"}), 4);
}

TEST(ResCCLStatements, ForWithOneTwoThreeArguments) {
  auto chunks = [](const std::string& range) {
    Algorithm a = parse(program("nRanks=4, OpType=\"Allreduce\"",
                                {"for i in " + range + ":", "    transfer(0, 1, 0, i, recv)"}));
    std::vector<int32_t> v;
    for (const Transfer& t : a.transfers) v.push_back(t.src_index);
    return v;
  };
  EXPECT_EQ(chunks("range(3)"), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(chunks("range(2, 5)"), (std::vector<int32_t>{2, 3, 4}));
  EXPECT_EQ(chunks("range(1, 8, 3)"), (std::vector<int32_t>{1, 4, 7}));
  EXPECT_EQ(chunks("range(1, 9, 4)"), (std::vector<int32_t>{1, 5}));
  EXPECT_EQ(chunks("range(5, 0, -2)"), (std::vector<int32_t>{5, 3, 1}));
  EXPECT_EQ(chunks("range(3, -1, -1)"), (std::vector<int32_t>{3, 2, 1, 0}));
  EXPECT_EQ(chunks("range(0)"), (std::vector<int32_t>{}));
  EXPECT_EQ(chunks("range(-3)"), (std::vector<int32_t>{}));
  EXPECT_EQ(chunks("range(5, 2)"), (std::vector<int32_t>{}));
  EXPECT_EQ(chunks("range(2, 5, -1)"), (std::vector<int32_t>{}));
  EXPECT_EQ(chunks("range(0, 10, 2,)"), (std::vector<int32_t>{0, 2, 4, 6, 8}));
}

TEST(ResCCLStatements, LoopVariableKeepsItsLastValueAndBoundsAreEvaluatedOnce) {
  EXPECT_EQ(value_of("i", "nRanks=4, OpType=\"Allreduce\"", {"for i in range(4):", "    x = i"}), 3);
  // Changing n inside the loop does not change the loop's bounds (Python semantics).
  Algorithm a = parse(program("nRanks=4, OpType=\"Allreduce\"",
                              {"n = 3", "for i in range(n):", "    n = 10", "    transfer(0, 1, i, n, recv)"}));
  EXPECT_EQ(a.transfers.size(), 3u);
}

TEST(ResCCLStatements, NestedLoopsAndDedentSeveralLevels) {
  Algorithm a = parse(lines({"ResCCLAlgo(nRanks=4, OpType=\"Allreduce\"):",
                             "  for a in range(2):",
                             "      for b in range(2):",
                             "         for c in range(2):",
                             "           transfer(a, b, c, 0, recv)",
                             "  transfer(3, 3, 9, 0, recv)",
                             "  for d in range(1):",
                             "   transfer(d, 2, 10, 1, rrc)"}));
  ASSERT_EQ(a.transfers.size(), 10u);
  EXPECT_EQ(a.transfers[0], (Transfer{0, Buffer::Output, 0, 0, Buffer::Output, 0, 1, TransferOp::Copy, 0}));
  EXPECT_EQ(a.transfers[7].src_rank, 1);
  EXPECT_EQ(a.transfers[7].dst_rank, 1);
  EXPECT_EQ(a.transfers[7].step, 1);
  EXPECT_EQ(a.transfers[8].step, 9);
  EXPECT_EQ(a.transfers[9].op, TransferOp::Reduce);
  EXPECT_EQ(a.transfer_locations[8].line, 6);
  EXPECT_EQ(a.transfer_locations[8].column, 3);
}

TEST(ResCCLStatements, LoopBoundsThroughChainsOfAssignments) {
  // The evaluator counts transfers in a first pass that runs only what loop bounds depend
  // on; bounds computed through several assignments inside loops must come out right.
  Algorithm a = parse(program("nRanks=4, OpType=\"Allreduce\"",
                              {"n = 2", "for i in range(3):", "    m = n + i", "    k = m", "    c = 100",
                               "    for j in range(k):", "        transfer(0, 1, i, j + c, recv)", "        k = 0"}));
  std::vector<std::pair<int32_t, int32_t>> got;
  for (const Transfer& t : a.transfers) got.emplace_back(t.step, t.src_index);
  std::vector<std::pair<int32_t, int32_t>> want;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2 + i; ++j) want.emplace_back(i, j + 100);
  EXPECT_EQ(got, want);
}

TEST(ResCCLStatements, SimpleStatementOnTheSameLineAsColon) {
  Algorithm a = parse(program("nRanks=4, OpType=\"Allreduce\"", {"for i in range(2): transfer(0, 1, i, 0, recv)"}));
  EXPECT_EQ(a.transfers.size(), 2u);
  Algorithm b = parse("ResCCLAlgo(nRanks=4, OpType=\"Allreduce\"): transfer(0, 1, 0, 0, recv)\n");
  EXPECT_EQ(b.transfers.size(), 1u);
}

TEST(ResCCLExpressions, Precedence) {
  EXPECT_EQ(value_of("2 + 3 * 4"), 14);
  EXPECT_EQ(value_of("(2 + 3) * 4"), 20);
  EXPECT_EQ(value_of("10 - 4 - 3"), 3);
  EXPECT_EQ(value_of("10 - (4 - 3)"), 9);
  EXPECT_EQ(value_of("100 / 10 / 5"), 2);
  EXPECT_EQ(value_of("7 % 4 * 2"), 6);
  EXPECT_EQ(value_of("2 * 7 % 4"), 2);
  EXPECT_EQ(value_of("1 + 7 / 2"), 4);
  EXPECT_EQ(value_of("1 + 7 % 5 - 1"), 2);
  EXPECT_EQ(value_of("((((1))))"), 1);
  EXPECT_EQ(value_of("2*3+4*5"), 26);
}

TEST(ResCCLExpressions, UnaryMinus) {
  EXPECT_EQ(value_of("-3 * 2"), -6);
  EXPECT_EQ(value_of("-(3 + 2)"), -5);
  EXPECT_EQ(value_of("2 - -3"), 5);
  EXPECT_EQ(value_of("--3"), 3);
  EXPECT_EQ(value_of("-x", "nRanks=4, OpType=\"Allreduce\"", {"x = 4"}), -4);
  EXPECT_EQ(value_of("- - x", "nRanks=4, OpType=\"Allreduce\"", {"x = 4"}), 4);
  EXPECT_EQ(value_of("-7 / 2"), -4);  // (-7) / 2, as in Python
}

TEST(ResCCLExpressions, FloorDivisionAndModuloOnNegatives) {
  EXPECT_EQ(value_of("-7 / 2"), -4);
  EXPECT_EQ(value_of("7 / -2"), -4);
  EXPECT_EQ(value_of("-7 / -2"), 3);
  EXPECT_EQ(value_of("6 / -3"), -2);
  EXPECT_EQ(value_of("-7 % 3"), 2);
  EXPECT_EQ(value_of("7 % -3"), -2);
  EXPECT_EQ(value_of("-7 % -3"), -1);
  EXPECT_EQ(value_of("-6 % 3"), 0);
  EXPECT_EQ(value_of("0 - 1 % 4"), -1);
  EXPECT_EQ(value_of("(0 - 1) % 4"), 3);
  // 64-bit intermediates: fine as long as the result fits in 32 bits.
  EXPECT_EQ(value_of("9223372036854775807 / 4611686018427387904"), 1);
  EXPECT_EQ(value_of("(0 - 9223372036854775807 - 1) % -1"), 0);
  EXPECT_EQ(value_of("(0 - 9223372036854775807 - 1) % 7"), 6);
  EXPECT_EQ(value_of("(0 - 9223372036854775807 - 1) / 4611686018427387904"), -2);
}

TEST(ResCCLLayout, CommentsBlankLinesAndLineEndings) {
  std::string text = lines({"# a comment before the header", "", "def ResCCLAlgo(nRanks=4,  # the ranks",
                            "               OpType=\"Allreduce\"):   # comment after the header",
                            "", "    # comment in the body", "      # comment indented anywhere", "    x = 1 # trailing",
                            "", "    for i in range(2):", "", "        # comment in a loop",
                            "        transfer(0, 1, i, x, recv)", "# comment at column 1", "    y = 2", "", ""});
  Algorithm a = parse(text);
  ASSERT_EQ(a.transfers.size(), 2u);
  EXPECT_EQ(a.transfer_locations[1].line, 13);
  std::string crlf;
  for (char c : text) {
    if (c == '\n') crlf += '\r';
    crlf += c;
  }
  Algorithm b = parse(crlf);
  EXPECT_EQ(a.transfers, b.transfers);
  // No newline at the end of the file.
  Algorithm c = parse("ResCCLAlgo(nRanks=4, OpType=\"Allreduce\"):\n    transfer(0, 1, 0, 0, recv)");
  EXPECT_EQ(c.transfers.size(), 1u);
  // A call may span lines inside its parentheses.
  Algorithm d = parse(program("nRanks=4, OpType=\"Allreduce\"", {"transfer(0,", "  1, 2,", "3, rrc)"}));
  EXPECT_EQ(d.transfers.at(0), (Transfer{0, Buffer::Output, 3, 1, Buffer::Output, 3, 1, TransferOp::Reduce, 2}));
}

TEST(ResCCLTransfer, CommTypesAndSpellings) {
  Algorithm a = parse(program("nRanks=4, OpType=\"Allreduce\"",
                              {"transfer(0, 1, 0, 0, recv)", "transfer(0, 1, 1, 0, rrc)",
                               "Transfer(0, 1, 2, 0, \"recv\")", "transfer(0, 1, 3, 0, 'rrc',)"}));
  ASSERT_EQ(a.transfers.size(), 4u);
  EXPECT_EQ(a.transfers[0].op, TransferOp::Copy);
  EXPECT_EQ(a.transfers[1].op, TransferOp::Reduce);
  EXPECT_EQ(a.transfers[2].op, TransferOp::Copy);
  EXPECT_EQ(a.transfers[3].op, TransferOp::Reduce);
}

TEST(ResCCLTransfer, KeywordArguments) {
  Algorithm a = parse(program(
      "nRanks=4, nChunks=8, nScratch=2, OpType=\"Allreduce\"",
      {"transfer(0, 1, 0, 2, recv, dstChunk=5)", "transfer(0, 1, 1, 2, rrc, count=3)",
       "transfer(0, 1, 2, 2, recv, srcBuf=input, dstBuf=scratch)",
       "transfer(0, 1, 3, 2, recv, dstBuf=\"output\", srcBuf='scratch', count=1 + 1, dstChunk=0)",
       "transfer(0, 1, 4, 2, recv, srcBuf=data, dstBuf=data)"}));
  ASSERT_EQ(a.transfers.size(), 5u);
  EXPECT_EQ(a.transfers[0], (Transfer{0, Buffer::Output, 2, 1, Buffer::Output, 5, 1, TransferOp::Copy, 0}));
  EXPECT_EQ(a.transfers[1], (Transfer{0, Buffer::Output, 2, 1, Buffer::Output, 2, 3, TransferOp::Reduce, 1}));
  EXPECT_EQ(a.transfers[2], (Transfer{0, Buffer::Input, 2, 1, Buffer::Scratch, 2, 1, TransferOp::Copy, 2}));
  EXPECT_EQ(a.transfers[3], (Transfer{0, Buffer::Scratch, 2, 1, Buffer::Output, 0, 2, TransferOp::Copy, 3}));
  EXPECT_EQ(a.transfers[4], (Transfer{0, Buffer::Output, 2, 1, Buffer::Output, 2, 1, TransferOp::Copy, 4}));
}

TEST(ResCCLTransfer, OutOfPlaceNamesItsBuffers) {
  Algorithm a = parse(program("nRanks=2, OpType=\"Alltoall\", InPlace=0",
                              {"for s in range(2):", "    for d in range(2):",
                               "        transfer(s, d, 0, d, recv, srcBuf=input, dstBuf=output, dstChunk=s)"}));
  EXPECT_FALSE(a.in_place);
  ASSERT_EQ(a.transfers.size(), 4u);
  EXPECT_EQ(a.transfers[1], (Transfer{0, Buffer::Input, 1, 1, Buffer::Output, 0, 1, TransferOp::Copy, 0}));
}

TEST(ResCCLTransfer, LocationsRecordEachTransfer) {
  Algorithm a = parse_resccl(program("nRanks=4, OpType=\"Allreduce\"",
                                     {"for i in range(2):", "    transfer(0, 1, i, 0, recv)", "  # x",
                                      "Transfer(1, 2, 5, 0, rrc)"}),
                             "a/b.rccl");
  ASSERT_EQ(a.transfer_locations.size(), 3u);
  EXPECT_EQ(a.file_of(a.transfer_locations[0]), "a/b.rccl");
  EXPECT_EQ(a.location_of(0), "a/b.rccl:3:9");
  EXPECT_EQ(a.location_of(2), "a/b.rccl:5:5");
  EXPECT_EQ(a.location_of(3), "");  // past the end
  EXPECT_EQ(a.transfer_locations[0].line, 3);
  EXPECT_EQ(a.transfer_locations[0].column, 9);
  EXPECT_EQ(a.transfer_locations[1].line, 3);
  EXPECT_EQ(a.transfer_locations[2].line, 5);
  EXPECT_EQ(a.transfer_locations[2].column, 5);
  EXPECT_EQ(a.num_steps(), 6);
}

TEST(ResCCLExpect, AccumulatesPerSlot) {
  Algorithm a = parse(program("nRanks=2, OpType=\"Custom\"",
                              {"for r in range(2):", "    expect(1, 0, r, 0)", "expect(0, 1, 1, 1)",
                               "transfer(0, 1, 0, 0, rrc)", "transfer(1, 0, 0, 1, recv)"}));
  ASSERT_EQ(a.custom_postcondition.size(), 2u);
  EXPECT_EQ(a.custom_postcondition[0].slot, (SlotRef{1, Buffer::Output, 0}));
  EXPECT_EQ(a.custom_postcondition[0].contributions, (std::vector<std::pair<int32_t, int32_t>>{{0, 0}, {1, 0}}));
  EXPECT_EQ(a.custom_postcondition[1].slot, (SlotRef{0, Buffer::Output, 1}));
  EXPECT_EQ(a.custom_postcondition[1].contributions, (std::vector<std::pair<int32_t, int32_t>>{{1, 1}}));
}

TEST(ResCCLNames, IdentifiersWithDigitsAndUnderscores) {
  EXPECT_EQ(value_of("_a1 + b_2_", "nRanks=4, OpType=\"Allreduce\"", {"_a1 = 3", "b_2_ = 4"}), 7);
  // transfer, expect and range are ordinary names outside of calls.
  EXPECT_EQ(value_of("range + recv", "nRanks=4, OpType=\"Allreduce\"", {"range = 3", "recv = 4"}), 7);
}

}  // namespace
}  // namespace weft
