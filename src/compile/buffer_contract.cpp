#include "compile/buffer_contract.hpp"

#include "util/text.hpp"

namespace weft {
std::string buffer_contract_violation(const Plan& plan) {
  for (const RankPlan& rp : plan.ranks) {
    const bool non_root = rp.rank != plan.root;
    for (size_t t = 0; t < rp.tbs.size(); ++t)
      for (size_t i = 0; i < rp.tbs[t].slots.size(); ++i) {
        const Slot& s = rp.tbs[t].slots[i];
        auto at = [&](const char* what, const BufferRange& b) {
          return text::format("plan %s: rank %d thread block %zu slot %zu (%s) %s its %s chunk %d, which ",
                              plan.algorithm.c_str(), rp.rank, t, i, std::string(to_string(s.primitive)).c_str(), what,
                              std::string(to_string(b.buffer)).c_str(), b.index);
        };
        if (primitive_info(s.primitive).writes_dst && s.dst.buffer != Buffer::Scratch) {
          if (!plan.in_place && s.dst.buffer == Buffer::Input)
            return at("writes", s.dst) + "an out-of-place call never writes";
          if (plan.collective == Collective::Reduce && non_root)
            return at("writes", s.dst) + "Reduce leaves to the caller on ranks other than the root";
        }
        if (primitive_info(s.primitive).reads_src && !plan.in_place && s.src.buffer == Buffer::Input &&
            plan.collective == Collective::Broadcast && non_root)
          return at("reads", s.src) + "Broadcast leaves undefined on ranks other than the root";
      }
  }
  return "";
}

}  // namespace weft
