"""Serving throughput over HTTP against peers, in the same run, on one region (default Andorra).

wrk on loopback, bounded runs, concurrency 1/16/64, with 1 and 2 `geoengine serve` workers (the full
façade: gateway, key on the unlimited plan, access log off). For every point: req/s, p50/p99 and the
server's CPU per request (user + system time of the server's processes over the run / requests).

    tiles-session  THE HEADLINE TILE ROW (benchmarks/tiles_session_bench.py, run first, at the
                 concurrencies 16 and 64 among --concurrency): the tile requests of the map page
                 recorded in Chromium while a user pans and zooms (benchmarks/data/tile_sessions.json),
                 replayed with the browser's headers, each connection its own session, against
                 `geoengine serve` as users start it (default settings, access log on) and nginx on the
                 same tiles; the page's session cookie and, second, a gateway key
    tiles        (secondary) every real tile URL of the archive repeated byte for byte, Accept-Encoding: gzip
                 peers: nginx (Debian) serving the same gzip bytes as files (as many workers);
                        tileserver-gl-light (npm) on the same .mbtiles (one process)
    tiles-distinct  the same, each request with its own X-Request-Id header: no request is the same
                 bytes as another (the server remembers nothing by request bytes since issue 27: kept
                 as a check that the two rows agree); nginx the same way
    autocomplete GET /search?q=<prefix> over prefixes of real place names of the region
    reverse      GET /search/reverse at random points of the road network
    autocomplete-computed, reverse-computed  the same, each query string made unique (`&_=N`, a
                 parameter the search ignores): the search answer cache (server/answers.py) never
                 applies, every answer is computed
    elevation    GET /elevation?lat=..&lon=.. at the same points
    route        POST /route, auto, directions_type none, over point pairs that both engines answer
                 peer: osrm-routed --algorithm ch -t <workers> on the same extract (the osrm-bindings
                       peer venv of route_bench.py: benchmarks/.peers/venv), GET /route/v1/driving
    route-osrm-api  geoengine's OSRM dialect on osrm-routed's own requests (GET /route/v1/driving/
                 {a};{b}?overview=false, the same pairs); peer: the osrm-routed row of `route`
    matrix       POST /matrix 100x100 once, best of 3, against osrm-routed's /table (same points)

    python benchmarks/serve_bench.py --region andorra --duration 5
    python benchmarks/serve_bench.py --only tiles,route --workers 2 --concurrency 16,64

The machine is usually shared: runs are interleaved per point (geoengine, then its peer) and each
figure is the best of --repeat runs; read the ratios, not the absolute numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from tiles_bench import (  # noqa: E402
    ensure_apt,
    ensure_tileserver,
    free_port,
    region_bundle,
    serve_nginx,
    serve_tileserver,
    stop,
    tile_list,
    wait_http,
    write_static,
)

PY = sys.executable
OSRM_VENV = ROOT / "benchmarks" / ".peers" / "venv"
HOST = "bench.local"


# ------------------------------------------------------------------------------------------ wrk
def lua_script(requests: list[tuple[str, str, str | None]], headers: dict, distinct: bool = False,
               bust: bool = False) -> str:
    """wrk script cycling over (method, path, body) with fixed headers; `distinct`: each request also
    carries its own `X-Request-Id`, so no two requests are the same bytes (as a client that numbers its
    requests); `bust`: each path also
    ends with its own `&_=N` (a parameter the search ignores), so no query string repeats and the
    search answer cache (server/answers.py) never applies."""
    def lua_str(s: str) -> str:
        return "[==[" + s + "]==]"

    items = ", ".join(f"{{{lua_str(m)}, {lua_str(p)}, {lua_str(b) if b else 'nil'}}}" for m, p, b in requests)
    hdr = "\n".join(f'wrk.headers["{k}"] = "{v}"' for k, v in headers.items())
    return f"""
local reqs = {{{items}}}
local n = #reqs
local i = 0
{hdr}
request = function()
  i = i + 1
  local r = reqs[(i % n) + 1]
  {"local h = {} for k, v in pairs(wrk.headers) do h[k] = v end h['X-Request-Id'] = tostring(i) .. '-' .. tostring(math.random(1, 1000000000))" if distinct else "local h = nil"}
  return wrk.format(r[1], {"r[2] .. '&_=' .. tostring(i)" if bust else "r[2]"}, h, r[3])
