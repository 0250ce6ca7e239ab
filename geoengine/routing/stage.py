"""The `routing` build stage: one customisable contraction hierarchy topology for every costing.

One metric-independent order (nested dissection) and one chordal supergraph of the full turn graph
(`geoengine.routing.customise.build_topology`) are written to `routing/cch/`. Every costing's default
turn graph is then checked: its weights are numbers >= 0 (inf: unusable), and every possible turn, of
which each costing's turns are a subset, must join vertices the topology connects. The router
customises each costing at first use (`Router.warm` does the car's at open), and any option set or
avoid area the same way, so all costings share the one topology (see docs/routing.md). The stage does
not customise: nothing it would customise is kept, and a customisation's metric arrays more than
doubled the stage's peak memory (0.72 -> 2.1 GB at 64 copies of Liechtenstein) and cost about a third
of its time. For the same reason the topology is written array by array as it is built, and the
costings' weights are checked a slice of the turn graph at a time (docs/routing-algorithms.md, "Build
memory": the stage's own peak at 64 copies went from 629 to 303 MB).

In `geoengine update` the stage is patched (`patch`, `geoengine.routing.patch`): the old bundle's order
is kept (its topology linked when the possible turns are unchanged, its supergraph contracted again
under the carried order when a few road edges changed), then the same checks run.
"""

from __future__ import annotations

import time

import numpy as np

from geoengine.bundler.pipeline import BuildContext, Stage, StageResult
from geoengine.costing import COSTINGS, default_options

CCH_DIR = "cch"
CHECK_SLICE = 1 << 20  # possible turns per slice of a costing's check


def run(ctx: BuildContext) -> StageResult:
    from geoengine.graph import Graph
    from geoengine.routing.customise import build_topology

    graph = Graph.open(ctx.out / "graph")
    from geoengine.elevation.grades import attach_grades

    attach_grades(graph, ctx.out)  # grades from the elevation stage (built before routing), if any
    out = ctx.stage_dir("routing")
    t0 = time.perf_counter()
    # written to disk array by array as it is built, and returned memory-mapped from there
    topo = build_topology(graph, out / CCH_DIR)
    return _finish(ctx, graph, topo, dict(topo.info, seconds=round(time.perf_counter() - t0, 3)))


def patch(ctx: BuildContext, p) -> StageResult | None:
    """`geoengine update`: the topology carried over from the old bundle's (`routing.patch`: linked when
    the possible turns are unchanged, contracted again under the old order when a few vertices changed),
    then the same checks as `run`. None (a full run) when the change is large, the old files are of
    another version, or the carried order's supergraph outgrew the last nested dissection's by more
    than `routing.patch.MAX_GROWTH`."""
    from geoengine.graph import Graph
    from geoengine.routing.patch import MAX_GROWTH, patch_topology

    old_entry = p.old_entry("routing")
    if not old_entry or old_entry.get("version") != STAGE.version:
        return None
    try:
        old_graph = Graph.open(p.old_dir("graph"))
    except Exception:  # an old graph this code cannot read: a full run
        return None
    graph = Graph.open(ctx.out / "graph")
    from geoengine.elevation.grades import attach_grades

    attach_grades(graph, ctx.out)
    out = ctx.stage_dir("routing")
    done = patch_topology(old_graph, graph, p.old_dir("routing") / CCH_DIR, out / CCH_DIR)
    del old_graph
    if done is None:
        return None
    topo, tinfo = done
    # the supergraph size of the last order made by nested dissection, carried through patches: an
    # order carried over update after update that has grown the supergraph by more than MAX_GROWTH
    # over it is made again (a full run)
    old_topo = old_entry.get("info", {}).get("topology", {})
    base = int(old_topo.get("nd_edges") or old_entry.get("counts", {}).get("cch_edges") or 0)
    if base and topo.edges > MAX_GROWTH * base:
        return None
    tinfo["nd_edges"] = base or topo.edges
    return _finish(ctx, graph, topo, tinfo)


def _finish(ctx: BuildContext, graph, topo, topo_info: dict) -> StageResult:
    """The stage's checks on a topology written to `routing/cch`, and its result."""
    from geoengine.bundler import heap
    from geoengine.routing.cch import CCHTopology
    from geoengine.routing.customise import possible_turns

    outputs = [f"routing/{CCH_DIR}/{n}" for n in CCHTopology.files()]
    info: dict = {"topology": topo_info}
    counts = {"vertices": int(graph.n_edges), "cch_edges": topo.edges}
    ctx.progress.update(1, f"CCH topology ({info['topology']['seconds']:.1f}s, {topo.edges} edges)")
    # every possible turn must join two vertices the topology connects (what the router's set_base
    # raises on otherwise); each costing's turn graph is a subset of them by construction
    # (graph.turns.TurnBase). A topology linked from the old bundle for the same turns was checked there.
    if not topo_info.get("same_turns"):
        topo.check(*possible_turns(graph))
    del topo  # saved and checked; the costings' checks below need only the graph
    heap.release()
    for i, costing in enumerate(COSTINGS):
        t0 = time.perf_counter()
        arcs, bad, usable = _check_costing(graph, costing)
        if bad:
            raise ValueError(f"{costing}: {bad} turn weight(s) are not numbers >= 0")
        info[costing] = {"arcs": arcs, "seconds": round(time.perf_counter() - t0, 3), "usable_edges": usable}
        counts[f"{costing}_arcs"] = arcs
        heap.release()  # the next costing's arrays take the place of these rather than join them
        ctx.progress.update(i + 2, f"{costing} checked ({info[costing]['seconds']:.1f}s)")
    return StageResult(outputs=outputs, counts=counts, info=info)


def _check_costing(graph, costing: str) -> tuple[int, int, int]:
    """(arcs, weights that are not numbers >= 0, usable edges) of the costing's default turn graph."""
    from geoengine.routing.profile import Profile

    prof = Profile(graph, costing, default_options(costing))
    arcs = bad = 0
    for _tgt, w in costing_weights(graph, prof):
        arcs += len(w)
        bad += int((~(w >= 0)).sum())  # NaN or negative
    return arcs, bad, int(prof.usable.sum())


def costing_weights(graph, prof, arcs_per_slice: int = CHECK_SLICE):
    """(targets, weights) of a profile's turn graph, slice after slice of about `arcs_per_slice` possible
    turns: the weights `Profile.turn_csr` gives (the same `TurnBase.turn_graph` call with the profile's
    edge costs, travel mode and turn penalty), without its secondary metrics and with one slice's
    arrays at a time (the whole turn graph's and the turn penalty's temporaries were the stage's peak
    at 64 copies of Liechtenstein, about 250 MB over the stage's start)."""
    from geoengine.costing import turn_penalty
    from geoengine.graph.turns import turn_base

    base = turn_base(graph)
    tp = turn_penalty(prof.costing, prof.options)
    cuts = np.searchsorted(base.offsets, np.arange(0, int(base.offsets[-1]), max(int(arcs_per_slice), 1)),
                           side="right") - 1
    bounds = np.unique(np.concatenate([[0], cuts, [graph.n_edges]]))
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        _off, tgt, w, _sec, _idx = base.turn_graph(prof.cost, prof.length, mode=prof.mode, turn_penalty=tp,
                                                   rows=(a, b))
        yield tgt, w


STAGE = Stage(name="routing", run=run, patch=patch,
              describe="customisable contraction hierarchy: one order and topology for every costing", isolated=True,
              needs=("stage:graph", "stage:elevation"))
