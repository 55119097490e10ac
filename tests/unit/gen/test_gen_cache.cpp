// The generated kernels' disk cache (src/gen/cache.hpp): the key changes with each of its
// parts; a stored cubin loads back; a corrupt, truncated, padded, oversized or foreign file
// is rejected with the reason and replaced by the next store; an unwritable folder is
// reported; the folder follows WEFT_CACHE_DIR, XDG_CACHE_HOME and HOME. The timing test
// prints a real plan's first compile and its load from the cache (targets 2 s and 5 ms).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>

#include "gen/cache.hpp"
#include "gen/codegen.hpp"
#include "gen_test_util.hpp"

namespace weft::gen {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/weft-gen-cache-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
};

const std::vector<std::pair<const char*, const char*>> kHeaders = {{"a.h", "int a;"}, {"b.h", "int b;"}};

KeyParts base_parts() {
  KeyParts p;
  p.source = "extern \"C\" __global__ void k() {}";
  p.headers_digest = headers_digest(kHeaders);
  p.nvrtc_version = "13.0";
  p.options = {"--gpu-architecture=sm_90", "-std=c++20"};
  p.arch = 90;
  p.weft_version = "0.1.0";
  return p;
}

std::vector<char> bytes(size_t n, char seed) {
  std::vector<char> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<char>(seed + i * 7);
  return v;
}

TEST(GenCache, KeyChangesWithEachPart) {
  const std::string k0 = cache_key(base_parts());
  EXPECT_EQ(k0.size(), 64u);
  EXPECT_EQ(k0, cache_key(base_parts()));
  std::set<std::string> keys = {k0};
  auto differs = [&](const char* what, KeyParts p) {
    const std::string k = cache_key(p);
    EXPECT_TRUE(keys.insert(k).second) << what << " did not change the key";
  };
  KeyParts p = base_parts();
  p.source += " ";
  differs("the source", p);
  const std::vector<std::pair<const char*, const char*>> other = {{"a.h", "int a;"}, {"b.h", "int c;"}};
  p = base_parts();
  p.headers_digest = headers_digest(other);
  differs("a header's text", p);
  const std::vector<std::pair<const char*, const char*>> renamed = {{"a.h", "int a;"}, {"c.h", "int b;"}};
  p.headers_digest = headers_digest(renamed);
  differs("a header's name", p);
  p = base_parts();
  p.nvrtc_version = "13.1";
  differs("the NVRTC version", p);
  p = base_parts();
  p.options.push_back("-lineinfo");
  differs("the options", p);
  p = base_parts();
  p.arch = 100;
  differs("the architecture", p);
  p = base_parts();
  p.weft_version = "0.1.1";
  differs("weft's version", p);
  // Parts are length-prefixed: moving text from one part to the next changes the key.
  p = base_parts();
  p.options = {"--gpu-architecture=sm_90-std=c++20"};
  differs("the split between options", p);
}

TEST(GenCache, StoresAndLoadsBack) {
  TempDir t;
  const DiskCache cache((t.path / "sub" / "dir").string());  // made on the first store
  const std::string key = cache_key(base_parts());
  std::string why;
  EXPECT_FALSE(cache.load(key, &why));
  EXPECT_TRUE(why.empty()) << "an absent file is no rejection: " << why;
  const std::vector<char> cubin = bytes(100000, 3);
  ASSERT_TRUE(cache.store(key, cubin, &why)) << why;
  auto back = cache.load(key, &why);
  ASSERT_TRUE(back) << why;
  EXPECT_EQ(*back, cubin);
  // No temporary file is left behind.
  int files = 0;
  for (const auto& e : fs::directory_iterator(t.path / "sub" / "dir")) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
}

