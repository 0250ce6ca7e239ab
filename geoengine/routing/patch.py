"""The routing stage's patch for `geoengine update` (issue 29): keep what the old bundle's CCH says
about the vertices that survive, instead of ordering the whole turn graph again.

A CCH answers exactly for any contraction order (only its speed depends on the order), and its
topology (the chordal supergraph) depends only on the order and the turn graph's arcs, never on a
weight. So, given the old bundle's `routing/cch` and graph and the new graph:

- **same topology**: the new graph's possible turns (`customise.possible_turns`: the CSR the topology
  is built from) equal the old graph's, array for array. The old topology is then the topology the
  new graph's turn graph has under the old order: its files are hard-linked (copied across file
  systems), and only what depends on weights is done again (each costing's check of its weights).
- **a small change** (a new road, a deleted road, a way split or joined): each new vertex (a directed
  road edge) that existed before, matched by its way's OSM id, its two end nodes' OSM ids and its
  direction, keeps its old rank relative to the others; a vertex that did not exist is placed just
  above the highest rank among its turn-graph neighbours (at the top when none of them survived). The
  supergraph is then contracted again under that order (`cch.supergraph`, `CCHTopology.assemble`),
  without the nested dissection (about half of the stage's time).
- **declined** (None: the stage runs in full): the old files are of another stage version or topology
  format, or missing; or more than `MAX_CHANGED` of the vertices (new and removed, each against its
  own graph) changed: a larger change would spend more of the old order's quality than the nested
  dissection costs. And (routing/stage.py) when the carried order's supergraph has more than
  `MAX_GROWTH` times the edges of the last order made by nested dissection (updates add up).

Since moved nodes change the edge middles the nested dissection projects, a full build of the new
extract orders differently from a patch: the `routing/cch` arrays differ, the routes do not (every
order is exact; the update test compares 500 routes with a full build's, tests/update/
test_routing_patch.py compares patched hierarchies with Dijkstra).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from geoengine.arrays import run_indices

MAX_CHANGED = 0.02  # share of vertices new or removed above which the patch declines (full rerun)
# supergraph edges of a carried order, against those of the last nested dissection (recorded as
# `nd_edges` in the stage's info through patches), above which the stage declines (routing/stage.py)
MAX_GROWTH = 1.10


def _topology_ok(old_cch: Path) -> bool:
    """The old topology's files are all there and of this code's format."""
    from geoengine.routing.cch import FORMAT_VERSION, CCHTopology

    try:
        meta = json.loads((old_cch / "cch.json").read_text())
    except (OSError, ValueError):
        return False
    return meta.get("format_version") == FORMAT_VERSION and all((old_cch / f).is_file() for f in CCHTopology.files())


def same_turns(old_graph, new_graph) -> bool:
    """Whether the two graphs' possible turns (the topology's input: n, offsets, targets) are equal: the
    arrays `customise.possible_turns` makes them of (each edge's end node, each node's out-edges) are."""
    if old_graph.n_edges != new_graph.n_edges:
        return False
    return all(np.array_equal(np.asarray(getattr(old_graph, a)), np.asarray(getattr(new_graph, a)))
               for a in ("edge_dst", "node_out_offsets", "node_out_edges"))


def _seg_keys(graph) -> np.ndarray:
    """int64[S, 3]: each segment's (way OSM id, OSM id of its first node, of its last node)."""
    nid = np.asarray(graph.node_osm_id, dtype=np.int64)
    return np.stack([np.asarray(graph.seg_way, dtype=np.int64), nid[np.asarray(graph.seg_u)],
                     nid[np.asarray(graph.seg_v)]], axis=1)


def match_edges(old_graph, new_graph) -> np.ndarray:
    """int64[E_new]: the old directed edge each new one is (-1: none). A segment matches the old segment
    of the same way between the same two OSM nodes; a key that occurs more than once in either graph
    (a way that joins the same two junctions twice) matches nothing. Edge 2k runs along segment k, 2k+1
    against it, in both graphs."""
    ko, kn = _seg_keys(old_graph), _seg_keys(new_graph)
    so, sn = len(ko), len(kn)
    _, inv, counts = np.unique(np.concatenate([ko, kn]), axis=0, return_inverse=True, return_counts=True)
    inv = inv.reshape(-1)
    io, inn = inv[:so], inv[so:]
    # a key once in each graph: counts == 2 with one occurrence on each side
    in_old = np.bincount(io, minlength=len(counts))
    in_new = np.bincount(inn, minlength=len(counts))
    unique_pair = (in_old == 1) & (in_new == 1)
    old_of_key = np.full(len(counts), -1, np.int64)
    old_of_key[io] = np.arange(so, dtype=np.int64)
    seg = np.where(unique_pair[inn], old_of_key[inn], -1)
    edge = np.empty(2 * sn, np.int64)
    edge[0::2] = np.where(seg >= 0, 2 * seg, -1)
    edge[1::2] = np.where(seg >= 0, 2 * seg + 1, -1)
    return edge