end
"""


def cpu_seconds(pids: list[int]) -> float:
    """User + system seconds of these processes and their children (workers)."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    seen = set()
    todo = list(pids)
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
            todo += [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
        except (OSError, IndexError, ValueError):
            continue
    return total


def run_wrk(base: str, script: str, conc: int, duration: float, workdir: Path, pids: list[int],
            threads: int | None = None) -> dict:
    """wrk with the Lua `script` at `conc` connections (`threads`: 1 at one connection, else 2), and the
    CPU the processes `pids` (and their children) used meanwhile; serve_bench and tiles_session_bench."""
    lua = workdir / f"wrk-{abs(hash(script)) % 10**8}.lua"
    lua.write_text(script)
    threads = threads or (1 if conc == 1 else 2)
    cmd = ["wrk", f"-t{threads}", f"-c{conc}", f"-d{max(1, int(duration))}s", "--latency", "--timeout", "5s",
           "-s", str(lua), base]
    c0 = cpu_seconds(pids)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 120)
    c1 = cpu_seconds(pids)
    out = p.stdout
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if not m:
        raise RuntimeError(f"wrk failed: {p.stderr[-800:]} {out[-800:]}")
    rps = float(m.group(1))
    n = int(re.search(r"(\d+) requests in", out).group(1))
    lat = {}
    for pct, val, unit in re.findall(r"^\s+(50|75|90|99)%\s+([\d.]+)(us|ms|s)\s*$", out, re.M):
        lat[pct] = float(val) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[unit]
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    sockerr = re.search(r"Socket errors: (.*)", out)
    return {"rps": rps, "requests": n, "p50_ms": lat.get("50"), "p99_ms": lat.get("99"),
            "cpu_ms_per_req": (c1 - c0) * 1e3 / n if n else None,
            "non2xx": int(errors.group(1)) if errors else 0, "socket_errors": sockerr.group(1) if sockerr else ""}


