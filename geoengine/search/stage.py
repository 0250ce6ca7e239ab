"""The `search` build stage: documents from the OSM extract and the GeoNames table, then the index."""

from __future__ import annotations

import gc
import time

from geoengine.bundler.pipeline import BuildContext, Stage, StageResult
from geoengine.errors import BuildError
from geoengine.search.documents import build_documents
from geoengine.search.write import write_index


def run(ctx: BuildContext) -> StageResult:
    t0 = time.perf_counter()
    out = ctx.stage_dir("search")
    scope = getattr(ctx.settings, "search_places", "important")
    if scope not in ("important", "region", "all"):
        raise BuildError(f"GEOENGINE_SEARCH_PLACES is '{scope}'; use important, region or all")
    # the objects that exist before the stage (in the build, the forked stage process shares them with the
    # build process) are left out of the garbage collections the stage runs (heap.release): a full collection
    # writes to every object it visits, copying the build process's pages into this one (at 64 copies of
    # Liechtenstein the peak moved by 2 MB, within the runs' spread: it costs nothing)
    gc.freeze()
    try:
        ds, info = build_documents(ctx.inputs.osm, ctx.inputs.places, ctx.inputs.admin1, bbox=ctx.bbox, world=scope)
        t1 = time.perf_counter()
        files, counts = write_index(out, ds, release=True)
        t2 = time.perf_counter()
    finally:
        gc.unfreeze()
    counts.update({k: v for k, v in info.items() if isinstance(v, int)})
    size = sum((out / f).stat().st_size for f in files)
    return StageResult(
        outputs=[f"search/{f}" for f in files],
        counts=counts,
        info={"places_scope": scope, "bytes": size, "documents_seconds": round(t1 - t0, 3),
              "index_seconds": round(t2 - t1, 3)},
    )


STAGE = Stage(name="search", run=run, describe="search documents (OSM places, POIs, streets, addresses; GeoNames) and index", isolated=True,
              needs=("input:osm", "input:places", "input:admin1", "bbox", "settings"))
