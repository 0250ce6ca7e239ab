"""The compile kit: a bundle small enough to build in seconds, built once per installation so that every
build stage's and request path's Numba kernel is compiled into NUMBA_CACHE_DIR before a user's first build.

Numba keys a cached kernel by its argument types, not by the data's size, so a build of a few dozen
junctions compiles exactly what a country's build compiles. The kit's extract is written here with pyosmium
(a small street grid with the tags every stage reads: road classes, a one-way, a turn restriction, names,
a place, a POI, an address and an interpolation line) and its DEM is one SRTM tile of a smooth surface. It is
not map data and nothing is ever answered from it: it only gives the kernels their argument types.

- `geoengine warm` with no bundle to warm builds the kit, updates it with a small change (`update_kit`:
  every stage's patch, so that a first `geoengine update` compiles nothing either) and warms its request
  paths (`./dev setup` and `pip install geoengine && geoengine warm` therefore leave a full cache).
- `geoengine build` in an environment whose cache has not seen the kit starts the kit's build in a child
  process at once (`start_in_background`), so the compile runs on the other core while the source and graph
  stages read the user's extract, and says so with how long it takes once.

- `warm_bundle` warms a bundle's request paths (geoengine.analysis.warm) unless a bundle with the same
  array types was warmed with the same code before (`types_key`, `bundle-types-<key>.done`).

A stamp file in the cache folder (`kit-<version>-<source hash>.done`) records a finished kit for the
installed code; any change to the package's source makes a new stamp, as Numba's own cache would recompile.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np

# The kit's grid: GRID x GRID junctions, STEP degrees apart, south-west corner at (LON0, LAT0).
GRID = 8
STEP = 0.002
LON0, LAT0 = 1.50, 42.50
# about the CPU seconds of the one-time compile (kit build and warm: 235 s user CPU with an empty cache,
# `time python -m geoengine.bundler.warmkit`, 2026-11-26; docs/setup.md)
COMPILE_SECONDS = 240


def cache_dir() -> Path:
    import geoengine  # noqa: F401  (sets the NUMBA_CACHE_DIR default)

    return Path(os.environ["NUMBA_CACHE_DIR"])


def source_hash() -> str:
    """A digest of the package's Python sources: the kit is rebuilt when any kernel may have changed."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for p in sorted(root.rglob("*.py")):
        h.update(str(p.relative_to(root)).encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def stamp_path() -> Path:
    from geoengine import __version__

    return cache_dir() / f"kit-{__version__}-{source_hash()}.done"


def is_warm() -> bool:
    return stamp_path().exists()


def types_key(path: Path) -> str:
    """What decides which compiled kernels a bundle's request paths meet: every array's type (file, dtype,
    dimensions, order; a name's digits counted as one, as search's prefixN files), the other files' kinds,
    which graph counts are not zero (turn restrictions, barriers: paths only data with them takes), the
    DEM's file kinds, the code (with its files' times and sizes, as Numba's cache index keys it) and the
    compiler versions. Two bundles with the same key meet the same
    kernels with the same types, so a cache warmed for one is warm for the other (`bundle_stamp_path`)."""
    import re

    import numba

    path = Path(path)
    items: set[tuple] = set()
    for p in path.rglob("*"):
        if not p.is_file() or p.name == "manifest.json":
            continue
        rel = re.sub(r"\d+", "N", str(p.relative_to(path).parent / p.name))
        if p.suffix == ".npy":
            with open(p, "rb") as fh:
                major, _minor = np.lib.format.read_magic(fh)
                read = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
                shape, fortran, dtype = read(fh)
            items.add((rel, dtype.str, len(shape), fortran))
        else:
            items.add((str(Path(rel).parent), p.suffix))
    # Numba keys its cache index by each source file's modification time and size, so a fresh checkout of
    # the same code recompiles: so does this key change
    package = Path(__file__).resolve().parents[1]
    stamps = sorted((str(p.relative_to(package)), p.stat().st_mtime_ns, p.stat().st_size) for p in package.rglob("*.py"))
    doc: dict = {"files": sorted(items, key=repr), "code": source_hash(), "sources": stamps, "numba": numba.__version__,
                 "numpy": np.__version__, "python": sys.version}
    graph_json = path / "graph" / "graph.json"
    if graph_json.exists():
        doc["nonzero"] = sorted(k for k, v in json.loads(graph_json.read_text()).get("counts", {}).items() if v)
    dem_json = path / "elevation" / "index.json"
    if dem_json.exists():
        doc["dem"] = sorted({"".join(Path(t.get("source", "")).suffixes) for t in json.loads(dem_json.read_text()).get("tiles", [])})
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:24]


def bundle_stamp_path(path: Path) -> Path:
    """The file in the compile cache that says a bundle of `path`'s types was warmed with this code."""
    return cache_dir() / f"bundle-types-{types_key(path)}.done"