/// Writes a valid file for `key`, lets `spoil` change it, and checks that the cache rejects
/// it with a reason containing `reason`, then that a new store replaces it.
void expect_rejected(const char* what, const std::function<void(const std::string& path)>& spoil, const char* reason) {
  SCOPED_TRACE(what);
  TempDir t;
  const DiskCache cache(t.path.string());
  const std::string key = cache_key(base_parts());
  const std::vector<char> cubin = bytes(4096, 1);
  std::string why;
  ASSERT_TRUE(cache.store(key, cubin, &why)) << why;
  spoil(cache.path_of(key));
  EXPECT_FALSE(cache.load(key, &why));
  EXPECT_NE(why.find(reason), std::string::npos) << why;
  ASSERT_TRUE(cache.store(key, cubin, &why)) << why;
  auto back = cache.load(key, &why);
  ASSERT_TRUE(back) << why;
  EXPECT_EQ(*back, cubin);
}

void flip_byte(const std::string& path, off_t at) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(at);
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x5a);
  f.seekp(at);
  f.write(&c, 1);
}

TEST(GenCache, RejectsSpoiledFilesAndReplacesThem) {
  expect_rejected(
      "a corrupt cubin", [](const std::string& p) { flip_byte(p, 112 + 100); }, "digest");
  expect_rejected(
      "a corrupt digest", [](const std::string& p) { flip_byte(p, 80 + 3); }, "digest");
  expect_rejected(
      "a truncated cubin", [](const std::string& p) { ASSERT_EQ(truncate(p.c_str(), 112 + 4000), 0); }, "truncated");
  expect_rejected(
      "a truncated header", [](const std::string& p) { ASSERT_EQ(truncate(p.c_str(), 50), 0); }, "truncated");
  expect_rejected(
      "an empty file", [](const std::string& p) { ASSERT_EQ(truncate(p.c_str(), 0), 0); }, "truncated");
  expect_rejected(
      "a padded file", [](const std::string& p) { std::ofstream(p, std::ios::app) << "extra"; }, "padded");
  expect_rejected(
      "another magic", [](const std::string& p) { flip_byte(p, 0); }, "magic");
  expect_rejected(
      "a foreign file (another key's)",
      [](const std::string& p) {
        KeyParts other = base_parts();
        other.arch = 80;
        const std::string k2 = cache_key(other);
        const DiskCache c2(fs::path(p).parent_path().string());
        std::string why;
        ASSERT_TRUE(c2.store(k2, bytes(4096, 1), &why)) << why;
        fs::rename(c2.path_of(k2), p);
      },
      "another key");
  expect_rejected(
      "an oversized file", [](const std::string& p) { ASSERT_EQ(truncate(p.c_str(), 112 + kMaxCubinBytes + 1), 0); },
      "more than");
}

TEST(GenCache, RejectsWhatIsNotARegularFile) {
  TempDir t;
  const DiskCache cache(t.path.string());
  const std::string key = cache_key(base_parts());
  std::string why;
  fs::create_directory(cache.path_of(key));
  EXPECT_FALSE(cache.load(key, &why));
  EXPECT_NE(why.find("not a regular file"), std::string::npos) << why;
  fs::remove(cache.path_of(key));
  fs::create_symlink("/dev/zero", cache.path_of(key));  // never followed
  EXPECT_FALSE(cache.load(key, &why));
  EXPECT_FALSE(why.empty());
}

TEST(GenCache, UnwritableFolderIsReported) {
  TempDir t;
  const fs::path file = t.path / "a-file";
  std::ofstream(file) << "x";
  std::string why;
  const DiskCache under_file((file / "cache").string());
  EXPECT_FALSE(under_file.store(cache_key(base_parts()), bytes(16, 0), &why));
  EXPECT_NE(why.find("cannot make"), std::string::npos) << why;
  if (geteuid() != 0) {  // root writes anywhere
    const fs::path ro = t.path / "read-only";
    fs::create_directory(ro);
    chmod(ro.c_str(), 0500);
    const DiskCache cache(ro.string());
    EXPECT_FALSE(cache.store(cache_key(base_parts()), bytes(16, 0), &why));
    EXPECT_NE(why.find("cannot write"), std::string::npos) << why;
    chmod(ro.c_str(), 0700);
  }
  const DiskCache none("");
  EXPECT_FALSE(none.store(cache_key(base_parts()), bytes(16, 0), &why));
  EXPECT_FALSE(none.load(cache_key(base_parts()), &why));
}

