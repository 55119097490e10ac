// MscclProgram: an MSCCL XML algorithm file as data, the format MSCCL's executor reads
// (Azure/msccl-executor-nccl) and msccl-tools writes.
//
//   <algo name proto nchannels nchunksperloop ngpus coll inplace outofplace minBytes maxBytes>
//     <gpu id i_chunks o_chunks s_chunks>
//       <tb id send recv chan>
//         <step s type srcbuf srcoff dstbuf dstoff cnt depid deps hasdep/>
//
// read_msccl_program() checks every attribute on its own (presence, syntax, range) and the
// structure (gpus 0..ngpus-1 once each, thread blocks 0..n-1, steps numbered in order, a
// peer for every step that sends or receives, one thread block per connection); the
// importer (msccl_import.hpp) checks what needs the whole file (matching sends with
// receives, dependencies, races). write_msccl_program() prints a program back as XML.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/algorithm.hpp"
#include "lang/xml_reader.hpp"

namespace weft {

/// The step types of MSCCL XML, with their spelling in the file.
enum class MscclStepType : uint8_t {
  Send,                ///< "s": send src to the thread block's send peer
  Recv,                ///< "r": receive from the recv peer into dst
  RecvCopySend,        ///< "rcs": receive into dst and forward it to the send peer
  RecvReduceSend,      ///< "rrs": forward src (+) incoming to the send peer; nothing stored
  RecvReduceCopy,      ///< "rrc": dst := src (+) incoming
  RecvReduceCopySend,  ///< "rrcs": dst := src (+) incoming, and forward dst
  Copy,                ///< "cpy": local dst := src
  Reduce,              ///< "re": local dst := dst (+) src
  Nop,                 ///< "nop": only waits on its dependency
};

std::string_view msccl_step_type_name(MscclStepType t);
bool msccl_step_sends(MscclStepType t);
bool msccl_step_receives(MscclStepType t);
bool msccl_step_reads_src(MscclStepType t);   ///< src names a chunk range the step reads
bool msccl_step_writes_dst(MscclStepType t);  ///< dst names a chunk range the step writes

/// One <step>. `elem` points into the xml::Document it was read from (nullptr for a program
/// built in memory); it is only used for error positions and lives as long as that document.
struct MscclStep {
  int32_t s = 0;
  MscclStepType type = MscclStepType::Nop;
  Buffer srcbuf = Buffer::Input;
  int32_t srcoff = -1;
  Buffer dstbuf = Buffer::Output;
  int32_t dstoff = -1;
  int32_t cnt = 0;
  int32_t depid = -1;  ///< thread block waited for, or -1
  int32_t deps = -1;   ///< step of that thread block waited for
  bool hasdep = false; ///< other thread blocks wait for this step: it signals when done
  const xml::Element* elem = nullptr;
};

struct MscclThreadBlock {
  int32_t id = 0;
  int32_t send = -1;  ///< peer sent to, or -1
  int32_t recv = -1;  ///< peer received from, or -1
  int32_t chan = 0;
  std::vector<MscclStep> steps;
  const xml::Element* elem = nullptr;
};

struct MscclGpu {
  int32_t id = 0;
  int32_t i_chunks = 0;
  int32_t o_chunks = 0;
  int32_t s_chunks = 0;
  std::vector<MscclThreadBlock> tbs;  ///< in id order (tbs[k].id == k)
  const xml::Element* elem = nullptr;
};

struct MscclProgram {
  std::string name;
  std::string proto = "Simple";  ///< "Simple", "LL" or "LL128"
  int32_t nchannels = 1;
  int32_t nchunksperloop = 1;
  int32_t ngpus = 0;
  std::string coll;              ///< as spelled in the file: allreduce, allgather, ...
  bool inplace = true;
  bool outofplace = false;
  int64_t min_bytes = 0;
  int64_t max_bytes = INT64_MAX;  ///< maxBytes; 0 in the file (no bound, as MSCCL reads it) is INT64_MAX
  /// Root of broadcast and reduce: weft's optional `root` attribute (MSCCL's format has
  /// none); -1 when absent.
  int32_t root = -1;
  std::vector<MscclGpu> gpus;    ///< in id order (gpus[r].id == r)
  const xml::Element* elem = nullptr;
};

/// Reads and checks the <algo> element of `doc` (see the file comment). Throws
/// weft::Error(Parse) "file:line:column: <element> attribute a: sentence" at the first fault.
/// The program's `elem` pointers point into `doc`.
MscclProgram read_msccl_program(const xml::Document& doc);

/// Prints `program` as MSCCL XML (the attribute order msccl-tools uses, two-space indent).
std::string write_msccl_program(const MscclProgram& program);

/// Position of attribute `name` of `e` (its value), else of the element; {0,0} for nullptr.
xml::Position attribute_position(const xml::Element* e, std::string_view name);

/// Throws weft::Error(Parse) "file:line:column: <elem> attribute a: sentence" at attribute
/// `attribute` of `e` (at the element when it lacks it; "<elem>: sentence" at the element
/// when `attribute` is empty; the file alone when `e` is nullptr).
[[noreturn]] void fail_at_attribute(const xml::Document& doc, const xml::Element* e, std::string_view attribute,
                                    const std::string& sentence);

}  // namespace weft
