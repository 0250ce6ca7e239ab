"""The bundle's object store (`source/store/`): every node's id, location and version, every way's and
relation's id and version, as sorted numpy arrays, memory-mapped. osm2pgsql's "middle" in its slim
mode plays this part: it lets `geoengine update` check a change and find any node's location without a
pass over the extract.

- The source stage writes it from the extract's blocks (geoengine.bundler.pbfscan, the same pass that
  counts the objects), and patches it in an update (`patched`): the change's deleted objects go, its
  created and modified ones are written with their new version (and location), by sorted merges.
- `geoengine update` reads the versions of the objects a change names from it (update.check_changes)
  and gives the stages' patches `PatchInputs.locations`: any node's location in the new extract, from
  this store and the change.

Size: 20 bytes per node (id, x, y, version) and 12 per way and relation: 46 MB for the 2.3 M nodes of
16 copies of Liechtenstein; about 8 GB for Germany's 400 M nodes (its PBF is about 4 GB).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

FOLDER = "store"
FORMAT = 1
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
    """Write the store (per type the arrays of pbfscan.scan_pbf(keep=True)["objects"]) into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for t in TYPES:
        arrays = _sorted(objects[t])
        for c in _COLUMNS[t]:
            np.save(folder / f"{t}_{c}.npy", np.ascontiguousarray(arrays[c], dtype=_DTYPES[c]))
            out.append(f"{t}_{c}.npy")
    return out


class Store:
    """The object store of one extract, memory-mapped (`open`)."""

    def __init__(self, arrays: dict[str, dict[str, np.ndarray]]):
        self.arrays = arrays

    @classmethod
    def open(cls, folder: Path) -> Store | None:
        """The store in `folder`, or None when the bundle has none (built before it, or from a file that
        is not a PBF)."""
        folder = Path(folder)
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

    def patched(self, osc) -> dict[str, dict[str, np.ndarray]]:
        """The store of the extract after the change `osc` (geoengine.bundler.osc.OscObjects): per type,
        the changed ids removed and the objects that are not deleted inserted, in id order."""
        out = {}
        for t in TYPES:
            objs = osc.of(t)
            old = self.arrays[t]
            changed = osc.ids(t)
            pos, found = self.find(t, changed)
            keep = np.ones(len(old["id"]), dtype=bool)
            keep[pos[found]] = False
            live = [o for o in objs.values() if not o.deleted and (t != "n" or o.x is not None)]
            live.sort(key=lambda o: o.id)
            new = {"id": np.fromiter((o.id for o in live), np.int64, len(live)),
                   "version": np.fromiter((o.version for o in live), np.int32, len(live))}
            if t == "n":
                new["x"] = np.fromiter((o.x for o in live), np.int32, len(live))
                new["y"] = np.fromiter((o.y for o in live), np.int32, len(live))
            kept = {c: np.asarray(old[c])[keep] for c in _COLUMNS[t]}
            at = np.searchsorted(kept["id"], new["id"])
            out[t] = {c: np.insert(kept[c], at, new[c]) for c in _COLUMNS[t]}
        return out


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
