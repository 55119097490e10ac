// The host-side state machine of partitioned requests: every misuse is an error whose
// message says what and where, and legal sequences pass.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "part/state.hpp"
#include "util/error.hpp"

using namespace weft;
using namespace weft::part;

namespace {

RequestDesc desc(Direction dir, uint32_t partitions = 4, uint64_t count = 8, int dtype = 7) {
  RequestDesc d;
  d.dir = dir;
  d.peer = 1;
  d.tag = 3;
  d.partitions = partitions;
  d.count = count;
  d.dtype = dtype;
  d.elem_bytes = dtype_bytes(dtype);
  return d;
}

/// Expects `f` to throw weft::Error with `code` and a message containing every `parts`.
void expect_error(const std::function<void()>& f, ErrorCode code, std::initializer_list<std::string> parts) {
  try {
    f();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (const std::string& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

RequestState prepared_send() {
  RequestState s(desc(Direction::Send), 0);
  s.start();
  EXPECT_TRUE(s.begin_prepare());
  s.setup_done();
  s.prepare_done();
  return s;
}

}  // namespace

TEST(PartState, LegalEpochs) {
  RequestState s(desc(Direction::Send), 0);
  EXPECT_EQ(s.epoch(), 0u);
  for (uint64_t e = 1; e <= 3; ++e) {
    s.start();
    EXPECT_EQ(s.epoch(), e);
    EXPECT_EQ(s.begin_prepare(), e == 1);  // only the first pbuf_prepare sets up
    s.setup_done();
    s.prepare_done();
    EXPECT_TRUE(s.prepared());
    for (uint32_t p = 0; p < 4; ++p) EXPECT_EQ(s.pready(p), p + 1);
    s.complete();
    EXPECT_FALSE(s.active());
  }
  s.check_free();
}

TEST(PartState, StartWhileActive) {
  RequestState s(desc(Direction::Recv), 2);
  s.start();
  expect_error([&] { s.start(); }, ErrorCode::InvalidUsage,
               {"rank 2", "precv from rank 1", "tag 3", "start while active", "epoch 1"});
}

TEST(PartState, PreadyTwice) {
  RequestState s = prepared_send();
  s.pready(2);
  expect_error([&] { s.pready(2); }, ErrorCode::InvalidUsage, {"psend to rank 1", "pready twice", "partition 2", "epoch 1"});
  // The next epoch accepts it again.
  for (uint32_t p : {0u, 1u, 3u}) s.pready(p);
  s.complete();
  s.start();
  s.begin_prepare();
  s.prepare_done();
  EXPECT_EQ(s.pready(2), 1u);
}

TEST(PartState, IndexOutOfRange) {
  RequestState s = prepared_send();
  expect_error([&] { s.pready(4); }, ErrorCode::InvalidArgument, {"partition 4", "out of range", "0..3"});
  RequestState r(desc(Direction::Recv), 0);
  expect_error([&] { r.check_parrived(9); }, ErrorCode::InvalidArgument, {"parrived of partition 9", "out of range"});
  r.check_parrived(3);
}

TEST(PartState, WrongDirectionAndOrder) {
  RequestState s(desc(Direction::Send), 0);
  expect_error([&] { s.pready(0); }, ErrorCode::InvalidUsage, {"inactive"});
  expect_error([&] { s.begin_prepare(); }, ErrorCode::InvalidUsage, {"pbuf_prepare on an inactive request"});
  s.start();
  expect_error([&] { s.pready(0); }, ErrorCode::InvalidUsage, {"pready before pbuf_prepare"});
  expect_error([&] { s.check_parrived(0); }, ErrorCode::InvalidUsage, {"parrived on a send request"});
  expect_error([&] { s.check_free(); }, ErrorCode::InvalidUsage, {"free of an active request"});
  expect_error([&] { s.check_wait(); }, ErrorCode::InvalidUsage, {"before pbuf_prepare"});
  s.begin_prepare();
  s.prepare_done();
  s.check_wait();
  RequestState r(desc(Direction::Recv), 0);
  r.start();
  expect_error([&] { r.pready(0); }, ErrorCode::InvalidUsage, {"pready on a receive request"});
}

TEST(PartState, PeerMismatch) {
  const RequestDesc send = desc(Direction::Send, 4, 8, 7);
  check_match(send, desc(Direction::Recv, 4, 8, 7), 0);
  expect_error([&] { check_match(send, desc(Direction::Recv, 5, 8, 7), 0); }, ErrorCode::InvalidUsage,
               {"does not match", "4 partitions of 8", "5 partitions of 8"});
  expect_error([&] { check_match(send, desc(Direction::Recv, 4, 9, 7), 0); }, ErrorCode::InvalidUsage,
               {"8 elements", "9 elements"});
  expect_error([&] { check_match(send, desc(Direction::Recv, 4, 8, 2), 0); }, ErrorCode::InvalidUsage,
               {"type 7", "type 2"});
}

TEST(PartState, InitArguments) {
  RequestDesc d = desc(Direction::Send);
  check_init(d, 0, 2);
  expect_error([&] { check_init(d, 0, 1); }, ErrorCode::InvalidArgument, {"peer 1 is not a rank"});
  d.partitions = 0;
  expect_error([&] { check_init(d, 0, 2); }, ErrorCode::InvalidArgument, {"partitions must be at least 1"});
  d = desc(Direction::Send, 4, 0);
  expect_error([&] { check_init(d, 0, 2); }, ErrorCode::InvalidArgument, {"count"});
  d = desc(Direction::Send, 4, 8, 42);
  expect_error([&] { check_init(d, 0, 2); }, ErrorCode::InvalidArgument, {"datatype 42"});
  d = desc(Direction::Send);
  d.tag = -1;
  expect_error([&] { check_init(d, 0, 2); }, ErrorCode::InvalidArgument, {"tag -1"});
}

TEST(PartState, DeviceErrorMessages) {
  const RequestDesc d = desc(Direction::Send);
  EXPECT_NE(describe_device_error(d, 0, kDevTwice, 2, 5).find("twice for partition 2 in epoch 5"), std::string::npos);
  EXPECT_NE(describe_device_error(d, 0, kDevOutOfRange, 7, 1).find("partition 7, out of range"), std::string::npos);
  EXPECT_NE(describe_device_error(d, 0, kDevNotStarted, 0, 0).find("not started"), std::string::npos);
  EXPECT_EQ(transport_partitions(10, 4), 3u);
  EXPECT_EQ(transport_partitions(8, 4), 2u);
  EXPECT_EQ(transport_partitions(8, 1), 8u);
}
