// Randomized tests run a fixed number of cases from a fixed seed, so every run checks the
// same inputs; WEFT_TEST_RANDOM_ITERS and WEFT_TEST_RANDOM_SEED run a longer or another
// campaign by hand (docs/testing.md).
#pragma once

#include <cstdlib>

namespace weft::test {

struct RandomSoak {
  int iters;
  unsigned seed;
};

/// The case count and seed of a randomized test: its defaults, or the environment's.
inline RandomSoak random_soak(int default_iters, unsigned default_seed) {
  const char* iters = std::getenv("WEFT_TEST_RANDOM_ITERS");
  const char* seed = std::getenv("WEFT_TEST_RANDOM_SEED");
  return {iters ? std::atoi(iters) : default_iters, seed ? static_cast<unsigned>(std::atoll(seed)) : default_seed};
}

}  // namespace weft::test
