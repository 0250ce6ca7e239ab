"""Runs inside benchmarks/.peers/valhalla-venv (pyvalhalla): builds Valhalla tiles for the extract with
its own valhalla_build_tiles, then times Actor.route (car, no narrative) on the pairs and
Actor.matrix (sources_to_targets) on the 10 and 100 point tables of route_bench.py. 1000x1000 is not
run (Valhalla's matrix on this machine kind takes about 1 s per 100x100, so minutes for 1000x1000).
Output: JSON written to the last argument. Never imported by geoengine."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np


def main():
    npz, pbf, work, result = sys.argv[1], sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4])
    d = dict(np.load(npz))
    out = {}
    import valhalla
    from valhalla import Actor, get_config

    work.mkdir(parents=True, exist_ok=True)
    tiles = work / "tiles"
    tiles.mkdir(exist_ok=True)
    cfg = get_config(tile_extract="", tile_dir=str(tiles), verbose=False)
    cfg["mjolnir"]["concurrency"] = 1
    limits = cfg["service_limits"]
    for mode in ("auto",):
        limits[mode]["max_matrix_location_pairs"] = 10**7
        limits[mode]["max_matrix_distance"] = 10**7
        limits[mode]["max_locations"] = 10**4
    limits["max_exclude_locations"] = 50
    path = work / "valhalla.json"
    path.write_text(json.dumps(cfg))
    binary = Path(os.path.dirname(valhalla.__file__)) / "bin" / "valhalla_build_tiles"
    t0 = time.perf_counter()
    p = subprocess.run([str(binary), "-c", str(path), str(pbf)], capture_output=True, text=True)
    out["valhalla_build_s"] = time.perf_counter() - t0
    if p.returncode != 0:
        out["valhalla_error"] = f"valhalla_build_tiles failed: {p.stderr[-800:]}"
        result.write_text(json.dumps(out))
        return
    actor = Actor(str(path))
    lon, lat = d["lon"], d["lat"]

    def loc(i):
        return {"lon": float(lon[i]), "lat": float(lat[i])}

    times, durs = [], []
    for a, b in zip(d["pair_a"][:300], d["pair_b"][:300], strict=True):
        req = json.dumps({"locations": [loc(a), loc(b)], "costing": "auto", "directions_type": "none"})
        t = time.perf_counter()
        try:
            r = json.loads(actor.route(req))
            durs.append(float(r["trip"]["summary"]["time"]))
        except Exception:
            durs.append(float("nan"))
        times.append(time.perf_counter() - t)
    out["valhalla_route_p50_ms"] = float(np.median(times)) * 1e3
    out["valhalla_route_found_share"] = float(np.isfinite(durs).mean())
    for k in (10, 100):
        pts = d[f"table_{k}"]
        req = json.dumps({"sources": [loc(i) for i in pts], "targets": [loc(i) for i in pts], "costing": "auto"})
        t = time.perf_counter()
        try:
            actor.matrix(req)
            out[f"valhalla_matrix_{k}_s"] = time.perf_counter() - t
        except Exception as exc:
            out.setdefault("valhalla_error", "")
            out["valhalla_error"] += f" matrix {k}: {exc!r}"
    result.write_text(json.dumps(out))


if __name__ == "__main__":
    main()
