// The built libweft_nccl.so as a program sees it (through dlopen, as a libnccl.so.2
// replacement): exactly NCCL's names and their pnccl aliases are exported, and calls that
// need no GPU answer with NCCL's codes and a message instead of crashing.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "weft/nccl.h"

namespace {

// Every function NCCL 2.28's libnccl.so.2 exports.
const std::vector<std::string> kAbi = {
    "ncclAllGather", "ncclAllReduce", "ncclAlltoAll", "ncclBcast", "ncclBroadcast", "ncclCommAbort", "ncclCommCount",
    "ncclCommCuDevice", "ncclCommDeregister", "ncclCommDestroy", "ncclCommFinalize", "ncclCommGetAsyncError",
    "ncclCommInitAll", "ncclCommInitRank", "ncclCommInitRankConfig", "ncclCommInitRankScalable", "ncclCommRegister",
    "ncclCommRevoke", "ncclCommShrink", "ncclCommSplit", "ncclCommUserRank", "ncclCommWindowDeregister",
    "ncclCommWindowRegister", "ncclDevCommCreate", "ncclDevCommDestroy", "ncclGather", "ncclGetErrorString",
    "ncclGetLastError", "ncclGetUniqueId", "ncclGetVersion", "ncclGinBarrierCreateRequirement", "ncclGroupEnd",
    "ncclGroupSimulateEnd", "ncclGroupStart", "ncclLLA2ACalcSlots", "ncclLLA2ACreateRequirement",
    "ncclLsaBarrierCreateRequirement", "ncclMemAlloc", "ncclMemFree", "ncclRecv", "ncclRedOpCreatePreMulSum",
    "ncclRedOpDestroy", "ncclReduce", "ncclReduceScatter", "ncclResetDebugInit", "ncclScatter", "ncclSend",
    "ncclTeamLsa", "ncclTeamRail", "ncclTeamRankToLsa", "ncclTeamRankToWorld", "ncclTeamWorld"};

class NcclAbi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    lib_ = dlopen(WEFT_NCCL_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(lib_, nullptr) << dlerror();
  }
  template <typename F>
  static F fn(const char* name) {
    void* p = dlsym(lib_, name);
    EXPECT_NE(p, nullptr) << name;
    return reinterpret_cast<F>(p);
  }
  static std::string last_error() { return fn<const char* (*)(ncclComm_t)>("ncclGetLastError")(nullptr); }
  static void* lib_;
};
void* NcclAbi::lib_ = nullptr;

}  // namespace

TEST_F(NcclAbi, ExportsEveryNcclNameAndItsProfilingAlias) {
  for (const std::string& name : kAbi) {
    void* a = dlsym(lib_, name.c_str());
    void* p = dlsym(lib_, ("p" + name).c_str());
    EXPECT_NE(a, nullptr) << name;
    EXPECT_EQ(a, p) << "p" << name << " is not an alias of " << name;
  }
}

TEST_F(NcclAbi, ExportsNothingOfWeftItself) {
  for (const char* name : {"weftAllReduce", "weftCommInitRank", "weftGetLastError", "cudaMalloc", "_ZN4weft4failENS_9ErrorCodeENSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"})
    EXPECT_EQ(dlsym(lib_, name), nullptr) << name;
}

TEST_F(NcclAbi, VersionIsNccl228) {
  int v = 0;
  EXPECT_EQ(fn<ncclResult_t (*)(int*)>("ncclGetVersion")(&v), ncclSuccess);
  EXPECT_EQ(v, 22800);
  EXPECT_EQ(fn<ncclResult_t (*)(int*)>("ncclGetVersion")(nullptr), ncclInvalidArgument);
  EXPECT_NE(last_error().find("version is NULL"), std::string::npos) << last_error();
}

TEST_F(NcclAbi, ErrorStrings) {
  auto s = fn<const char* (*)(ncclResult_t)>("ncclGetErrorString");
  EXPECT_STREQ(s(ncclSuccess), "no error");
  EXPECT_STREQ(s(ncclInternalError), "internal error - please report this issue");
  EXPECT_STREQ(s(static_cast<ncclResult_t>(1234)), "unknown result code");
}