# -------------------------------------------------------------------------------------- servers
def serve_geoengine(bundle: Path, home: Path, workers: int, key: str):
    from geoengine.config import Settings

    settings = Settings(home=home, gateway_host=HOST)
    port = free_port()
    env = {**os.environ, **settings.to_env(), "PYTHONPATH": str(ROOT), "GEOENGINE_LOG_LEVEL": "warning"}
    proc = subprocess.Popen([PY, "-m", "geoengine.cli", "serve", "--bundle", str(bundle), "--port", str(port),
                             "--workers", str(workers), "--no-access-log"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    headers = {"X-Gateway-Key": key, "X-Gateway-Host": HOST}
    ok = wait_http(f"http://127.0.0.1:{port}/health", headers, timeout=600)
    return proc, f"http://127.0.0.1:{port}", headers, ok


def osrm_prepare(pbf: Path, workdir: Path) -> tuple[Path | None, str]:
    """osrm-extract + osrm-contract (car profile) with the peer venv's binaries."""
    py = OSRM_VENV / "bin" / "python"
    if not py.exists():
        return None, f"{py} missing (python -m venv {OSRM_VENV} && {OSRM_VENV}/bin/pip install osrm-bindings)"
    base = subprocess.run([str(py), "-c", "import osrm, os; print(os.path.dirname(osrm.__file__))"],
                          capture_output=True, text=True)
    if base.returncode:
        return None, "import osrm failed in the peer venv"
    osrm = Path(base.stdout.strip())
    (workdir / "osrm").mkdir(exist_ok=True)
    dst = workdir / "osrm" / "region.osm.pbf"
    shutil.copyfile(pbf, dst)
    for cmd in ([str(osrm / "bin/osrm-extract"), "-p", str(osrm / "share/profiles/car.lua"), str(dst)],
                [str(osrm / "bin/osrm-contract"), str(workdir / "osrm" / "region.osrm")]):
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode:
            return None, f"{Path(cmd[0]).name} failed: {p.stderr[-300:]}"
    return osrm / "bin" / "osrm-routed", ""


def serve_osrm(routed: Path, data: Path, threads: int):
    port = free_port()
    proc = subprocess.Popen([str(routed), "--algorithm", "ch", "-t", str(threads), "-i", "127.0.0.1", "-p", str(port),
                             "--max-table-size", "1000", str(data)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    ok = wait_http(base + "/route/v1/driving/1.52,42.50;1.53,42.51?overview=false", timeout=60)
    return proc, base, ok


# ---------------------------------------------------------------------------------- workloads
def route_pairs(bundle: Path, n: int, seed: int, osrm_base: str | None):
    """Point pairs on the car network that geoengine routes (and osrm-routed too, when running)."""
    from route_bench import random_points

    import geoengine

    engine = geoengine.open(bundle)
    pts = random_points(engine, 4 * n, seed)
    pairs = []
    for i in range(0, len(pts) - 1, 2):
        a = {"lon": round(float(pts[i, 0]), 6), "lat": round(float(pts[i, 1]), 6)}
        b = {"lon": round(float(pts[i + 1, 0]), 6), "lat": round(float(pts[i + 1, 1]), 6)}
        try:
            engine.route(locations=[a, b], directions_options={"directions_type": "none"})
        except Exception:
            continue
        if osrm_base:
            url = f"{osrm_base}/route/v1/driving/{a['lon']},{a['lat']};{b['lon']},{b['lat']}?overview=false"
            try:
                with urllib.request.urlopen(url, timeout=10) as r:
                    if json.loads(r.read())["code"] != "Ok":
                        continue
            except Exception:
                continue
        pairs.append((a, b))
        if len(pairs) == n:
            break
    return engine, pts, pairs


def search_requests(engine, pts) -> dict[str, list[tuple[str, str, None]]]:
    names = []
    for q in ("andorra", "encamp", "canillo", "ordino", "escaldes", "sant julia", "la massana", "pas de la casa",
              "carrer", "avinguda", "hotel", "restaurant", "pic de", "riu", "port", "font"):
        names.append(q)
    prefixes = sorted({n[:k] for n in names for k in (3, 5, len(n))})
    auto = [("GET", "/search?" + urllib.parse.urlencode({"q": p, "size": 10}), None) for p in prefixes]
    rev = [("GET", f"/search/reverse?lat={lat:.6f}&lon={lon:.6f}", None) for lon, lat in pts[:200]]
    elev = [("GET", f"/elevation?lat={lat:.6f}&lon={lon:.6f}", None) for lon, lat in pts[:200]]
    return {"autocomplete": auto, "reverse": rev, "elevation": elev}


def time_once(fn, repeat=3) -> float:
    best = 1e9
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def post_json(url: str, body: dict, headers: dict) -> bytes:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={**headers, "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return r.read()


def get(url: str, headers: dict | None = None) -> bytes:
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=120) as r:
        return r.read()


# ------------------------------------------------------------------------------------------ main
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--region", default="andorra")
    ap.add_argument("--duration", type=float, default=5.0, help="seconds per wrk run")
    ap.add_argument("--concurrency", default="1,16,64")
    ap.add_argument("--workers", default="1,2", help="geoengine worker counts to run (peers use as many)")
    ap.add_argument("--repeat", type=int, default=1, help="wrk runs per point; the best is reported")
    ap.add_argument("--only", default="tiles-session,tiles,autocomplete,reverse,elevation,route,matrix")
    ap.add_argument("--pairs", type=int, default=56, help="route pairs")
    ap.add_argument("--tileserver", help="folder where `npm install tileserver-gl-light` was run")
    ap.add_argument("--no-tileserver", action="store_true")
    ap.add_argument("--no-osrm", action="store_true")
    ap.add_argument("--no-install", action="store_true", help="do not install missing peers")
    ap.add_argument("--pbf", help="the extract osrm-routed is prepared from (that of --bundle; default the "
                    "region's), e.g. a 16-copy extract of ../shared/tools/replicate_extract.py")
    ap.add_argument("--bundle", help="serve this bundle of --region instead of building one into a temporary folder")
    ap.add_argument("--json", help="write the figures here")
    args, _ = ap.parse_known_args()
    only = set(args.only.split(","))
    conc = [int(c) for c in args.concurrency.split(",")]
    worker_counts = [int(w) for w in args.workers.split(",")]
    if not args.no_install:
        ensure_apt({"wrk": "wrk", "nginx": "nginx-light"})
        if "tiles" in only and not args.tileserver and not args.no_tileserver:
            folder, why = ensure_tileserver()
            args.tileserver = str(folder) if folder else None
            if why:
                print(f"tileserver-gl-light: {why}")
    if not shutil.which("wrk"):
        print("wrk is not installed (apt-get install wrk)")
        return 1

    from geoengine.bundler.fetch import fetch_region
    from geoengine.config import Settings
    from geoengine.gateway import KeyStore

    rows: list[dict] = []
    extra: dict = {}
    print(f"serve_bench: {args.region}, {args.duration:g}s per run, concurrency {conc}, workers {worker_counts}, "
          f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f} (the machine may be shared)")
    with tempfile.TemporaryDirectory(prefix="serve-bench-") as tmp:
        work = Path(tmp)
        work.chmod(0o755)  # nginx workers run as an unprivileged user
        home = work / "home"
        bundle = Path(args.bundle).resolve() if args.bundle else region_bundle(args.region, home)
        settings = Settings(home=home, data_mirror=str((ROOT.parent / "shared" / "data").resolve()))
        key, _ = KeyStore(settings.state).create("unlimited", "bench")
        pbf = Path(args.pbf) if args.pbf else Path(fetch_region(args.region, settings)["osm"][0])

        routed = None
        if ({"route", "matrix"} & only) and not args.no_osrm:
            routed, why = osrm_prepare(pbf, work)
            if routed is None:
                print(f"osrm-routed: skipped ({why})")
        probe = serve_osrm(routed, work / "osrm" / "region.osrm", 1) if routed else (None, None, False)
        try:
            engine, pts, pairs = route_pairs(bundle, args.pairs, 11, probe[1] if probe[2] else None)
        finally:
            stop(probe[0])
        print(f"{len(pairs)} route pairs that both engines answer" if routed else f"{len(pairs)} route pairs")
        if "tiles-session" in only:  # the headline tile figure: recorded map sessions, default server
            session_conc = ",".join(str(c) for c in conc if c > 1) or "16,64"
            cmd = [PY, str(ROOT / "benchmarks" / "tiles_session_bench.py"), "--bundle", str(bundle),
                   "--duration", str(args.duration), "--repeat", str(args.repeat),
                   "--concurrency", session_conc]
            if args.json:
                cmd += ["--json", str(Path(args.json).with_suffix(".session.json"))]
            print("tiles-session (headline):", " ".join(cmd[1:]), flush=True)
            subprocess.run(cmd, env={**os.environ, "PYTHONPATH": str(ROOT)})
        mbtiles = next((bundle / "tiles").glob("*.mbtiles"))
        source = mbtiles.stem
        tiles = tile_list(mbtiles)
        workloads = {
            "tiles": [("GET", f"/tiles/{source}/{z}/{x}/{y}", None) for z, x, y in tiles],
            **search_requests(engine, pts),
            "route": [("POST", "/route", json.dumps({"locations": [a, b], "costing": "auto",
                                                     "directions_options": {"directions_type": "none"}}))
                      for a, b in pairs],
        }
        osrm_paths = [("GET", f"/route/v1/driving/{a['lon']},{a['lat']};{b['lon']},{b['lat']}?overview=false", None)
                      for a, b in pairs]
        table_pts = pts[:100]
        del engine

        def record(kind, peer, workers, base, reqs, headers, pids, distinct=False, bust=False):
            script = lua_script(reqs, {"Accept-Encoding": "gzip", **headers}, distinct=distinct, bust=bust)
            run_wrk(base, script, 4, 1, work, pids)  # warm-up: caches, lazily compiled kernels
            for c in conc:
                runs = [run_wrk(base, script, c, args.duration, work, pids) for _ in range(args.repeat)]
                r = max(runs, key=lambda run: run["rps"])
                r.update(kind=kind, peer=peer, workers=workers, concurrency=c)
                rows.append(r)
                cpu = f"{r['cpu_ms_per_req']:.3f}" if r["cpu_ms_per_req"] is not None else "-"
                print(f"  {kind:<12} {peer:<20} w={workers} c={c:<3} {r['rps']:>9.0f} req/s  p50 {r['p50_ms']:7.2f} ms"
                      f"  p99 {r['p99_ms']:7.2f} ms  cpu {cpu} ms/req  non-2xx {r['non2xx']} {r['socket_errors']}",
                      flush=True)

        for workers in (worker_counts if only - {"tiles-session"} else []):
            proc, base, headers, ok = serve_geoengine(bundle, home, workers, key)
            try:
                if not ok:
                    print("geoengine did not start:", proc.stderr.read().decode()[-800:] if proc.stderr else "")
                    continue
                for z, x, y in tiles:  # warm the tile cache of the worker that answers
                    get(f"{base}/tiles/{source}/{z}/{x}/{y}", headers)
                for kind in ("tiles", "autocomplete", "reverse", "elevation", "route"):
                    if kind in only:
                        record(kind, "geoengine", workers, base, workloads[kind], headers, [proc.pid])
                    if kind == "tiles" and "tiles" in only:  # no request repeated byte for byte
                        record("tiles-distinct", "geoengine", workers, base, workloads[kind], headers, [proc.pid],
                               distinct=True)
                    if kind == "route" and "route" in only:  # the OSRM dialect: osrm-routed's own requests
                        record("route-osrm-api", "geoengine", workers, base, osrm_paths, headers, [proc.pid])
                    if kind in ("autocomplete", "reverse") and kind in only:  # no query string repeated
                        record(f"{kind}-computed", "geoengine", workers, base, workloads[kind], headers, [proc.pid],
                               bust=True)
                if "matrix" in only:
                    locs = [{"lon": float(x), "lat": float(y)} for x, y in table_pts]
                    body = {"sources": locs, "targets": locs, "costing": "auto"}
                    post_json(base + "/matrix", body, headers)
                    extra[f"geoengine_matrix100_s_w{workers}"] = time_once(
                        lambda b=base, body=body, h=headers: post_json(b + "/matrix", body, h))
                    print(f"  matrix 100x100 geoengine w={workers}: {extra[f'geoengine_matrix100_s_w{workers}'] * 1e3:.1f} ms")
            finally:
                stop(proc)

            if "tiles" in only and shutil.which("nginx"):
                root = work / "nginx-root"
                if not root.exists():
                    write_static(mbtiles, root, source)
                nproc, nbase, nok = serve_nginx(root, source, work, workers)
                try:
                    if nok:
                        nginx_tiles = [("GET", p + ".pbf", None) for _, p, _ in workloads["tiles"]]
                        record("tiles", "nginx", workers, nbase, nginx_tiles, {}, [nproc.pid])
                        record("tiles-distinct", "nginx", workers, nbase, nginx_tiles, {}, [nproc.pid], distinct=True)
                finally:
                    stop(nproc)
            if ({"route", "matrix"} & only) and routed:
                oproc, obase, ook = serve_osrm(routed, work / "osrm" / "region.osrm", workers)
                try:
                    if ook and "route" in only:
                        record("route", "osrm-routed", workers, obase, osrm_paths, {}, [oproc.pid])
                        # the same requests as route-osrm-api: its peer row is this measurement
                        rows.extend({**r, "kind": "route-osrm-api"} for r in list(rows)
                                    if r["kind"] == "route" and r["peer"] == "osrm-routed" and r["workers"] == workers)
                    if ook and "matrix" in only:
                        coords = ";".join(f"{x:.6f},{y:.6f}" for x, y in table_pts)
                        url = f"{obase}/table/v1/driving/{coords}?annotations=duration,distance"
                        get(url)
                        extra[f"osrm_table100_s_w{workers}"] = time_once(lambda u=url: get(u))
                        print(f"  matrix 100x100 osrm-routed /table t={workers}: "
                              f"{extra[f'osrm_table100_s_w{workers}'] * 1e3:.1f} ms")
                finally:
                    stop(oproc)
        if "tiles" in only and args.tileserver and not args.no_tileserver:
            tproc, tbase, why = serve_tileserver(Path(args.tileserver), mbtiles, work)
            try:
                if tproc:
                    record("tiles", "tileserver-gl-light", 1, tbase,
                           [("GET", f"/data/{source}/{z}/{x}/{y}.pbf", None) for z, x, y in tiles], {}, [tproc.pid])
                else:
                    print(f"  tileserver-gl-light: skipped ({why})")
            finally:
                stop(tproc)

    print("\nratios (geoengine / peer, req/s, same workers):")
    by = {(r["kind"], r["peer"], r["workers"], r["concurrency"]): r for r in rows}
    for (kind, peer, w, c), r in sorted(by.items()):
        if peer == "geoengine":
            continue
        ge = by.get((kind, "geoengine", w, c)) or by.get((kind, "geoengine", max(worker_counts), c))
        if ge and r["rps"]:
            p99 = f"; p99 {ge['p99_ms'] / r['p99_ms']:.2f}x" if r.get("p99_ms") else ""
            print(f"  {kind:<6} c={c:<3} w={w}: geoengine / {peer} = {ge['rps'] / r['rps']:.2f}x{p99}")
    for w in worker_counts:
        g, o = extra.get(f"geoengine_matrix100_s_w{w}"), extra.get(f"osrm_table100_s_w{w}")
        if g and o:
            print(f"  matrix 100x100 w={w}: geoengine / osrm-routed time = {g / o:.2f}x")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, **extra}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
