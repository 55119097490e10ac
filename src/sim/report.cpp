#include "sim/report.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "util/text.hpp"

namespace weft::sim {

double bus_factor(Collective c, int32_t ranks) {
  const double n = ranks < 1 ? 1.0 : static_cast<double>(ranks);
  switch (c) {
    case Collective::AllReduce: return 2.0 * (n - 1.0) / n;
    case Collective::AllGather:
    case Collective::ReduceScatter:
    case Collective::AllToAll: return (n - 1.0) / n;
    case Collective::Broadcast:
    case Collective::Reduce:
    case Collective::Custom: return 1.0;
  }
  return 1.0;
}

void summarize_tbs(SimReport& r) {
  // Means over the plan's thread blocks: a merged block counts for each sibling.
  double busy = 0, idle = 0, idle_max = 0, sync = 0, sync_max = 0, n = 0;
  for (const TbStat& t : r.tbs) {
    busy += t.weight * (t.lifetime_us > 0 ? t.busy_us / t.lifetime_us : 0);
    idle += t.weight * t.idle();
    idle_max = std::max(idle_max, t.idle());
    sync += t.weight * t.sync_idle();
    sync_max = std::max(sync_max, t.sync_idle());
    n += t.weight;
  }
  if (n > 0) {
    r.tb_busy_mean = busy / n;
    r.tb_idle_mean = idle / n;
    r.tb_sync_idle_mean = sync / n;
  }
  r.tb_idle_max = idle_max;
  r.tb_sync_idle_max = sync_max;
  r.tbs_total = static_cast<int64_t>(n);
}

std::string report_to_json(const SimReport& r) {
  nlohmann::ordered_json j;
  j["algorithm"] = r.algorithm;
  j["collective"] = std::string(to_string(r.collective));
  j["scheduler"] = r.scheduler;
  j["allocator"] = r.allocator;
  j["execution"] = r.execution;
  j["topology"] = r.topology;
  j["ranks"] = r.ranks;
  j["bytes"] = r.bytes;
  j["chunk_bytes"] = r.chunk_bytes;
  j["microbatch_bytes"] = r.microbatch_bytes;
  j["microbatches"] = r.microbatches;
  j["time_us"] = r.time_us;
  j["algbw_GBps"] = r.algbw_GBps;
  j["busbw_GBps"] = r.busbw_GBps;
  j["link_utilization"] = r.link_utilization;
  j["link_bandwidth_utilization"] = r.link_bandwidth_utilization;
  j["links_used"] = r.links_used;
  j["tb_busy_mean"] = r.tb_busy_mean;
  j["tb_idle_mean"] = r.tb_idle_mean;
  j["tb_idle_max"] = r.tb_idle_max;
  j["tb_sync_idle_mean"] = r.tb_sync_idle_mean;
  j["tb_sync_idle_max"] = r.tb_sync_idle_max;
  j["tbs_per_rank_max"] = r.tbs_per_rank_max;
  j["tbs_per_rank_mean"] = r.tbs_per_rank_mean;
  j["tbs_total"] = r.tbs_total;
  j["invocations"] = r.invocations;
  j["simulated_invocations"] = r.simulated_invocations;
  j["events"] = r.events;
  j["sim_seconds"] = r.wall_seconds;
  if (!r.variant.empty()) {
    j["variant"] = r.variant;
    j["variant_reason"] = r.variant_reason;
  }
  return j.dump();
}

std::vector<std::string> report_table_header() {
  return {"size", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "link-util", "tb-idle-avg", "tb-idle-max", "TBs/rank"};
}

std::vector<std::string> report_table_row(const SimReport& r) {
  return {std::to_string(r.bytes),
          text::format("%.1f", r.time_us),
          text::format("%.2f", r.algbw_GBps),
          text::format("%.2f", r.busbw_GBps),
          text::format("%.1f%%", 100.0 * r.link_utilization),
          text::format("%.1f%%", 100.0 * r.tb_idle_mean),
          text::format("%.1f%%", 100.0 * r.tb_idle_max),
          std::to_string(r.tbs_per_rank_max)};
}

}  // namespace weft::sim
