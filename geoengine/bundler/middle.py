"""The bundle's object store (`source/store/`): every node's id, location and version, every way's and
relation's id and version, as sorted numpy arrays, memory-mapped. osm2pgsql's "middle" in its slim
mode plays this part: it lets `geoengine update` check a change and find any node's location without a
pass over the extract.

- The source stage writes it from the extract's blocks (geoengine.bundler.pbfscan, the same pass that
  counts the objects), and patches it in an update (`Store.write_patched`): the change's deleted objects go, its
  created and modified ones are written with their new version (and location), by sorted merges.
- `geoengine update` reads the versions of the objects a change names from it (update.check_changes)
  and gives the stages' patches `PatchInputs.locations`: any node's location in the new extract, from
  this store and the change.

Size: 20 bytes per node (id, x, y, version) and 12 per way and relation: 46 MB for the 2.3 M nodes of
16 copies of Liechtenstein; about 8 GB for Germany's 400 M nodes (its PBF is about 4 GB). The scan
writes it a block at a time (StoreWriter): the source stage's peak stays the scan's (154 MB at 64
copies), and its CPU grows by about a third (the versions' decoding and the writes).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

#: the copy of the extract a bundle keeps beside its store (`source/`: geoengine update applies change files to
#: it); named here, where `geoengine update` reads it before the stage modules (and Numba) are imported
EXTRACT = "extract.osm.pbf"

FOLDER = "store"
FORMAT = 1  # recorded in the store's META file; a store of another format is not read (Store.open: None)
META = "store.json"
TYPES = ("n", "w", "r")
_COLUMNS = {"n": ("id", "version", "x", "y"), "w": ("id", "version"), "r": ("id", "version")}
_DTYPES = {"id": np.int64, "version": np.int32, "x": np.int32, "y": np.int32}


def files() -> list[str]:
    return [f"{t}_{c}.npy" for t in TYPES for c in _COLUMNS[t]]


def _sorted(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    ids = arrays["id"]
    if len(ids) > 1 and not (ids[1:] > ids[:-1]).all():  # an extract not sorted by id (osmium sorts)
        order = np.argsort(ids, kind="stable")
        arrays = {k: v[order] for k, v in arrays.items()}
        ids = arrays["id"]
        last = np.r_[ids[1:] != ids[:-1], True]  # a repeated id: its last object in the file
        arrays = {k: v[last] for k, v in arrays.items()}
    return arrays


def write(folder: Path, objects: dict[str, dict[str, np.ndarray]]) -> list[str]:
    """Write the store (per type the arrays of pbfscan.scan_pbf(keep=True)["objects"], or of
    a test's) into `folder`, as StoreWriter does (the same bytes)."""
    writer = StoreWriter(folder)
    for t in TYPES:
        arrays = _sorted(objects[t])
        writer.add(t, *(arrays[c] for c in _COLUMNS[t]))
    return writer.close()


class StoreWriter:
    """A scan's objects (pbfscan.scan_pbf(sink=...): `add` a block at a time) written to the store in
    `folder` as they come, so that memory stays one block's, not the extract's (at 64 copies of
    Liechtenstein the store held in memory took the scan to a 598 MB peak, 295 MB so). Each column's
    .npy gets its data appended after a header of fixed size, written at `close` once the count is
    known. A type whose ids are not increasing (an extract osmium did not sort) is sorted in memory."""

    HEADER = 128  # bytes: .npy format 1.0, its header padded with spaces (a multiple of 64)

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.files = {t: {c: open(self.folder / f"{t}_{c}.npy", "wb") for c in _COLUMNS[t]} for t in TYPES}
        for cols in self.files.values():
            for fh in cols.values():
                fh.write(b"\0" * self.HEADER)
        self.count = dict.fromkeys(TYPES, 0)
        self.last = dict.fromkeys(TYPES, None)
        self.ordered = dict.fromkeys(TYPES, True)

    def add(self, t: str, ids, versions, x=None, y=None) -> None:
        if not len(ids):
            return
        ids = np.asarray(ids, dtype=np.int64)
        if (self.last[t] is not None and ids[0] <= self.last[t]) or (len(ids) > 1 and not (ids[1:] > ids[:-1]).all()):
            self.ordered[t] = False
        self.last[t] = int(ids[-1])
        cols = {"id": ids, "version": versions, "x": x, "y": y}
        for c, fh in self.files[t].items():
            fh.write(np.ascontiguousarray(cols[c], dtype=_DTYPES[c]).tobytes())
        self.count[t] += len(ids)

    def _header(self, dtype, n: int) -> bytes:
        text = repr({"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": (n,)})
        body = text.encode("latin1")
        pad = self.HEADER - 10 - len(body) - 1
        return b"\x93NUMPY\x01\x00" + (self.HEADER - 10).to_bytes(2, "little") + body + b" " * pad + b"\n"

    def close(self) -> list[str]:
        out = []
        for t in TYPES:
            n = self.count[t]
            for c, fh in self.files[t].items():
                fh.seek(0)
                fh.write(self._header(_DTYPES[c], n))
                fh.close()
                out.append(f"{t}_{c}.npy")
            if not self.ordered[t]:
                arrays = _sorted({c: np.array(np.load(self.folder / f"{t}_{c}.npy", mmap_mode="r")) for c in _COLUMNS[t]})
                for c in _COLUMNS[t]:
                    np.save(self.folder / f"{t}_{c}.npy", arrays[c])
                del arrays
        (self.folder / META).write_text(json.dumps({"format": FORMAT, "counts": self.count}))
        return [*out, META]


class Store:
    """The object store of one extract, memory-mapped (`open`)."""

    def __init__(self, arrays: dict[str, dict[str, np.ndarray]]):
        self.arrays = arrays

    @classmethod
    def open(cls, folder: Path) -> Store | None:
        """The store in `folder`, or None when the bundle has none (built before it, or from a file that
        is not a PBF)."""
        folder = Path(folder)
        try:
            if json.loads((folder / META).read_text()).get("format") != FORMAT:
                return None
        except (OSError, ValueError):
            return None
        if not all((folder / f).exists() for f in files()):
            return None
        return cls({t: {c: np.load(folder / f"{t}_{c}.npy", mmap_mode="r") for c in _COLUMNS[t]} for t in TYPES})

    def count(self, t: str) -> int:
        return len(self.arrays[t]["id"])

    def find(self, t: str, ids) -> tuple[np.ndarray, np.ndarray]:
        """(positions, found) of `ids` among the objects of type `t`."""
        ids = np.asarray(ids, dtype=np.int64)
        have = self.arrays[t]["id"]
        pos = np.searchsorted(have, ids)
        found = pos < len(have)
        found[found] = have[pos[found]] == ids[found]
        return pos, found

    def versions(self, t: str, ids) -> dict[int, int]:
        """{id: version} of the objects of `ids` the extract has (version 0: the extract has none)."""
        ids = np.asarray(ids, dtype=np.int64)
        pos, found = self.find(t, ids)
        return dict(zip(ids[found].tolist(), np.asarray(self.arrays[t]["version"])[pos[found]].tolist(), strict=True))

    def fixed(self, ids) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(x, y, found): the nodes' int32 1e-7 degree coordinates (0 where not found)."""
        pos, found = self.find("n", ids)
        x = np.zeros(len(pos), np.int32)
        y = np.zeros(len(pos), np.int32)
        x[found] = self.arrays["n"]["x"][pos[found]]
        y[found] = self.arrays["n"]["y"][pos[found]]
        return x, y, found

    def bbox(self) -> list[float] | None:
        """The nodes' [min_lon, min_lat, max_lon, max_lat], as pbfscan.scan_pbf computes it."""
        x, y = self.arrays["n"]["x"], self.arrays["n"]["y"]
        if not len(x):
            return None
        return [int(x.min()) / 1e7, int(y.min()) / 1e7, int(x.max()) / 1e7, int(y.max()) / 1e7]

    def bbox_after(self, osc, bbox) -> list[float] | None:
        """What `bbox()` gives of the store after the change `osc` (`write_patched`'s), found from the
        change's nodes alone, without the new store: `bbox` is this store's `bbox()`. None where a changed
        node held one of its extremes (the box may shrink: only the whole new store tells)."""
        if bbox is None:
            return None
        ext = [int(round(v * 1e7)) for v in bbox]
        changed, cx, cy, live = osc.node_arrays()
        if len(changed):
            x, y, found = self.fixed(changed)
            if (found & ((x == ext[0]) | (y == ext[1]) | (x == ext[2]) | (y == ext[3]))).any():
                return None
            if live.any():
                ext = [min(ext[0], int(cx[live].min())), min(ext[1], int(cy[live].min())),
                       max(ext[2], int(cx[live].max())), max(ext[3], int(cy[live].max()))]
        return [ext[0] / 1e7, ext[1] / 1e7, ext[2] / 1e7, ext[3] / 1e7]

    CHUNK = 1 << 22  # objects of the old store merged at a time (write_patched)

    def write_patched(self, folder: Path, osc) -> list[str]:
        """Write into `folder` the store of the extract after the change `osc`
        (geoengine.bundler.osc.OscObjects): per type, the changed ids removed and the objects that are not
        deleted inserted, in id order. The old store is merged a chunk at a time, so memory stays a
        chunk's (the change's objects aside), not the store's (about 8 GB for Germany)."""
        writer = StoreWriter(folder)
        for t in TYPES:
            old = self.arrays[t]
            objs = osc.of(t)
            live = sorted((o for o in objs.values() if not o.deleted and (t != "n" or o.x is not None)),
                          key=lambda o: o.id)
            new = {"id": np.fromiter((o.id for o in live), np.int64, len(live)),
                   "version": np.fromiter((o.version for o in live), np.int32, len(live))}
            if t == "n":
                new["x"] = np.fromiter((o.x for o in live), np.int32, len(live))
                new["y"] = np.fromiter((o.y for o in live), np.int32, len(live))
            changed = osc.ids(t)
            n = len(old["id"])
            for a in range(0, max(n, 1), self.CHUNK):
                b = min(a + self.CHUNK, n)
                part = {c: np.asarray(old[c][a:b]) for c in _COLUMNS[t]}
                ids = part["id"]
                k = np.searchsorted(changed, ids)
                hit = k < len(changed)
                hit[hit] = changed[k[hit]] == ids[hit]
                part = {c: v[~hit] for c, v in part.items()}
                # the new objects whose ids fall in this chunk's range (the first and last chunks are open)
                lo = 0 if a == 0 else int(np.searchsorted(new["id"], old["id"][a]))
                hi = len(new["id"]) if b >= n else int(np.searchsorted(new["id"], old["id"][b]))
                at = np.searchsorted(part["id"], new["id"][lo:hi])
                writer.add(t, *(np.insert(part[c], at, new[c][lo:hi]) for c in _COLUMNS[t]))
        return writer.close()


def locations(store: Store, osc, ids) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lon, lat, found) of nodes `ids` in the extract after the change `osc`: the change's own nodes
    (deleted ones not found), every other from `store` (the extract before it). lon/lat equal osmium's
    Location.lon/.lat (x / 1e7)."""
    ids = np.asarray(ids, dtype=np.int64)
    x, y, found = store.fixed(ids)
    changed, cx, cy, live = osc.node_arrays()
    if len(changed):
        k = np.searchsorted(changed, ids)
        hit = k < len(changed)
        hit[hit] = changed[k[hit]] == ids[hit]
        k = k[hit]
        found[hit] = live[k]
        x[hit] = np.where(live[k], cx[k], 0)
        y[hit] = np.where(live[k], cy[k], 0)
    lon = np.where(found, x / 1e7, np.nan)
    lat = np.where(found, y / 1e7, np.nan)
    return lon, lat, found