def warm_bundle(engine, log=None, force: bool = False) -> dict[str, float] | None:
    """`warm`, unless a bundle with the same types was warmed with this code before (the cache already
    holds every kernel this one's request paths meet): then None, in the time it takes to read the
    arrays' headers. `force` warms all the same. A finished warm writes the stamp."""
    stamp = bundle_stamp_path(engine.bundle.path)
    if stamp.exists() and not force:
        if log:
            log(f"[warm] the compile cache already holds this bundle's kernels (same array types as a bundle "
                f"warmed before, {stamp.name}); nothing to compile")
        return None
    from geoengine.analysis.warm import warm

    steps = warm(engine, log=log)
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.write_text(f"{time.time():.0f}\n")
    return steps


def write_extract(path: Path) -> Path:
    """The kit's OSM extract (.osm.pbf) at `path`."""
    import osmium
    from osmium.osm.mutable import Node, Relation, Way

    path.unlink(missing_ok=True)
    node_id = {}
    w = osmium.SimpleWriter(str(path))
    try:
        nid = 1
        for j in range(GRID):
            for i in range(GRID):
                node_id[i, j] = nid
                w.add_node(Node(id=nid, version=1, location=(LON0 + i * STEP, LAT0 + j * STEP), tags={}))
                nid += 1
        extra = nid
        w.add_node(Node(id=extra, version=1, location=(LON0 + 2.5 * STEP, LAT0 + 2.5 * STEP),
                        tags={"place": "village", "name": "Kit", "name:en": "Kit"}))
        w.add_node(Node(id=extra + 1, version=1, location=(LON0 + 1.5 * STEP, LAT0 + 1.2 * STEP),
                        tags={"amenity": "restaurant", "name": "Kit Cafe", "cuisine": "pizza",
                              "addr:street": "Kit Street", "addr:housenumber": "3"}))
        w.add_node(Node(id=extra + 2, version=1, location=(LON0 + 3.2 * STEP, LAT0 + 0.1 * STEP),
                        tags={"addr:street": "Kit Street", "addr:housenumber": "10", "addr:postcode": "AD500"}))
        w.add_node(Node(id=extra + 3, version=1, location=(LON0 + 4.0 * STEP, LAT0 + 0.2 * STEP),
                        tags={"addr:street": "Kit Street", "addr:housenumber": "2"}))
        w.add_node(Node(id=extra + 4, version=1, location=(LON0 + 6.0 * STEP, LAT0 + 0.2 * STEP),
                        tags={"addr:street": "Kit Street", "addr:housenumber": "12"}))
        w.add_node(Node(id=extra + 5, version=1, location=(LON0 + 5.5 * STEP, LAT0 + 5.5 * STEP),
                        tags={"natural": "peak", "name": "Kit Peak", "ele": "1200"}))
        wid = 1
        classes = ("primary", "residential", "secondary", "tertiary", "unclassified", "service", "footway",
                   "cycleway")
        for j in range(GRID):  # east-west streets
            tags = {"highway": classes[j % len(classes)], "name": "Kit Street" if j == 0 else f"Row {j}"}
            if j == 3:
                tags["oneway"] = "yes"
            if j == 5:
                tags["maxspeed"] = "30"
            w.add_way(Way(id=wid, version=1, nodes=[node_id[i, j] for i in range(GRID)], tags=tags))
            wid += 1
        for i in range(GRID):  # north-south streets
            tags = {"highway": classes[(i + 1) % len(classes)], "name": f"Column {i}"}
            if i == 4:
                tags.update({"surface": "gravel", "bridge": "yes", "layer": "1"})
            w.add_way(Way(id=wid, version=1, nodes=[node_id[i, j] for j in range(GRID)], tags=tags))
            wid += 1
        w.add_way(Way(id=wid, version=1, nodes=[extra + 3, extra + 4],
                      tags={"addr:interpolation": "even", "addr:street": "Kit Street"}))
        ring = [node_id[1, 4], node_id[2, 4], node_id[2, 5], node_id[1, 5], node_id[1, 4]]
        w.add_way(Way(id=wid + 1, version=1, nodes=ring,
                      tags={"building": "yes", "addr:street": "Row 4", "addr:housenumber": "7"}))
        w.add_way(Way(id=wid + 2, version=1,
                      nodes=[node_id[5, 1], node_id[6, 1], node_id[6, 2], node_id[5, 2], node_id[5, 1]],
                      tags={"landuse": "forest", "name": "Kit Wood"}))
        # no left turn from the first column onto the first street
        w.add_relation(Relation(id=1, version=1, members=[("w", GRID + 1, "from"), ("n", node_id[0, 0], "via"),
                                                          ("w", 1, "to")],
                                tags={"type": "restriction", "restriction": "no_left_turn"}))
    finally:
        w.close()
    return path


