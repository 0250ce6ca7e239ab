"""Issue 26's "Far-apart parts": an extract whose parts lie far apart (Nominatim's test extract: Liechtenstein
and Autauga County, Alabama; its bounding box spans the Atlantic) must open and answer its first /route and
/search in under 2 s, and a server process's peak memory must stay within 1.2x of the two parts built alone.

The script splits the extract into its two parts with pyosmium (a node by its longitude, a way by its first
node, a relation by its members; references completed by osmium's BackReferenceWriter), builds the three
bundles (`geoengine build`, kept in --work), fills the compile cache (`geoengine warm`), then, for each bundle
in turn, starts `geoengine serve` (one worker, as users start it) and measures:

- spawn->route, spawn->search: seconds from starting the process to the first answered POST /route (two points
  of the bundle's car network) and then GET /search, polling every 20 ms (the process's imports included);
- open+warm: the server's own start-up (Engine.open and Engine.warm), and the first /route and /search after it
  (in process, read from a second fresh interpreter that does what the server does: `--in-process` rows);
- peak RSS (VmHWM of the serving process, after its first answers).

    PYTHONPATH=. python benchmarks/far_apart_bench.py [--work benchmarks/results/far_apart] [--runs 3]

No peer: the criterion compares the engine with itself (the whole against its parts).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
HOST = "bench.local"
SRC = ROOT.parent / "shared" / "data" / "liechtenstein" / "nominatim-apidb-test-data.osm.pbf"
SPLIT_LON = -30.0  # Alabama west of it, Liechtenstein east


def split_extract(src: Path, west: Path, east: Path, lon: float = SPLIT_LON) -> dict:
    """Write the objects of `src` west and east of `lon` into two reference-complete extracts."""
    import osmium

    sides: dict[tuple[str, int], bool] = {}
    counts = {"west": 0, "east": 0, "dropped": 0}
    with osmium.BackReferenceWriter(str(west), ref_src=str(src), overwrite=True) as w, \
            osmium.BackReferenceWriter(str(east), ref_src=str(src), overwrite=True) as e:
        for o in osmium.FileProcessor(str(src)).with_locations():
            if o.is_node():
                key, side = ("n", o.id), o.location.valid() and o.location.lon < lon
            elif o.is_way():
                locs = [n.location for n in o.nodes if n.location.valid()]
                if not locs:
                    counts["dropped"] += 1
                    continue
                key, side = ("w", o.id), locs[0].lon < lon
            else:
                known = [sides[(m.type, m.ref)] for m in o.members if (m.type, m.ref) in sides]
                if not known:
                    counts["dropped"] += 1
                    continue
                key, side = ("r", o.id), known[0]
            sides[key] = side
            (w if side else e).add(o)
            counts["west" if side else "east"] += 1
    return counts


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def build(pbf: Path, out: Path, env: dict) -> None:
    if (out / "manifest.json").exists():
        return
    subprocess.run([PY, "-m", "geoengine", "build", str(pbf), "--out", str(out), "--quiet", "--no-warm"], env=env,
                   check=True)


def route_points(bundle: Path, env: dict) -> list[dict]:
    """Two junctions of the car network's largest component (from a child process: this one stays small)."""
    code = ("import json, sys, numpy as np, geoengine\n"
            "e = geoengine.open(sys.argv[1]); net = e.network('auto')\n"
            "ids = np.flatnonzero(net.in_component); a, b = ids[len(ids) // 3], ids[2 * len(ids) // 3]\n"
            "print(json.dumps([{'lon': float(net.lon[i]), 'lat': float(net.lat[i])} for i in (a, b)]))")
    out = subprocess.run([PY, "-c", code, str(bundle)], env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def vm_hwm_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def serve_once(bundle: Path, env: dict, headers: dict, locs: list[dict], query: str) -> dict:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    t0 = time.perf_counter()
    proc = subprocess.Popen([PY, "-m", "geoengine", "serve", "--bundle", str(bundle), "--port", str(port),
                             "--workers", "1", "--no-access-log"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    body = json.dumps({"locations": locs, "costing": "auto"}).encode()
    try:
        t_route = None
        while t_route is None:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited: {proc.stderr.read().decode()[-2000:]}")
            try:
                req = urllib.request.Request(base + "/route", data=body, method="POST",
                                             headers={**headers, "Content-Type": "application/json"})
                with urllib.request.urlopen(req, timeout=120) as r:
                    if r.status == 200:
                        r.read()
                        t_route = time.perf_counter() - t0
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.02)
        req = urllib.request.Request(base + "/search?" + urllib.parse.urlencode({"q": query}), headers=headers)
        with urllib.request.urlopen(req, timeout=120) as r:
            found = len(json.loads(r.read()).get("results", []))
        t_search = time.perf_counter() - t0
        rss = vm_hwm_kb(proc.pid)
        return {"spawn_to_route_s": round(t_route, 3), "spawn_to_search_s": round(t_search, 3),
                "peak_rss_mb": round(rss / 1024, 1), "search_results": found}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


IN_PROCESS = r"""
import json, resource, sys, time
t00 = time.perf_counter()
import geoengine
locs, query, warm = json.loads(sys.argv[2]), sys.argv[3], sys.argv[4] == "warm"
t0 = time.perf_counter()
e = geoengine.open(sys.argv[1])
if warm:
    e.warm()  # what the server does before it accepts requests
t1 = time.perf_counter()
e.route(locations=locs)
t2 = time.perf_counter()
e.search(query)
t3 = time.perf_counter()
print(json.dumps({"open_warm_s": round(t1 - t0, 3), "first_route_s": round(t2 - t1, 4),
                  "first_search_s": round(t3 - t2, 4), "open_to_answers_s": round(t3 - t0, 3),
                  "import_to_answers_s": round(t3 - t00, 3),
                  "grid_mb": round(e.router.snapper.grid.nbytes / 2**20, 2),
                  "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}))
"""


def in_process(bundle: Path, env: dict, locs: list[dict], query: str, warm: bool = True) -> dict:
    out = subprocess.run([PY, "-c", IN_PROCESS, str(bundle), json.dumps(locs), query, "warm" if warm else "cold"],
                         env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default=str(ROOT / "benchmarks" / "results" / "far_apart"),
                    help="folder for the split extracts, the bundles and the home (kept between runs)")
    ap.add_argument("--src", default=str(SRC), help="the two-part extract (default: Nominatim's test extract)")
    ap.add_argument("--runs", type=int, default=3, help="server starts per bundle (median reported)")
    args = ap.parse_args()

    from geoengine.config import Settings
    from geoengine.gateway import KeyStore

    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    home = work / "home"
    settings = Settings(home=home, gateway_host=HOST)
    key, _ = KeyStore(settings.state).create("unlimited", "bench")
    env = {**os.environ, **settings.to_env(), "PYTHONPATH": str(ROOT), "GEOENGINE_LOG_LEVEL": "warning"}
    headers = {"X-Gateway-Key": key, "X-Gateway-Host": HOST}

    src = Path(args.src)
    west, east = work / "west.osm.pbf", work / "east.osm.pbf"
    if not (west.exists() and east.exists()):
        print("split:", split_extract(src, west, east))
    bundles = {"whole": work / "bundle-whole", "west": work / "bundle-west", "east": work / "bundle-east"}
    for name, pbf in (("whole", src), ("west", west), ("east", east)):
        t = time.perf_counter()
        build(pbf, bundles[name], env)
        subprocess.run([PY, "-m", "geoengine", "warm", "--quiet", str(bundles[name])], env=env, check=True)
        print(f"{name}: built and warmed in {time.perf_counter() - t:.1f}s")
    # the first /route of the whole goes to Alabama (west), a part's /route to its own roads
    pts = {name: route_points(path, env) for name, path in bundles.items()}
    queries = {"whole": "Vaduz", "west": "Prattville", "east": "Vaduz"}
    rows = {}
    print(f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores (the machine may be shared)")
    for name, path in bundles.items():
        runs = [serve_once(path, env, headers, pts[name], queries[name]) for _ in range(args.runs)]
        inp = [in_process(path, env, pts[name], queries[name]) for _ in range(args.runs)]
        cold = [in_process(path, env, pts[name], queries[name], warm=False) for _ in range(args.runs)]
        med = {k: sorted(r[k] for r in runs)[len(runs) // 2] for k in runs[0]}
        med.update({k: sorted(r[k] for r in inp)[len(inp) // 2] for k in inp[0] if k != "peak_rss_mb"})
        # the library as a notebook uses it: import, open and the first /route and /search, no warm
        med["library_open_to_answers_s"] = sorted(r["import_to_answers_s"] for r in cold)[len(cold) // 2]
        med["in_process_peak_rss_mb"] = sorted(r["peak_rss_mb"] for r in inp)[len(inp) // 2]
        rows[name] = med
        print(f"{name:5s} " + "  ".join(f"{k}={v}" for k, v in med.items()))
    parts_rss = rows["west"]["peak_rss_mb"] + rows["east"]["peak_rss_mb"]
    parts_grid = rows["west"]["grid_mb"] + rows["east"]["grid_mb"]
    print(f"whole vs parts: server peak RSS {rows['whole']['peak_rss_mb']} MB vs {parts_rss:.1f} MB "
          f"({rows['whole']['peak_rss_mb'] / parts_rss:.2f}x; target <= 1.2x); snapping grid "
          f"{rows['whole']['grid_mb']} MB vs {parts_grid:.2f} MB; import+open+first /route+/search "
          f"{rows['whole']['library_open_to_answers_s']} s in a fresh interpreter (the library, no warm), "
          f"open+warm+first /route+/search {rows['whole']['open_to_answers_s']} s in process, first /route {rows['whole']['spawn_to_route_s']} s "
          f"and /search {rows['whole']['spawn_to_search_s']} s after spawning the server (target < 2 s)")
    (work / "result.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
