"""The `tiles` build stage: the extract's features in the Protomaps basemap schema, cut into gzip
vector tiles z0-14 and stored in `tiles/<id>.mbtiles` (id = region name, else the extract's stem)."""

from __future__ import annotations

import json
import shutil
import sqlite3
import time

import numpy as np

from geoengine.bundle import STAGE_VERSIONS
from geoengine.bundler.measure import cpu_s
from geoengine.bundler.pipeline import BuildContext, Stage, StageResult
from geoengine.tiles import kept as K
from geoengine.tiles import schema
from geoengine.tiles.mbtiles import MBTilesWriter
from geoengine.tiles.spool import collect_spooled, cut_spooled, plan_cut, reaching
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

    record: list = []  # each tile's features (geoengine.tiles.splice), kept for `geoengine update`
    for z, x, y, data in cut_spooled(fs, partitions, bbox, on_step=on_step, plan=plan, record=record):
        writer.add(z, x, y, data)
    tiles, nbytes = writer.count, writer.bytes
    writer.close(_metadata(ctx, sid, bbox))
    counts = _counts(fs, tiles)
    t_cut = time.time() - t0 - t_collect
    # the collection is kept for `geoengine update` (geoengine.tiles.kept): the partition files are moved,
    # the index and the ways' node refs (a Numba pass over the PBF's way blocks) written
    kept_bytes = K.save(out / K.FOLDER, fs, spool_dir, ctx.inputs.osm)
    if kept_bytes is not None:
        from geoengine.tiles import splice

        kept_bytes += splice.save_record(out / K.FOLDER, record)
    del record
    shutil.rmtree(spool_dir, ignore_errors=True)
    return StageResult(
        outputs=[f"tiles/{sid}.mbtiles"],
        counts=counts,
        info={"source": sid, "bytes": nbytes, "minzoom": MINZOOM, "maxzoom": MAXZOOM, "partitions": len(plan.partitions),
              "collect_seconds": round(t_collect, 3), "cut_seconds": round(t_cut, 3),
              "kept_bytes": kept_bytes, "keep_seconds": round(time.time() - t0 - t_collect - t_cut, 3)},
    )


