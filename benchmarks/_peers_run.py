"""Runs inside the peer venv (benchmarks/.peers/venv): OSRM (osrm-bindings, CH) and pandana on the same
points as ch_bench.py. Input: a .npz with lon/lat of the pair/table points and the node graph; output:
JSON on stdout. Never imported by geoengine."""

import json
import sys
import time
from pathlib import Path

import numpy as np


def p50(xs):
    return float(np.median(xs))


def run_osrm(pbf, work, d, out):
    try:
        import osrm
    except Exception as exc:  # pragma: no cover - reported by the caller
        out["osrm_error"] = f"import osrm failed: {exc!r}"
        return
    import subprocess

    base = Path(osrm.__file__).parent
    work.mkdir(parents=True, exist_ok=True)
    dst = work / "region.osm.pbf"
    dst.write_bytes(Path(pbf).read_bytes())
    import resource

    def child_cpu():
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        return r.ru_utime + r.ru_stime

    c0 = child_cpu()
    t0 = time.perf_counter()
    subprocess.run([str(base / "bin/osrm-extract"), "-p", str(base / "share/profiles/car.lua"), str(dst), "-t", "1"],
                   check=True, capture_output=True)
    t1 = time.perf_counter()
    subprocess.run([str(base / "bin/osrm-contract"), str(work / "region.osrm"), "-t", "1"], check=True,
                   capture_output=True)
    t2 = time.perf_counter()
    out["osrm_extract_s"] = t1 - t0
    out["osrm_contract_s"] = t2 - t1
    out["osrm_extract_contract_cpu_s"] = child_cpu() - c0
    eng = osrm.OSRM(storage_config=str(work / "region.osrm"), algorithm="CH", use_shared_memory=False,
                    max_locations_distance_table=5000)
    pa, pb = d["pair_a"], d["pair_b"]
    lon, lat = d["lon"], d["lat"]
    times = []
    durs = []
    for a, b in zip(pa, pb, strict=True):
        p = osrm.RouteParameters(coordinates=[(float(lon[a]), float(lat[a])), (float(lon[b]), float(lat[b]))],
                                 overview="false")
        t = time.perf_counter()
        r = eng.Route(p)
        times.append(time.perf_counter() - t)
        try:
            durs.append(float(r["routes"][0]["duration"]))
        except Exception:
            durs.append(float("nan"))
    out["osrm_route_p50_ms"] = p50(times) * 1e3
    out["osrm_route_durations"] = durs
    for k in (10, 100, 1000):
        pts = d[f"table_{k}"]
        coords = [(float(lon[i]), float(lat[i])) for i in pts]
        tp = osrm.TableParameters(coordinates=coords + coords, sources=list(range(k)),
                                  destinations=list(range(k, 2 * k)))
        best = 1e9
        for _ in range(3 if k < 1000 else 1):
            t = time.perf_counter()
            eng.Table(tp)
            best = min(best, time.perf_counter() - t)
        out[f"osrm_table_{k}_s"] = best


def run_pandana(d, out):
    if "tails" not in d:  # route_bench.py sends no node graph: pandana is ch_bench.py's peer
        return
    try:
        import pandana
        import pandas as pd
    except Exception as exc:
        out["pandana_error"] = f"import pandana failed: {exc!r}"
        return
    n = d["lon"].shape[0]
    nodes = pd.DataFrame({"x": d["lon"], "y": d["lat"]}, index=np.arange(n))
    edges = pd.DataFrame({"from": d["tails"], "to": d["heads"], "w": d["seconds"]})
    t0 = time.perf_counter()
    net = pandana.Network(nodes["x"], nodes["y"], edges["from"], edges["to"], edges[["w"]], twoway=False)
    out["pandana_build_s"] = time.perf_counter() - t0
    pa, pb = d["pair_a"], d["pair_b"]
    times = []
    for a, b in zip(pa[:300], pb[:300], strict=True):
        t = time.perf_counter()
        net.shortest_path_length(int(a), int(b))
        times.append(time.perf_counter() - t)
    out["pandana_route_p50_ms"] = p50(times) * 1e3
    for k in (10, 100, 1000):
        pts = d[f"table_{k}"]
        o = np.repeat(pts, k)
        dd = np.tile(pts, k)
        t = time.perf_counter()
        net.shortest_path_lengths(o, dd)
        out[f"pandana_table_{k}_s"] = time.perf_counter() - t


def main():
    npz, pbf, work, result = sys.argv[1], sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4])
    d = dict(np.load(npz))
    out = {}
    for fn in (lambda: run_osrm(pbf, work, d, out), lambda: run_pandana(d, out)):
        try:
            fn()
        except Exception as exc:
            out.setdefault("errors", []).append(repr(exc))
    result.write_text(json.dumps(out))


if __name__ == "__main__":
    main()
