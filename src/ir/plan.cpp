#include "ir/plan.hpp"

#include <algorithm>
#include <cctype>
#include <iterator>

namespace weft {

std::string_view to_string(ExecutionModel m) { return m == ExecutionModel::Task ? "task" : "algorithm"; }

std::string_view to_string(ChannelKind k) {
  return k == ChannelKind::Memory ? "memory" : k == ChannelKind::PortCopyEngine ? "port-ce" : "port-net";
}

std::optional<ChannelKind> channel_kind_from_string(std::string_view s) {
  if (s == "memory") return ChannelKind::Memory;
  if (s == "port-ce") return ChannelKind::PortCopyEngine;
  if (s == "port-net") return ChannelKind::PortNetwork;
  return std::nullopt;
}

std::string_view to_string(Primitive p) {
  switch (p) {
    case Primitive::Send: return "send";
    case Primitive::Recv: return "recv";
    case Primitive::RecvReduceCopy: return "rrc";
    case Primitive::RecvCopySend: return "rcs";
    case Primitive::RecvReduceCopySend: return "rrcs";
    case Primitive::RecvReduceSend: return "rrs";
    case Primitive::Copy: return "copy";
    case Primitive::Reduce: return "reduce";
    case Primitive::Nop: return "nop";
  }
  return "?";
}

std::optional<Primitive> primitive_from_string(std::string_view s) {
  std::string l(s);
  std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return std::tolower(c); });
  if (l == "send" || l == "s") return Primitive::Send;
  if (l == "recv" || l == "r") return Primitive::Recv;
  if (l == "rrc") return Primitive::RecvReduceCopy;
  if (l == "rcs") return Primitive::RecvCopySend;
  if (l == "rrcs") return Primitive::RecvReduceCopySend;
  if (l == "rrs") return Primitive::RecvReduceSend;
  if (l == "copy" || l == "cpy") return Primitive::Copy;
  if (l == "reduce" || l == "re") return Primitive::Reduce;
  if (l == "nop") return Primitive::Nop;
  return std::nullopt;
}

const PrimitiveInfo& primitive_info(Primitive p) {
  //                               reads_src writes_dst reads_dst receives sends  reduces
  static const PrimitiveInfo kTable[] = {
      /* Send */               {true,     false,     false,    false,   true,  false},
      /* Recv */               {false,    true,      false,    true,    false, false},
      /* RecvReduceCopy */     {true,     true,      false,    true,    false, true},
      /* RecvCopySend */       {false,    true,      false,    true,    true,  false},
      /* RecvReduceCopySend */ {true,     true,      false,    true,    true,  true},
      /* RecvReduceSend */     {true,     false,     false,    true,    true,  true},
      /* Copy */               {true,     true,      false,    false,   false, false},
      /* Reduce */             {true,     true,      true,     false,   false, true},
      /* Nop */                {false,    false,     false,    false,   false, false},
  };
  static const PrimitiveInfo kUnknown{};
  const auto i = static_cast<size_t>(p);
  return i < std::size(kTable) ? kTable[i] : kUnknown;
}

int32_t Plan::max_tbs_per_rank() const {
  size_t m = 0;
  for (const RankPlan& r : ranks) m = std::max(m, r.tbs.size());
  return static_cast<int32_t>(m);
}

double Plan::mean_tbs_per_rank() const {
  if (ranks.empty()) return 0;
  double s = 0;
  for (const RankPlan& r : ranks) s += static_cast<double>(r.tbs.size());
  return s / static_cast<double>(ranks.size());
}

}  // namespace weft
