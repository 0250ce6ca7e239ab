"""An update against a full build: is `geoengine update` cheap? (issue 29: a diff touching 1 % of the
ways applied in at most 25 % of a full build's time, at 16 copies of Liechtenstein.)

    PYTHONPATH=. .venv/bin/python benchmarks/update_bench.py [--copies 16] [--fraction 0.01] [--keep DIR]

1. The replicated extract (scale_bench.extract_for: ../shared/tools/replicate_extract.py, cached in
   --cache, default /work/scale-cache).
2. A build of the Liechtenstein extract itself (fills the compile cache, so neither run below pays
   for compiling), then a full build of it (`geoengine build --no-warm --report`), measured as a child process: wall, CPU
   (the process and its forked stages), peak RSS.
3. A change file made with pyosmium: every 1/fraction-th way of the extract (all ways, roads or not)
   gets a new version with a changed tag, and its first node moves ~5 m, as an edit does.
4. `geoengine update BUNDLE --diff change.osc.gz --report`, measured the same way.
5. The ratios update / build (wall and CPU), per step, and which stages were reused, patched or rebuilt.
6. With `--topology K`, a second update of the updated bundle that changes the road graph's topology
   (`make_topology_change`: about K roads deleted, K added), measured the same way: the routing
   stage's patch then carries its order over instead of linking it (docs/updates.md).

The machine is shared: CPU seconds are the figure to compare; wall depends on the load.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale_bench import BASE_PBF, ROOT, extract_for, run_measured  # noqa: E402


def edited_way(w, when):
    """The benchmark's edit of a way: a new version with a changed tag (its name, else a note)."""
    tags = dict(w.tags)
    if "name" in tags:
        tags["name"] = tags["name"] + " (neu)"
    else:
        tags["note"] = "geoengine update benchmark"
    return w.replace(version=w.version + 1, timestamp=when, tags=tags, nodes=[n.ref for n in w.nodes])


def write_change(pbf: Path, out: Path, ways: dict, first_nodes, when) -> int:
    """Write the change: the nodes `first_nodes` moved ~5 m (a new version each), then `ways`; returns
    how many nodes moved."""
    import osmium

    out.unlink(missing_ok=True)
    writer = osmium.SimpleWriter(str(out))
    moved = 0
    try:
        nodes = osmium.FileProcessor(str(pbf), osmium.osm.NODE).with_filter(osmium.filter.IdFilter(first_nodes))
        for n in nodes:
            loc = n.location
            writer.add_node(n.replace(version=n.version + 1, timestamp=when,
                                      location=(loc.lon + 0.00005, loc.lat + 0.00004)))
            moved += 1
        for wid in sorted(ways):
            writer.add_way(ways[wid])
    finally:
        writer.close()
    return moved


def make_change(pbf: Path, out: Path, fraction: float) -> dict:
    """Every 1/fraction-th way: a new version with a changed tag, and its first node moved (~5 m)."""
    import osmium

    step = max(1, round(1 / fraction))
    when = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
    ways, first_nodes = {}, {}
    n_ways = 0
    for w in osmium.FileProcessor(str(pbf), osmium.osm.WAY):
        if n_ways % step == 0 and len(w.nodes) >= 2:
            ways[w.id] = edited_way(w, when)
            first_nodes[w.nodes[0].ref] = w.id
        n_ways += 1
    moved = write_change(pbf, out, ways, first_nodes, when)
    return {"ways_total": n_ways, "ways_changed": len(ways), "nodes_moved": moved, "bytes": out.stat().st_size}


LOCAL_CENTRE = (9.5209, 47.1410)  # Vaduz, in the first copy (copies keep the original's coordinates)


