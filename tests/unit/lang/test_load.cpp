// load_algorithm, data_dir and builtin_algorithm_names.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "resccl_test_util.hpp"

namespace weft {
namespace {

namespace fs = std::filesystem;

/// A temporary data directory that WEFT_DATA_DIR points at for the test's lifetime.
class DataDir {
 public:
  DataDir() {
    dir_ = fs::temp_directory_path() / ("weft_lang_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    const char* old = std::getenv("WEFT_DATA_DIR");
    if (old) old_ = old;
    had_ = old != nullptr;
    ::setenv("WEFT_DATA_DIR", dir_.c_str(), 1);
  }
  ~DataDir() {
    if (had_)
      ::setenv("WEFT_DATA_DIR", old_.c_str(), 1);
    else
      ::unsetenv("WEFT_DATA_DIR");
    fs::remove_all(dir_);
  }
  void write(const std::string& rel, const std::string& content) {
    fs::create_directories((dir_ / rel).parent_path());
    std::ofstream(dir_ / rel) << content;
  }
  const fs::path& path() const { return dir_; }

 private:
  fs::path dir_;
  std::string old_;
  bool had_ = false;
};

const std::string kRing =
    "ResCCLAlgo(nRanks=4, OpType=\"Allgather\"):\n"
    "    for s in range(nRanks - 1):\n"
    "        for r in range(nRanks):\n"
    "            transfer(r, (r + 1) % nRanks, s, (r - s) % nRanks, recv)\n";

TEST(Load, DataDirFollowsTheEnvironmentElseTheSourceTree) {
  {
    DataDir d;
    EXPECT_EQ(data_dir(), d.path().string());
  }
  // The test binary has no share/weft next to it, so the source tree is used.
  if (std::getenv("WEFT_DATA_DIR") == nullptr) {
    EXPECT_EQ(fs::path(data_dir()), fs::path(WEFT_TEST_DATA_DIR));
  }
}

TEST(Load, BuiltinNamesAreSortedStems) {
  DataDir d;
  EXPECT_TRUE(builtin_algorithm_names().empty());  // no algorithms/ folder
  d.write("algorithms/ring_allgather.rccl", kRing);
  d.write("algorithms/a_first.rccl", kRing);
  d.write("algorithms/README.md", "not an algorithm");
  fs::create_directories(d.path() / "algorithms" / "dir.rccl");
  EXPECT_EQ(builtin_algorithm_names(), (std::vector<std::string>{"a_first", "ring_allgather"}));
}

TEST(Load, BuiltinsTheDataDirectoryLacksComeFromTheLibrary) {
  DataDir d;  // empty: no algorithms/ folder
  Algorithm a = load_algorithm("ring_allreduce", {{"nRanks", "4"}});
  EXPECT_EQ(a.name, "ring_allreduce");
  EXPECT_EQ(a.ranks, 4);
  EXPECT_EQ(a.source_file, "(built in) algorithms/ring_allreduce.rccl");
  // The built-in copy is the file of the source tree, byte for byte.
  std::ifstream f(std::string(WEFT_TEST_DATA_DIR) + "/algorithms/ring_allreduce.rccl", std::ios::binary);
  std::ostringstream text;
  text << f.rdbuf();
  ASSERT_TRUE(embedded_algorithm("ring_allreduce").has_value());
  EXPECT_EQ(std::string(*embedded_algorithm("ring_allreduce")), text.str());
  EXPECT_FALSE(embedded_algorithm("no_such_algorithm").has_value());
  // A file in the data directory wins over the built-in copy.
  d.write("algorithms/ring_allreduce.rccl", kRing);
  EXPECT_EQ(load_algorithm("ring_allreduce").collective, Collective::AllGather);
}

TEST(Load, ByBuiltinName) {
  DataDir d;
  d.write("algorithms/ring_allgather.rccl", kRing);
  Algorithm a = load_algorithm("ring_allgather", {{"nRanks", "8"}});
  EXPECT_EQ(a.name, "ring_allgather");
  EXPECT_EQ(a.ranks, 8);
  EXPECT_EQ(a.transfers.size(), 7u * 8u);
  EXPECT_EQ(a.source_file, (d.path() / "algorithms" / "ring_allgather.rccl").string());
  try {
    load_algorithm("ring_allgathr");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_EQ(std::string(e.what()),
              "'ring_allgathr' is neither a file nor a built-in algorithm (built-ins: ring_allgather)");
  }
}

TEST(Load, ByPath) {
  DataDir d;
  d.write("x/my.rccl", kRing);
  std::string path = (d.path() / "x" / "my.rccl").string();
  Algorithm a = load_algorithm(path);
  EXPECT_EQ(a.name, "my");
  EXPECT_EQ(a.transfers.size(), 12u);
  EXPECT_EQ(a.file_of(a.transfer_locations.at(0)), path);
  EXPECT_EQ(a.transfer_locations.at(0).line, 4);
  // Errors name the file.
  d.write("x/bad.rccl", "ResCCLAlgo(nRanks=4, OpType=\"Allgather\"):\n    x = y\n");
  std::string bad = (d.path() / "x" / "bad.rccl").string();
  try {
    load_algorithm(bad);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Parse);
    EXPECT_EQ(std::string(e.what()), bad + ":2:9: variable y is used before it is assigned\n    x = y\n        ^");
  }
}

TEST(Load, MissingFilesAndXml) {
  DataDir d;
  for (const char* spec : {"/nonexistent/a.rccl", "missing.rccl", "dir/missing", "missing.xml"}) {
    try {
      load_algorithm(spec);
      ADD_FAILURE() << spec;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << spec;
      EXPECT_EQ(std::string(e.what()), std::string(spec) + ": no such file");
    }
  }
  d.write("algo.xml", "<algo/>");
  try {
    load_algorithm((d.path() / "algo.xml").string());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    // .xml files go to the MSCCL importer (tests/unit/xml), which finds this one lacking.
    EXPECT_EQ(e.code(), ErrorCode::Parse);
    EXPECT_NE(std::string(e.what()).find("<algo> lacks the required attribute proto"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_algorithm(""), Error);
}

}  // namespace
}  // namespace weft