def write_dem(folder: Path) -> Path:
    """One SRTM3 tile (1201 x 1201 big-endian int16, zipped) of a smooth surface over the kit."""
    lat_i, lon_i = int(np.floor(LAT0)), int(np.floor(LON0))
    name = f"N{lat_i:02d}E{lon_i:03d}.hgt"
    y, x = np.mgrid[0:1201, 0:1201].astype(np.float64)
    height = (1000 + 300 * np.sin(x / 97.0) * np.cos(y / 131.0)).astype(">i2")
    out = folder / f"{name}.zip"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(name, height.tobytes())
    return out


def write_change(extract: Path, path: Path) -> Path:
    """A change to the kit (.osc.gz at `path`): a junction moved about 10 m, a street renamed, the POI
    retagged: what an update patches in every stage (no new road, so the routing stage keeps its order)."""
    import datetime as dt

    import osmium

    when = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
    path.unlink(missing_ok=True)
    w = osmium.SimpleWriter(str(path))
    try:
        for o in osmium.FileProcessor(str(extract)):
            if o.is_node() and o.id in (GRID + 2, GRID * GRID + 2):  # a junction, the cafe
                loc = o.location
                tags = dict(o.tags)
                if "amenity" in tags:
                    tags["cuisine"] = "regional"
                w.add_node(o.replace(version=o.version + 1, timestamp=when, tags=tags,
                                     location=(loc.lon + 0.0001, loc.lat + 0.00005)))
            elif o.is_way() and o.id == 2:  # Row 1
                w.add_way(o.replace(version=o.version + 1, timestamp=when, nodes=[n.ref for n in o.nodes],
                                    tags={**dict(o.tags), "name": "Kit Avenue"}))
    finally:
        w.close()
    return path


def update_kit(out: Path, tmp: Path, settings) -> list[str]:
    """Apply `write_change` to the kit's bundle with `geoengine update` (the update's own kernels: the object
    store's, the graph's, search's and tiles' patches, the tile splice); returns the stages it patched.
    The stages' bounds on the share of a change they patch are lifted for it: in a bundle of a few dozen
    ways any change is a large share, and the point is to run every patch once."""
    from geoengine.bundler.update import update
    from geoengine.graph import patch as graph_patch
    from geoengine.search import stage as search_stage
    from geoengine.tiles import stage as tiles_stage

    bounds = [(m, m.PATCH_MAX_SHARE) for m in (graph_patch, search_stage, tiles_stage)]
    try:
        for m, _ in bounds:
            m.PATCH_MAX_SHARE = 1.0
        change = write_change(Path(out) / "source" / "extract.osm.pbf", tmp / "kit-change.osc.gz")
        return update(out, settings, diffs=[change])["stages_patched"]
    finally:
        for m, v in bounds:
            m.PATCH_MAX_SHARE = v


def build_and_warm(log=None) -> float:
    """Build the kit in a temporary folder, update it (`update_kit`), warm its request paths and write the
    stamp; returns seconds."""
    from geoengine.analysis.warm import warm
    from geoengine.bundler.pipeline import BuildInputs, build
    from geoengine.config import Settings
    from geoengine.engine import Engine
    from geoengine.progress import NullProgress

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="geoengine-kit-") as tmp:
        tmp = Path(tmp)
        settings = Settings.from_env(home=str(tmp / "home"))
        inputs = BuildInputs(osm=write_extract(tmp / "kit.osm.pbf"), dem=[write_dem(tmp)])
        out = build(inputs, tmp / "bundle", settings, progress=NullProgress())
        patched = update_kit(out, tmp, settings)  # before `warm`: the update forks, and warm's kernels are parallel
        if log:
            log(f"[warm] compile kit updated: {', '.join(patched) or 'no stage'} patched")
        warm(Engine.open(out, settings=settings))
    stamp = stamp_path()
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.write_text(f"{time.time():.0f}\n")
    seconds = time.perf_counter() - t0
    if log:
        log(f"[warm] compile kit built and warmed in {seconds:.1f}s ({stamp.name})")
    return seconds


def start_in_background(log=None) -> subprocess.Popen | None:
    """When the cache has not seen the kit, build it in a child process now; None when it has.

    The child's output goes to a log file in the cache folder. A build that reaches a kernel before the
    child has compiled it compiles it itself (Numba writes cache entries atomically), so this never delays
    a build; it moves the compile onto the machine's other core while the early stages run."""
    if is_warm():
        return None
    folder = cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "kit.log", "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "geoengine.bundler.warmkit"], stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=False)
    if log:
        log(f"[warm] first build with this installation: compiling the engine's kernels once, in the background "
            f"(about {COMPILE_SECONDS} s of CPU, once; `geoengine warm` does it ahead of time)")
    return proc


def main() -> int:
    """The background child: one kit build at a time per cache folder (a second build's child leaves)."""
    import fcntl

    folder = cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "kit.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            print("[warm] another process is building the compile kit", flush=True)
            return 0
        if not is_warm():
            build_and_warm(log=lambda s: print(s, flush=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
