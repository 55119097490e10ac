#include "sim/svg_plot.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>

#include "util/error.hpp"
#include "util/text.hpp"

namespace weft::sim {

namespace {

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

// "1K", "32M", "4G": short binary sizes for tick labels.
std::string short_size(uint64_t b) {
  const char* units[] = {"B", "K", "M", "G", "T"};
  int u = 0;
  double v = static_cast<double>(b);
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return v == std::floor(v) ? text::format("%.0f%s", v, units[u]) : text::format("%.1f%s", v, units[u]);
}

// A round step giving about `n` ticks up to `max`.
double nice_step(double max, int n) {
  double raw = max / n;
  double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * mag >= raw) return m * mag;
  return 10 * mag;
}

const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"};

}  // namespace

std::string busbw_plot_svg(const std::vector<PlotSeries>& series, const std::string& title) {
  const double W = 720, H = 440, L = 70, R = 170, T = 40, B = 60;
  const double pw = W - L - R, ph = H - T - B;
  uint64_t xmin = 0, xmax = 0;
  double ymax = 0;
  for (const PlotSeries& s : series)
    for (auto [x, y] : s.points) {
      if (x == 0) continue;
      xmin = xmin == 0 ? x : std::min(xmin, x);
      xmax = std::max(xmax, x);
      ymax = std::max(ymax, y);
    }
  if (xmin == 0) xmin = xmax = 1;
  if (!(ymax > 0)) ymax = 1;
  const double lx0 = std::log2(static_cast<double>(xmin)), lx1 = std::max(lx0 + 1, std::log2(static_cast<double>(xmax)));
  const double ystep = nice_step(ymax * 1.05, 6);
  const double ytop = std::ceil(ymax * 1.05 / ystep) * ystep;
  auto X = [&](uint64_t x) { return L + pw * (std::log2(static_cast<double>(x)) - lx0) / (lx1 - lx0); };
  auto Y = [&](double y) { return T + ph * (1 - y / ytop); };

  std::string o = text::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
      W, H, W, H);
  o += text::format("<text x=\"%.0f\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">%s</text>\n", L + pw / 2, xml_escape(title).c_str());
  // Grid and ticks.
  for (double y = 0; y <= ytop + 1e-9; y += ystep) {
    o += text::format("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", L, Y(y), L + pw, Y(y));
    o += text::format("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", L - 6, Y(y) + 4, y);
  }
  const int steps = static_cast<int>(std::round(lx1 - lx0));
  const int every = std::max(1, steps / 10);
  for (int i = 0; i <= steps; i += every) {
    const uint64_t x = static_cast<uint64_t>(std::llround(std::exp2(lx0 + i)));
    o += text::format("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>\n", X(x), T, X(x), T + ph);
    o += text::format("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n", X(x), T + ph + 18, short_size(x).c_str());
  }
  o += text::format("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"black\"/>\n", L, T, pw, ph);
  o += text::format("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">message size (bytes)</text>\n", L + pw / 2, H - 18);
  o += text::format("<text transform=\"translate(18 %.1f) rotate(-90)\" text-anchor=\"middle\">bus bandwidth (GB/s)</text>\n", T + ph / 2);
  // Lines, markers, legend.
  for (size_t i = 0; i < series.size(); ++i) {
    const char* c = kColors[i % (sizeof(kColors) / sizeof(kColors[0]))];
    std::vector<std::pair<uint64_t, double>> pts;
    for (auto pt : series[i].points)
      if (pt.first > 0) pts.push_back(pt);
    std::sort(pts.begin(), pts.end());
    if (!pts.empty()) {
      std::string d;
      for (auto [x, y] : pts) d += text::format("%s%.1f,%.1f", d.empty() ? "" : " ", X(x), Y(y));
      o += text::format("<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"%s\"/>\n", c, d.c_str());
      for (auto [x, y] : pts) o += text::format("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", X(x), Y(y), c);
    }
    const double ly = T + 10 + 20.0 * static_cast<double>(i);
    o += text::format("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"/>\n", L + pw + 14, ly,
                      L + pw + 38, ly, c);
    o += text::format("<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", L + pw + 44, ly + 4, xml_escape(series[i].name).c_str());
  }
  o += "</svg>\n";
  return o;
}

void write_busbw_plot(const std::string& path, const std::vector<PlotSeries>& series, const std::string& title) {
  std::ofstream f(path);
  if (!f) fail(ErrorCode::System, "cannot write the plot to '" + path + "'");
  f << busbw_plot_svg(series, title);
  f.close();
  if (!f) fail(ErrorCode::System, "writing the plot to '" + path + "' failed");
}

}  // namespace weft::sim
