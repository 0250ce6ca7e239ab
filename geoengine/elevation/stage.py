"""The `elevation` build stage: DEM tiles covering the extract, stored for memory-mapped loading.

Writes `elevation/samples.npy` (every kept tile's int16 samples, row-major, back to back;
little-endian) and `elevation/index.json` (per tile: name, offset of its first sample, bounds, rows,
cols, steps, arc-seconds, void count, source file). A tile is kept when it meets the extract's bbox
grown by `MARGIN_DEG` on every side: OSM extracts commonly hold ways beyond their header bbox
(Andorra's reach 41.74N), and routes near the edge should keep their heights. HGT tiles are stored whole; a larger raster (a GeoTIFF) is cropped to
that grown bbox. Voids (-32768) are stored as they are and counted per tile.

When the bundle being built has a road graph (the `graph` stage runs first), the stage also samples
the DEM along every segment and writes `seg_climb.npy`, `seg_descent.npy` and `seg_grade.npy`
(`geoengine.elevation.grades`), which the bicycle and pedestrian costings use (`use_hills`).
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np

from geoengine.bundler.pipeline import BuildContext, Stage, StageResult
from geoengine.elevation.dem import DemTile, read_dem
from geoengine.elevation.model import INDEX_FORMAT, SAMPLES_FILE

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
    read = []
    for k, path in enumerate(ctx.inputs.dem):
        read.append(read_dem(path))
        ctx.progress.update(k + 1, f"of {len(ctx.inputs.dem)} DEM files read")
    kept, skipped = select_tiles(read, ctx.bbox)
    total = sum(t.data.size for t in kept)
    # written tile by tile into the memory-mapped file: a big DEM never sits twice in memory
    samples = np.lib.format.open_memmap(out / SAMPLES_FILE, mode="w+", dtype=np.dtype("<i2"), shape=(total,))
    index_tiles = []
    offset = total_voids = 0
    for tile in kept:
        samples[offset : offset + tile.data.size] = tile.data.ravel()
        voids = tile.voids
        total_voids += voids
        index_tiles.append(
            {
                "name": tile.name,
                "offset": offset,
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
        offset += tile.data.size
    samples.flush()
    del samples
    index = {"format": INDEX_FORMAT, "void": -32768, "samples": SAMPLES_FILE, "tiles": index_tiles}
    (out / "index.json").write_text(json.dumps(index, indent=2))
    outputs = ["elevation/index.json", f"elevation/{SAMPLES_FILE}"]
    counts = {"tiles": len(kept), "samples": total, "voids": total_voids}
    info = {"tiles": [t["name"] for t in index_tiles], "skipped": skipped, "margin_deg": MARGIN_DEG}
    if kept and "graph" in ctx.results and (ctx.out / "graph" / "graph.json").exists():
        graded = _grade_graph(ctx, out)
        outputs += [f"elevation/{name}" for name in graded.pop("files")]
        counts.update(graded.pop("counts"))
        info["grades"] = graded
    return StageResult(outputs=outputs, counts=counts, info=info)


def _grade_graph(ctx: BuildContext, out) -> dict:
    """Climb, descent and grade of every road segment (see geoengine.elevation.grades)."""
    import time

    from geoengine.elevation.grades import SMOOTH_M, STEP_M, segment_grades, write_grades
    from geoengine.elevation.model import ElevationModel
    from geoengine.graph import Graph

    t0 = time.perf_counter()
    graph = Graph.open(ctx.out / "graph")
    grades = segment_grades(graph, ElevationModel.open(out))
    files = write_grades(out, grades)
    ctx.progress.update(1, f"grades of {graph.n_segments:,} road segments")
    climb = grades["climb"]
    return {
        "files": files,
        "counts": {"graded_segments": int(grades["has_height"].sum()),
                   "ungraded_segments": int((~grades["has_height"]).sum())},
        "step_m": STEP_M,
        "smooth_m": SMOOTH_M,
        "total_climb_m": round(float(climb.sum(dtype=np.float64)), 1),
        "seconds": round(time.perf_counter() - t0, 3),
    }


STAGE = Stage(
    name="elevation",
    run=run,
    applies=lambda ctx: bool(ctx.inputs.dem),
    describe="store the DEM tiles covering the extract as memory-mappable int16 arrays",
    isolated=True,
    needs=("input:dem", "stage:graph", "bbox"),  # the grades are the graph's segments over the DEM
)
