#include "tune/cta_policy.hpp"

#include <algorithm>
#include <cctype>

#include "util/error.hpp"

namespace weft {

int normalize_cta_policy(int flags, std::string_view where) {
  if (flags < 0 || flags > (kCtaEfficiency | kCtaZero))
    fail(ErrorCode::InvalidArgument, std::string(where) + ": CTA policy " + std::to_string(flags) +
                                         " is not 0 (default), 1 (efficiency), 2 (zero) or 3 (both flags)");
  return (flags & kCtaZero) ? kCtaZero : flags;
}

int parse_cta_policy(std::string_view text, std::string_view where) {
  if (text.empty()) return -1;
  auto bad = [&] {
    fail(ErrorCode::InvalidArgument, std::string(where) + "='" + std::string(text) +
                                         "' is not a CTA policy: 0, 1, 2, or DEFAULT, EFFICIENCY and ZERO joined by '|'");
  };
  if (text.size() == 1 && text[0] >= '0' && text[0] <= '2') return text[0] - '0';
  int flags = 0;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t bar = std::min(text.find('|', start), text.size());
    std::string token(text.substr(start, bar - start));
    for (char& ch : token) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    if (token == "DEFAULT") flags |= kCtaDefault;
    else if (token == "EFFICIENCY") flags |= kCtaEfficiency;
    else if (token == "ZERO") flags |= kCtaZero;
    else bad();
    start = bar + 1;
  }
  return normalize_cta_policy(flags, where);
}

const char* cta_policy_name(int policy) {
  switch (policy) {
    case kCtaDefault: return "default";
    case kCtaEfficiency: return "efficiency";
    case kCtaZero: return "zero";
    default: return "?";
  }
}

bool zero_cta_collective(Collective c) {
  return c == Collective::AllGather || c == Collective::AllToAll || c == Collective::Broadcast;
}

int efficiency_instances(int instances, int blocks) {
  if (instances <= 1 || blocks <= kEfficiencyBlocks) return std::max(1, instances);
  // blocks ~ instances x (blocks per instance): the instances that would give the cap.
  const long long next = static_cast<long long>(instances) * kEfficiencyBlocks / blocks;
  return static_cast<int>(std::clamp<long long>(next, 1, instances - 1));
}

}  // namespace weft
