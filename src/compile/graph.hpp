// Analysis: the task graph of a placed algorithm (docs/design.md).
//
// One task per transfer. Data edges come from walking the transfers in step order and
// tracking, per physical chunk slot, its last writer and the readers since: a read gets a
// true edge from the last writer, a write gets anti edges from those readers and an output
// edge from the last writer. Each task's conflict set is Topology::conflict_resources of its
// link (the pair connection inside a node, the two NICs across nodes). Chunk DAGs (HPDS's
// G[C]) are the weakly connected components of the data edges. Cost: linear in the number
// of transfers and chunk slots touched.
#pragma once

#include "compile/layout.hpp"
#include "ir/task_graph.hpp"
#include "ir/topology.hpp"

namespace weft {

/// Builds the task graph of an algorithm already placed by place_buffers. Throws
/// InvalidArgument when the topology's GPU count differs from the algorithm's ranks.
TaskGraph build_task_graph(const PlacedAlgorithm& placed, const Topology& topo);

/// Convenience: places `algo` as written (in place when it is, no aggregation) and builds its graph.
TaskGraph build_task_graph(const Algorithm& algo, const Topology& topo);

/// Throws InvalidArgument unless `topo` has exactly `algo.ranks` GPUs and is consistent.
void check_topology_fits(const Algorithm& algo, const Topology& topo);

}  // namespace weft
