"""The `graph` build stage: OSM extract -> road graph arrays in `<bundle>/graph/`."""

from __future__ import annotations

from geoengine.bundler.pipeline import BuildContext, Stage, StageResult
from geoengine.graph.build import build_graph


def run(ctx: BuildContext) -> StageResult:
    out = ctx.stage_dir("graph")
    res = build_graph(ctx.inputs.osm, out)
    return StageResult(outputs=[f"graph/{p}" for p in res["outputs"]], counts=res["counts"], info=res["info"])


STAGE = Stage(name="graph", run=run, describe="road graph: junctions, directed edges, attributes, turn restrictions", isolated=True,
              needs=("input:osm",))
