// Routing of NCCL calls (weft, weft as bytes, PreMulSum, fallback) and result codes.
#include <gtest/gtest.h>

#include "nccl/route.hpp"

using namespace weft::nccl;
using weft::ErrorCode;

namespace {

ErrorCode code_of(Coll c, int type, int op, int user_type) {
  try {
    route(c, type, op, user_type);
  } catch (const weft::Error& e) {
    return e.code();
  }
  return ErrorCode::Success;
}

}  // namespace

TEST(NcclRoute, TypeSizesMatchNccl) {
  const size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  for (int t = 0; t < 12; ++t) EXPECT_EQ(type_size(t), sizes[t]) << type_name(t);
  EXPECT_EQ(type_size(12), 0u);
  EXPECT_EQ(type_size(-1), 0u);
  EXPECT_EQ(type_name(10), "float8e4m3");
  EXPECT_EQ(type_name(42), "type 42");
}

TEST(NcclRoute, BuiltInTypesAndOpsRunOnWeft) {
  for (Coll c : {Coll::AllReduce, Coll::Reduce, Coll::ReduceScatter})
    for (int t = 0; t < 10; ++t)
      for (int op = 0; op < 5; ++op) {
        Route r = route(c, t, op, -1);
        EXPECT_EQ(r.kind, Route::Kind::Weft);
        EXPECT_EQ(r.weft_type, t);
        EXPECT_EQ(r.weft_op, op);
      }
}

TEST(NcclRoute, Fp8MovesAsBytesButReducesOnTheFallback) {
  for (Coll c : {Coll::AllGather, Coll::Broadcast, Coll::AllToAll, Coll::Send, Coll::Recv, Coll::Gather, Coll::Scatter})
    for (int t : {kFloat8e4m3, kFloat8e5m2}) {
      Route r = route(c, t, 0, -1);
      EXPECT_EQ(r.kind, Route::Kind::Weft) << coll_name(c);
      EXPECT_EQ(r.weft_type, static_cast<int>(weft::DataType::Uint8));
    }
  Route r = route(Coll::AllReduce, kFloat8e5m2, 2, -1);
  EXPECT_EQ(r.kind, Route::Kind::Fallback);
  EXPECT_EQ(r.fallback_kind, "AllReduce of float8e5m2 (max)");
  r = route(Coll::ReduceScatter, kFloat8e4m3, 7, kFloat8e4m3);
  EXPECT_EQ(r.kind, Route::Kind::Fallback);
  EXPECT_EQ(r.fallback_kind, "ReduceScatter of float8e4m3 (premulsum)");
}

TEST(NcclRoute, PreMulSumRunsOnWeftAsScaledSum) {
  Route r = route(Coll::AllReduce, 9, 5, 9);
  EXPECT_EQ(r.kind, Route::Kind::PreMulSum);
  EXPECT_EQ(r.weft_type, 9);
  EXPECT_EQ(r.weft_op, weft::kOpSum);
}

TEST(NcclRoute, BadTypesAndOperatorsAreInvalidArguments) {
  EXPECT_EQ(code_of(Coll::AllReduce, 12, 0, -1), ErrorCode::InvalidArgument);
  EXPECT_EQ(code_of(Coll::Send, -3, 0, -1), ErrorCode::InvalidArgument);
  EXPECT_EQ(code_of(Coll::AllReduce, 7, -1, -1), ErrorCode::InvalidArgument);
  EXPECT_EQ(code_of(Coll::AllReduce, 7, 6, -1), ErrorCode::InvalidArgument);  // never created
  EXPECT_EQ(code_of(Coll::Reduce, 7, 5, 6), ErrorCode::InvalidArgument);     // made for float16
  EXPECT_EQ(code_of(Coll::AllGather, 7, 99, -1), ErrorCode::Success);        // op ignored
  try {
    route(Coll::Reduce, 7, 5, 6);
  } catch (const weft::Error& e) {
    EXPECT_NE(std::string(e.what()).find("made for float16 but is used with float32"), std::string::npos) << e.what();
  }
}

TEST(NcclRoute, ResultCodes) {
  EXPECT_EQ(to_nccl_result(ErrorCode::Success), 0);
  EXPECT_EQ(to_nccl_result(ErrorCode::UnhandledCuda), 1);
  EXPECT_EQ(to_nccl_result(ErrorCode::InvalidUsage), 5);
  EXPECT_EQ(to_nccl_result(ErrorCode::InProgress), 7);
  EXPECT_EQ(to_nccl_result(ErrorCode::Timeout), 6);
  EXPECT_EQ(to_nccl_result(ErrorCode::Parse), 4);
  EXPECT_EQ(to_nccl_result(ErrorCode::Verify), 3);
  EXPECT_STREQ(result_string(0), "no error");
  EXPECT_STREQ(result_string(6), "remote process exited or there was a network error");
  EXPECT_STREQ(result_string(99), "unknown result code");
}
