"""geoengine vs Nominatim over HTTP on the same extract, the same query set and the same client.

Nominatim is a benchmark peer only (not a dependency). Set it up once (Debian postgresql-15-postgis-3
and osm2pgsql, PyPI nominatim-db and nominatim-api in their own venv), import the same extract and
serve it, e.g.:

    nominatim import --osm-file ../shared/data/liechtenstein/valhalla-liechtenstein-latest.osm.pbf --no-updates
    nominatim serve --server 127.0.0.1:8088

then run

    python benchmarks/search_vs_nominatim.py --region liechtenstein --nominatim http://127.0.0.1:8088

The script builds (or opens, --bundle) the geoengine bundle, starts `geoengine serve` on a free port
with a fresh API key, and sends both servers the same requests with one httpx client. Query set: the
OSM documents' names (see benchmarks/search_quality.py: full, prefix3, typo1, no_accent, english);
a hit is a result of the same normalised name within 1 km of the expected document, or, for a
house-number address, any result within 30 m. Throughput: `--concurrency` Python threads, each with
its own httpx client, sending autocomplete queries for `--seconds` (the client's CPU limits this on a
small machine), then, when `wrk` is installed, wrk with the same request paths for both servers, for
autocomplete and reverse, with 1 and `--concurrency` connections.

geoengine serve keeps search answers by query string (server/answers.py): wrk cycles over a few
hundred query strings, so after the first pass geoengine answers from that cache. The wrk rows
marked "computed" make every query string unique (`&_=N`, a parameter the search ignores): there
every answer is computed, which is what a query never asked before costs.
"""

from __future__ import annotations

import argparse
import math
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import search_quality as sq  # noqa: E402

from geoengine.search.text import normalise  # noqa: E402


def dist_m(a_lat, a_lon, b_lat, b_lon) -> float:
    p1, p2 = math.radians(a_lat), math.radians(b_lat)
    h = math.sin((p2 - p1) / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(math.radians(b_lon - a_lon) / 2) ** 2
    return 2 * 6371008.8 * math.asin(math.sqrt(min(1.0, h)))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def geo_results(client, base, q, bias=None):
    params = {"q": q, "size": 5}
    if bias:
        params.update(lat=bias[0], lon=bias[1])
    r = client.get(f"{base}/search", params=params)
    r.raise_for_status()
    return [(x["name"] or "", x["location"]["lat"], x["location"]["lon"]) for x in r.json()["results"]]


def nom_results(client, base, q, bias=None):
    r = client.get(f"{base}/search", params={"q": q, "format": "jsonv2", "limit": 5})
    r.raise_for_status()
    return [(x.get("name") or "", float(x["lat"]), float(x["lon"])) for x in r.json()]


def hit(res, name, lat, lon, is_address) -> list[bool]:
    out = []
    for n, a, b in res:
        d = dist_m(lat, lon, a, b)
        out.append((normalise(n) == normalise(name) and d <= 1000) or (is_address and d <= 30))
    return out


def timed(fn, n):
    t = []
    for args in n:
        t0 = time.perf_counter()
        fn(*args)
        t.append(time.perf_counter() - t0)
    return np.array(t) * 1000


def throughput(make_request, queries, concurrency, seconds) -> float:
    stop = time.perf_counter() + seconds
    counts = [0] * concurrency

    def worker(k):
        with httpx.Client(timeout=30) as c:
            i = k
            while time.perf_counter() < stop:
                make_request(c, queries[i % len(queries)])
                counts[k] += 1
                i += concurrency

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(concurrency)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts) / (time.perf_counter() - t0)


WRK_LUA = """
local paths = {}
for line in io.lines(os.getenv("WRK_PATHS")) do paths[#paths + 1] = line end
local i = 0
for k, v in string.gmatch(os.getenv("WRK_HEADERS") or "", "([^=;]+)=([^;]*)") do wrk.headers[k] = v end
local bust = os.getenv("WRK_BUST") == "1"
local n = 0
request = function()
  i = i % #paths + 1
  n = n + 1
  if bust then return wrk.format("GET", paths[i] .. "&_=" .. n) end
  return wrk.format("GET", paths[i])
end
done = function(summary, latency, requests)
  io.write(string.format("WRKSTATS %d %d %.3f %.3f\\n", summary.requests,
    summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.timeout,
    latency:percentile(50) / 1000, latency:percentile(95) / 1000))
end
"""


