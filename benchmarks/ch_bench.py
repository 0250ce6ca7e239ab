"""Benchmark of the routing algorithms (geoengine.routing) against peers, in one run, on the same data.

    PYTHONPATH=. python benchmarks/ch_bench.py [--region liechtenstein|andorra|both] [--pairs 1000]

Graph: the car road network of the extract (tests/routing/osm_graph.py: highway ways, per-class speeds,
one-ways), turned into the edge-based (turn-expanded) graph that routing runs on. A query from node a to
node b uses the out-arcs of a as source candidates (offset = arc time) and the in-arcs of b as target
candidates: the multi-candidate form a snapped location produces.

Peers: scipy.sparse.csgraph.dijkstra and networkx on the node graph (what notebook users do); OSRM
(osrm-bindings: osrm-extract + osrm-contract with its car.lua, CH) and pandana, run by
benchmarks/_peers_run.py inside the peer venv benchmarks/.peers/venv (create it with
`python -m venv benchmarks/.peers/venv && benchmarks/.peers/venv/bin/pip install osrm-bindings pandana`).
OSRM uses its own graph and snapping from the same coordinates, so its times are comparable, its
durations only roughly. Ratios > 1 mean geoengine is faster.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "routing"))

import osm_graph  # noqa: E402

from geoengine.routing import ContractionHierarchy  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
REGIONS = {
    "andorra": DATA / "andorra" / "andorra.osm.pbf",
    "liechtenstein": DATA / "liechtenstein" / "valhalla-liechtenstein-latest.osm.pbf",
}
PEER_PY = ROOT / "benchmarks" / ".peers" / "venv" / "bin" / "python"


def warm_numba():
    offs = np.array([0, 1, 2, 2], np.int64)
    ch = ContractionHierarchy.build(3, offs, np.array([1, 2], np.int32), np.ones(2), np.ones(2))
    ch.query(0, 2)
    ch.table(np.array([0]), np.array([2]))


def candidates(g_offsets, in_off, in_arc, w, node):
    """Source candidates (out-arcs, offset = their time) and target candidates (in-arcs, offset 0)."""
    out_arcs = np.arange(g_offsets[node], g_offsets[node + 1])
    in_arcs = in_arc[in_off[node]:in_off[node + 1]]
    return (out_arcs, w[out_arcs]), (in_arcs, np.zeros(in_arcs.shape[0]))


def bench_region(name, args):
    res = {"region": name}
    pbf = REGIONS[name]
    warm_numba()
    t0 = time.perf_counter()
    g = osm_graph.load(pbf, car_only=True)
    t1 = time.perf_counter()
    n_e, eoff, etgt, ew, es, tails, heads = osm_graph.edge_based(g)
    t2 = time.perf_counter()
    c2 = time.process_time()
    ch = ContractionHierarchy.build(n_e, eoff, etgt, ew, es)
    t3 = time.perf_counter()
    res["contract_cpu_s"] = time.process_time() - c2
    res.update(nodes=g.n, arcs=int(g.targets.shape[0]), eb_vertices=n_e, eb_arcs=int(etgt.shape[0]),
               graph_s=t1 - t0, expand_s=t2 - t1, contract_s=t3 - t2, shortcuts=ch.info["shortcuts"])
    # in-arcs per node
    in_order = np.argsort(heads, kind="stable")
    in_off = np.searchsorted(heads[in_order], np.arange(g.n + 1))
    rng = np.random.default_rng(42)
    # points: nodes with both in- and out-arcs
    ok = np.nonzero((np.diff(g.offsets) > 0) & (np.diff(in_off) > 0))[0]
    pa = rng.choice(ok, args.pairs)
    pb = rng.choice(ok, args.pairs)
    tables = {k: rng.choice(ok, k, replace=False) for k in (10, 100, 1000)}

    cands = {}

    def cand(v):
        c = cands.get(v)
        if c is None:
            c = cands[v] = candidates(g.offsets, in_off, in_order, g.seconds, v)
        return c

    # geoengine route (with path unpacking)
    lat = []
    ge = np.empty(args.pairs)
    for i, (a, b) in enumerate(zip(pa, pb, strict=True)):
        (sv, so), _ = cand(a)
        _, (tv, to) = cand(b)
        t = time.perf_counter()
        r = ch.query(sv, tv, so, to)
        lat.append(time.perf_counter() - t)
        ge[i] = r.primary if a != b else 0.0
    res["ge_route_p50_ms"] = float(np.median(lat)) * 1e3
    res["ge_route_p90_ms"] = float(np.percentile(lat, 90)) * 1e3
    # kernel-only latency (no Python argument handling): path=False
    lat2 = []
    for a, b in zip(pa[:300], pb[:300], strict=True):
        (sv, so), _ = cand(a)
        _, (tv, to) = cand(b)
        t = time.perf_counter()
        ch.query(sv, tv, so, to, path=False)
        lat2.append(time.perf_counter() - t)
    res["ge_route_nopath_p50_ms"] = float(np.median(lat2)) * 1e3
    for k, pts in tables.items():
        srcs = [(cand(v)[0][0], cand(v)[0][1]) for v in pts]
        tgts = [(cand(v)[1][0], cand(v)[1][1]) for v in pts]
        best = 1e9
        for _ in range(3 if k < 1000 else 2):
            t = time.perf_counter()
            T, _S = ch.table(srcs, tgts)
            best = min(best, time.perf_counter() - t)
        res[f"ge_table_{k}_s"] = best
        if k == 100:
            T100 = T
    # the exact fallback (option-weighted requests) on the same edge-based graph
    from geoengine.routing import Graph, bidirectional_dijkstra, dijkstra, dijkstra_table

    eg = Graph(n_e, eoff, etgt, ew, es)
    eg.warmup()
    for label, fn in (("dijkstra", dijkstra), ("bidir", bidirectional_dijkstra)):
        lat = []
        for a, b in zip(pa[:200], pb[:200], strict=True):
            (sv, so), _ = cand(a)
            _, (tv, to) = cand(b)
            t = time.perf_counter()
            r = fn(eg, sv, tv, so, to)
            lat.append(time.perf_counter() - t)
        res[f"ge_{label}_route_p50_ms"] = float(np.median(lat)) * 1e3
    pts = tables[100]
    t = time.perf_counter()
    dijkstra_table(eg, [cand(v)[0] for v in pts], [cand(v)[1] for v in pts])
    res["ge_dijkstra_table_100_s"] = time.perf_counter() - t
    # scipy csgraph on the node graph (one full Dijkstra per source)
    from scipy.sparse.csgraph import dijkstra as sdij

    M = osm_graph.to_scipy(g.n, g.offsets, g.targets, g.seconds)
    lat = []
    sc = np.empty(min(args.pairs, 100))
    for i, (a, b) in enumerate(zip(pa[:100], pb[:100], strict=True)):
        t = time.perf_counter()
        d = sdij(M, indices=int(a))
        sc[i] = d[b]
        lat.append(time.perf_counter() - t)
    res["scipy_route_p50_ms"] = float(np.median(lat)) * 1e3
    # the edge-based graph forbids U-turns, the node graph does not: most pairs agree exactly
    same = np.isclose(sc, ge[:100], rtol=1e-9) | (np.isinf(sc) & np.isinf(ge[:100]))
    res["ge_equals_scipy_share"] = float(same.mean())
    for k in (10, 100):
        pts = tables[k]
        t = time.perf_counter()
        D = sdij(M, indices=pts)[:, pts]
        res[f"scipy_table_{k}_s"] = time.perf_counter() - t
        if k == 100:
            both = np.isfinite(D) & np.isfinite(T100)
            res["table100_ge_vs_scipy_median_rel_diff"] = float(np.median(np.abs(T100[both] - D[both]) / np.maximum(D[both], 1)))
    res["scipy_table_1000_s_(extrapolated_from_100)"] = res["scipy_table_100_s"] * 10
    # networkx (bidirectional Dijkstra per pair)
    try:
        import networkx as nx

        G = nx.DiGraph()
        u = np.repeat(np.arange(g.n), np.diff(g.offsets))
        G.add_weighted_edges_from(zip(u.tolist(), g.targets.tolist(), g.seconds.tolist(), strict=True))
        lat = []
        for a, b in zip(pa[:60], pb[:60], strict=True):
            t = time.perf_counter()
            try:
                nx.shortest_path(G, int(a), int(b), weight="weight")
            except nx.NetworkXNoPath:
                pass
            lat.append(time.perf_counter() - t)
        res["networkx_route_p50_ms"] = float(np.median(lat)) * 1e3
    except Exception as exc:
        res["networkx_error"] = repr(exc)
    # peers in their venv
    if args.no_peers:
        res["peers"] = "skipped (--no-peers)"
    elif not PEER_PY.exists():
        res["peers"] = f"not run: {PEER_PY} missing (see the module docstring)"
    else:
        with tempfile.TemporaryDirectory() as tmp:
            npz = Path(tmp) / "pts.npz"
            np.savez(npz, lon=g.lon, lat=g.lat, pair_a=pa, pair_b=pb, tails=tails, heads=heads,
                     seconds=g.seconds, **{f"table_{k}": v for k, v in tables.items()})
            p = subprocess.run([str(PEER_PY), str(ROOT / "benchmarks" / "_peers_run.py"), str(npz), str(pbf),
                                str(Path(tmp) / "osrm"), str(Path(tmp) / "peers.json")], capture_output=True,
                               text=True)
            if p.returncode != 0:
                res["peers"] = f"failed: {p.stderr[-2000:]}"
            else:
                peer = json.loads((Path(tmp) / "peers.json").read_text())
                od = np.asarray(peer.pop("osrm_route_durations", []), float)
                if od.size:
                    both = np.isfinite(od) & np.isfinite(ge) & (od > 0)
                    res["osrm_vs_ge_duration_median_ratio"] = float(np.median(ge[both] / od[both]))
                res.update(peer)
    return res


def ratio(a, b):
    return f"{a / b:7.2f}x" if a and b else "    n/a"


def report(res):
    print(f"\n== {res['region']}: {res['nodes']} nodes / {res['arcs']} arcs; edge-based {res['eb_vertices']} "
          f"vertices / {res['eb_arcs']} arcs; {res['shortcuts']} shortcuts")
    build = res["graph_s"] + res["expand_s"] + res["contract_s"]
    print(f"build: simple graph {res['graph_s']:.2f}s + expansion {res['expand_s']:.2f}s + contraction "
          f"{res['contract_s']:.2f}s = {build:.2f}s")
    print(f"  contraction CPU time {res['contract_cpu_s']:.2f}s (wall time suffers when the machine is shared)")
    if "osrm_extract_s" in res:
        o = res["osrm_extract_s"] + res["osrm_contract_s"]
        print(f"  OSRM extract {res['osrm_extract_s']:.2f}s + contract {res['osrm_contract_s']:.2f}s = {o:.2f}s "
              f"(CPU {res['osrm_extract_contract_cpu_s']:.2f}s); geoengine/OSRM = {build / o:.2f} (target <= 3)")
    if "pandana_build_s" in res:
        print(f"  pandana Network (CH) build {res['pandana_build_s']:.2f}s")
    ge = res["ge_route_p50_ms"]
    print(f"route p50: geoengine {ge:.3f} ms (p90 {res['ge_route_p90_ms']:.3f}, without unpacking "
          f"{res['ge_route_nopath_p50_ms']:.3f})")
    for peer in ("osrm", "pandana", "scipy", "networkx"):
        v = res.get(f"{peer}_route_p50_ms")
        if v:
            print(f"  {peer:9s} {v:9.3f} ms   speed-up of geoengine {ratio(v, ge)}")
    print(f"exact fallback on the same graph: Dijkstra route p50 {res['ge_dijkstra_route_p50_ms']:.2f} ms, "
          f"bidirectional {res['ge_bidir_route_p50_ms']:.2f} ms, table 100x100 "
          f"{res['ge_dijkstra_table_100_s'] * 1e3:.0f} ms")
    for k in (10, 100, 1000):
        g = res[f"ge_table_{k}_s"]
        print(f"table {k}x{k}: geoengine {g * 1e3:.1f} ms")
        for peer, key in (("osrm", f"osrm_table_{k}_s"), ("pandana", f"pandana_table_{k}_s"),
                          ("scipy", f"scipy_table_{k}_s"), ("scipy*", f"scipy_table_{k}_s_(extrapolated_from_100)")):
            v = res.get(key)
            if v:
                print(f"  {peer:9s} {v * 1e3:9.1f} ms   speed-up of geoengine {ratio(v, g)}")
    for k in ("osrm_error", "pandana_error", "errors", "peers", "networkx_error"):
        if k in res:
            print(f"  {k}: {res[k]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--region", default="both", choices=["both", *REGIONS])
    ap.add_argument("--pairs", type=int, default=1000)
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--json", type=Path, help="also write the raw figures here")
    args = ap.parse_args()
    regions = list(REGIONS) if args.region == "both" else [args.region]
    out = []
    for r in regions:
        res = bench_region(r, args)
        report(res)
        out.append(res)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
