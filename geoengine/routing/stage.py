"""The `routing` build stage: one customisable contraction hierarchy topology for every costing.

One metric-independent order (nested dissection) and one chordal supergraph of the full turn graph
(`geoengine.routing.customise.build_topology`) are written to `routing/cch/`. Every costing's
default metric is then customised once here (to check it and to report its time and size); the
router customises them again at first use (`Router.warm` does the car's at open), and any option
set or avoid area the same way, so all costings share the one topology (see docs/routing.md).
"""

from __future__ import annotations

import time

from geoengine.bundler.pipeline import BuildContext, Stage, StageResult
from geoengine.costing import COSTINGS, default_options

CCH_DIR = "cch"


def run(ctx: BuildContext) -> StageResult:
    from geoengine.graph import Graph
    from geoengine.routing.customise import build_topology
    from geoengine.routing.profile import Profile

    graph = Graph.open(ctx.out / "graph")
    from geoengine.elevation.grades import attach_grades

    attach_grades(graph, ctx.out)  # grades from the elevation stage (built before routing), if any
    out = ctx.stage_dir("routing")
    t0 = time.perf_counter()
    topo = build_topology(graph)
    names = topo.save(out / CCH_DIR)
    outputs = [f"routing/{CCH_DIR}/{n}" for n in names]
    info: dict = {"topology": dict(topo.info, seconds=round(time.perf_counter() - t0, 3))}
    counts = {"vertices": int(graph.n_edges), "cch_edges": topo.edges}
    ctx.progress.update(1, f"CCH topology ({info['topology']['seconds']:.1f}s, {topo.edges} edges)")
    for i, costing in enumerate(COSTINGS):
        t0 = time.perf_counter()
        prof = Profile(graph, costing, default_options(costing))
        off, tgt, w, packed = prof.turn_csr()
        ch = topo.customise(off, tgt, w, packed)
        info[costing] = {"arcs": int(len(tgt)), "seconds": round(time.perf_counter() - t0, 3),
                         "customise_seconds": ch.info["customise_seconds"], "bytes": ch.nbytes(),
                         "usable_edges": int(prof.usable.sum())}
        counts[f"{costing}_up_arcs"] = int(ch.info["up_arcs"])
        ctx.progress.update(i + 2, f"{costing} customised ({info[costing]['seconds']:.1f}s)")
    return StageResult(outputs=outputs, counts=counts, info=info)


STAGE = Stage(name="routing", run=run,
              describe="customisable contraction hierarchy: one order and topology for every costing")
