#include "plan/plan_file.hpp"

#include "compile/deadlock.hpp"
#include "util/error.hpp"

namespace weft {

bool is_plan_file_path(const std::string& source) {
  constexpr std::string_view ext = ".json";
  return source.size() > ext.size() && source.compare(source.size() - ext.size(), ext.size(), ext) == 0;
}

void check_plan_file(const Plan& plan, const std::string& origin, int32_t ranks, const std::string& ranks_of,
                     int32_t fifo_depth) {
  if (plan.num_ranks != ranks)
    fail(ErrorCode::InvalidArgument, origin + ": the plan is for " + std::to_string(plan.num_ranks) + " ranks, " +
                                         ranks_of + " has " + std::to_string(ranks));
  DeadlockReport dl = check_deadlock(plan, fifo_depth);
  if (!dl.ok)
    fail(ErrorCode::Verify, origin + ": the plan can deadlock with FIFOs of " + std::to_string(fifo_depth) +
                                " messages: " + dl.message);
}

}  // namespace weft
