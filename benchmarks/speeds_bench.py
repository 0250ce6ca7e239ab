"""New speeds against OSRM's osrm-customize, at 64 copies of Liechtenstein (issue 28).

    nice -n 10 env NUMBA_CACHE_DIR=... PYTHONPATH=$PWD .venv/bin/python benchmarks/speeds_bench.py \\
        [--extract /work/scale-cache/liechtenstein-x64.osm.pbf] [--cache /work/scale-cache/speeds] \\
        [--rows 100000] [--pairs 200] [--json out.json] [--failures N] [--turns]

- The bundle (source + graph + routing stages) is built once into --cache (not timed), as OSRM's
  osrm-extract + osrm-partition (MLD, car.lua; osrm-bindings in benchmarks/.peers/venv, through
  _speeds_peer_run.py; not timed).
- The speed file: OSRM's CSV (from_osm_node_id,to_osm_node_id,speed_kmh), --rows rows: every OSM
  segment cars may drive in copy (0, 0) (the original Liechtenstein, both allowed directions) and random
  segments of the other copies up to --rows, speeds uniform 10-110 km/h. The same file for both.
- geoengine: the engine opened and warmed first (a running server, idle: the background perfect
  customisation of the profile speeds finished; --spare: whether that customisation's working arrays stay
  for the next one, Settings.speeds_spare, kept by default once a bundle has measured speeds); timed from `engine.apply_speeds(file)`
  (which reads it) to the first route answered with the new speeds (wall, and CPU of the process).
- OSRM: `osrm-customize region.osrm --segment-speed-file file` (wall and CPU of the child); the load of
  the customised data and its first route are reported apart.
- Durations: --pairs random pairs inside copy (0, 0), where every road has a speed from the file, so
  both engines' durations come from the same speeds (plus each one's turn and obstacle delays).
  "Where the graphs agree" (issue 28), from loosest to strictest:
    lengths   the two routes' lengths within 1 %;
    99 %      besides, at least 99 % of OSRM's route (by length) on OSM segments geoengine's route also
              takes (in the same direction);
    same roads  besides, every OSM segment OSRM's route travels (its annotation's node pairs with a
              positive length) is one geoengine's route travels in the same direction, and one the file
              gives a speed for; and every OSM segment geoengine's route travels (over more than
              END_M metres) is one OSRM's route travels: the two follow the same roads from the start
              to the end at the same speeds (a route that wanders out of copy (0, 0) meets segments the
              file leaves at each engine's own profile speed). geoengine's OSM node pairs: the shape
              points' OSM ids of its edges (`engine.compute_route`), its first and last edge only
              where the route runs on them (between the snapped point and the edge's end, by the
              piece's f_first/f_last). The second half matters at the route's ends: a location on a
              road only geoengine's auto costing drives (highway=track, which car.lua leaves out of
              OSRM's graph) snaps onto it in geoengine and up to tens of metres away in OSRM, and
              geoengine's route then drives along the track and turns off it. The goal's figure.
  Prints, for each, the share within 1 % of OSRM's duration and the ratios; --failures N prints the
  same-road pairs beyond 1 % with both sides' seconds on roads and in turns and obstacles.
- --turns: every turn of OSRM's graph against geoengine's, by its three OSM nodes: OSRM's own turn
  seconds (its .turn_duration_penalties and .turn_penalties_index) and geoengine's car turn seconds.
The machine is shared: figures move with its load; compare the ratios of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PEER_PY = ROOT / "benchmarks" / ".peers" / "venv" / "bin" / "python"
COPY0 = (9.46, 9.65, 47.04, 47.29)  # the original Liechtenstein (copy 0, 0) of replicate_extract.py
END_M = 0.1  # metres of a route's first or last OSM segment that count as travelling it ("same roads")


def ensure_peer():
    if not PEER_PY.exists():
        subprocess.run([sys.executable, "-m", "venv", str(PEER_PY.parents[1])], check=True)
    if subprocess.run([str(PEER_PY), "-c", "import osrm, numpy"], capture_output=True).returncode != 0:
        subprocess.run([str(PEER_PY.parent / "pip"), "install", "-q", "osrm-bindings", "numpy"], check=True)


def build_bundle(extract: Path, out: Path) -> None:
    from geoengine.bundler.pipeline import build, resolve_inputs
    from geoengine.bundler.stages import all_stages
    from geoengine.config import Settings
    from geoengine.progress import NullProgress

    if (out / "manifest.json").exists() and (out / "graph" / "seg_car_lua.npy").exists():
        return  # (a bundle built before car.lua's obstacles and ways, graph/seg_car_lua.npy, is rebuilt)
    settings = Settings(home=out.parent / "home", data_mirror=str(ROOT.parent / "shared" / "data"))
    stages = [s for s in all_stages() if s.name in ("source", "graph", "routing")]
    inputs = resolve_inputs(str(extract), settings, progress=NullProgress())
    t = time.perf_counter()
    build(inputs, out, settings, progress=NullProgress(), stages=stages)
    print(f"bundle built in {time.perf_counter() - t:.0f} s (not timed)")


def speed_file(graph, rows: int, path: Path, rng) -> None:
    """OSRM rows for every car piece of copy 0 plus random car pieces elsewhere, up to `rows`."""
    sid = np.asarray(graph.shape_osm_id)
    off = np.asarray(graph.shape_offsets)
    lon, lat = np.asarray(graph.shape_lon), np.asarray(graph.shape_lat)
    P = len(sid)
    last = np.zeros(P, bool)
    last[off[1:] - 1] = True
    piece = np.flatnonzero(~last)
    seg = np.searchsorted(off, piece, side="right") - 1
    acc = np.asarray(graph.edge_access)
    fw_ok = (acc[2 * seg] & 1) != 0
    bw_ok = (acc[2 * seg + 1] & 1) != 0
    a = np.concatenate([sid[piece[fw_ok]], sid[piece[bw_ok] + 1]])
    b = np.concatenate([sid[piece[fw_ok] + 1], sid[piece[bw_ok]]])
    p = np.concatenate([piece[fw_ok], piece[bw_ok]])
    in0 = (lon[p] > COPY0[0]) & (lon[p] < COPY0[1]) & (lat[p] > COPY0[2]) & (lat[p] < COPY0[3])
    keep = np.flatnonzero(in0)
    rest = np.flatnonzero(~in0)
    extra = max(rows - len(keep), 0)
    sel = np.concatenate([keep[:rows], rng.choice(rest, min(extra, len(rest)), replace=False)])
    rng.shuffle(sel)
    v = rng.integers(10, 111, len(sel))
    with open(path, "w") as f:
        f.write("\n".join(f"{x},{y},{s}" for x, y, s in zip(a[sel].tolist(), b[sel].tolist(), v.tolist(),
                                                            strict=True)) + "\n")
    return int(in0.sum()), set(zip(a[sel].tolist(), b[sel].tolist(), strict=True))


def pairs_in_copy0(graph, n, rng):
    lon, lat = np.asarray(graph.shape_lon), np.asarray(graph.shape_lat)
    acc = np.asarray(graph.edge_access)
    off = np.asarray(graph.shape_offsets)
    seg_ok = ((acc[0::2] | acc[1::2]) & 1) != 0
    pts = np.flatnonzero(seg_ok[np.searchsorted(off, np.arange(len(lon)), side="right") - 1]
                         & (lon > COPY0[0] + 0.01) & (lon < COPY0[1] - 0.01) & (lat > COPY0[2] + 0.01)
                         & (lat < COPY0[3] - 0.01))
    a = rng.choice(pts, 4 * n)
    b = rng.choice(pts, 4 * n)
    far = np.hypot((lon[a] - lon[b]) * 0.68, lat[a] - lat[b]) > 0.03  # about 3 km or more
    a, b = a[far][:n], b[far][:n]
    return np.column_stack([lon[a], lat[a]]), np.column_stack([lon[b], lat[b]])


def travelled_pairs(graph, edges, f_first: float, f_last: float) -> set:
    """The OSM node pairs (from, to) a route piece travels: every OSM segment of its middle edges, and of
    its first and last edge the segments it runs on for more than END_M metres (the edge's direction;
    fractions by length along the edge's shape, as the router's)."""
    from geoengine.geo import haversine_m

    sid, off = np.asarray(graph.shape_osm_id), np.asarray(graph.shape_offsets)
    lon, lat = np.asarray(graph.shape_lon), np.asarray(graph.shape_lat)
    out = set()
    n = len(edges)
    for i, e in enumerate(edges):
        a, b = int(off[e >> 1]), int(off[(e >> 1) + 1])
        idx = np.arange(a, b)[::-1] if e & 1 else np.arange(a, b)
        ids = sid[idx].tolist()
        pairs = list(zip(ids[:-1], ids[1:], strict=True))
        if 0 < i < n - 1:
            out.update(pairs)
            continue
        seg = haversine_m(lat[idx[:-1]], lon[idx[:-1]], lat[idx[1:]], lon[idx[1:]])
        cum = np.r_[0.0, np.cumsum(seg)]
        s = (f_first if i == 0 else 0.0) * cum[-1]
        t = (f_last if i == n - 1 else 1.0) * cum[-1]
        run = np.minimum(cum[1:], t) - np.maximum(cum[:-1], s)  # metres of each segment travelled
        out.update(p for p, m in zip(pairs, run.tolist(), strict=True) if m > END_M)
    return out


def osrm_turn_check(engine, osrm_file: Path) -> dict:
    """geoengine's car turn seconds against OSRM's own, turn by turn: OSRM writes each turn of its
    edge-based graph with its duration penalty (car.lua's `process_turn`: the angle's sigmoid, the
    U-turn, the obstacles at the junction; deciseconds) to `.turn_duration_penalties`, and the turn's
    three nodes (the node before the junction, the junction, the node after) to
    `.turn_penalties_index`, whose node ids `.nbg_nodes` maps to OSM ids (40-bit packed). The same
    three OSM nodes give geoengine's turn (`TurnBase.penalty` with the auto costing's `MotorTurns`;
    an obstacle at the junction is in geoengine's edge, not its turn, so such turns are left out)."""
    import tarfile

    from geoengine.costing import turn_penalty
    from geoengine.graph import tags as T
    from geoengine.graph.turns import turn_base

    def member(suffix, name, dtype):
        with tarfile.open(f"{osrm_file}{suffix}") as t:
            return np.frombuffer(t.extractfile(name).read(), dtype=dtype)

    idx = member(".turn_penalties_index", "/extractor/turn_index", np.uint32).reshape(-1, 3)
    dur = member(".turn_duration_penalties", "/common/turn_penalty/duration", np.int16) / 10.0
    n = len(member(".nbg_nodes", "/common/nbn_data/coordinates", np.int32)) // 2
    words = member(".nbg_nodes", "/common/nbn_data/osm_node_ids/packed", np.uint64)
    bits = np.unpackbits(words.view(np.uint8), bitorder="little")[: n * 40].reshape(n, 40).astype(np.uint64)
    osm = (bits << np.arange(40, dtype=np.uint64)).sum(axis=1, dtype=np.uint64)
    g = engine.graph
    base = turn_base(g)
    sid, off = np.asarray(g.shape_osm_id).astype(np.uint64), np.asarray(g.shape_offsets)
    e1, e2 = base.e1.astype(np.int64), base.e2.astype(np.int64)
    s1, s2 = e1 >> 1, e2 >> 1
    frm = np.where(e1 & 1, sid[off[s1] + 1], sid[off[s1 + 1] - 2])
    via = np.where(e1 & 1, sid[off[s1]], sid[off[s1 + 1] - 1])
    to = np.where(e2 & 1, sid[off[s2 + 1] - 2], sid[off[s2] + 1])

    def key(x, y, z):  # one 64-bit key per node triple
        return (x * np.uint64(0x9E3779B97F4A7C15)) ^ (y * np.uint64(0xC2B2AE3D27D4EB4F)) ^ (z * np.uint64(0x165667B19E3779F9))

    with np.errstate(over="ignore"):
        ok_key, ge_key = key(osm[idx[:, 0]], osm[idx[:, 1]], osm[idx[:, 2]]), key(frm, via, to)
    order = np.argsort(ok_key)
    pos = np.clip(np.searchsorted(ok_key[order], ge_key), 0, len(order) - 1)
    found = ok_key[order][pos] == ge_key
    # obstacles at the junction: OSRM adds them to the turn, geoengine to the edge (left out)
    obst = np.asarray(g.edge_obstacle_s)[e1] > 0 if hasattr(g, "edge_obstacle_s") else np.zeros(len(e1), bool)
    sel = np.flatnonzero(found & ~obst)
    ge_s = base.penalty(turn_penalty("auto"), sel, T.AUTO)
    d = ge_s - dur[order][pos[sel]]
    return {"osrm_turns": int(len(dur)), "compared": int(len(sel)), "within_0_1s": float(np.mean(np.abs(d) < 0.11)),
            "over_1s": float(np.mean(np.abs(d) > 1.0)), "mean_abs_s": float(np.mean(np.abs(d)))}