def _metadata(ctx: BuildContext, sid: str, bbox) -> dict:
    center = _catalog_center(ctx.inputs.region, bbox) or ((bbox[0] + bbox[2]) / 2, (bbox[1] + bbox[3]) / 2, 12)
    name = _catalog_title(ctx.inputs.region) or sid.replace("_", " ").title()
    return {
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


def _counts(fs, tiles: int) -> dict:
    counts = {"tiles": tiles, "features": fs.n, **{f"features_{k}": v for k, v in fs.counts().items()}}
    if fs.partial_ways or fs.skipped_ways:
        counts["ways_with_missing_nodes"] = fs.partial_ways
        counts["ways_skipped"] = fs.skipped_ways
    return counts


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

# A patch re-cuts at most this share of the tiles a full cut visits; above it the stage runs in full
# (measured at 16 copies of Liechtenstein with the kept collection: 175 tiles of 4,160 cut again took 0.28x a
# full run's CPU, 1,592 took 0.62-0.82x; docs/updates.md).
PATCH_MAX_SHARE = 0.50


def _stored(path) -> dict[int, np.ndarray]:
    """Per zoom, the sorted ids (x << 32 | y) of the tiles an MBTiles archive holds."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        rows = np.asarray(db.execute("SELECT zoom_level, tile_column, tile_row FROM tiles").fetchall(),
                          dtype=np.int64).reshape(-1, 3)
    out = {}
    for z in range(MINZOOM, MAXZOOM + 1):
        r = rows[rows[:, 0] == z]
        out[z] = np.sort((r[:, 1] << 32) | ((1 << z) - 1 - r[:, 2]))
    return out


def _why_not(ctx: BuildContext, p, sid: str, old_path) -> str | None:
    """Why the old archive cannot be patched (None: it can)."""
    from geoengine import __version__

    entry = p.old_entry("tiles")
    if not entry:
        return "the old bundle has no tiles"
    if entry.get("version") != STAGE_VERSIONS["tiles"]:
        return f"the old tiles are of stage version {entry.get('version')}"
    if p.old.manifest.get("geoengine_version") != __version__:
        return f"the old bundle was built by geoengine {p.old.manifest.get('geoengine_version')}"
    if entry.get("outputs") != [f"tiles/{sid}.mbtiles"] or not old_path.exists():
        return "the old bundle's archive has another name"
    if p.changes is None:
        return "no change list"
    with sqlite3.connect(f"file:{old_path}?mode=ro", uri=True) as db:
        meta = dict(db.execute("SELECT name, value FROM metadata").fetchall())
    want = _metadata(ctx, sid, ctx.bbox)
    for k in ("bounds", "minzoom", "maxzoom", "generator", "format", "compression"):
        if meta.get(k) != want[k]:
            return f"the old archive's {k} differs ({meta.get(k)} against {want[k]})"
    return None


def patch(ctx: BuildContext, p) -> StageResult | None:
    """`geoengine update`'s partial rebuild (Stage.patch), from the old bundle's kept collection and the
    change alone (geoengine.tiles.slim: the affected objects' features made again, the collection
    patched; no pass over either extract), then the tiles those features' old and new bounds touch cut
    again (geoengine.tiles.patch) and every other tile's bytes copied from the old archive in SQLite.
    None (the stage then runs in full) when the old tiles were made by another stage version, geoengine
    or box, when the old bundle keeps no collection or object store, when a coastline changed, or when
    more than PATCH_MAX_SHARE of the tiles would be cut again."""
    from geoengine.tiles import patch as P
    from geoengine.tiles import slim
    from geoengine.tiles.spool import restrict_plan

    bbox = ctx.bbox
    if bbox is None:
        return None
    t0 = time.time()
    cpu = [cpu_s()]
    sid = source_id(ctx)
    old_path = p.old_dir("tiles") / f"{sid}.mbtiles"
    why = _why_not(ctx, p, sid, old_path)
    old_kept = p.old_dir("tiles") / K.FOLDER
    if why is None and not (old_kept / "meta.pkl").exists():
        why = "the old bundle keeps no tile collection (built before it)"
    if why is None and (getattr(p, "osc", None) is None or getattr(p, "store", None) is None):
        why = "the old bundle keeps no object store (node locations)"
    if why is not None:
        ctx.progress.log(f"[tiles] not patched: {why}")
        return None
    out = ctx.stage_dir("tiles")
    work = out / K.FOLDER
    shutil.rmtree(work, ignore_errors=True)

    def decline(msg: str):
        shutil.rmtree(work, ignore_errors=True)
        ctx.progress.log(f"[tiles] not patched: {msg}")

    try:
        fs, feats, objects = slim.build(bbox, p, slim.Old(old_kept), work)
    except (slim.Decline, LookupError) as exc:
        decline(str(exc))
        return None
    t_collect = time.time() - t0
    cpu.append(cpu_s())
    touched = P.touched_by_features(feats, bbox)
    stored = _stored(old_path)
    plan = plan_cut(fs, [], bbox)
    planned, met = P.planned_tiles(fs, plan, bbox)
    recut = {z: ids[np.isin(ids, touched.get(z, ()))] for z, ids in planned.items()}
    n_planned = sum(len(v) for v in planned.values())
    n_recut = sum(len(v) for v in recut.values())
    t_find = time.time() - t0 - t_collect
    cpu.append(cpu_s())
    if n_recut > PATCH_MAX_SHARE * n_planned:
        decline(f"{n_recut:,} of the {n_planned:,} tiles would be cut again")
        return None
    # Away from the change a zoom's tiles are those of the old cut unless the zoom switched to every
    # tile of the box (FULL_GRID_FACTOR) from the tiles features meet: decline where it may have
    # and some untouched tile the new cut visits is not in the old archive.
    z = P.grid_may_have_grown(planned, met, stored, touched, bbox)
    if z is not None:
        decline(f"the tiles of zoom {z} may have become every tile of the box")
        return None
    ctx.progress.log(f"[tiles] the change touches {sum(objects.values()):,} objects "
                     f"({len(feats[0]['bounds']):,} features before, {len(feats[1]['bounds']):,} after): "
                     f"{n_recut:,} of {n_planned:,} tiles to cut again")
    path = out / f"{sid}.mbtiles"
    writer = MBTilesWriter(path)
    done = [0]

    def on_step(k):
        done[0] += k
        ctx.progress.update(done[0], "of tile batches and partitions")

    # the splice (geoengine.tiles.splice): a touched tile made from its old bytes and the affected
    # objects' features alone; the tiles it cannot splice (or all, when the old bundle kept no seq lists)
    # are cut again from every feature that reaches them
    from geoengine.tiles import splice as SP

    kept_seqs = SP.Kept.load(old_kept)
    record: list = []
    splice_info = None
    cut = recut
    made = 0
    if kept_seqs is not None:
        ctx.progress.task("tiles", total=None)
        try:
            spliced, srec, cut, splice_info = SP.splice_tiles(fs, p, old_kept, work, old_path, kept_seqs, recut,
                                                              plan, bbox, on_step=on_step)
        except (ValueError, IndexError, KeyError, OSError, EOFError) as exc:  # then cut them all again
            ctx.progress.log(f"[tiles] not spliced: {type(exc).__name__}: {exc}")
            spliced, srec, cut, splice_info = [], [], recut, {"error": f"{type(exc).__name__}: {exc}"}
        for z, x, y, data in spliced:
            writer.add(z, x, y, data)
        made = len(spliced)  # (tiles made: spliced or cut again)
        record.extend(srec)
        ctx.progress.log(f"[tiles] {splice_info.get('tiles_spliced', 0):,} tiles spliced, "
                         f"{sum(len(v) for v in cut.values()):,} to cut again")
    t_splice = time.time() - t0 - t_find - t_collect
    cpu.append(cpu_s())
    small = restrict_plan(plan, cut, fs.pz)
    # the partitions' records that can reach a tile to cut (by the index's bounds): only they are parsed
    ix = fs.index
    fs.reach_seqs = np.sort(ix["seq"][reaching(np.asarray(ix["bounds"]), {z: v for z, v in cut.items()
                                                                           if z >= fs.pz})])
    ctx.progress.task("tiles", total=len(small.low_tasks) + len(small.partitions))
    if any(len(v) for v in cut.values()):
        for z, x, y, data in cut_spooled(fs, small.partitions, bbox, on_step=on_step, plan=small, only=cut,
                                         record=record):
            writer.add(z, x, y, data)
            made += 1
    t_cut = time.time() - t0 - t_find - t_collect
    cpu.append(cpu_s())
    copied, copied_bytes = _copy_tiles(writer, old_path, stored, planned, recut)
    tiles, nbytes = writer.count, writer.bytes
    writer.close(_metadata(ctx, sid, bbox))
    if kept_seqs is not None:  # the new seq lists: the copied tiles' old ones, the others' new ones
        gone = [SP.tile_key(z, ids[np.isin(ids, recut.get(z, ())) | ~np.isin(ids, planned.get(z, ()))])
                for z, ids in stored.items()]
        SP.save(work, *SP.merged(kept_seqs, np.sort(np.concatenate(gone)), SP.from_record(record)))
    cpu.append(cpu_s())
    return StageResult(
        outputs=[f"tiles/{sid}.mbtiles"],
        counts=_counts(fs, tiles),
        info={"source": sid, "bytes": nbytes, "minzoom": MINZOOM, "maxzoom": MAXZOOM,
              "partitions": len(small.partitions),
              "patch": {"objects": objects, "features_before": len(feats[0]["bounds"]),
                        "features_after": len(feats[1]["bounds"]), "tiles_planned": n_planned,
                        "tiles_recut": n_recut, "tiles_made": made, "splice": splice_info,
                        "tiles_recut_per_zoom": [int(len(recut.get(z, ()))) for z in range(MINZOOM, MAXZOOM + 1)], "tiles_copied": copied,
                        # CPU (this process and its workers) of patching the collection, finding the
                        # tiles, cutting, copying
                        "cpu_seconds": dict(zip(("collection", "find", "splice", "cut", "copy"),
                                                (round(b - a, 3) for a, b in zip(cpu, cpu[1:], strict=False)),
                                                strict=False))},
              "collect_seconds": round(t_collect, 3), "find_seconds": round(t_find, 3),
              "splice_seconds": round(t_splice, 3), "cut_seconds": round(t_cut - t_splice, 3),
              "copy_seconds": round(time.time() - t0 - t_find - t_collect - t_cut, 3)},
    )


def _copy_tiles(writer: MBTilesWriter, old_path, stored: dict, planned: dict, recut: dict) -> tuple[int, int]:
    """Copy into the writer's archive every tile of the old archive that the new cut visits and that was
    not cut again. Returns the tiles and bytes copied."""
    rows = []
    for z, ids in stored.items():
        drop = ids[np.isin(ids, recut.get(z, ())) | ~np.isin(ids, planned.get(z, ()))]
        xs, ys = drop >> 32, drop & 0xFFFFFFFF
        rows.append(np.column_stack([np.full(len(drop), z, dtype=np.int64), xs, (1 << z) - 1 - ys]))
    skip = np.concatenate(rows) if rows else np.zeros((0, 3), dtype=np.int64)
    return writer.copy_from(old_path, skip.tolist())


STAGE = Stage(name="tiles", run=run, describe="vector tiles z0-14 (Protomaps basemap schema) in an MBTiles archive",
              isolated=True, patch=patch, needs=("input:osm", "bbox", "region"))
