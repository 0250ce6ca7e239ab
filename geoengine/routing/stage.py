"""The `routing` build stage: one contraction hierarchy per costing, for its default options.

Each is built over the same edge-based graph (`Profile.turn_csr`) that the router searches at run
time, so CH answers equal the exact Dijkstra fallback's. Requests with non-default options use that
fallback (see docs/routing.md).
"""

from __future__ import annotations

import time

from geoengine.bundler.pipeline import BuildContext, Stage, StageResult
from geoengine.costing import COSTINGS, default_options

CH_COSTINGS = COSTINGS


def run(ctx: BuildContext) -> StageResult:
    from geoengine.graph import Graph
    from geoengine.routing.ch import ContractionHierarchy
    from geoengine.routing.profile import Profile

    graph = Graph.open(ctx.out / "graph")
    from geoengine.elevation.grades import attach_grades

    attach_grades(graph, ctx.out)  # grades from the elevation stage (built before routing), if any
    out = ctx.stage_dir("routing")
    outputs, counts, info = [], {}, {}
    for i, costing in enumerate(CH_COSTINGS):
        t0 = time.perf_counter()
        prof = Profile(graph, costing, default_options(costing))
        off, tgt, w, packed = prof.turn_csr()
        ch = ContractionHierarchy.build(graph.n_edges, off, tgt, w, packed)
        names = ch.save(out / costing)
        outputs += [f"routing/{costing}/{n}" for n in names]
        counts[f"{costing}_shortcuts"] = int(ch.info["shortcuts"])
        info[costing] = {"arcs": int(len(tgt)), "seconds": round(time.perf_counter() - t0, 3),
                         "usable_edges": int(prof.usable.sum())}
        ctx.progress.update(i + 1, f"{costing} contracted ({info[costing]['seconds']:.1f}s)")
    counts["vertices"] = int(graph.n_edges)
    return StageResult(outputs=outputs, counts=counts, info=info)


STAGE = Stage(name="routing", run=run, describe="contraction hierarchies for every costing's default options")