TEST_F(NcclAbi, BadArgumentsAreRefusedBeforeAnyGpuWork) {
  auto init = fn<ncclResult_t (*)(ncclComm_t*, int, ncclUniqueId, int)>("ncclCommInitRank");
  auto init_cfg = fn<ncclResult_t (*)(ncclComm_t*, int, ncclUniqueId, int, ncclConfig_t*)>("ncclCommInitRankConfig");
  ncclUniqueId id{};
  ncclComm_t comm = reinterpret_cast<ncclComm_t>(0x1);
  EXPECT_EQ(init(&comm, 0, id, 0), ncclInvalidArgument);
  EXPECT_EQ(comm, nullptr);
  EXPECT_NE(last_error().find("ncclCommInitRank: nranks 0 is not positive"), std::string::npos) << last_error();
  EXPECT_EQ(init(&comm, 2, id, 2), ncclInvalidArgument);
  EXPECT_NE(last_error().find("rank 2 is outside 0..1"), std::string::npos) << last_error();
  EXPECT_EQ(init(nullptr, 2, id, 0), ncclInvalidArgument);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 5;
  EXPECT_EQ(init_cfg(&comm, 2, id, 0, &cfg), ncclInvalidArgument);
  EXPECT_NE(last_error().find("blocking is 5"), std::string::npos) << last_error();
}

TEST_F(NcclAbi, NullCommunicatorsAreInvalidArgumentsNotCrashes) {
  auto allreduce =
      fn<ncclResult_t (*)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t)>(
          "ncclAllReduce");
  EXPECT_EQ(allreduce(nullptr, nullptr, 4, ncclFloat, ncclSum, nullptr, nullptr), ncclInvalidArgument);
  EXPECT_NE(last_error().find("ncclAllReduce: the communicator is NULL"), std::string::npos) << last_error();
  auto send = fn<ncclResult_t (*)(const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t)>("ncclSend");
  EXPECT_EQ(send(nullptr, 4, ncclFloat, 0, nullptr, nullptr), ncclInvalidArgument);
  auto count = fn<ncclResult_t (*)(ncclComm_t, int*)>("ncclCommCount");
  int n = 0;
  EXPECT_EQ(count(nullptr, &n), ncclInvalidArgument);
  auto async = fn<ncclResult_t (*)(ncclComm_t, ncclResult_t*)>("ncclCommGetAsyncError");
  ncclResult_t r = ncclSuccess;
  EXPECT_EQ(async(nullptr, &r), ncclInvalidArgument);
  EXPECT_EQ(fn<ncclResult_t (*)(ncclComm_t)>("ncclCommDestroy")(nullptr), ncclSuccess);
  EXPECT_EQ(fn<ncclResult_t (*)(ncclComm_t)>("ncclCommAbort")(nullptr), ncclSuccess);
  EXPECT_EQ(fn<ncclResult_t (*)(ncclRedOp_t, ncclComm_t)>("ncclRedOpDestroy")(ncclSum, nullptr), ncclInvalidArgument);
  EXPECT_EQ(fn<ncclResult_t (*)(void**, size_t)>("ncclMemAlloc")(nullptr, 16), ncclInvalidArgument);
}

TEST_F(NcclAbi, UnsupportedCallsSayWhy) {
  ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
  EXPECT_EQ(fn<ncclResult_t (*)(ncclSimInfo_t*)>("ncclGroupSimulateEnd")(&info), ncclInvalidUsage);
  EXPECT_NE(last_error().find("weft does not simulate groups"), std::string::npos) << last_error();
  EXPECT_EQ(fn<ncclResult_t (*)(ncclComm_t, const void*, void*)>("ncclDevCommCreate")(nullptr, nullptr, nullptr),
            ncclInvalidUsage);
  EXPECT_NE(last_error().find("device API"), std::string::npos) << last_error();
  EXPECT_EQ(fn<int (*)(int, int)>("ncclLLA2ACalcSlots")(1024, 8), 0);
}

