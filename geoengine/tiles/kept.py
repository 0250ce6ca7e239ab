"""The tile stage's kept collection: what a full run read from the extract, kept in the bundle
(`tiles/collection/`) so that `geoengine update` patches it from the change alone (osm2pgsql's "slim"
design; `stage.patch`, docs/tiles.md "Updates: the stage's patch").

- `parts/`: the spool's partition files as the cut read them (pickled records (seq, WKB, layer, min zoom,
  properties), geoengine.tiles.spool), moved into the bundle instead of deleted;
- `shared.pkl`, `low.pkl`: the records in every partition, and the low zooms' records (WKB);
- `index.npy`: one row per feature (spool.INDEX_DTYPE: seq, the OSM object it came from, layer, min
  zoom, Mercator bounds, size), memory-mapped;
- `ways/`: every way of the extract (sorted ids, node refs in CSR form, refs memory-mapped; decoded from
  the PBF's blocks by a Numba kernel and written as it goes, `way_refs`), the tag sets the collectors read per way (`tags.pkl`: per stream the
  way ids, their tag set and the sets), the ways counted as partial or skipped;
- `relations.pkl`: (id, tags, members) of the relations osmium may make areas of and of the boundary
  relations (features.boundary_relations).
"""

from __future__ import annotations

import pickle
import shutil
import struct
import zlib
from pathlib import Path

import numba
import numpy as np

from geoengine.bundler.pbfscan import _blobs, group_way_refs, skip_at, varint_at

FORMAT = 2
FOLDER = "collection"  # under the stage's folder


@numba.njit(cache=True, nogil=True)
def _block_ways(buf, ids, counts, refs):
    """The ways of one PrimitiveBlock: ids, node counts and refs (delta-decoded) written from index 0
    (pbfscan.group_way_refs over each PrimitiveGroup). Returns (ways, refs) written, or (-1, -1) on a
    field it cannot read."""
    ends = np.zeros(len(ids) + 1, np.int64)
    nw = 0
    nr = 0
    pos = 0
    n = len(buf)
    while pos < n:
        key, pos = varint_at(buf, pos)
        field, wire = key >> 3, key & 7
        if field == 2 and wire == 2:  # PrimitiveGroup
            ln, pos = varint_at(buf, pos)
            nw, nr = group_way_refs(buf, pos, pos + ln, ids, ends, refs, nw, nr)
            if nw < 0:
                return -1, -1
            pos += ln
        else:
            pos = skip_at(buf, pos, wire)
            if pos < 0:
                return -1, -1
    for k in range(nw):
        counts[k] = ends[k + 1] - ends[k]
    return nw, nr


