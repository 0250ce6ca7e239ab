"""Runs inside the peer venv (benchmarks/.peers/venv): pandana's aggregate and OSRM's table on the inputs
that accessibility_bench.py and batch_matrix_bench.py write. Input: a .npz; output: JSON. Never imported
by geoengine.

    python _peers_analysis_run.py pandana INPUT.npz OUT.json
    python _peers_analysis_run.py osrm-table INPUT.npz REGION.osm.pbf WORKDIR OUT.json
"""

import json
import sys
import time
from pathlib import Path

import numpy as np


def pandana_accessibility(d, out):
    import pandana
    import pandas as pd

    n = int(d["lon"].shape[0])
    t0 = time.perf_counter()
    net = pandana.Network(pd.Series(d["lon"], index=np.arange(n)), pd.Series(d["lat"], index=np.arange(n)),
                          pd.Series(d["src"]), pd.Series(d["dst"]), pd.DataFrame({"w": d["w"]}), twoway=False)
    out["pandana_build_s"] = time.perf_counter() - t0
    limit = float(d["limit"])
    t0, c0 = time.perf_counter(), time.process_time()
    net.precompute(limit)
    out["pandana_precompute_s"] = time.perf_counter() - t0
    out["pandana_precompute_cpu_s"] = time.process_time() - c0
    net.set(pd.Series(d["poi_node"]), variable=pd.Series(np.ones(len(d["poi_node"]))), name="pois")
    best = best_cpu = 1e9
    for _ in range(int(d["repeat"])):
        t0, c0 = time.perf_counter(), time.process_time()
        counts = net.aggregate(limit, type="sum", decay="flat", name="pois")
        best = min(best, time.perf_counter() - t0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    out["pandana_aggregate_s"] = best
    out["pandana_aggregate_cpu_s"] = best_cpu
    out["pandana_counts"] = counts.reindex(np.arange(n)).fillna(0).to_numpy().tolist()


def osrm_table(d, pbf, work, out):
    import subprocess

    import osrm

    base = Path(osrm.__file__).parent
    work.mkdir(parents=True, exist_ok=True)
    dst = work / "region.osm.pbf"
    dst.write_bytes(Path(pbf).read_bytes())
    subprocess.run([str(base / "bin/osrm-extract"), "-p", str(base / "share/profiles/car.lua"), str(dst), "-t", "2"],
                   check=True, capture_output=True)
    subprocess.run([str(base / "bin/osrm-contract"), str(work / "region.osrm"), "-t", "2"], check=True,
                   capture_output=True)
    src, tgt = d["sources"], d["targets"]
    eng = osrm.OSRM(storage_config=str(work / "region.osrm"), algorithm="CH", use_shared_memory=False,
                    max_locations_distance_table=len(src) + len(tgt))
    coords = [(float(x), float(y)) for x, y in np.concatenate([src, tgt])]
    tp = osrm.TableParameters(coordinates=coords, sources=list(range(len(src))),
                              destinations=list(range(len(src), len(src) + len(tgt))),
                              annotations=["duration", "distance"])
    t0 = time.perf_counter()
    r = eng.Table(tp)
    out["osrm_table_s"] = time.perf_counter() - t0
    dur = r["durations"]
    out["osrm_table_cells"] = len(dur) * (len(dur[0]) if len(dur) else 0)


def main():
    kind = sys.argv[1]
    out = {}
    try:
        if kind == "pandana":
            d = dict(np.load(sys.argv[2]))
            pandana_accessibility(d, out)
            result = Path(sys.argv[3])
        else:
            d = dict(np.load(sys.argv[2]))
            osrm_table(d, sys.argv[3], Path(sys.argv[4]), out)
            result = Path(sys.argv[5])
    except Exception as exc:
        out["error"] = repr(exc)
        result = Path(sys.argv[-1])
    result.write_text(json.dumps(out))


if __name__ == "__main__":
    main()
