// The happens-before graph of an MSCCL program (internal to the importer).
//
// One node per <step> of every gpu. A node happens after:
//  * the previous step of its thread block (a thread block runs its steps in order);
//  * the step its dependency waits for: MSCCL's wait (depid, deps) ends when thread block
//    depid signals a step at or after deps, and only steps with hasdep=1 signal, so the
//    edge comes from the first such step (nops never signal: MSCCL drops them);
//  * for a step that receives, the step that sent what it receives: the k-th send on a
//    connection (sender, receiver, channel) meets the k-th receive on it.
// Sends are buffered (NCCL's connection FIFO), so a send does not wait for its receive.
#pragma once

#include <cstdint>
#include <vector>

#include "lang/msccl_program.hpp"
#include "lang/xml_reader.hpp"

namespace weft::msccl_detail {

struct StepNode {
  int32_t rank = 0;
  int32_t tb = 0;
  int32_t pos = 0;
  const MscclStep* step = nullptr;
  int32_t sent_by = -1;     ///< receiving steps: the node whose send this step receives
  int32_t received_by = -1; ///< sending steps: the node that receives this step's send
  int32_t dep = -1;         ///< the node the step's dependency resolves to, or -1
};

class StepGraph {
 public:
  /// Builds the graph; throws weft::Error(Parse) at the step at fault when sends and
  /// receives do not match, a dependency can never be satisfied, or the steps wait for
  /// each other in a cycle (MSCCL would hang).
  StepGraph(const xml::Document& doc, const MscclProgram& program);

  const std::vector<StepNode>& nodes() const { return nodes_; }
  int32_t node_id(int32_t rank, int32_t tb, int32_t pos) const { return first_[rank][tb] + pos; }
  /// Position of the node in a topological order of the graph.
  int32_t order(int32_t node) const { return order_[node]; }
  /// True when `a` happens before `b` (a path a -> b exists). Answers true once its search
  /// budget is spent (then only the verifier's own race check stands).
  bool happens_before(int32_t a, int32_t b) const;
  /// "gpu 0, thread block 3, step 2 (line 17)".
  std::string describe(int32_t node) const;

 private:
  const xml::Document& doc_;
  std::vector<StepNode> nodes_;
  std::vector<std::vector<int32_t>> first_;  ///< [rank][tb] -> id of its step 0
  std::vector<std::vector<int32_t>> preds_;
  std::vector<int32_t> order_;
  mutable std::vector<uint32_t> seen_;      ///< search stamps for happens_before
  mutable uint32_t stamp_ = 0;
  mutable int64_t budget_ = 50'000'000;     ///< node visits left for happens_before

  void match_connections(const MscclProgram& program);
  void resolve_dependencies(const MscclProgram& program);
  void order_or_fail();
};

}  // namespace weft::msccl_detail