def carried_rank(old_rank, old_of_new, uoff, uadj, place: str = "neighbour") -> np.ndarray:
    """int32[n]: a contraction order of the new turn graph (symmetric CSR `uoff`/`uadj`) that keeps the
    old order among the surviving vertices (`old_of_new`: each new vertex's old vertex, -1 for a new
    one). A new vertex goes just above the highest old rank among its surviving neighbours
    (`place="neighbour"`), or above every survivor (`place="top"`, and where no neighbour survived);
    new vertices at the same place keep their index order."""
    n = len(old_of_new)
    old_rank = np.asarray(old_rank, dtype=np.int64)
    matched = old_of_new >= 0
    key = np.full(n, np.inf)
    key[matched] = old_rank[old_of_new[matched]]
    fresh = np.flatnonzero(~matched)
    top = float(len(old_rank))
    if len(fresh):
        if place == "neighbour":
            starts, ends = uoff[fresh], uoff[fresh + 1]
            lens = (ends - starts).astype(np.int64)
            owner = np.repeat(np.arange(len(fresh)), lens)
            pos = run_indices(starts, lens)
            nb = np.asarray(uadj)[pos]
            val = np.where(matched[nb], key[nb], -1.0)
            best = np.full(len(fresh), -1.0)
            np.maximum.at(best, owner, val)
            key[fresh] = np.where(best >= 0, best + 0.5, top)
        else:
            key[fresh] = top
    order = np.lexsort((np.arange(n), key))
    rank = np.empty(n, np.int32)
    rank[order] = np.arange(n, dtype=np.int32)
    return rank


def patch_topology(old_graph, new_graph, old_cch: Path, out_cch: Path, *, max_changed: float | None = None,
                   place: str = "neighbour"):
    """Write the new graph's CCH topology to `out_cch` from the old one in `old_cch` (see the module
    docstring). Returns (CCHTopology memory-mapped from `out_cch`, info) or None (declined: nothing
    written that the caller must keep). `max_changed`: default `MAX_CHANGED`."""
    from geoengine.bundler import heap
    from geoengine.bundler.pipeline import link_file
    from geoengine.routing.cch import CCHTopology, supergraph
    from geoengine.routing.customise import possible_turns
    from geoengine.routing.order import undirected

    if not _topology_ok(old_cch):
        return None
    max_changed = MAX_CHANGED if max_changed is None else max_changed
    t0 = time.perf_counter()
    n = int(new_graph.n_edges)
    if same_turns(old_graph, new_graph):
        out_cch.mkdir(parents=True, exist_ok=True)
        for f in CCHTopology.files():
            link_file(old_cch / f, out_cch / f)
        topo = CCHTopology.load(out_cch, mmap=True)
        return topo, {"patch": "same topology: order and supergraph linked from the old bundle", "same_turns": True,
                      "seconds": round(time.perf_counter() - t0, 3)}
    old_of_new = match_edges(old_graph, new_graph)
    kept = int((old_of_new >= 0).sum())
    added = n - kept
    removed = int(old_graph.n_edges) - kept
    if added > max_changed * n or removed > max_changed * max(int(old_graph.n_edges), 1):
        return None
    old_rank = np.load(old_cch / "rank.npy", mmap_mode="r")
    if len(old_rank) != int(old_graph.n_edges):
        return None
    off, tgt = possible_turns(new_graph)
    arcs = int(tgt.shape[0])
    uoff, uadj = undirected(n, off, tgt)
    del off, tgt
    rank = carried_rank(old_rank, old_of_new, uoff, uadj, place)
    del old_of_new
    t1 = time.perf_counter()
    chordal = supergraph(n, uoff, uadj, rank)
    del uoff, uadj
    heap.release()
    info = {"arcs": arcs, "order_seconds": round(t1 - t0, 3),
            "patch": f"order carried over from the old bundle ({kept} vertices kept, {added} new, {removed} "
                     f"removed; new ones placed by {place}), supergraph contracted again"}
    topo = CCHTopology.assemble(n, rank, chordal, info, t1, out_cch)
    return topo, dict(topo.info, seconds=round(time.perf_counter() - t0, 3))
