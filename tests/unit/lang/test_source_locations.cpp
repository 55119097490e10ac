// Transfer locations: a SourceLocation holds line, column and an index into the
// Algorithm's files, never a path; Algorithm::location_of() formats "file:line:column".
// Checked for the IR itself, for ResCCLang files and for chunk-DSL programs whose transfers
// come from several files.
#include <gtest/gtest.h>

#include <type_traits>

#include "compile/verify.hpp"
#include "lang/chunk_dsl.hpp"
#include "lang/load.hpp"

namespace weft {
namespace {

// The point of the layout: three 32-bit fields, no string per transfer.
static_assert(sizeof(SourceLocation) == 12);
static_assert(std::is_trivially_copyable_v<SourceLocation>);

TEST(SourceLocations, FormattedFromTheAlgorithmsFiles) {
  Algorithm a;
  a.source_file = "main.rccl";
  a.other_source_files = {"helper.hpp", "other.cpp"};
  a.transfers.resize(6);
  a.transfer_locations = {{3, 7, 0}, {4, 1, 1}, {5, 2, 2}, {0, 0, 0}, {9, 9, 3}, {8, 1, -1}};
  EXPECT_EQ(a.location_of(0), "main.rccl:3:7");
  EXPECT_EQ(a.location_of(1), "helper.hpp:4:1");
  EXPECT_EQ(a.location_of(2), "other.cpp:5:2");
  EXPECT_EQ(a.location_of(3), "");        // line 0: no location
  EXPECT_EQ(a.location_of(4), "9:9");     // a file index out of range: no file, still the place
  EXPECT_EQ(a.location_of(5), "8:1");
  EXPECT_EQ(a.location_of(6), "");        // past the end of transfer_locations
  EXPECT_EQ(a.file_of(a.transfer_locations[1]), "helper.hpp");
  EXPECT_EQ(a.file_of(a.transfer_locations[4]), "");
  a.source_file.clear();
  EXPECT_EQ(a.location_of(0), "3:7");
}

TEST(SourceLocations, ResCCLangTransfersPointIntoTheFile) {
  Algorithm a = parse_resccl(
      "ResCCLAlgo(nRanks=2, OpType=\"Allgather\"):\n"
      "    for r in range(nRanks):\n"
      "        transfer(r, 1 - r, 0, r, recv)\n",
      "dir/x.rccl");
  ASSERT_EQ(a.transfer_locations.size(), 2u);
  EXPECT_TRUE(a.other_source_files.empty());
  EXPECT_EQ(a.location_of(0), "dir/x.rccl:3:9");
  EXPECT_EQ(a.location_of(1), "dir/x.rccl:3:9");
}

// Defined at the end of this file under a #line directive, so that the transfers it
// records come from another "file", as they do when a program calls helpers in a header.
void copy_from_helper(dsl::Program& p);

TEST(SourceLocations, ChunkDslTransfersFromSeveralFiles) {
  dsl::Program p({.name = "t", .collective = Collective::AllGather, .ranks = 2, .input_chunks = 1});
  p.chunk(0, Buffer::Output, 0).copy(1);  const int line = __LINE__;
  copy_from_helper(p);
  copy_from_helper(p);  // a file seen before keeps its index
  Algorithm a = p.algorithm();
  ASSERT_EQ(a.transfer_locations.size(), 3u);
  EXPECT_EQ(a.source_file, __FILE__);
  ASSERT_EQ(a.other_source_files, std::vector<std::string>{"helper_in_a_header.hpp"});
  EXPECT_EQ(a.location_of(0).rfind(std::string(__FILE__) + ":" + std::to_string(line) + ":", 0), 0u)
      << a.location_of(0);
  EXPECT_EQ(a.location_of(1).rfind("helper_in_a_header.hpp:5:", 0), 0u) << a.location_of(1);
  EXPECT_EQ(a.transfer_locations[1], a.transfer_locations[2]);

  // A verifier message about a helper's transfer names the helper's file.
  a.transfers[1].dst_index = 5;  // out of range: the shape check names the transfer
  VerifyResult r = verify(a);
  ASSERT_FALSE(r.ok);
  EXPECT_EQ(r.errors[0].rfind("helper_in_a_header.hpp:5:", 0), 0u) << r.errors[0];
}

}  // namespace
}  // namespace weft

#line 1 "helper_in_a_header.hpp"
// (From here on the compiler reports this file as helper_in_a_header.hpp, this line 1.)
namespace weft {
namespace {
void copy_from_helper(dsl::Program& p) {
  p.chunk(1, Buffer::Output, 1).copy(0);  // line 5
}
}  // namespace
}  // namespace weft
