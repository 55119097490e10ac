// Scheduler "auto" in the runtime (tune/auto_schedule.hpp): the size buckets, the choice on
// a file of weft's own fixtures where the file's own schedule wins small calls and HPDS
// large ones, the plan key that keeps one plan per bucket, WEFT_SCHEDULER, a selection row
// naming "auto", and `weft bench --predict` saying what it chose.
#include <gtest/gtest.h>

#include <string>

#include "cli_run.hpp"
#include "exec/plan_check.hpp"
#include "exec/plan_lowering.hpp"
#include "tune/auto_schedule.hpp"
#include "plan/plan_source.hpp"
#include "scoped_env.hpp"
#include "tune/decide.hpp"
#include "tune/selection_table.hpp"
#include "util/error.hpp"

namespace weft {
namespace {

constexpr uint64_t KiB = 1024, MiB = 1024 * KiB;

const std::string kFile = std::string(WEFT_TEST_DATA_DIR) + "/tests/data/msccl/exported/allpairs_allreduce_2_oop.xml";

TEST(AutoSchedule, BucketsArePowersOfTwoFrom4KiB) {
  EXPECT_EQ(algo::auto_bucket(0), 12);
  EXPECT_EQ(algo::auto_bucket(1), 12);
  EXPECT_EQ(algo::auto_bucket(4 * KiB), 12);
  EXPECT_EQ(algo::auto_bucket(4 * KiB + 1), 13);
  EXPECT_EQ(algo::auto_bucket(MiB - 1), 20);
  EXPECT_EQ(algo::auto_bucket(MiB), 20);
  EXPECT_EQ(algo::auto_bucket(MiB + 1), 21);
  EXPECT_EQ(algo::auto_bucket(uint64_t{1} << 50), algo::kAutoMaxBucket);
  EXPECT_EQ(algo::auto_bucket_bytes(20), MiB);
}

TEST(AutoSchedule, CandidatesAreTheSchedulersAndAFilesOwnSchedule) {
  EXPECT_EQ(auto_candidates("ring_allreduce"), (std::vector<std::string>{"hpds", "algo", "stage", "rr", "gc3"}));
  EXPECT_EQ(auto_candidates(kFile).back(), "as-given");
  EXPECT_EQ(auto_candidates(kFile).size(), 6u);
}

/// The choice at `bytes` with the protocol and instances the default table gives 2 ranks there.
AutoChoice choose(uint64_t bytes, const std::string& proto, int instances) {
  return choose_auto_schedule(Collective::AllReduce, 2, kFile, proto, instances, false, 0, 4, "state", {}, bytes,
                              proto == "LL" ? 32 * KiB : 512 * KiB);
}

void expect_fastest(const AutoChoice& ch) {
  size_t built = 0;
  const AutoCandidate* w = nullptr;
  for (const AutoCandidate& c : ch.candidates)
    if (c.scheduler == ch.scheduler) w = &c;
  ASSERT_NE(w, nullptr);
  for (const AutoCandidate& c : ch.candidates) {
    if (!c.error.empty()) continue;
    ++built;
    EXPECT_LE(w->time_us, c.time_us * (1 + 1e-9)) << c.scheduler << " is faster than the chosen " << ch.scheduler;
  }
  EXPECT_EQ(built, ch.candidates.size()) << ch.reason;
  EXPECT_EQ(ch.plan.max_tbs_per_rank(), w->tbs);
  EXPECT_NE(ch.reason.find(ch.scheduler + " for AllReduce at " + std::to_string(ch.bytes) + " bytes"), std::string::npos)
      << ch.reason;
  EXPECT_NE(ch.reason.find("(6 of 6 candidates built and simulated on topology h200"), std::string::npos) << ch.reason;
}

TEST(AutoSchedule, TheFilesOwnScheduleWinsSmallCallsAndHpdsLargeOnes) {
  const AutoChoice small = choose(16 * KiB, "LL", 2);
  expect_fastest(small);
  EXPECT_EQ(small.scheduler, "as-given") << small.reason;
  EXPECT_EQ(small.bytes, 16 * KiB);
  const AutoChoice large = choose(40 * MiB, "Simple", 24);
  expect_fastest(large);
  EXPECT_EQ(large.scheduler, "hpds") << large.reason;
  EXPECT_EQ(large.bytes, 64 * MiB);  // 40 MiB falls in the bucket chosen at 64 MiB
  // Both pass what every plan passes before upload: lowering (32 connections per pair, the
  // default WEFT_CONNECTIONS) and the emulator against the host reference.
  EXPECT_NO_THROW(check_plan_on_emulator(lower_plan(small.plan, 2, 32), 4, exec::kLL));
  EXPECT_NO_THROW(check_plan_on_emulator(lower_plan(large.plan, 2, 32), 4, exec::kSimple));
  // The plan is the one make_plan builds with the chosen scheduler.
  const Plan again = make_plan(Collective::AllReduce, 2, kFile, "Simple", 24, false, 0, 4, "hpds", "state");
  EXPECT_EQ(large.plan.max_tbs_per_rank(), again.max_tbs_per_rank());
  EXPECT_EQ(large.plan.scheduler, again.scheduler);
}

TEST(AutoSchedule, InPlaceCallsOfAnOutOfPlaceFileTakeTheCompilersSchedules) {
  const AutoChoice ch = choose_auto_schedule(Collective::AllReduce, 2, kFile, "LL", 1, true, 0, 4, "state", {}, KiB, 32 * KiB);
  EXPECT_NE(ch.scheduler, "as-given");
  EXPECT_TRUE(ch.plan.in_place);
  ASSERT_EQ(ch.candidates.back().scheduler, "as-given");
  EXPECT_NE(ch.candidates.back().error.find("compiles only for out-of-place buffers"), std::string::npos);
  EXPECT_NE(ch.reason.find("(5 of 6 candidates"), std::string::npos) << ch.reason;
}

TEST(AutoSchedule, ASourceForAnotherCollectiveIsRefusedNamingIt) {
  try {
    choose_auto_schedule(Collective::AllGather, 2, kFile, "Simple", 1, false, 0, 4, "state", {}, MiB, 512 * KiB);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("implements AllReduce, not AllGather"), std::string::npos) << e.what();
  }
}

std::shared_ptr<const SelectionTable> table() {
  return std::shared_ptr<const SelectionTable>(std::shared_ptr<void>(), &default_json_table());
}

CommShape two_ranks() {
  CommShape s;
  s.nranks = 2;
  return s;
}

TEST(AutoSchedule, WeftSchedulerAutoKeysOnePlanPerBucket) {
  DecideEnv env;
  env.algo = kFile;
  env.scheduler = "auto";
  const Decider d(table(), two_ranks(), env);
  auto key = [&](uint64_t bytes) {
    const Call call{Collective::AllReduce, bytes, false};
    const Decision dec = d.decide(call);
    EXPECT_TRUE(algo::registry().at(dec.algorithm).auto_schedule()) << bytes;
    return plan_key(call, dec, 0);
  };
  EXPECT_EQ(key(3 * MiB).bucket, 22);
  EXPECT_EQ(key(3 * MiB), key(4 * MiB));
  EXPECT_NE(key(4 * MiB), key(4 * MiB + 1));
  // Without it the table's scheduler stays and there is no bucket.
  env.scheduler.clear();
  const Decider fixed(table(), two_ranks(), env);
  const Call call{Collective::AllReduce, 4 * MiB, false};
  const Decision dec = fixed.decide(call);
  EXPECT_FALSE(algo::registry().at(dec.algorithm).auto_schedule());
  EXPECT_EQ(plan_key(call, dec, 0).bucket, 0);
}

TEST(AutoSchedule, AnUnknownWeftSchedulerFailsTheCallNamingIt) {
  DecideEnv env;
  env.algo = kFile;
  env.scheduler = "fastest";
  const Decider d(table(), two_ranks(), env);
  try {
    d.decide(Call{Collective::AllReduce, MiB, false});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("WEFT_SCHEDULER: unknown scheduler 'fastest'"), std::string::npos) << e.what();
  }
}

TEST(AutoSchedule, ASelectionRowMayNameAuto) {
  const SelectionTable t = parse_selection_table(
      R"({"format": "weft-selection", "version": 1, "rows": [{"collectives": ["AllReduce"], "algorithm": "ring_allreduce",
          "scheduler": "auto", "protocol": "Simple", "instances": 2}]})",
      "auto.json");
  ASSERT_EQ(t.rows.size(), 1u);
  EXPECT_TRUE(algo::registry().at(t.rows[0].algorithm_id).auto_schedule());
}

TEST(AutoSchedule, BenchPredictSaysWhatItChoseAndWhy) {
  const test::CliRun r = test::run_command("WEFT_ALGO=" + kFile + " WEFT_SCHEDULER=auto " + std::string(WEFT_CLI) +
                                               " bench AllReduce --predict --ranks 2 --sizes 16K:64M --factor 64 --json",
                                           "auto_predict");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("auto chose as-given\",\"schedule_reason\":\"auto chose as-given for AllReduce at 16384 bytes"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("auto chose hpds\",\"schedule_reason\":\"auto chose hpds for AllReduce at 67108864 bytes"),
            std::string::npos) << r.out;
}

}  // namespace
}  // namespace weft
