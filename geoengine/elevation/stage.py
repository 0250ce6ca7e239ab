"""The `elevation` build stage: DEM tiles covering the extract, stored for memory-mapped loading.

Writes `elevation/index.json` and one `elevation/tiles/<name>.npy` (int16, native byte order) per
tile. A tile is kept when it meets the extract's bbox grown by `MARGIN_DEG` on every side: OSM
extracts commonly hold ways beyond their header bbox (Andorra's reach 41.74N), and routes near the
edge should keep their heights. HGT tiles are stored whole; a larger raster (a GeoTIFF) is cropped to
that grown bbox. Voids (-32768) are stored as they are and counted per tile.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np

from geoengine.build.pipeline import BuildContext, Stage, StageResult
from geoengine.elevation.dem import DemTile, read_dem
from geoengine.elevation.model import INDEX_FORMAT

MARGIN_DEG = 0.5


def _window(bbox):
    if not bbox:
        return None
    min_lon, min_lat, max_lon, max_lat = bbox
    return (min_lon - MARGIN_DEG, min_lat - MARGIN_DEG, max_lon + MARGIN_DEG, max_lat + MARGIN_DEG)


def select_tiles(tiles: list[DemTile], bbox) -> tuple[list[DemTile], list[str]]:
    """(kept tiles, descriptions of skipped ones): drop tiles away from the grown bbox and repeats of
    a tile already kept, crop big rasters, and give same-named tiles of other places unique names."""
    window = _window(bbox)
    kept: list[DemTile] = []
    skipped: list[str] = []
    placed: dict[str, tuple] = {}  # stored name -> (north, west, rows, cols)
    for tile in tiles:
        if window is not None and not tile.intersects(window):
            skipped.append(f"{tile.source} (outside the extract)")
            continue
        if ".hgt" not in tile.source.lower() and window is not None:
            tile = tile.crop(window)
        where = (tile.north, tile.west, tile.rows, tile.cols)
        if placed.get(tile.name) == where:
            skipped.append(f"{tile.source} (same tile as an earlier {tile.name})")
            continue
        name, k = tile.name, 1
        while name in placed:
            k += 1
            name = f"{tile.name}-{k}"
        if name != tile.name:
            tile = dataclasses.replace(tile, name=name)
        placed[name] = where
        kept.append(tile)
    return kept, skipped


def run(ctx: BuildContext) -> StageResult:
    out = ctx.stage_dir("elevation")
    tiles_dir = out / "tiles"
    tiles_dir.mkdir(exist_ok=True)
    read = []
    for k, path in enumerate(ctx.inputs.dem):
        read.append(read_dem(path))
        ctx.progress.update(k + 1, f"of {len(ctx.inputs.dem)} DEM files read")
    kept, skipped = select_tiles(read, ctx.bbox)
    index_tiles, outputs = [], []
    total_voids = samples = 0
    for tile in kept:
        rel = f"tiles/{tile.name}.npy"
        np.save(tiles_dir / f"{tile.name}.npy", np.ascontiguousarray(tile.data, dtype=np.dtype("int16").newbyteorder("=")))
        voids = tile.voids
        total_voids += voids
        samples += tile.data.size
        index_tiles.append(
            {
                "name": tile.name,
                "file": rel,
                "north": tile.north,
                "south": tile.south,
                "west": tile.west,
                "east": tile.east,
                "rows": tile.rows,
                "cols": tile.cols,
                "step_lat": tile.step_lat,
                "step_lon": tile.step_lon,
                "arc_seconds": tile.arc_seconds,
                "voids": voids,
                "source": tile.source,
            }
        )
        outputs.append(f"elevation/{rel}")
    index = {"format": INDEX_FORMAT, "void": -32768, "tiles": index_tiles}
    (out / "index.json").write_text(json.dumps(index, indent=2))
    outputs.insert(0, "elevation/index.json")
    return StageResult(
        outputs=outputs,
        counts={"tiles": len(kept), "samples": samples, "voids": total_voids},
        info={"tiles": [t["name"] for t in index_tiles], "skipped": skipped, "margin_deg": MARGIN_DEG},
    )


STAGE = Stage(
    name="elevation",
    run=run,
    applies=lambda ctx: bool(ctx.inputs.dem),
    describe="store the DEM tiles covering the extract as memory-mappable int16 arrays",
)
