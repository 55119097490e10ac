// libFuzzer target of the ResCCLang front-end: arbitrary bytes must either parse into an
// Algorithm or raise weft::Error; any other exception, a crash, a sanitizer report or a
// timeout is a bug.
//
// Input layout: the first byte picks a --param override (low 3 bits: which; high 5 bits:
// a value), the rest is the program text. The limits are lowered so that one input runs in
// well under a second even under the sanitizers.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "lang/load.hpp"
#include "lang/resccl_eval.hpp"
#include "util/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  const std::string value = std::to_string(mode >> 3);
  weft::ParamMap overrides;
  switch (mode & 7) {
    case 0: break;
    case 1: overrides["nRanks"] = value; break;
    case 2: overrides["GPUPerNode"] = value; break;
    case 3: overrides["nChunks"] = value; break;
    case 4: overrides["K"] = value; break;  // a user parameter, or unknown
    case 5: overrides["OpType"] = (mode >> 3) % 2 ? "Custom" : "Allgather"; break;
    case 6: overrides["nRanks"] = "x" + value; break;  // malformed
    case 7: overrides["InPlace"] = std::to_string((mode >> 3) % 3); break;
  }
  weft::resccl::Limits limits;
  limits.max_statements = 200'000;
  limits.max_records = 50'000;
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    weft::Algorithm a = weft::resccl::run(text, "fuzz.rccl", overrides, limits);
    // A result is whole: one location per transfer, and the header's shape.
    if (a.transfer_locations.size() != a.transfers.size() || a.ranks < 1 || a.input_chunks < 0) std::abort();
  } catch (const weft::Error& e) {
    if (e.code() != weft::ErrorCode::Parse) std::abort();
  }
  return 0;
}
