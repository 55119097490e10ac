// Handles without a GPU: a released ncclComm and a stray pointer are refused as
// communicators (before anything behind them is read), by the NCCL layer and by weft's C API.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "nccl/comm.hpp"
#include "weft/nccl.h"
#include "weft/weft.h"

using namespace weft::nccl;
using weft::ErrorCode;

namespace {

ErrorCode code_of(void (*f)(ncclComm*), ncclComm* c) {
  try {
    f(c);
  } catch (const weft::Error& e) {
    return e.code();
  }
  return ErrorCode::Success;
}

TEST(NcclHandles, AReleasedCommunicatorIsDeadForEveryLaterCall) {
  auto* c = new ncclComm;  // never initialized: release() needs no GPU
  EXPECT_EQ(&handle(c, "test"), c);
  release(c, true);
  EXPECT_EQ(code_of([](ncclComm* x) { handle(x, "test"); }, c), ErrorCode::InvalidArgument);
  // Released twice: an error, not a double free.
  EXPECT_EQ(code_of([](ncclComm* x) { release(x, true); }, c), ErrorCode::InvalidArgument);
  EXPECT_EQ(ncclCommDestroy(c), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("destroyed or is not one"), std::string::npos)
      << ncclGetLastError(nullptr);
  int n = 0;
  EXPECT_EQ(ncclCommCount(c, &n), ncclInvalidArgument);
  // A new communicator never takes the dead one's address (the dead shell stays allocated).
  auto* d = new ncclComm;
  EXPECT_NE(d, c);
  release(d, true);
}

TEST(NcclHandles, AStrayPointerIsNoCommunicatorEvenWithTheMagic) {
  alignas(ncclComm) unsigned char fake[sizeof(ncclComm)] = {};
  const uint64_t magic = ncclComm::kAlive;
  std::memcpy(fake, &magic, sizeof(magic));  // the magic's place in ncclComm, first member
  auto* c = reinterpret_cast<ncclComm_t>(fake);
  int n = 0;
  EXPECT_EQ(ncclCommCount(c, &n), ncclInvalidArgument);
  EXPECT_EQ(ncclCommDestroy(c), ncclInvalidArgument);
  EXPECT_EQ(ncclCommAbort(c), ncclInvalidArgument);
}

TEST(WeftHandles, AStrayPointerIsNoCommunicator) {
  unsigned char fake[64] = {};
  auto* c = reinterpret_cast<weftComm_t>(fake);
  int n = 0;
  EXPECT_EQ(weftCommCount(c, &n), weftInvalidArgument);
  EXPECT_NE(std::string(weftGetLastError(nullptr)).find("destroyed or aborted, or is not one"), std::string::npos)
      << weftGetLastError(nullptr);
  EXPECT_EQ(weftCommDestroy(c), weftInvalidArgument);
  EXPECT_EQ(weftCommAbort(c), weftInvalidArgument);
  EXPECT_EQ(weftAllReduce(nullptr, nullptr, 4, weftFloat32, weftSum, c, nullptr), weftInvalidArgument);
  EXPECT_EQ(weftSend(nullptr, 4, weftFloat32, 0, c, nullptr), weftInvalidArgument);
  EXPECT_EQ(weftCommDestroy(nullptr), weftSuccess);  // NULL stays a no-op, as in NCCL
}

}  // namespace

// ncclCommShrink's argument checks (NCCL's): a positive count, ranks of the parent, none
// twice, the caller not among them; the survivors keep the parent's order.
TEST(NcclShrink, SurvivorsAndRefusedLists) {
  const int ex[] = {3, 1};
  EXPECT_EQ(shrink_survivors(5, 0, ex, 2), (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(shrink_survivors(5, 4, ex, 2), (std::vector<int>{0, 2, 4}));
  auto message = [](int nranks, int me, const int* list, int count) -> std::string {
    try {
      shrink_survivors(nranks, me, list, count);
    } catch (const weft::Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
      return e.what();
    }
    return "accepted";
  };
  EXPECT_NE(message(5, 0, ex, 0).find("excludeRanksCount 0 is not positive"), std::string::npos);
  EXPECT_NE(message(5, 0, nullptr, 1).find("excludeRanksList is NULL"), std::string::npos);
  const int out_of_range[] = {5};
  EXPECT_NE(message(5, 0, out_of_range, 1).find("excludeRanksList[0] = 5 is not a rank"), std::string::npos);
  const int twice[] = {2, 2};
  EXPECT_NE(message(5, 0, twice, 2).find("names rank 2 twice"), std::string::npos);
  EXPECT_NE(message(5, 1, ex, 2).find("rank 1 is in excludeRanksList"), std::string::npos);
}
