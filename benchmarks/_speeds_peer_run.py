"""Runs inside the peer venv (benchmarks/.peers/venv): OSRM MLD (osrm-bindings, car.lua) for speeds_bench.py.

    _speeds_peer_run.py PBF WORK SPEEDS.csv POINTS.npz OUT.json

osrm-extract and osrm-partition once (cached in WORK, not timed), then `osrm-customize
--segment-speed-file SPEEDS.csv` (timed: wall and CPU of the child), then the engine loaded (MLD) and the
pairs routed. Never imported by geoengine."""

import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np


def child_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main():
    pbf, work, speeds, points, out_path = sys.argv[1:6]
    import osrm

    base = Path(osrm.__file__).parent
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    out = {}
    osrm_file = work / "region.osrm"
    if not (work / "partitioned").exists():
        src = work / "region.osm.pbf"
        if not src.exists():
            src.symlink_to(Path(pbf).resolve())
        t = time.perf_counter()
        subprocess.run([str(base / "bin/osrm-extract"), "-p", str(base / "share/profiles/car.lua"), str(src), "-t", "2"],
                       check=True, capture_output=True)
        subprocess.run([str(base / "bin/osrm-partition"), str(osrm_file), "-t", "2"], check=True, capture_output=True)
        out["prepare_s"] = time.perf_counter() - t
        (work / "partitioned").write_text("ok")
    c0 = child_cpu()
    t0 = time.perf_counter()
    p = subprocess.run([str(base / "bin/osrm-customize"), str(osrm_file), "--segment-speed-file", speeds, "-t", "2"],
                       capture_output=True, text=True)
    out["customize_s"] = time.perf_counter() - t0
    out["customize_cpu_s"] = child_cpu() - c0
    if p.returncode != 0:
        out["error"] = p.stderr[-1500:] + p.stdout[-1500:]
        Path(out_path).write_text(json.dumps(out))
        return
    out["customize_log_tail"] = p.stdout[-600:]
    t1 = time.perf_counter()
    eng = osrm.OSRM(storage_config=str(osrm_file), algorithm="MLD", use_shared_memory=False)
    d = np.load(points)
    a, b = d["a"], d["b"]
    r = eng.Route(osrm.RouteParameters(coordinates=[(float(a[0, 0]), float(a[0, 1])), (float(b[0, 0]), float(b[0, 1]))],
                                       overview="false"))
    out["load_and_first_route_s"] = time.perf_counter() - t1
    durs, dists, nodes, seg_m, seg_s = [], [], [], [], []
    for i in range(len(a)):
        try:
            r = eng.Route(osrm.RouteParameters(coordinates=[(float(a[i, 0]), float(a[i, 1])),
                                                            (float(b[i, 0]), float(b[i, 1]))], overview="false",
                                               annotations=["nodes", "distance", "duration"]))
            durs.append(float(r["routes"][0]["duration"]))
            dists.append(float(r["routes"][0]["distance"]))
            ann = r["routes"][0]["legs"][0]["annotation"]
            nodes.append([int(x) for x in ann["nodes"]])
            seg_m.append([float(x) for x in ann["distance"]])
            seg_s.append([float(x) for x in ann["duration"]])
        except Exception:
            durs.append(float("nan"))
            dists.append(float("nan"))
            nodes.append([])
            seg_m.append([])
            seg_s.append([])
    out["durations"] = durs
    out["distances"] = dists
    out["nodes"] = nodes  # the OSM nodes of each route and the metres between them ("same roads")
    out["segment_m"] = seg_m
    out["segment_s"] = seg_s  # OSRM's seconds per OSM segment of the route (its annotation)
    Path(out_path).write_text(json.dumps(out))


if __name__ == "__main__":
    main()
