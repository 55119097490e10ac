"""Topologies for weft.language programs: GC3's fully_connected, and weft's presets and files."""
import json as _json

from . import _weft
from . import topology as _topology

__all__ = ["fully_connected", "preset"]


def preset(spec):
    """A weft topology preset (h200-1x8, a100-4x8, a100-128x8, ...) or a topology JSON file."""
    return _topology(spec)


def fully_connected(size):
    """GC3's fully_connected(size): `size` GPUs that all reach each other, here one NVSwitch node
    with h200-1x8's link figures (GC3's topology names only the ranks; weft's compiler and
    simulator need figures)."""
    if not isinstance(size, int) or size < 1:
        raise _weft.Error("fully_connected(): size must be a positive integer, not %r" % (size,))
    t = _json.loads(_weft.load_topology("h200-1x8").to_json())
    t["name"] = "fully_connected-%d" % size
    t["description"] = "GC3's fully_connected(%d): one node of %d GPUs with h200-1x8's figures" % (size, size)
    t["gpus_per_node"] = size
    return _weft.topology_from_json(_json.dumps(t), "fully_connected(%d)" % size)
