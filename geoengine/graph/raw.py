"""What the graph stage's read kept, in the bundle: `<bundle>/graph/raw/` (osm2pgsql's "slim" idea).

`build.read_osm` reads the extract once and yields `raw`: the routable ways (ids, attribute columns,
limits) and their node references with fixed-point locations, the node sets (barriers, border
controls, traffic signals, car.lua's obstacles) and the restriction relations; the rest of the stage
(`build.graph_arrays`) is numpy over `raw`. The full build writes `raw` here, as it was read, so that
`geoengine update` can patch it from the change's objects alone (geoengine.graph.patch) and run only
the array phase: no pass over the extract.

Files (numpy .npy, memory-mapped when read back; `raw.json` says the format and counts):

- `way_ids` int64[W] in read order; `way_<column>` one per attribute column (`build.ATTR_COLUMNS`,
  the read's dtypes; `name`/`ref` index the stage's string table, `graph/strings.bin`); `way_limits`
  float32[W, 6]; `way_offsets` int64[W+1]: way w's points are `[way_offsets[w], way_offsets[w+1])`.
- `refs` int64[P], `x`, `y` int32[P]: every way node reference with osmium's fixed-point location
  (degrees x 1e7, exactly what the read got; 2147483647 where the node is missing from the extract).
- `barrier_ids`/`barrier_modes`, `border_ids`, `signal_ids`, `obstacle_ids`/`obstacle_s` (float64[n, 2]):
  sorted by OSM id.
- `restrictions.json`: the restriction relations in read order, `[id, value, modes, [[type, ref, role],
  ...]]`.

The folder is the stage's kept records, not its output: `Stage.kept` leaves it out of the graph's
`output_sha256`, so a change that leaves the graph arrays as they were still lets routing be reused.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

RAW_DIR = "raw"
#: the layout above; a bundle whose raw has another (or none) is not patched (a full run)
RAW_FORMAT = 1

WAY_FILES = ("way_ids", "way_limits", "way_offsets")
POINT_FILES = ("refs", "x", "y")
NODE_FILES = ("barrier_ids", "barrier_modes", "border_ids", "signal_ids", "obstacle_ids", "obstacle_s")


def ids_increasing(a) -> bool:
    """Whether the ids `a` are strictly increasing."""
    a = np.asarray(a)
    return bool(a.size < 2 or (a[1:] > a[:-1]).all())


def write_raw(raw: dict, folder: Path) -> list[str]:
    """Write `raw` (read_osm's dict, with `way_of_point`) into `folder`; the file names written."""
    folder.mkdir(parents=True, exist_ok=True)
    n_ways = len(raw["way_ids"])
    offsets = np.zeros(n_ways + 1, dtype=np.int64)
    if n_ways:
        np.cumsum(np.bincount(raw["way_of_point"], minlength=n_ways), out=offsets[1:])
    arrays = {"way_ids": raw["way_ids"], "way_limits": raw["way_limits"], "way_offsets": offsets}
    arrays.update({f"way_{key}": col for key, col in raw["way_cols"].items()})
    arrays.update({name: raw[name] for name in POINT_FILES + NODE_FILES})
    names = []
    for name, arr in arrays.items():
        np.save(folder / f"{name}.npy", np.ascontiguousarray(arr))
        names.append(f"{name}.npy")
    rel = [[int(rid), value, int(modes), [[t, int(ref), role] for t, ref, role in members]]
           for rid, value, modes, members in raw["restrictions"]]
    (folder / "restrictions.json").write_text(json.dumps(rel, separators=(",", ":")))
    names.append("restrictions.json")
    meta = {
        "format": RAW_FORMAT,
        "ways": n_ways,
        "points": int(len(raw["refs"])),
        "columns": list(raw["way_cols"]),
        # the patch keeps ways and restrictions in id order: it declines unless the read found them so
        "sorted": ids_increasing(raw["way_ids"]) and ids_increasing([r[0] for r in raw["restrictions"]]),
    }
    (folder / "raw.json").write_text(json.dumps(meta))
    names.append("raw.json")
    return names


def read_meta(folder: Path) -> dict | None:
    """`raw.json` of `folder`, or None when there is none (a bundle built before it) or it is unreadable."""
    try:
        return json.loads((folder / "raw.json").read_text())
    except (OSError, ValueError):
        return None


def load_raw(folder: Path, columns) -> dict:
    """The arrays of `folder` memory-mapped (read-only), restrictions as lists: {"way_ids", "way_cols",
    "way_limits", "way_offsets", "refs", "x", "y", node sets..., "restrictions"}."""
    def load(name):
        return np.load(folder / f"{name}.npy", mmap_mode="r")

    out = {name: load(name) for name in WAY_FILES + POINT_FILES + NODE_FILES}
    out["way_cols"] = {key: load(f"way_{key}") for key in columns}
    out["restrictions"] = json.loads((folder / "restrictions.json").read_text())
    return out
