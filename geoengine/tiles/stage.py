"""The `tiles` build stage: the extract's features in the Protomaps basemap schema, cut into gzip
vector tiles z0-14 and stored in `tiles/<id>.mbtiles` (id = region name, else the extract's stem)."""

from __future__ import annotations

import json
import shutil
import time

from geoengine.bundler.pipeline import BuildContext, Stage, StageResult
from geoengine.tiles import schema
from geoengine.tiles.mbtiles import MBTilesWriter
from geoengine.tiles.spool import collect_spooled, cut_spooled, plan_cut
from geoengine.tiles.tiler import MAXZOOM, MINZOOM

ATTRIBUTION = "© OpenStreetMap contributors"


def source_id(ctx: BuildContext) -> str:
    return ctx.inputs.region or ctx.inputs.osm.name.split(".")[0]


def vector_layers(minzoom: int = MINZOOM, maxzoom: int = MAXZOOM) -> list[dict]:
    return [
        {"id": name, "description": schema.LAYER_DESCRIPTIONS[name], "minzoom": minzoom, "maxzoom": maxzoom,
         "fields": schema.LAYER_FIELDS[name]}
        for name in schema.LAYERS
    ]


def run(ctx: BuildContext) -> StageResult:
    bbox = ctx.bbox
    t0 = time.time()
    if bbox is None:
        raise ValueError("the extract has no bounding box (no header box and no located nodes): nothing to tile")
    out = ctx.stage_dir("tiles")
    spool_dir = out / "spool"
    # features go to disk by partition as they are collected (geoengine.tiles.spool), not into memory
    fs, partitions = collect_spooled(ctx.inputs.osm, bbox, spool_dir)
    t_collect = time.time() - t0
    sid = source_id(ctx)
    path = out / f"{sid}.mbtiles"
    writer = MBTilesWriter(path)
    ctx.progress.log(f"[tiles] {len(fs):,} features collected in {t_collect:.1f}s, spooled into "
                     f"{len(partitions)} partitions")
    plan = plan_cut(fs, partitions, bbox)
    n_steps = len(plan.low_tasks) + len(plan.partitions)
    ctx.progress.task("tiles", total=n_steps)
    done = [0]

    def on_step(k):
        done[0] += k
        ctx.progress.update(done[0], "of tile batches and partitions")

    for z, x, y, data in cut_spooled(fs, partitions, bbox, on_step=on_step, plan=plan):
        writer.add(z, x, y, data)
    shutil.rmtree(spool_dir, ignore_errors=True)
    center = _catalog_center(ctx.inputs.region, bbox) or ((bbox[0] + bbox[2]) / 2, (bbox[1] + bbox[3]) / 2, 12)
    name = _catalog_title(ctx.inputs.region) or sid.replace("_", " ").title()
    metadata = {
        "name": f"{name} basemap",
        "description": f"OpenStreetMap basemap of {name} in the Protomaps basemap layer schema",
        "attribution": ATTRIBUTION,
        "type": "baselayer",
        "version": "1",
        "format": "pbf",
        "compression": "gzip",
        "scheme": "xyz",
        "bounds": ",".join(f"{v:.6f}" for v in bbox),
        "center": f"{center[0]:.6f},{center[1]:.6f},{int(min(MAXZOOM, center[2]))}",
        "minzoom": str(MINZOOM),
        "maxzoom": str(MAXZOOM),
        "generator": "geoengine tiles stage",
        "json": json.dumps({"vector_layers": vector_layers()}),
    }
    tiles, nbytes = writer.count, writer.bytes
    writer.close(metadata)
    counts = {"tiles": tiles, "features": len(fs), **{f"features_{k}": v for k, v in fs.counts().items()}}
    if fs.partial_ways or fs.skipped_ways:
        counts["ways_with_missing_nodes"] = fs.partial_ways
        counts["ways_skipped"] = fs.skipped_ways
    return StageResult(
        outputs=[f"tiles/{sid}.mbtiles"],
        counts=counts,
        info={"source": sid, "bytes": nbytes, "minzoom": MINZOOM, "maxzoom": MAXZOOM, "partitions": len(plan.partitions),
              "collect_seconds": round(t_collect, 3), "cut_seconds": round(time.time() - t0 - t_collect, 3)},
    )


def _region(name: str | None):
    if not name:
        return None
    from geoengine.bundler.fetch import load_regions

    try:
        return load_regions().regions.get(name)
    except Exception:  # the catalog only adds a nicer centre and title
        return None


def _catalog_center(name: str | None, bbox) -> tuple | None:
    """The region catalog's centre (e.g. the capital) when it lies inside the bbox."""
    region = _region(name)
    c = getattr(region, "center", None)
    if c and len(c) == 3 and bbox[0] <= c[0] <= bbox[2] and bbox[1] <= c[1] <= bbox[3]:
        return tuple(c)
    return None


def _catalog_title(name: str | None) -> str | None:
    region = _region(name)
    return getattr(region, "title", None)


STAGE = Stage(name="tiles", run=run, describe="vector tiles z0-14 (Protomaps basemap schema) in an MBTiles archive", isolated=True)
