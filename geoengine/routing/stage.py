"""The `routing` build stage: one customisable contraction hierarchy topology for every costing.

One metric-independent order (nested dissection) and one chordal supergraph of the full turn graph
(`geoengine.routing.customise.build_topology`) are written to `routing/cch/`. Every costing's default
turn graph is then checked: its weights are numbers >= 0 (inf: unusable), and every possible turn, of
which each costing's turns are a subset, must join vertices the topology connects. The router
customises each costing at first use (`Router.warm` does the car's at open), and any option set or
avoid area the same way, so all costings share the one topology (see docs/routing.md). The stage does
not customise: nothing it would customise is kept, and a customisation's metric arrays more than
doubled the stage's peak memory (0.72 -> 2.1 GB at 64 copies of Liechtenstein) and cost about a third
of its time.
"""

from __future__ import annotations

import time

from geoengine.bundler.pipeline import BuildContext, Stage, StageResult
from geoengine.costing import COSTINGS, default_options

CCH_DIR = "cch"


def run(ctx: BuildContext) -> StageResult:
    from geoengine.bundler import heap
    from geoengine.graph import Graph
    from geoengine.routing.cch import CCHTopology
    from geoengine.routing.customise import build_topology, possible_turns
    from geoengine.routing.profile import Profile

    graph = Graph.open(ctx.out / "graph")
    from geoengine.elevation.grades import attach_grades

    attach_grades(graph, ctx.out)  # grades from the elevation stage (built before routing), if any
    out = ctx.stage_dir("routing")
    t0 = time.perf_counter()
    # written to disk array by array as it is built, and returned memory-mapped from there
    topo = build_topology(graph, out / CCH_DIR)
    outputs = [f"routing/{CCH_DIR}/{n}" for n in CCHTopology.files()]
    info: dict = {"topology": dict(topo.info, seconds=round(time.perf_counter() - t0, 3))}
    counts = {"vertices": int(graph.n_edges), "cch_edges": topo.edges}
    ctx.progress.update(1, f"CCH topology ({info['topology']['seconds']:.1f}s, {topo.edges} edges)")
    # every possible turn must join two vertices the topology connects (what the router's set_base
    # raises on otherwise); each costing's turn graph is a subset of them by construction
    # (graph.turns.TurnBase)
    topo.check(*possible_turns(graph))
    del topo  # saved and checked; the costings' checks below need only the graph
    heap.release()
    for i, costing in enumerate(COSTINGS):
        t0 = time.perf_counter()
        prof = Profile(graph, costing, default_options(costing))
        _off, tgt, w, _packed = prof.turn_csr()
        if not (w >= 0).all():  # NaN or negative
            raise ValueError(f"{costing}: {int((~(w >= 0)).sum())} turn weight(s) are not numbers >= 0")
        info[costing] = {"arcs": int(len(tgt)), "seconds": round(time.perf_counter() - t0, 3),
                         "usable_edges": int(prof.usable.sum())}
        counts[f"{costing}_arcs"] = int(len(tgt))
        # the next costing's arrays replace these rather than join them
        del prof, _off, tgt, w, _packed
        ctx.progress.update(i + 2, f"{costing} checked ({info[costing]['seconds']:.1f}s)")
    return StageResult(outputs=outputs, counts=counts, info=info)


STAGE = Stage(name="routing", run=run,
              describe="customisable contraction hierarchy: one order and topology for every costing")
