// A hand-written SVG line plot of bus bandwidth against message size, one line per series
// (typically one per scheduler). No dependency: the file is built as text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace weft::sim {

struct PlotSeries {
  std::string name;                                 ///< legend entry, e.g. "hpds"
  std::vector<std::pair<uint64_t, double>> points;  ///< (message bytes, busbw GB/s)
};

/// SVG text: log2 x axis over the sizes present, linear y axis from 0, grid, axis labels,
/// legend, title. Series with no points are listed in the legend only. Names and the
/// title are escaped for XML.
std::string busbw_plot_svg(const std::vector<PlotSeries>& series, const std::string& title);

/// Writes busbw_plot_svg to `path`; throws Error(System) naming the path on failure.
void write_busbw_plot(const std::string& path, const std::vector<PlotSeries>& series, const std::string& title);

}  // namespace weft::sim
