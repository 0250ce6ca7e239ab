"""The `search` build stage: documents from the OSM extract and the GeoNames table, then the index."""

from __future__ import annotations

import gc
import shutil
import time

from geoengine.bundler.pipeline import BuildContext, PatchInputs, Stage, StageResult
from geoengine.errors import BuildError
from geoengine.search import records
from geoengine.search.documents import build_documents
from geoengine.search.write import write_index

# a change whose affected objects are more than this share of the kept documents is run in full
PATCH_MAX_SHARE = 0.25


def run(ctx: BuildContext, read=None, info_extra: dict | None = None) -> StageResult:
    t0 = time.perf_counter()
    out = ctx.stage_dir("search")
    scope = getattr(ctx.settings, "search_places", "important")
    if scope not in ("important", "region", "all"):
        raise BuildError(f"GEOENGINE_SEARCH_PLACES is '{scope}'; use important, region or all")
    kept: list[str] = []

    def keep(ds, streets, boundaries, reader):  # what the read made, for updates (search/records.py)
        if read is None:
            rec = records.records_of(ds, streets, boundaries, reader)
        else:  # (patched: the records and kept ways' files are in place already, `patch`)
            kept.extend(read[1])
            return
        kept.extend(name for name, _ in rec["ways"] if name not in kept)
        kept.append(records.save(out, rec))

    # the objects that exist before the stage (in the build, the forked stage process shares them with the
    # build process) are left out of the garbage collections the stage runs (heap.release): a full collection
    # writes to every object it visits, copying the build process's pages into this one (at 64 copies of
    # Liechtenstein the peak moved by 2 MB, within the runs' spread: it costs nothing)
    gc.freeze()
    try:
        ds, info = build_documents(ctx.inputs.osm, ctx.inputs.places, ctx.inputs.admin1, bbox=ctx.bbox, world=scope,
                                   read=None if read is None else read[0], keep=keep,
                                   keep_ways=str(out / "ways") if read is None else None)
        read = None
        t1 = time.perf_counter()
        files, counts = write_index(out, ds, release=True)
        t2 = time.perf_counter()
    finally:
        gc.unfreeze()
    files = files + kept
    counts.update({k: v for k, v in info.items() if isinstance(v, int)})
    size = sum((out / f).stat().st_size for f in files)
    return StageResult(
        outputs=[f"search/{f}" for f in files],
        counts=counts,
        info={"places_scope": scope, "bytes": size, "documents_seconds": round(t1 - t0, 3),
              "index_seconds": round(t2 - t1, 3), **(info_extra or {})},
    )


def _trim() -> None:
    """The heap's free memory back to the system (heap.release without its garbage collection: the records
    are arrays and bytes, freed as they go; a full collection of the forked process cost 0.06 s a call)."""
    from geoengine.bundler import heap

    libc = heap._libc()
    if libc is not None:
        libc.malloc_trim(0)


def patch(ctx: BuildContext, p: PatchInputs) -> StageResult | None:
    """The stage for an update: the old bundle's records (search/records.py) with the objects the change
    affects read again, then the later phases and the index as a full run makes them; None (a full run)
    where the records cannot be patched exactly."""
    log = ctx.progress.log
    t0 = time.perf_counter()
    if getattr(p, "osc", None) is None or not hasattr(p, "locations"):
        log("[search] not patched: the update gives no change objects")
        return None
    if ctx.inputs.osm.suffix != ".pbf":
        log("[search] not patched: the extract is not a PBF")
        return None
    rec = records.load(p.old_dir("search"))
    if rec is None:
        log("[search] not patched: the old bundle keeps no search records of this format (rebuilt once)")
        return None
    changed = len(p.osc.nodes) + len(p.osc.ways) + len(p.osc.relations)
    if changed > PATCH_MAX_SHARE * max(1, len(rec["doc.key"]) + len(rec["wrec.id"])):
        log(f"[search] not patched: {changed:,} changed objects, too many to pay")
        return None
    # the merge's temporaries (numpy arrays of a few MB) mapped and unmapped, not left as holes in the heap (a
    # forked stage process inherits the build process's dynamic threshold; build_documents sets the same)
    from geoengine.bundler import heap
    from geoengine.search.documents import MMAP_THRESHOLD

    heap.mmap_threshold(MMAP_THRESHOLD)
    work = records.temp_dir()
    try:
        try:
            new = records.patch_read(rec, p.osc, p.locations, work, p.old_dir("search"))
        except (records.Declined, LookupError) as exc:  # (LookupError: the old bundle keeps no node store)
            log(f"[search] not patched: {exc}")
            return None
        del rec
        _trim()
        # the patched records kept now (the old bundle's kept ways' files hard-linked, the patch's beside
        # them), so that they are not held under the later phases (the stage's peak)
        out = ctx.stage_dir("search")
        kept = records.link_kept(new, p.old_dir("search"), new.pop("_files"), out)
        kept.extend(name for name, _ in new["ways"] if name not in kept)
        kept.append(records.save(out, new))
        read = (records.from_records(new), kept)
        del new
        _trim()
        t1 = time.perf_counter()
        return run(ctx, read=read, info_extra={"patched": {"records_seconds": round(t1 - t0, 3)}})
    finally:
        shutil.rmtree(work, ignore_errors=True)

STAGE = Stage(name="search", run=run, describe="search documents (OSM places, POIs, streets, addresses; GeoNames) and index",
              isolated=True, patch=patch, needs=("input:osm", "input:places", "input:admin1", "bbox", "settings"))
