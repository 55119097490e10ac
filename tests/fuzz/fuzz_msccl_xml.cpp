// libFuzzer target of the MSCCL XML importer: arbitrary bytes must either import or raise
// weft::Error(Parse); any other exception, a crash, a sanitizer report or a timeout is a bug.
//
// What imports must also hold together: one location per transfer, a shape check_shape()
// accepts, and the file's own schedule exported and imported again must give the same
// algorithm (export and import are each other's inverse on as-given plans).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "ir/algorithm.hpp"
#include "lang/msccl_export.hpp"
#include "lang/msccl_import.hpp"
#include "util/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  weft::MscclImport first;
  try {
    first = weft::import_msccl(text, "fuzz.xml");
  } catch (const weft::Error& e) {
    if (e.code() != weft::ErrorCode::Parse) std::abort();
    return 0;
  }
  const weft::Algorithm& a = first.algorithm;
  if (a.transfer_locations.size() != a.transfers.size()) std::abort();
  try {
    weft::check_shape(a);
    std::string again = weft::export_msccl(first.as_given, {"", first.min_bytes, first.max_bytes});
    weft::MscclImport second = weft::import_msccl(again, "again.xml");
    const weft::Algorithm& b = second.algorithm;
    // Channels are not compared: an export names only the channels its steps use.
    if (a.transfers != b.transfers || a.name != b.name || a.collective != b.collective || a.ranks != b.ranks ||
        a.input_chunks != b.input_chunks || a.output_chunks != b.output_chunks ||
        a.scratch_chunks != b.scratch_chunks || a.in_place != b.in_place || a.root != b.root ||
        a.protocol != b.protocol || second.min_bytes != first.min_bytes || second.max_bytes != first.max_bytes)
      std::abort();
  } catch (const weft::Error&) {
    std::abort();
  }
  return 0;
}
