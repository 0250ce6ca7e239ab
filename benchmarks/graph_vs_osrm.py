"""Graph oracle: shortest car distances on geoengine's graph vs OSRM (car profile, distance weight).

    PYTHONPATH=. python benchmarks/graph_vs_osrm.py [region] [pairs] [car|foot]

Both engines route between the midpoints of random two-way car segments. geoengine: the auto costing
with `shortest` (cost = length), turn-expanded graph with restrictions, scipy Dijkstra. OSRM: its
`car.lua` with `weight_name = 'distance'` (turn weights 0); or foot (pedestrian costing). Tracks (car) and
cycleways (foot) are masked on our side unless an access tag opens them explicitly, as OSRM's
profiles do (geoengine, like Valhalla, opens them by default). Prints how many pairs agree within 1 % and 5 %, the median
ratio, the worst pairs, and the build times (graph stage vs osrm-extract + osrm-contract).
The peer is installed into benchmarks/.peers (never a package dependency).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
PEERS = ROOT / "benchmarks" / ".peers"
FILES = {
    "andorra": "andorra/andorra.osm.pbf",
    "liechtenstein": "liechtenstein/valhalla-liechtenstein-latest.osm.pbf",
    "helsinki": "helsinki/helsinki.osm.pbf",
}


def ensure_osrm():
    if not (PEERS / "osrm").exists():
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--target", str(PEERS), "osrm-bindings"],
                       check=True)
    sys.path.insert(0, str(PEERS))
    import osrm

    return osrm


def osrm_build(osrm, pbf: Path, work: Path, profile: str = "car") -> tuple[Path, float]:
    share = Path(osrm.__file__).parent / "share" / "profiles"
    prof_dir = work / "profiles"
    subprocess.run(["cp", "-r", str(share), str(prof_dir)], check=True)
    car = prof_dir / f"{profile}.lua"
    text = car.read_text()
    for old in ("weight_name                     = 'routability'", "weight_name                   = 'duration'"):
        text = text.replace(old, "weight_name = 'distance'")
    car.write_text(text)
    src = work / pbf.name
    src.symlink_to(pbf)
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "osrm", "extract", "-p", str(car), str(src)], check=True,
                   capture_output=True, env={"PYTHONPATH": str(PEERS), "PATH": "/usr/bin:/bin"})
    base = work / pbf.name.replace(".osm.pbf", ".osrm")
    subprocess.run([sys.executable, "-m", "osrm", "contract", str(base)], check=True, capture_output=True,
                   env={"PYTHONPATH": str(PEERS), "PATH": "/usr/bin:/bin"})
    return base, time.perf_counter() - t


def _explicitly_open(pbf: Path, highway: str, keys: tuple[str, ...]) -> np.ndarray:
    """Ids of `highway=<highway>` ways that one of `keys` opens explicitly (yes, designated, ...)."""
    import osmium

    out = []
    for w in osmium.FileProcessor(str(pbf)).with_filter(osmium.filter.TagFilter(("highway", highway))):
        if w.is_way() and any(w.tags.get(k) in ("yes", "designated", "permissive", "destination") for k in keys):
            out.append(w.id)
    return np.asarray(out, dtype=np.int64)


def main(region="liechtenstein", pairs=200, profile="car"):
    import scipy.sparse as sp
    from scipy.sparse.csgraph import dijkstra

    from geoengine.costing import edge_costs, parse_costing_options
    from geoengine.graph import Graph, turn_graph
    from geoengine.graph import tags as T
    from geoengine.graph.build import build_graph

    osrm = ensure_osrm()
    pbf = DATA / FILES[region]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        t = time.perf_counter()
        build_graph(pbf, tmp / "graph")
        t_graph = time.perf_counter() - t
        g = Graph.open(tmp / "graph")
        base, t_osrm = osrm_build(osrm, pbf, tmp, profile)
        engine = osrm.OSRM(str(base))

        costing = {"car": "auto", "foot": "pedestrian"}[profile]
        extra = {"max_hiking_difficulty": 6} if costing == "pedestrian" else {}  # OSRM's foot ignores sac_scale
        cost, _time, length = edge_costs(g, costing, parse_costing_options(costing, {"shortest": True, **extra}))
        # OSRM's car drives a track, and its foot profile walks a cycleway, only when an access tag
        # explicitly allows it; geoengine (like Valhalla) allows both by default: mask them here
        cls, keys = {"car": ("track", ("access", "vehicle", "motor_vehicle", "motorcar")),
                     "foot": ("cycleway", ("access", "foot"))}[profile]
        opened = _explicitly_open(pbf, cls, keys)
        closed = (g.edge_class == T.CLASS[cls]) & ~np.isin(np.repeat(np.asarray(g.seg_way), 2), opened)
        cost = np.where(closed, np.inf, cost)
        offsets, targets, _w, sec = turn_graph(g, cost, length, mode=costing)
        m = sp.csr_matrix((sec + 1e-9, targets, offsets), shape=(g.n_edges, g.n_edges))

        from scipy.sparse.csgraph import connected_components

        ok = np.isfinite(cost)
        # OSRM never snaps into small isolated pieces of the network: draw points from the largest
        # strongly connected part of our car graph
        _n, label = connected_components(m, directed=True, connection="strong")
        big = label == np.bincount(label[ok]).argmax()
        two_way = np.flatnonzero(ok[0::2] & ok[1::2] & big[0::2] & big[1::2] & (np.asarray(g.seg_length) > 30))
        rng = np.random.default_rng(42)
        src_segs = rng.choice(two_way, pairs)
        dst_segs = rng.choice(two_way, pairs)
        sources = np.unique(np.concatenate([2 * src_segs, 2 * src_segs + 1]))
        dist = dijkstra(m, directed=True, indices=sources)
        row = {int(s): i for i, s in enumerate(sources)}

        def midpoint(seg):
            lon, lat = g.edge_shape(2 * seg, 0.0, 0.5)
            return float(lon[-1]), float(lat[-1])

        ours, theirs, worst = [], [], []
        snapped_elsewhere = 0
        for a, b in zip(src_segs.tolist(), dst_segs.tolist(), strict=True):
            if a == b:
                continue
            la, lb = g.seg_length[a], g.seg_length[b]
            best = min(0.5 * la + dist[row[ea], eb] - 0.5 * lb for ea in (2 * a, 2 * a + 1) for eb in (2 * b, 2 * b + 1))
            params = osrm.RouteParameters(coordinates=[midpoint(a), midpoint(b)], overview="false")
            try:
                res = engine.Route(params)
                d = float(res["routes"][0]["distance"])
                if max(float(w["distance"]) for w in res["waypoints"]) > 1.0:
                    snapped_elsewhere += 1
                    continue
            except Exception:  # noqa: BLE001 - a peer failure is a data point
                d = np.inf
            ours.append(best)
            theirs.append(d)
            worst.append((abs(best - d) / max(d, 1.0), a, b, best, d))
        ours, theirs = np.array(ours), np.array(theirs)
        both = np.isfinite(ours) & np.isfinite(theirs)
        ratio = ours[both] / np.maximum(theirs[both], 1.0)
        print(f"{region} ({profile}): {len(ours)} pairs, both routable {both.sum()}, only geoengine {(np.isfinite(ours) & ~np.isfinite(theirs)).sum()}, "
              f"only OSRM {(~np.isfinite(ours) & np.isfinite(theirs)).sum()}, OSRM snapped elsewhere (skipped) {snapped_elsewhere}")
        print(f"  within 1 %: {(np.abs(ratio - 1) <= 0.01).mean():.1%}   within 5 %: {(np.abs(ratio - 1) <= 0.05).mean():.1%}"
              f"   median ratio {np.median(ratio):.4f}")
        for _rel, a, b, mine, peer in sorted(worst, key=lambda x: -x[0] if np.isfinite(x[0]) else -1e9)[:5]:
            print(f"  worst: seg {a} (way {g.seg_way[a]}) -> seg {b} (way {g.seg_way[b]}): geoengine {mine:.0f} m, OSRM {peer:.0f} m")
        print(f"  build: geoengine graph stage {t_graph:.2f} s, osrm-extract + osrm-contract {t_osrm:.2f} s "
              f"(ratio {t_graph / t_osrm:.2f}; the CH is not in the graph stage)")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "liechtenstein", int(sys.argv[2]) if len(sys.argv) > 2 else 200,
         sys.argv[3] if len(sys.argv) > 3 else "car")
