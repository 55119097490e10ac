// Shared by the generated-kernel tests: whether NVRTC loads here (the tests that compile
// skip with its message when it does not), and a small lowered plan.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "exec/plan_lowering.hpp"
#include "gen/nvrtc.hpp"
#include "plan/plan_source.hpp"
#include "util/error.hpp"

namespace weft::gen::test {

/// NVRTC, or null with `why` set.
inline const Nvrtc* nvrtc_or_null(std::string* why) {
  try {
    return &Nvrtc::get();
  } catch (const Error& e) {
    *why = e.what();
    return nullptr;
  }
}

#define WEFT_REQUIRE_NVRTC(var)                                                 \
  std::string var##_why;                                                        \
  const ::weft::gen::Nvrtc* var = ::weft::gen::test::nvrtc_or_null(&var##_why); \
  if (var == nullptr) GTEST_SKIP() << "NVRTC is missing here: " << var##_why

inline LoweredPlan lowered(Collective c, int ranks, const std::string& algorithm, const std::string& protocol,
                           int instances, bool in_place = false, const std::string& scheduler = "algo") {
  return lower_plan(make_plan(c, ranks, algorithm, protocol, instances, in_place, 0, kDefaultFifoDepth, scheduler),
                    ranks, 32);
}

}  // namespace weft::gen::test