def make_local_change(pbf: Path, out: Path, count: int, centre=LOCAL_CENTRE) -> dict:
    """The edit of `make_change` (a changed tag, the first node moved ~5 m) on the `count` ways whose
    first node lies nearest `centre`: a change of the same size confined to a few km, as a real minutely
    or hourly diff is (--local)."""
    import math

    import numpy as np
    import osmium

    when = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
    ids, first, xy = [], [], []
    ways = osmium.FileProcessor(str(pbf), osmium.osm.NODE | osmium.osm.WAY).with_locations()
    for w in ways.with_filter(osmium.filter.EntityFilter(osmium.osm.WAY)):
        if len(w.nodes) >= 2 and w.nodes[0].location.valid():
            ids.append(w.id)
            first.append(w.nodes[0].ref)
            xy.append((w.nodes[0].location.lon, w.nodes[0].location.lat))
    a = np.asarray(xy, dtype=np.float64)
    d = np.hypot((a[:, 0] - centre[0]) * math.cos(math.radians(centre[1])), a[:, 1] - centre[1])
    pick = np.argsort(d, kind="stable")[:count]
    chosen = {ids[i] for i in pick.tolist()}
    first_nodes = {first[i] for i in pick.tolist()}
    radius_km = float(d[pick].max()) * 111.2 if len(pick) else 0.0
    ways = {}
    for w in osmium.FileProcessor(str(pbf), osmium.osm.WAY).with_filter(osmium.filter.IdFilter(chosen)):
        ways[w.id] = edited_way(w, when)
    moved = write_change(pbf, out, ways, first_nodes, when)
    return {"ways_total": len(ids), "ways_changed": len(ways), "nodes_moved": moved, "bytes": out.stat().st_size,
            "local": {"centre": list(centre), "radius_km": round(radius_km, 2)}}


def tiles_patch_info(bundle: Path) -> dict:
    """The tile stage's manifest entry after the update: patched or rebuilt, and how many tiles were cut."""
    entry = json.loads((bundle / "manifest.json").read_text())["stages"].get("tiles", {})
    return {"patched_from": entry.get("patched_from"), "tiles": entry.get("counts", {}).get("tiles"),
            **entry.get("info", {}).get("patch", {})}