TEST(GenCache, FolderFollowsTheEnvironment) {
  const char* saved_home = std::getenv("HOME");
  const std::string home = saved_home != nullptr ? saved_home : "";
  setenv("WEFT_CACHE_DIR", "/x/weft-cache", 1);
  setenv("XDG_CACHE_HOME", "/y", 1);
  EXPECT_EQ(default_cache_dir(), "/x/weft-cache");
  unsetenv("WEFT_CACHE_DIR");
  EXPECT_EQ(default_cache_dir(), "/y/weft");
  unsetenv("XDG_CACHE_HOME");
  setenv("HOME", "/home/z", 1);
  EXPECT_EQ(default_cache_dir(), "/home/z/.cache/weft");
  unsetenv("HOME");
  EXPECT_EQ(default_cache_dir(), "");
  if (saved_home != nullptr) setenv("HOME", home.c_str(), 1);
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

/// The compile and cache times docs/generated-kernels.md quotes: the first compile of a
/// plan, then its load from the disk cache (read and check, as a second process does before
/// handing the cubin to CUDA). Printed, never asserted.
TEST(GenCache, FirstCompileAndCacheLoadTimes) {
  WEFT_REQUIRE_NVRTC(nvrtc);
  TempDir t;
  const DiskCache cache(t.path.string());
  struct Case {
    Collective c;
    int ranks;
    const char* algorithm;
    const char* protocol;
    int instances;
  };
  for (const Case& k : {Case{Collective::AllReduce, 2, "allpairs", "LL", 1},
                        Case{Collective::AllReduce, 8, "ring_allreduce", "Simple", 4},
                        Case{Collective::AllReduce, 8, "ring_allreduce", "Simple", 24},
                        Case{Collective::AllToAll, 8, "alltoall_direct", "Simple", 4}}) {
    const LoweredPlan lp = test::lowered(k.c, k.ranks, k.algorithm, k.protocol, k.instances);
    KeyParts parts;
    auto t0 = std::chrono::steady_clock::now();
    parts.source =
        generate_source(lp, KernelSpec{0, std::string(k.protocol) == "LL" ? exec::kLL : exec::kSimple, 7, 0});
    const double source_ms = ms_since(t0);
    parts.headers_digest = headers_digest(embedded_headers());
    parts.nvrtc_version = nvrtc->version();
    parts.arch = 90;
    parts.options = compile_options(90);
    parts.weft_version = WEFT_VERSION_STRING;
    t0 = std::chrono::steady_clock::now();
    const std::string key = cache_key(parts);
    const double key_ms = ms_since(t0);
    t0 = std::chrono::steady_clock::now();
    const std::vector<char> cubin = nvrtc->compile(parts.source, "t.cu", embedded_headers(), parts.options);
    const double compile_ms = ms_since(t0);
    std::string why;
    ASSERT_TRUE(cache.store(key, cubin, &why)) << why;
    t0 = std::chrono::steady_clock::now();
    auto back = cache.load(key, &why);
    const double load_ms = ms_since(t0);
    ASSERT_TRUE(back) << why;
    EXPECT_EQ(*back, cubin);
    std::printf(
        "%s %s R=%d x%d %s: %zu slots, first compile %.0f ms (target 2000), cubin %zu KiB, "
        "source %.2f ms, key %.2f ms, cache load %.2f ms (target 5 for the three)\n",
        std::string(to_string(k.c)).c_str(), k.algorithm, k.ranks, k.instances, k.protocol, lp.ranks[0].slots.size(),
        compile_ms, cubin.size() / 1024, source_ms, key_ms, load_ms);
  }
}

}  // namespace
}  // namespace weft::gen
