#include "lang/algorithm_file.hpp"

#include <bit>
#include <cstdio>
#include <cstring>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/error.hpp"
#include "util/text.hpp"

namespace weft {

static_assert(std::endian::native == std::endian::little, "algorithm files are little-endian");

namespace {

constexpr const char* kMagic = "weft-algorithm 1\n";
constexpr size_t kTransferInts = 9, kLocationInts = 3;

nlohmann::json header_json(const Algorithm& a) {
  nlohmann::json j;
  j["name"] = a.name;
  j["collective"] = std::string(to_string(a.collective));
  j["ranks"] = a.ranks;
  j["input_chunks"] = a.input_chunks;
  j["output_chunks"] = a.output_chunks;
  j["scratch_chunks"] = a.scratch_chunks;
  j["in_place"] = a.in_place;
  j["root"] = a.root;
  j["channels"] = a.channels;
  j["warps"] = a.warps;
  j["gpus_per_node"] = a.gpus_per_node;
  j["nics_per_node"] = a.nics_per_node;
  j["protocol"] = a.protocol;
  j["source_file"] = a.source_file;
  j["other_source_files"] = a.other_source_files;
  nlohmann::json post = nlohmann::json::array();
  for (const Expectation& e : a.custom_postcondition)
    post.push_back({e.slot.rank, static_cast<int>(e.slot.buffer), e.slot.index, e.contributions});
  j["custom_postcondition"] = std::move(post);
  j["transfers"] = a.transfers.size();
  j["locations"] = a.transfer_locations.size() == a.transfers.size() && !a.transfers.empty();
  return j;
}

}  // namespace

void save_algorithm_file(const Algorithm& a, const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) fail(ErrorCode::System, path + ": cannot write the algorithm file (" + std::strerror(errno) + ")");
  const nlohmann::json h = header_json(a);
  std::string head = std::string(kMagic) + h.dump() + "\n";
  bool ok = std::fwrite(head.data(), 1, head.size(), f) == head.size();
  std::vector<int32_t> buf;
  buf.reserve(a.transfers.size() * kTransferInts);
  for (const Transfer& t : a.transfers)
    buf.insert(buf.end(), {t.src_rank, static_cast<int32_t>(t.src_buffer), t.src_index, t.dst_rank,
                           static_cast<int32_t>(t.dst_buffer), t.dst_index, t.count, static_cast<int32_t>(t.op), t.step});
  if (h["locations"].get<bool>())
    for (const SourceLocation& l : a.transfer_locations) buf.insert(buf.end(), {l.line, l.column, l.file});
  ok = ok && std::fwrite(buf.data(), sizeof(int32_t), buf.size(), f) == buf.size();
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) fail(ErrorCode::System, path + ": writing the algorithm file failed");
}

Algorithm load_algorithm_file(const std::string& path) {
  std::optional<std::string> text = text::read_file(path);
  if (!text) fail(ErrorCode::System, path + ": cannot read the algorithm file (" + std::strerror(errno) + ")");
  const std::string& s = *text;
  auto bad = [&](const std::string& why) { fail(ErrorCode::Parse, path + ": not a weft algorithm file: " + why); };
  const size_t magic = std::strlen(kMagic);
  if (s.compare(0, magic, kMagic) != 0) bad("it does not start with \"weft-algorithm 1\"");
  const size_t eol = s.find('\n', magic);
  if (eol == std::string::npos) bad("the header line is not terminated");
  Algorithm a;
  size_t n = 0;
  bool locations = false;
  try {
    const nlohmann::json h = nlohmann::json::parse(s.substr(magic, eol - magic));
    a.name = h.at("name").get<std::string>();
    auto c = collective_from_string(h.at("collective").get<std::string>());
    if (!c) bad("unknown collective " + h.at("collective").dump());
    a.collective = *c;
    a.ranks = h.at("ranks").get<int32_t>();
    a.input_chunks = h.at("input_chunks").get<int32_t>();
    a.output_chunks = h.at("output_chunks").get<int32_t>();
    a.scratch_chunks = h.at("scratch_chunks").get<int32_t>();
    a.in_place = h.at("in_place").get<bool>();
    a.root = h.at("root").get<int32_t>();
    a.channels = h.at("channels").get<int32_t>();
    a.warps = h.at("warps").get<int32_t>();
    a.gpus_per_node = h.at("gpus_per_node").get<int32_t>();
    a.nics_per_node = h.at("nics_per_node").get<int32_t>();
    a.protocol = h.at("protocol").get<std::string>();
    a.source_file = h.at("source_file").get<std::string>();
    a.other_source_files = h.at("other_source_files").get<std::vector<std::string>>();
    for (const auto& e : h.at("custom_postcondition")) {
      const int buffer = e.at(1).get<int>();
      if (buffer < 0 || buffer > 2) bad("a postcondition names buffer " + std::to_string(buffer));
      a.custom_postcondition.push_back({{e.at(0).get<int32_t>(), static_cast<Buffer>(buffer), e.at(2).get<int32_t>()},
                                        e.at(3).get<std::vector<std::pair<int32_t, int32_t>>>()});
    }
    n = h.at("transfers").get<size_t>();
    locations = h.at("locations").get<bool>();
  } catch (const nlohmann::json::exception& e) {
    bad(std::string("bad header: ") + e.what());
  }
  const size_t ints = n * (kTransferInts + (locations ? kLocationInts : 0));
  if (n > (s.size() / sizeof(int32_t)) || s.size() - (eol + 1) != ints * sizeof(int32_t))
    bad("the header announces " + std::to_string(n) + " transfers, the file holds " +
        std::to_string(s.size() - (eol + 1)) + " bytes after it");
  std::vector<int32_t> v(ints);
  if (ints) std::memcpy(v.data(), s.data() + eol + 1, ints * sizeof(int32_t));
  a.transfers.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const int32_t* r = v.data() + i * kTransferInts;
    if (r[1] < 0 || r[1] > 2 || r[4] < 0 || r[4] > 2 || r[7] < 0 || r[7] > 1)
      bad("transfer " + std::to_string(i) + " names an unknown buffer or operation");
    a.transfers[i] = {r[0], static_cast<Buffer>(r[1]), r[2], r[3], static_cast<Buffer>(r[4]), r[5], r[6],
                      static_cast<TransferOp>(r[7]), r[8]};
  }
  if (locations) {
    a.transfer_locations.resize(n);
    const int32_t* base = v.data() + n * kTransferInts;
    for (size_t i = 0; i < n; ++i)
      a.transfer_locations[i] = {base[i * 3], base[i * 3 + 1], base[i * 3 + 2]};
  }
  check_shape(a);
  return a;
}

}  // namespace weft