def way_refs(path, folder: Path) -> bool:
    """Every way of a PBF file into `folder` (WAYS_FILES: sorted ids, CSR offsets, refs as raw int64),
    decoded block by block and written as it goes (not held in memory). False when it cannot be read."""
    folder.mkdir(parents=True, exist_ok=True)
    ids_p, cnt_p, refs_p = folder / "ids.tmp", folder / "counts.tmp", folder / "refs.bin"
    try:
        with open(ids_p, "wb") as fi, open(cnt_p, "wb") as fc, open(refs_p, "wb") as fr:
            for btype, data in _blobs(Path(path)):
                if btype != "OSMData":
                    continue
                buf = np.frombuffer(data, dtype=np.uint8)
                bi = np.empty(len(buf) // 4 + 1, dtype=np.int64)
                bc = np.empty(len(buf) // 4 + 1, dtype=np.int64)
                br = np.empty(len(buf) + 1, dtype=np.int64)
                nw, nr = _block_ways(buf, bi, bc, br)
                if nw < 0:
                    return False
                fi.write(bi[:nw].tobytes())
                fc.write(bc[:nw].tobytes())
                fr.write(br[:nr].tobytes())
    except (ValueError, zlib.error, struct.error, IndexError, OSError):
        return False
    wid = np.fromfile(ids_p, dtype=np.int64)
    cnt = np.fromfile(cnt_p, dtype=np.int64)
    ids_p.unlink()
    cnt_p.unlink()
    if len(wid) > 1 and not (np.diff(wid) > 0).all():  # (a sorted extract: ids ascending)
        ref = np.fromfile(refs_p, dtype=np.int64)
        off = np.zeros(len(wid) + 1, dtype=np.int64)
        np.cumsum(cnt, out=off[1:])
        order = np.argsort(wid, kind="stable")
        idx = np.repeat(off[:-1][order] - np.concatenate([[0], np.cumsum(cnt[order])[:-1]]), cnt[order]) + \
            np.arange(int(cnt.sum()))
        ref[idx].tofile(refs_p)
        wid, cnt = wid[order], cnt[order]
    off = np.zeros(len(wid) + 1, dtype=np.int64)
    np.cumsum(cnt, out=off[1:])
    np.save(folder / "ids.npy", wid)
    np.save(folder / "offsets.npy", off)
    return True


def load_ways(folder: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(ids, offsets, refs (memory-mapped), flags) of a kept collection's `ways/`."""
    refs = np.memmap(folder / "refs.bin", dtype=np.int64, mode="r") if (folder / "refs.bin").stat().st_size \
        else np.zeros(0, dtype=np.int64)
    return np.load(folder / "ids.npy"), np.load(folder / "offsets.npy"), refs, np.load(folder / "flags.npy")


def save_ways(folder: Path, wid, off, refs, flags) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / "ids.npy", wid)
    np.save(folder / "offsets.npy", off)
    np.asarray(refs, dtype=np.int64).tofile(folder / "refs.bin")
    np.save(folder / "flags.npy", np.asarray(flags, dtype=np.int64))


def save(folder: Path, spool, spool_dir: Path, osm_path) -> int | None:
    """Keep a full run's collection in `folder` (the spool's partition files are moved there). Returns the
    bytes kept, or None (nothing kept) when the extract's ways cannot be decoded."""
    import shapely

    from geoengine.tiles.spool import INDEX_DTYPE

    folder.mkdir(parents=True, exist_ok=True)
    if not way_refs(osm_path, folder / "ways"):
        discard(folder)
        return None
    np.save(folder / "ways" / "flags.npy", np.frombuffer(spool.way_flags, dtype=np.int64) if len(spool.way_flags)
            else np.zeros(0, np.int64))
    # the index: the streams' row files, in order, copied into one memory-mapped .npy
    total = sum(p.stat().st_size for p in spool.index_files) // INDEX_DTYPE.itemsize
    index = np.lib.format.open_memmap(folder / "index.npy", mode="w+", dtype=INDEX_DTYPE, shape=(total,))
    at = 0
    for p in spool.index_files:
        rows = np.fromfile(p, dtype=INDEX_DTYPE)
        index[at:at + len(rows)] = rows
        at += len(rows)
        p.unlink()
    if total > 1 and (np.diff(index["seq"]) < 0).any():  # (the sea, added last, is in the first file)
        index[:] = index[np.argsort(index["seq"], kind="stable")]
    index.flush()
    del index
    spool_dir.rename(folder / "parts")
    low = list(zip((r[0] for r in spool.low), shapely.to_wkb([r[1] for r in spool.low]).tolist() if spool.low else [],
                   (r[2] for r in spool.low), (r[3] for r in spool.low), (r[4] for r in spool.low), strict=True))
    _dump(folder / "low.pkl", low)
    _dump(folder / "shared.pkl", spool.shared)
    _dump(folder / "relations.pkl", spool.relations or [])
    _dump(folder / "tags.pkl", {k: (np.frombuffer(a, dtype=np.int64), np.frombuffer(b, dtype=np.int64), sets)
                                for k, (a, b, sets) in spool.kept_tags.items()})
    _dump(folder / "meta.pkl", {"format": FORMAT, "next_seq": spool.next_seq, "coastlines": bool(spool.coastlines),
                                "skipped_ways": spool.skipped_ways, "partial_ways": spool.partial_ways,
                                "counts": list(spool.counts_by_layer), "n": spool.n})
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _dump(path: Path, obj) -> None:
    with open(path, "wb") as fh:
        pickle.dump(obj, fh, protocol=pickle.HIGHEST_PROTOCOL)


def load_pickle(path: Path):
    with open(path, "rb") as fh:
        return pickle.load(fh)


def discard(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