def print_failures(engine, a, b, ge_t, os_t, ge_d, os_d, peer, sel, limit):
    """Per pair of `sel`: both durations and lengths; geoengine's seconds on edges and in turns (and how
    many turns cost anything), its signals; OSRM's seconds on segments (its annotation) and the rest
    (its turns and obstacles)."""
    from geoengine.routing.profile import unpack

    loc = lambda p: {"lon": float(p[0]), "lat": float(p[1])}  # noqa: E731
    g = engine.graph
    sig = np.asarray(g.edge_signals)
    print(f"  same-road pairs beyond 1 % ({int(sel.sum())}; up to {limit}):")
    print("    pair   ge_s   osrm_s  ratio  ge_m/osrm_m  ge_edges_s ge_turns_s (n)  signals  osrm_segs_s osrm_rest_s")
    for i in np.flatnonzero(sel)[:limit].tolist():
        r = engine.compute_route(locations=[loc(a[i]), loc(b[i])])
        prof = r.profile if hasattr(r, "profile") else engine.router.profile("auto", engine.router.parse_options("auto", None))
        path = np.concatenate([np.asarray(p.edges) for p in r.routes[0].pieces])
        off, tgt, _w, packed = prof.turn_csr()
        turns = []
        for e1, e2 in zip(path[:-1].tolist(), path[1:].tolist(), strict=True):
            k = off[e1] + int(np.flatnonzero(tgt[off[e1]:off[e1 + 1]] == e2)[0])
            t, _ = unpack(packed[k])
            turns.append(float(t) - round(float(prof.time[e2]) * 10) / 10)
        turns = np.asarray(turns)
        edges_s = float(ge_t[i]) - float(turns.sum())
        seg_s = float(np.sum(peer["segment_s"][i])) if peer.get("segment_s") else float("nan")
        print(f"    {i:4d} {ge_t[i]:7.1f} {os_t[i]:7.1f} {ge_t[i] / os_t[i]:6.4f} {ge_d[i] / os_d[i]:8.4f} "
              f"{edges_s:10.1f} {turns.sum():8.1f} ({int((turns > 0.05).sum())}) {int(sig[path].sum()):6d} "
              f"{seg_s:11.1f} {os_t[i] - seg_s:10.1f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--extract", type=Path, default=Path("/work/scale-cache/liechtenstein-x64.osm.pbf"))
    ap.add_argument("--cache", type=Path, default=Path("/work/scale-cache/speeds"))
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--pairs", type=int, default=200)
    ap.add_argument("--seed", type=int, default=28)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--spare", choices=("auto", "on", "off"), default="auto",
                    help="Settings.speeds_spare (GEOENGINE_SPEEDS_SPARE): auto, the default, keeps the spare "
                         "customisation arrays because the bundle has measured speeds (this bench resets them "
                         "first, as an operator with a traffic feed has); off shows a first apply without it")
    ap.add_argument("--failures", type=int, default=0,
                    help="print up to N same-road pairs whose durations differ by more than 1 %%: both "
                         "durations, the turn and signal delays of each")
    ap.add_argument("--turns", action="store_true",
                    help="also compare geoengine's car turn seconds with OSRM's turn by turn (its "
                         ".turn_duration_penalties, by the three OSM nodes of each turn)")
    args = ap.parse_args()
    print(f"cpu threads visible: {os.cpu_count()}; load average {os.getloadavg()}")
    label = args.extract.name.split(".")[0]
    work = args.cache / label
    work.mkdir(parents=True, exist_ok=True)
    bundle = work / "bundle"
    build_bundle(args.extract, bundle)
    ensure_peer()

    import geoengine
    from geoengine.config import Settings

    settings = Settings.from_env(speeds_dir=work / "speeds", speeds_spare=args.spare)
    engine = geoengine.open(bundle, settings=settings)
    engine.reset_speeds()
    rng = np.random.default_rng(args.seed)
    csv = work / "speeds.csv"
    n_copy0, in_file = speed_file(engine.graph, args.rows, csv, rng)
    a, b = pairs_in_copy0(engine.graph, args.pairs, rng)
    np.savez(work / "points.npz", a=a, b=b)
    print(f"speed file: {sum(1 for _ in open(csv)):,} rows ({csv.stat().st_size / 1e6:.1f} MB); car pieces of copy 0: {n_copy0:,}")
    engine.warm()  # a running server: open, customised for the profile speeds, kernels loaded
    loc = lambda p: {"lon": float(p[0]), "lat": float(p[1])}  # noqa: E731
    before = engine.route(locations=[loc(a[0]), loc(b[0])])["trip"]["summary"]["time"]
    engine.router.customiser.wait(600)  # idle: warm's perfect customisation done in the background

    print(f"spare customisation arrays: speeds_spare={args.spare}, "
          f"kept={engine.router.customiser.topology.keep_spare}")
    c0, t0 = time.process_time(), time.perf_counter()
    info = engine.apply_speeds(csv)
    t_apply = time.perf_counter() - t0
    first = engine.route(locations=[loc(a[0]), loc(b[0])])["trip"]["summary"]["time"]
    ge_wall, ge_cpu = time.perf_counter() - t0, time.process_time() - c0
    assert first != before, "the first route after the apply did not change"
    print(f"geoengine: apply {t_apply:.2f} s, file to first route with the new speeds {ge_wall:.2f} s wall, "
          f"{ge_cpu:.2f} s CPU ({info['edges']:,} edges changed; route {before:.1f} -> {first:.1f} s)")
    engine.router.customiser.wait(600)
    g = engine.graph
    ge_t, ge_d = np.full(len(a), np.nan), np.full(len(a), np.nan)
    ge_pieces: list[set] = [set() for _ in range(len(a))]
    for i in range(len(a)):
        try:
            s = engine.route(locations=[loc(a[i]), loc(b[i])])["trip"]["summary"]
            ge_t[i], ge_d[i] = s["time"], s["length"] * 1000
            # the OSM node pairs the route travels (the same request, typed)
            for p in engine.compute_route(locations=[loc(a[i]), loc(b[i])]).routes[0].pieces:
                ge_pieces[i] |= travelled_pairs(g, np.asarray(p.edges).tolist(), p.f_first, p.f_last)
        except Exception:  # noqa: BLE001 - an unsnappable or unreachable pair counts as no route
            pass

    out_json = work / "osrm.json"
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run([str(PEER_PY), str(ROOT / "benchmarks" / "_speeds_peer_run.py"), str(args.extract),
                        str(work / "osrm"), str(csv), str(work / "points.npz"), str(out_json)],
                       capture_output=True, text=True, timeout=7200)
    _ = ru0
    if p.returncode != 0:
        print("OSRM failed:", p.stderr[-2000:])
        return 1
    peer = json.loads(out_json.read_text())
    if "error" in peer:
        print("osrm-customize failed:", peer["error"])
        return 1
    if "prepare_s" in peer:
        print(f"OSRM osrm-extract + osrm-partition: {peer['prepare_s']:.0f} s (not timed)")
    print(f"OSRM: osrm-customize --segment-speed-file {peer['customize_s']:.2f} s wall, "
          f"{peer['customize_cpu_s']:.2f} s CPU; then load + first route {peer['load_and_first_route_s']:.2f} s")
    print(f"ratio geoengine / osrm-customize: wall {ge_wall / peer['customize_s']:.2f}, "
          f"CPU {ge_cpu / max(peer['customize_cpu_s'], 1e-9):.2f}")
    os_t, os_d = np.asarray(peer["durations"], float), np.asarray(peer["distances"], float)
    ok = np.isfinite(ge_t) & np.isfinite(os_t) & (os_d > 0)
    agree = ok & (np.abs(ge_d / np.where(os_d > 0, os_d, 1) - 1) <= 0.01)
    rel = np.abs(ge_t / np.where(os_t > 0, os_t, 1) - 1)
    within = agree & (rel <= 0.01)
    print(f"durations: {int(ok.sum())} pairs routed by both, {int(agree.sum())} where the lengths agree within 1 %; "
          f"of those {int(within.sum())} ({within.sum() / max(agree.sum(), 1):.1%}) within 1 % of OSRM's duration; "
          f"median |ratio - 1| {np.median(rel[agree]) if agree.any() else float('nan'):.4f}, "
          f"p95 {np.percentile(rel[agree], 95) if agree.any() else float('nan'):.4f}, "
          f"median ratio {np.median(ge_t[agree] / os_t[agree]) if agree.any() else float('nan'):.4f}")
    same = np.zeros(len(a), bool)  # every OSM segment of OSRM's route is on geoengine's
    most = np.zeros(len(a), bool)  # 99 % of OSRM's route (by length) on geoengine's (the earlier figure)
    ends = np.zeros(len(a), bool)  # all of OSRM's route on geoengine's, but geoengine travels more (its ends)
    for i in np.flatnonzero(agree).tolist():
        nodes, seg_m = peer["nodes"][i], np.asarray(peer["segment_m"][i], float)
        if len(seg_m):
            pairs = list(zip(nodes[:-1], nodes[1:], strict=True))
            shared = np.array([p in ge_pieces[i] for p in pairs])
            timed = np.array([p in in_file for p in pairs])  # a speed from the file (not a profile speed)
            osrm_pairs = {p for p, m in zip(pairs, seg_m.tolist(), strict=True) if m > 0}
            both_ways = ge_pieces[i] <= osrm_pairs  # nothing geoengine travels that OSRM does not
            same[i] = bool((shared & timed | (seg_m <= 0)).all()) and both_ways
            ends[i] = bool((shared & timed | (seg_m <= 0)).all()) and not both_ways
            most[i] = seg_m[shared].sum() >= 0.99 * seg_m.sum()
    for name, sel in (("the same roads (every OSM segment of OSRM's route on geoengine's, at the file's speed, and none "
                       "more)",
                       same),
                      ("99 % of OSRM's length on geoengine's segments", most)):
        w = sel & (rel <= 0.01)
        print(f"  of those, {int(sel.sum())} on {name}: {int(w.sum())} ({w.sum() / max(sel.sum(), 1):.1%}) within "
              f"1 %, median ratio {np.median(ge_t[sel] / os_t[sel]) if sel.any() else float('nan'):.4f}, p5-p95 "
              f"{np.percentile(ge_t[sel] / os_t[sel], [5, 95]).round(4).tolist() if sel.any() else '-'}")
    print(f"  graphs disagree at an end: {int(ends.sum())} pairs travel all of OSRM's route plus OSM segments OSRM's "
          f"route does not (left out of 'the same roads'), {int((ends & (rel <= 0.01)).sum())} of them within 1 %")
    within_same = same & (rel <= 0.01)
    turns = None
    if args.turns:
        turns = osrm_turn_check(engine, work / "osrm" / "region.osrm")
        print(f"turns: {turns['compared']:,} of OSRM's {turns['osrm_turns']:,} compared (no obstacle on the edge in); "
              f"geoengine's seconds within 0.1 s of OSRM's on {turns['within_0_1s']:.1%}, more than 1 s off on "
              f"{turns['over_1s']:.2%}, mean |difference| {turns['mean_abs_s']:.3f} s")
    if args.failures:
        print_failures(engine, a, b, ge_t, os_t, ge_d, os_d, peer, same & (rel > 0.01), args.failures)
    res = {"rows": args.rows, "edges": info["edges"], "ge_apply_s": t_apply, "ge_file_to_first_route_s": ge_wall,
           "ge_cpu_s": ge_cpu, "osrm_customize_s": peer["customize_s"], "osrm_customize_cpu_s": peer["customize_cpu_s"],
           "osrm_load_first_route_s": peer["load_and_first_route_s"], "pairs": int(ok.sum()), "agree": int(agree.sum()),
           "within_1pct": int(within.sum()), "same_roads": int(same.sum()), "same_roads_within_1pct": int(within_same.sum()),
           "graphs_disagree_at_an_end": int(ends.sum()),
           "most_roads": int(most.sum()), "most_roads_within_1pct": int((most & (rel <= 0.01)).sum()),
           "median_rel": float(np.median(rel[agree])) if agree.any() else None, "turns": turns,
           "per_pair": {"ge_s": ge_t.tolist(), "osrm_s": os_t.tolist(), "ge_m": ge_d.tolist(), "osrm_m": os_d.tolist(),
                        "lengths": agree.tolist(), "most_roads": most.tolist(), "same_roads": same.tolist(),
                        "disagree_at_an_end": ends.tolist()}}
    if args.json:
        args.json.write_text(json.dumps(res, indent=1))
    engine.reset_speeds()
    return 0


if __name__ == "__main__":
    sys.exit(main())
