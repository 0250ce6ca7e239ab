"""Runs inside the peer venv (benchmarks/.peers/valhalla-venv): builds Valhalla tiles for an OSM extract
(once, cached in the work folder) and answers optimized_route for the given location sets, timed.
Input: argv[1] pbf, argv[2] work folder, argv[3] JSON file {"problems": [[[lon, lat], ...], ...], "repeat": n}.
Output: JSON on stdout. Never imported by geoengine."""

import json
import subprocess
import sys
import time
from pathlib import Path


def main():
    pbf, work, spec = Path(sys.argv[1]), Path(sys.argv[2]), json.loads(Path(sys.argv[3]).read_text())
    import valhalla
    from valhalla import Actor, get_config

    out = {"valhalla_version": getattr(valhalla, "__version__", "?")}
    tiles = work / "tiles"
    tiles.mkdir(parents=True, exist_ok=True)
    cfg = get_config(tile_extract="", tile_dir=str(tiles))
    cfg_path = work / "valhalla.json"
    cfg_path.write_text(json.dumps(cfg))
    done = work / "tiles.done"
    out["build_tiles_s"] = None
    if not done.exists():
        binary = Path(valhalla.__file__).parent / "bin" / "valhalla_build_tiles"
        t0 = time.perf_counter()
        r = subprocess.run([str(binary), "-c", str(cfg_path), str(pbf)], capture_output=True, text=True)
        if r.returncode != 0:
            out["error"] = "valhalla_build_tiles failed: " + r.stderr[-400:]
            print(json.dumps(out))
            return
        out["build_tiles_s"] = time.perf_counter() - t0
        done.write_text("ok")
    actor = Actor(str(cfg_path))
    results = []
    for locs in spec["problems"]:
        body = json.dumps({"locations": [{"lon": x, "lat": y} for x, y in locs], "costing": "auto",
                           "directions_options": {"units": "kilometers"}})
        times = []
        doc = None
        err = None
        for _ in range(spec.get("repeat", 3)):
            t = time.perf_counter()
            try:
                doc = json.loads(actor.optimized_route(body))
            except Exception as exc:
                err = str(exc)[:300]
                break
            times.append(time.perf_counter() - t)
        if err:
            results.append({"error": err})
            continue
        trip = doc["trip"]
        results.append({"times": times, "order": [loc["original_index"] for loc in trip["locations"]],
                        "time_s": trip["summary"]["time"], "length_km": trip["summary"]["length"]})
    out["results"] = results
    print(json.dumps(out))


if __name__ == "__main__":
    main()