def make_topology_change(pbf: Path, out: Path, k: int) -> dict:
    """A change of the road graph's topology (the routing patch's second case): about `k` residential or
    unclassified ways (4+ nodes, in no relation, spread over the extract) deleted, and `k` new
    residential roads each joining the first nodes of two such roads 100-500 m apart through a new node."""
    import osmium

    when = dt.datetime(2030, 2, 1, tzinfo=dt.UTC)
    ways, in_rel, max_way = {}, set(), 0
    for o in osmium.FileProcessor(str(pbf), osmium.osm.WAY | osmium.osm.RELATION):
        if o.is_way():
            max_way = max(max_way, o.id)
            if o.tags.get("highway") in ("residential", "unclassified"):
                ways[o.id] = [n.ref for n in o.nodes]
        else:
            in_rel.update(m.ref for m in o.members if m.type == "w")
    order = sorted(ways)
    deleted = set([w for w in order[::max(1, len(order) // k)] if len(ways[w]) >= 4 and w not in in_rel][:k])
    firsts = {ways[w][0] for w in order}
    loc, max_node = {}, 0
    for n in osmium.FileProcessor(str(pbf), osmium.osm.NODE):
        max_node = max(max_node, n.id)
        if n.id in firsts:
            loc[n.id] = (n.location.lon, n.location.lat)
    cands = [w for w in order if w not in deleted]
    pairs = []
    for i in range(0, len(cands), max(1, len(cands) // (3 * k))):
        (xa, ya) = loc[ways[cands[i]][0]]
        for wb in cands[i + 1:i + 400]:
            xb, yb = loc[ways[wb][0]]
            if 0.001 ** 2 < ((xa - xb) * 0.68) ** 2 + (ya - yb) ** 2 < 0.005 ** 2:
                pairs.append((ways[cands[i]][0], ways[wb][0]))
                break
        if len(pairs) >= k:
            break
    gone = [o.replace(version=o.version + 1, timestamp=when, visible=False, nodes=[], tags={})
            for o in osmium.FileProcessor(str(pbf), osmium.osm.WAY) if o.id in deleted]
    meta = {"version": 1, "timestamp": when, "changeset": 1, "uid": 1, "user": "update-bench"}
    out.unlink(missing_ok=True)
    writer = osmium.SimpleWriter(str(out))
    try:
        for i, (a, b) in enumerate(pairs):
            (xa, ya), (xb, yb) = loc[a], loc[b]
            writer.add_node(osmium.osm.mutable.Node(id=max_node + 1 + i, tags={}, **meta,
                                                    location=((xa + xb) / 2 + 0.0002, (ya + yb) / 2 + 0.0002)))
        for i, (a, b) in enumerate(pairs):
            writer.add_way(osmium.osm.mutable.Way(id=max_way + 1 + i, nodes=[a, max_node + 1 + i, b],
                                                  tags={"highway": "residential"}, **meta))
        for o in gone:
            writer.add_way(o)
    finally:
        writer.close()
    return {"ways_deleted": len(gone), "roads_added": len(pairs), "bytes": out.stat().st_size}


def routing_patch_info(bundle: Path) -> str | None:
    """What the routing stage's patch did in the update (its manifest's topology note), if it patched."""
    try:
        entry = json.loads((bundle / "manifest.json").read_text())["stages"]["routing"]
    except (OSError, KeyError, ValueError):
        return None
    topo = entry.get("info", {}).get("topology", {})
    return f"{topo['patch']} ({topo.get('seconds')} s)" if "patch" in topo else None


def topology_update(k: int, bundle: Path, work: Path, env: dict) -> dict:
    """`geoengine update` of the updated bundle with `make_topology_change` of its extract, measured."""
    change = make_topology_change(bundle / "source" / "extract.osm.pbf", work / "topology.osc.gz", k)
    res = run_measured([sys.executable, "-m", "geoengine", "update", str(bundle), "--diff", str(work / "topology.osc.gz"),
                        "--report", str(work / "topology.json")], env=env, log=work / "topology.log")
    res["steps"] = json.loads((work / "topology.json").read_text())["steps"]
    res["change"], res["routing_patch"] = change, routing_patch_info(bundle)
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--copies", type=int, default=16)
    ap.add_argument("--fraction", type=float, default=0.01, help="share of the ways the change touches (0.01)")
    ap.add_argument("--cache", type=Path, default=Path("/work/scale-cache"))
    ap.add_argument("--keep", type=Path, help="work in DIR and keep it (default: a temporary folder)")
    ap.add_argument("--json", type=Path, help="write the results as JSON")
    ap.add_argument("--local", action="store_true",
                    help="the same count of ways, nearest one copy's centre (make_local_change), not spread")
    ap.add_argument("--no-warmup", action="store_true", help="skip the small build that fills the compile cache")
    ap.add_argument("--topology", type=int, default=0, metavar="K",
                    help="then a second update: about K roads deleted and K added (a topology change)")
    a = ap.parse_args(argv)
    pbf = extract_for(a.copies, a.cache)
    work = a.keep or Path(tempfile.mkdtemp(prefix="update-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.setdefault("GEOENGINE_HOME", str(work / "home"))
    env.setdefault("NUMBA_CACHE_DIR", str(ROOT / ".geoengine" / "numba-cache"))
    env["PYTHONPATH"] = str(ROOT)
    bundle = work / "bundle"
    py = sys.executable
    load0 = os.getloadavg()
    try:
        print(f"{pbf} ({pbf.stat().st_size / 2**20:.1f} MB), {a.copies} copies", flush=True)
        if not a.no_warmup:  # the build's kernels compiled into the cache first, so neither run pays it
            run_measured([py, "-m", "geoengine", "build", str(BASE_PBF), "--out", str(work / "warmup"), "--no-warm"],
                         env=env, log=work / "warmup.log")
        build = run_measured([py, "-m", "geoengine", "build", str(pbf), "--out", str(bundle), "--no-warm",
                              "--report", str(work / "build.json")], env=env, log=work / "build.log")
        build["steps"] = json.loads((work / "build.json").read_text())["steps"]
        print(f"full build: {build['seconds']:.1f} s wall, {build['cpu_seconds']:.1f} s CPU", flush=True)
        t = time.perf_counter()
        change = make_change(pbf, work / "change.osc.gz", a.fraction)
        if a.local:  # the same count of ways, confined to a few km
            change = make_local_change(pbf, work / "change.osc.gz", change["ways_changed"])
        change["seconds_to_make"] = round(time.perf_counter() - t, 1)
        print(f"change: {change['ways_changed']:,} of {change['ways_total']:,} ways, {change['nodes_moved']:,} nodes "
              f"moved, {change['bytes'] / 1024:.0f} KB", flush=True)
        upd = run_measured([py, "-m", "geoengine", "update", str(bundle), "--diff", str(work / "change.osc.gz"),
                            "--report", str(work / "update.json")], env=env, log=work / "update.log")
        rep = json.loads((work / "update.json").read_text())
        upd["steps"] = rep["steps"]
        upd["stages_reused"], upd["stages_rebuilt"] = rep.get("stages_reused"), rep.get("stages_rebuilt")
        upd["stages_patched"] = rep.get("stages_patched")
        upd["routing_patch"] = routing_patch_info(bundle)
        upd["tiles_patch"] = tiles_patch_info(bundle)
        print(f"update: {upd['seconds']:.1f} s wall, {upd['cpu_seconds']:.1f} s CPU", flush=True)
        topo = topology_update(a.topology, bundle, work, env) if a.topology else None
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    results = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "load_before": load0,
                    "load_after": os.getloadavg()},
        "copies": a.copies, "extract_mb": round(pbf.stat().st_size / 2**20, 1), "change": change,
        "build": build, "update": upd, "topology_update": topo,
        "ratio_wall": round(upd["seconds"] / build["seconds"], 3),
        "ratio_cpu": round(upd["cpu_seconds"] / build["cpu_seconds"], 3),
    }
    print()
    print(f"{'step':16s} {'build wall':>10s} {'build cpu':>10s} {'update wall':>11s} {'update cpu':>10s}")
    names = list(dict.fromkeys([*build["steps"], *upd["steps"]]))
    for name in names:
        b, u = build["steps"].get(name, {}), upd["steps"].get(name, {})
        print(f"{name:16s} {b.get('seconds', 0):10.1f} {b.get('cpu_seconds', 0):10.1f} "
              f"{u.get('seconds', 0):11.1f} {u.get('cpu_seconds', 0):10.1f}")
    print(f"{'whole process':16s} {build['seconds']:10.1f} {build['cpu_seconds']:10.1f} "
          f"{upd['seconds']:11.1f} {upd['cpu_seconds']:10.1f}")
    print(f"\nupdate / build: wall {results['ratio_wall']:.2f}, CPU {results['ratio_cpu']:.2f} (target <= 0.25); "
          f"reused: {', '.join(upd['stages_reused'] or []) or 'none'}; rebuilt in full: "
          f"{', '.join(upd['stages_rebuilt'] or []) or 'none'}; patched: {', '.join(upd['stages_patched'] or []) or 'none'}")
    print(f"tiles: {json.dumps(upd['tiles_patch'])}")
    if upd.get("routing_patch"):
        print(f"routing patch: {upd['routing_patch']}")
    if topo:
        r = topo["steps"].get("routing", {})
        print(f"topology update ({topo['change']['roads_added']} roads added, {topo['change']['ways_deleted']} "
              f"deleted): {topo['seconds']:.1f} s wall, {topo['cpu_seconds']:.1f} s CPU; routing step "
              f"{r.get('seconds', 0):.1f} s wall, {r.get('cpu_seconds', 0):.1f} s CPU; {topo['routing_patch'] or 'routing in full'}")
    if a.json:
        a.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