TEST_F(NcclAbi, WindowsShrinkAndPolicyCallsCheckTheirArguments) {
  auto reg = fn<ncclResult_t (*)(ncclComm_t, void*, size_t, ncclWindow_t*, int)>("ncclCommWindowRegister");
  auto dereg = fn<ncclResult_t (*)(ncclComm_t, ncclWindow_t)>("ncclCommWindowDeregister");
  ncclWindow_t win = reinterpret_cast<ncclWindow_t>(0x1);
  int buf = 0;
  EXPECT_EQ(reg(nullptr, &buf, 4, &win, NCCL_WIN_COLL_SYMMETRIC), ncclInvalidArgument);
  EXPECT_EQ(win, nullptr);  // cleared before anything else
  EXPECT_NE(last_error().find("ncclCommWindowRegister: the communicator is NULL"), std::string::npos) << last_error();
  EXPECT_EQ(reg(nullptr, &buf, 4, nullptr, 0), ncclInvalidArgument);
  EXPECT_NE(last_error().find("win is NULL"), std::string::npos) << last_error();
  EXPECT_EQ(dereg(nullptr, nullptr), ncclInvalidArgument);
  EXPECT_NE(last_error().find("ncclCommWindowDeregister: the communicator is NULL"), std::string::npos) << last_error();
  auto shrink = fn<ncclResult_t (*)(ncclComm_t, int*, int, ncclComm_t*, ncclConfig_t*, int)>("ncclCommShrink");
  int ex[] = {1};
  ncclComm_t out = reinterpret_cast<ncclComm_t>(0x1);
  EXPECT_EQ(shrink(nullptr, ex, 1, &out, nullptr, NCCL_SHRINK_DEFAULT), ncclInvalidArgument);
  EXPECT_EQ(out, nullptr);
  EXPECT_NE(last_error().find("ncclCommShrink: the communicator is NULL"), std::string::npos) << last_error();
  EXPECT_EQ(shrink(nullptr, ex, 1, nullptr, nullptr, NCCL_SHRINK_DEFAULT), ncclInvalidArgument);
  EXPECT_NE(last_error().find("newcomm is NULL"), std::string::npos) << last_error();
  // A config with an unknown CTA policy is refused before any rendezvous.
  auto init_cfg = fn<ncclResult_t (*)(ncclComm_t*, int, ncclUniqueId, int, ncclConfig_t*)>("ncclCommInitRankConfig");
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.CTAPolicy = 4;
  ncclUniqueId id{};
  EXPECT_EQ(init_cfg(&out, 2, id, 0, &cfg), ncclInvalidArgument);
  EXPECT_NE(last_error().find("CTAPolicy 4 is not a known policy"), std::string::npos) << last_error();
}

TEST_F(NcclAbi, GroupsMustBalance) {
  auto start = fn<ncclResult_t (*)()>("ncclGroupStart");
  auto end = fn<ncclResult_t (*)()>("ncclGroupEnd");
  EXPECT_EQ(end(), ncclInvalidUsage);
  EXPECT_NE(last_error().find("ncclGroupEnd without ncclGroupStart"), std::string::npos) << last_error();
  EXPECT_EQ(start(), ncclSuccess);
  EXPECT_EQ(start(), ncclSuccess);
  EXPECT_EQ(end(), ncclSuccess);
  EXPECT_EQ(end(), ncclSuccess);
  EXPECT_EQ(end(), ncclInvalidUsage);
}

TEST_F(NcclAbi, TeamsOfANullCommunicatorAreEmpty) {
  struct Team {
    int nRanks, rank, stride;
  };
  Team t = fn<Team (*)(ncclComm_t)>("ncclTeamWorld")(nullptr);
  EXPECT_EQ(t.nRanks, 0);
  EXPECT_EQ(t.rank, -1);
}
