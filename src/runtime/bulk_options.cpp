// Communicator::bulk_options: the Simple bulk path's switches for a plan on its first use
// (docs/runtime.md, "Large messages against NCCL").
#include "exec/plan_fuse.hpp"
#include "runtime/communicator.hpp"
#include "exec/plan_check.hpp"
#include "plan/plan_source.hpp"
#include "util/config.hpp"
#include "util/log.hpp"

namespace weft {

void Communicator::bulk_options(CachedPlan& cp, bool simple) {
  if (!simple) return;
  const std::string what = "rank " + std::to_string(rank_) + ": plan '" + cp.lp.plan.algorithm + "'";
  if (config::get_bool("WEFT_FUSE_COPY")) {
    const FuseReport f = fuse_copies(cp.lp);
    if (f.total() > 0)
      WEFT_LOG(Debug, "PLAN", what << ": " << f.copy_sends << " copies fused into sends, " << f.folded_blocks
                                   << " copy blocks folded, " << f.dead_scratch << " rrcs into unread scratch made rrs");
  }
  // The posting warp: one plan thread block per CUDA block within a node, the interpreter
  // (collectives.cpp also leaves it out of traced calls and grouped plans).
  cp.post_warp = config::get_bool("WEFT_POST_WARP") && net_ == nullptr && !cp.gen;
  cp.mover_wide = config::get_bool("WEFT_MOVER_WIDE");
  cp.post_thread = config::get_bool("WEFT_POST_THREAD") && net_ == nullptr;
  // Windows of micro-batches change the order of a block's messages (every rank has the
  // same window: checked at creation); a plan that would deadlock so, on the emulator at
  // the communicator's depth, keeps windows of 1 on every rank alike.
  const uint32_t win = layout_.cfg.mb_window;
  if (win <= 1 || cp.lp.plan.execution != ExecutionModel::Algorithm) return;
  try {
    check_plan_on_emulator(cp.lp, layout_.cfg.depth, exec::kSimple, win);
    cp.mb_window = win;
  } catch (const Error& e) {
    WEFT_LOG(Info, "PLAN", what << " runs with windows of 1 micro-batch, not WEFT_MB_WINDOW=" << win << ": "
                                << e.what());
  }
}

}  // namespace weft
