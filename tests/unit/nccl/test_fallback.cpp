// The fallback loader: a missing library, weft's own library, a real NCCL where one is
// installed. Nothing here needs a GPU (ncclGetVersion starts nothing).
#include <gtest/gtest.h>

#include <unistd.h>

#include "nccl/fallback.hpp"

using namespace weft::nccl;

TEST(NcclFallback, MissingLibraryIsExplained) {
  std::string why;
  EXPECT_EQ(open_real_nccl("/nonexistent/libnccl.so.2", &why), nullptr);
  EXPECT_NE(why.find("/nonexistent/libnccl.so.2 cannot be opened"), std::string::npos) << why;
}

TEST(NcclFallback, ALibraryWithoutNcclIsRefused) {
  std::string why;
  EXPECT_EQ(open_real_nccl("libm.so.6", &why), nullptr);
  EXPECT_NE(why.find("lacks ncclGetVersion"), std::string::npos) << why;
}

TEST(NcclFallback, RealNcclLoadsBesideWeft) {
  if (access(WEFT_SYSTEM_NCCL, R_OK) != 0) GTEST_SKIP() << "no NCCL at " << WEFT_SYSTEM_NCCL;
  std::string why;
  auto real = open_real_nccl(WEFT_SYSTEM_NCCL, &why);
  ASSERT_NE(real, nullptr) << why;
  EXPECT_GE(real->version, 21300);
  EXPECT_NE(real->AllReduce, nullptr);
  EXPECT_NE(real->CommInitRankConfig, nullptr);
}