def wrk_run(base: str, paths: list[str], headers: dict, connections: int, seconds: float,
            bust: bool = False) -> tuple[float, float, float, int]:
    """(requests/s, p50 ms, p95 ms, errors) from wrk cycling through `paths` (Debian package `wrk`);
    `bust`: each request's query string ends with its own number (`&_=N`, a parameter the search
    ignores), so no query string repeats and geoengine's answer cache never applies."""
    import re
    import shutil

    with tempfile.TemporaryDirectory() as tmp:
        lua, plist = Path(tmp) / "paths.lua", Path(tmp) / "paths.txt"
        lua.write_text(WRK_LUA)
        plist.write_text("".join(p + "\n" for p in paths))
        env = {**os.environ, "WRK_PATHS": str(plist), "WRK_HEADERS": ";".join(f"{k}={v}" for k, v in headers.items()),
               "WRK_BUST": "1" if bust else "0"}
        out = subprocess.run([shutil.which("wrk"), f"-t{min(2, connections)}", f"-c{connections}", f"-d{seconds:g}s",
                              "-s", str(lua), base], env=env, capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    _, n, errors, p50, p95 = re.search(r"WRKSTATS (\d+) (\d+) ([\d.]+) ([\d.]+)", out).group(0).split()
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return rps, float(p50), float(p95), int(errors) + (int(non2xx.group(1)) if non2xx else 0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--region", default="liechtenstein")
    ap.add_argument("--bundle")
    ap.add_argument("--nominatim", default="http://127.0.0.1:8088")
    ap.add_argument("--per-kind", type=int, default=100)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--skip-quality", action="store_true", help="only latency and throughput")
    args = ap.parse_args()
    try:
        httpx.get(f"{args.nominatim}/status", timeout=5)
    except httpx.TransportError:
        print(f"Nominatim is not reachable at {args.nominatim}: comparison skipped (see the module docstring)")
        return
    import geoengine
    from geoengine.config import Settings
    from geoengine.gateway import KeyStore

    home = Path(tempfile.mkdtemp(prefix="ge-bench-nom-"))
    settings = Settings(home=home, data_mirror=str(Path(__file__).resolve().parents[2] / "shared" / "data"),
                        gateway_host="bench.local")
    if args.bundle:
        bundle = Path(args.bundle)
    else:
        from geoengine.bundler.pipeline import build, default_out, resolve_inputs
        from geoengine.progress import NullProgress

        inputs = resolve_inputs(args.region, settings)
        bundle = build(inputs, default_out(inputs, settings), settings, progress=NullProgress())
    engine = geoengine.open(bundle, settings=settings)
    ix = engine.search_index
    bbox = engine.bbox
    centre = ((bbox[1] + bbox[3]) / 2, (bbox[0] + bbox[2]) / 2)
    key, _ = KeyStore(settings.state).create("unlimited", "bench")
    port = free_port()
    env = {**os.environ, **settings.to_env()}
    server = subprocess.Popen([sys.executable, "-m", "geoengine", "serve", "--bundle", str(bundle), "--port", str(port),
                               "--no-access-log"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    geo = f"http://127.0.0.1:{port}"
    headers = {"X-Gateway-Key": key, "X-Gateway-Host": settings.gateway_host}
    try:
        with httpx.Client(timeout=30, headers=headers) as gc, httpx.Client(timeout=30) as nc:
            for _ in range(100):
                try:
                    if gc.get(f"{geo}/health").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                time.sleep(0.2)
            else:
                raise SystemExit(f"geoengine serve did not start: {server.stderr.read().decode()[-2000:]}")
            queries = [q for q in sq.build_queries(ix, args.per_kind) if q[0].startswith("osm") and len(q[2].strip()) >= 2]
            stats = {}
            for _, kind, q, row in ([] if args.skip_quality else queries):
                name, lat, lon = ix.cols["name"][row], float(ix.lat[row]), float(ix.lon[row])
                is_addr = ix.cols["index"][row] == "addresses"
                for peer, fn in (("geoengine", lambda q: geo_results(gc, geo, q)),
                                 ("geoengine+bias", lambda q: geo_results(gc, geo, q, centre)),
                                 ("nominatim", lambda q: nom_results(nc, args.nominatim, q))):
                    h = hit(fn(q), name, lat, lon, is_addr)
                    s = stats.setdefault((kind, peer), [0, 0, 0])
                    s[0] += 1
                    s[1] += bool(h[:1] and h[0])
                    s[2] += any(h)
            print(f"{len(queries)} queries from {bundle}\n")
            print(f"{'kind':<11}{'peer':<16}{'n':>5}{'top-1':>9}{'top-5':>9}")
            for kind in ("full", "prefix3", "typo1", "no_accent", "english"):
                for peer in ("geoengine", "geoengine+bias", "nominatim"):
                    s = stats.get((kind, peer))
                    if s:
                        print(f"{kind:<11}{peer:<16}{s[0]:>5}{100 * s[1] / s[0]:>8.1f}%{100 * s[2] / s[0]:>8.1f}%")
            auto = [q[2] for q in queries if q[1] == "prefix3"] or [q[2] for q in queries]
            rng = np.random.default_rng(1)
            rows = rng.choice(ix.n, 300)
            pts = [(float(ix.lat[r]) + 0.0005, float(ix.lon[r])) for r in rows
                   if bbox[0] <= ix.lon[r] <= bbox[2] and bbox[1] <= ix.lat[r] <= bbox[3]]
            lat_g = timed(lambda q: gc.get(f"{geo}/search", params={"q": q, "size": 5}), [(q,) for q in auto])
            lat_n = timed(lambda q: nc.get(f"{args.nominatim}/search", params={"q": q, "format": "jsonv2", "limit": 5}),
                          [(q,) for q in auto])
            rev_g = timed(lambda a, b: gc.get(f"{geo}/search/reverse", params={"lat": a, "lon": b}), pts)
            rev_n = timed(lambda a, b: nc.get(f"{args.nominatim}/reverse", params={"lat": a, "lon": b, "format": "jsonv2"}), pts)
            print(f"\nsequential HTTP latency (p50 / p95 ms): autocomplete geoengine {np.median(lat_g):.2f} / "
                  f"{np.percentile(lat_g, 95):.2f}, nominatim {np.median(lat_n):.2f} / {np.percentile(lat_n, 95):.2f}; "
                  f"reverse geoengine {np.median(rev_g):.2f} / {np.percentile(rev_g, 95):.2f}, "
                  f"nominatim {np.median(rev_n):.2f} / {np.percentile(rev_n, 95):.2f}")

            def g_req(c, q):
                c.get(f"{geo}/search", params={"q": q, "size": 5}, headers=headers)

            def n_req(c, q):
                c.get(f"{args.nominatim}/search", params={"q": q, "format": "jsonv2", "limit": 5})

            rps_g = throughput(g_req, auto, args.concurrency, args.seconds)
            rps_n = throughput(n_req, auto, args.concurrency, args.seconds)
            print(f"throughput, {args.concurrency} Python client threads (httpx; the client's own CPU limits this), "
                  f"autocomplete: geoengine {rps_g:.0f} req/s, nominatim {rps_n:.0f} req/s, ratio {rps_g / rps_n:.1f}x")
            import shutil

            if shutil.which("wrk"):
                enc = httpx.QueryParams
                g_auto = [f"/search?{enc({'q': q, 'size': 5})}" for q in auto]
                n_auto = [f"/search?{enc({'q': q, 'format': 'jsonv2', 'limit': 5})}" for q in auto]
                g_rev = [f"/search/reverse?{enc({'lat': a, 'lon': b})}" for a, b in pts]
                n_rev = [f"/reverse?{enc({'lat': a, 'lon': b, 'format': 'jsonv2'})}" for a, b in pts]
                print("\nwrk (C client, same paths for both; requests/s, p50 / p95 ms, errors):")
                for what, gp, nomp in (("autocomplete", g_auto, n_auto), ("reverse", g_rev, n_rev)):
                    for conns in (1, args.concurrency):
                        n = wrk_run(args.nominatim, nomp, {}, conns, args.seconds)
                        for bust in (False, True):
                            g = wrk_run(geo, gp, headers, conns, args.seconds, bust=bust)
                            label = f"{what} computed" if bust else what
                            print(f"  {label:<21} {conns} connection(s): geoengine {g[0]:.0f} req/s, {g[1]:.2f} / "
                                  f"{g[2]:.2f} ms, {g[3]} errors; nominatim {n[0]:.0f} req/s, {n[1]:.2f} / {n[2]:.2f} ms, "
                                  f"{n[3]} errors; ratio {g[0] / n[0]:.1f}x")
            else:
                print("wrk is not installed (apt-get install wrk): the C-client throughput comparison is skipped")
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    main()
