"""The `graph` build stage: OSM extract -> road graph arrays in `<bundle>/graph/`, and what the read kept
in `<bundle>/graph/raw/` (geoengine.graph.raw), which `geoengine update` patches (geoengine.graph.patch)."""

from __future__ import annotations

from geoengine.bundler.pipeline import BuildContext, PatchInputs, Stage, StageResult
from geoengine.graph.build import build_graph
from geoengine.graph.raw import RAW_DIR


def run(ctx: BuildContext) -> StageResult:
    out = ctx.stage_dir("graph")
    res = build_graph(ctx.inputs.osm, out)
    return StageResult(outputs=[f"graph/{p}" for p in res["outputs"]], counts=res["counts"], info=res["info"])


def patch(ctx: BuildContext, p: PatchInputs) -> StageResult | None:
    """`geoengine update`: the old bundle's kept read patched from the change's objects, then the build's
    array phase (geoengine.graph.patch); None (a full run) when it declines, which the progress says."""
    import time

    from geoengine.graph.build import graph_arrays
    from geoengine.graph.patch import old_graph_ok, patch_raw
    from geoengine.graph.raw import write_raw

    def declined(why: str) -> None:
        ctx.progress.log(f"[graph] not patched: {why}")

    if p.osc is None or p.store is None:
        return declined("the old bundle keeps no object store (source/store: built before it), so no node locations")
    old_graph = p.old_dir("graph")
    if p.old_entry("graph").get("version") != STAGE.version or not old_graph_ok(old_graph):
        return declined("the old bundle's graph is of another version or format")
    t0 = time.perf_counter()
    try:
        raw = patch_raw(old_graph, p.osc, p.locations)
    except LookupError as exc:  # PatchInputs.locations without a store
        return declined(str(exc))
    if isinstance(raw, str):
        return declined(raw)
    t1 = time.perf_counter()
    out = ctx.stage_dir("graph")
    patch_counts = raw.pop("counts")
    kept = [f"{RAW_DIR}/{name}" for name in write_raw(raw, out / RAW_DIR)]
    res = graph_arrays(raw, out)
    info = dict(res["info"], patch={**patch_counts, "patch_seconds": round(t1 - t0, 3),
                                    "arrays_seconds": round(time.perf_counter() - t1, 3)})
    return StageResult(outputs=[f"graph/{q}" for q in res["outputs"] + kept], counts=res["counts"], info=info)


STAGE = Stage(name="graph", run=run, patch=patch, kept=(RAW_DIR,), isolated=True, needs=("input:osm",),
              describe="road graph: junctions, directed edges, attributes, turn restrictions")
