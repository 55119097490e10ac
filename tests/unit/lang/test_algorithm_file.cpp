// Algorithm files (lang/algorithm_file.hpp), the chunk DSL's channels, and the parts of the
// Python front-end (lang/python_frontend.hpp) that need no Python module; tests/python covers
// the rest.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "lang/algorithm_file.hpp"
#include "lang/chunk_dsl.hpp"
#include "lang/chunk_dsl_algorithms.hpp"
#include "lang/python_frontend.hpp"
#include "util/error.hpp"

namespace weft {
namespace {

namespace fs = std::filesystem;

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("weft-test-" + std::to_string(::getpid()) + "-" + name)).string();
}

template <class F>
Error error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error";
  return Error(ErrorCode::Success, "");
}

TEST(AlgorithmFile, RoundTripsEverything) {
  dsl::Program p({.name = "custom", .collective = Collective::Custom, .ranks = 2, .input_chunks = 2,
                  .output_chunks = 2, .in_place = false, .gpus_per_node = 2, .protocol = "LL"});
  p.chunk(0, Buffer::Input, 0, 2).copy(1, Buffer::Output, 0, 3);
  p.expect(1, 0, {{0, 0}});
  p.expect(1, 1, {{0, 1}});
  Algorithm a = p.algorithm();
  a.other_source_files.push_back("helper.py");
  a.transfer_locations[0] = {7, 0, 1};
  const std::string path = temp_path("roundtrip.alg");
  save_algorithm_file(a, path);
  Algorithm b = load_algorithm_file(path);
  fs::remove(path);
  EXPECT_EQ(b.name, a.name);
  EXPECT_EQ(b.collective, a.collective);
  EXPECT_EQ(b.transfers, a.transfers);
  EXPECT_EQ(b.transfer_locations, a.transfer_locations);
  EXPECT_EQ(b.other_source_files, a.other_source_files);
  EXPECT_EQ(b.location_of(0), "helper.py:7");  // column 0: unknown, left out
  EXPECT_EQ(b.channels, 4);
  EXPECT_EQ(b.protocol, "LL");
  EXPECT_FALSE(b.in_place);
  ASSERT_EQ(b.custom_postcondition.size(), 2u);
  EXPECT_EQ(b.custom_postcondition[1].slot, (SlotRef{1, Buffer::Output, 1}));
  EXPECT_EQ(b.custom_postcondition[1].contributions, (std::vector<std::pair<int32_t, int32_t>>{{0, 1}}));
}

TEST(AlgorithmFile, LargeAlgorithmsRoundTrip) {
  Algorithm a = dsl::ring_allreduce(64);
  const std::string path = temp_path("ring.alg");
  save_algorithm_file(a, path);
  Algorithm b = load_algorithm_file(path);
  fs::remove(path);
  EXPECT_EQ(b.transfers, a.transfers);
  EXPECT_EQ(b.transfer_locations, a.transfer_locations);
  EXPECT_EQ(b.source_file, a.source_file);
}

TEST(AlgorithmFile, MalformedFilesAreRefused) {
  const std::string path = temp_path("bad.alg");
  auto write = [&](const std::string& text) { std::ofstream(path, std::ios::binary) << text; };
  write("nonsense\n");
  Error e = error_of([&] { load_algorithm_file(path); });
  EXPECT_EQ(e.code(), ErrorCode::Parse);
  EXPECT_NE(std::string(e.what()).find("does not start with"), std::string::npos) << e.what();
  write("weft-algorithm 1\n{\"name\": 1}\n");
  EXPECT_EQ(error_of([&] { load_algorithm_file(path); }).code(), ErrorCode::Parse);
  save_algorithm_file(dsl::ring_allreduce(4), path);
  std::string text;
  {
    std::ifstream in(path, std::ios::binary);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  write(text.substr(0, text.size() - 4));  // one int short
  e = error_of([&] { load_algorithm_file(path); });
  EXPECT_EQ(e.code(), ErrorCode::Parse);
  EXPECT_NE(std::string(e.what()).find("announces 24 transfers"), std::string::npos) << e.what();
  fs::remove(path);
  EXPECT_EQ(error_of([&] { load_algorithm_file(path); }).code(), ErrorCode::System);
}

TEST(ChunkDslChannels, AreRecordedAndBounded) {
  dsl::Program p({.name = "ch", .collective = Collective::AllReduce, .ranks = 2, .input_chunks = 2});
  p.chunk(1, Buffer::Output, 0).reduce(p.chunk(0, Buffer::Output, 0), 5);
  p.chunk(0, Buffer::Output, 1).copy(1, Buffer::Scratch, 0);
  EXPECT_EQ(p.transfer_channels(), (std::vector<int32_t>{5, -1}));
  EXPECT_EQ(p.algorithm().channels, 6);
  Error e = error_of([&] { p.chunk(0, Buffer::Output, 1).copy(1, Buffer::Output, 1, dsl::kMaxChannels); });
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(std::string(e.what()).find("channel 32 is out of range"), std::string::npos) << e.what();
  EXPECT_EQ(p.transfer_channels().size(), 2u);
}

TEST(PythonFrontEnd, NamesAndCodes) {
  EXPECT_TRUE(is_python_path("prog.py"));
  EXPECT_TRUE(is_python_path("dir/prog.py"));
  EXPECT_FALSE(is_python_path(".py"));
  EXPECT_FALSE(is_python_path("prog.rccl"));
  for (ErrorCode c : {ErrorCode::InvalidArgument, ErrorCode::InvalidUsage, ErrorCode::Parse, ErrorCode::Verify,
                      ErrorCode::System})
    EXPECT_EQ(error_code_from_identifier(error_code_identifier(c)), c);
  EXPECT_EQ(error_code_from_identifier("Nonsense"), ErrorCode::InvalidArgument);
}

TEST(PythonFrontEnd, MissingFileAndInterpreterAreSaid) {
  Error e = error_of([] { load_python_program("/nonexistent/prog.py", {}); });
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(std::string(e.what()).find("no such file"), std::string::npos) << e.what();
  const std::string prog = temp_path("prog.py");
  std::ofstream(prog) << "x = 1\n";
  ::setenv("WEFT_PYTHON", "/nonexistent/python3", 1);
  e = error_of([&] { load_python_program(prog, {}); });
  ::unsetenv("WEFT_PYTHON");
  fs::remove(prog);
  EXPECT_NE(std::string(e.what()).find("cannot run the Python interpreter '/nonexistent/python3'"), std::string::npos)
      << e.what();
}

}  // namespace
}  // namespace weft
