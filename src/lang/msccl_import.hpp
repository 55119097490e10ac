// MSCCL XML import: other people's algorithms (msccl-tools, TACCL, TE-CCL, hand-written
// files for MSCCL's executor) as weft Algorithms, and their own schedules as Plans.
//
// The import recovers what the file does, independent of how it schedules it:
//  * every send meets the receive on the same connection (sender, receiver, channel) in
//    order and becomes one transfer from the sender's chunks to the receiver's; a fused
//    step (rcs, rrcs, rrs) is the end of one transfer and the start of the next; local
//    cpy and re steps are local transfers; rrc/rrcs with a source other than the
//    destination first copy the source in (dst := src (+) incoming);
//  * rrs stores nothing in MSCCL; weft reduces into its source chunk when nothing reads
//    that chunk afterwards before overwriting it (the usual case, as in rings), else into
//    a fresh scratch chunk appended after the file's scratch;
//  * steps come from the dependency order: a transfer's step is one more than the steps
//    of the transfers it must follow (read after write, write after read or write, per
//    chunk, in the order the file's dependencies and connections impose).
// Accesses to one chunk that the file leaves unordered are a race, and an error here.
// See docs/msccl-xml.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ir/algorithm.hpp"
#include "ir/plan.hpp"
#include "lang/load.hpp"

namespace weft {

struct MscclImportOptions {
  /// The buffer layout to import for. Unset: in place when the file says inplace=1, else
  /// out of place. Asking for a layout the file does not declare is an error.
  std::optional<bool> in_place{};
  /// The rank count the caller expects (a topology's GPUs); unset: any. A file for another
  /// number of GPUs is an error naming both.
  std::optional<int32_t> ranks{};
  /// Hints for Algorithm::gpus_per_node / nics_per_node (0: unknown; MSCCL's format has none).
  int32_t gpus_per_node = 0;
  int32_t nics_per_node = 0;
};

struct MscclImport {
  /// The recovered algorithm; weft verifies it and schedules it afresh.
  Algorithm algorithm;
  /// The file's own schedule, as MSCCL runs it: its thread blocks and steps in order, its
  /// dependencies (resolved to the step that signals), ExecutionModel::Algorithm, scheduler
  /// and allocator "as-given". Slot::tasks index `algorithm.transfers`.
  Plan as_given;
  int32_t nchunksperloop = 0;
  int64_t min_bytes = 0;          ///< message sizes the file is meant for (minBytes)
  int64_t max_bytes = INT64_MAX;  ///< (maxBytes)
  int32_t rrs_scratch_chunks = 0; ///< scratch chunks added for rrs steps whose source stays live
};

/// Imports MSCCL XML text. `file` names it in messages. Throws weft::Error(Parse) with
/// "file:line:column: <element> attribute a: sentence" and the line with a caret for any
/// fault of the file (syntax, attribute, unmatched send, unsatisfiable dependency, cycle,
/// race). The algorithm is not verified here (compile/verify.hpp does that).
MscclImport import_msccl(std::string_view text, const std::string& file, const MscclImportOptions& options = {});

/// Reads `path` and imports it; throws weft::Error(System) if it cannot be read.
MscclImport import_msccl_file(const std::string& path, const MscclImportOptions& options = {});

/// The options that command-line parameters (--param) ask for: InPlace=0|1, and the shape
/// parameters tools derive from a topology, nRanks (must match the file's ngpus),
/// GPUPerNode and NICPerNode (hints). Throws InvalidArgument, naming `file`, for any other
/// name or a malformed value.
MscclImportOptions msccl_options_from_params(const ParamMap& params, const std::string& file);

/// True when `path` names an MSCCL XML file (by its extension, as load_algorithm decides).
bool is_msccl_xml_path(const std::string& path);

}  // namespace weft
