"""The Nominatim dialect against Nominatim 5 over HTTP, same extract, same request paths, wrk at 4 connections.

Nominatim is the benchmark peer installed, imported and served by `benchmarks/peers/nominatim.sh` (one
database per extract; `--nominatim` defaults to the URL that script gives the region). geoengine builds (or
opens, `--bundle`) the bundle of the same extract and runs `geoengine serve` on a free loopback port with a
fresh `unlimited` key. The requests are the bundle's own addresses:

- search: "<road> <house number>, <town>" for addresses the bundle holds, found by reverse geocoding
  (zoom 18) random points of the extract's settled area, `format=jsonv2&addressdetails=1&limit=5`;
- reverse: points 0-40 m from those addresses, `format=jsonv2&zoom=18`.

Both servers get the same paths (geoengine also needs its gateway headers). geoengine keeps answers by query
string (server/answers.py), so the rows marked "computed" append `&_=N` (a parameter both ignore) to make
every request new: that is what a query never asked before costs. Nominatim has no such cache (its
PostgreSQL keeps pages in memory either way). Prints requests/s, p50/p95 ms, errors and the ratios, and
writes benchmarks/results/geocode_dialects.json.

    PYTHONPATH=. .venv/bin/python benchmarks/geocode_dialects_bench.py --region liechtenstein --seconds 10
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from search_vs_nominatim import free_port, wrk_run  # noqa: E402

PEER_URLS = {"liechtenstein": "http://127.0.0.1:8088", "apidb": "http://127.0.0.1:8089",
             "andorra": "http://127.0.0.1:8090"}
EXTRACTS = {"apidb": "liechtenstein/nominatim-apidb-test-data.osm.pbf"}


def harvest(engine, n: int, seed: int = 7) -> list[tuple[float, float, str, str, str | None]]:
    """(lat, lon, house number, road, town) of up to `n` distinct addresses of the bundle: the zoom-18
    reverse answer of random points near random documents of the index."""
    ix = engine.search_index
    rng = np.random.default_rng(seed)
    out: dict[tuple, tuple] = {}
    for row in rng.choice(ix.n, min(ix.n, 40 * n), replace=False):
        lat, lon = float(ix.lat[row]) + rng.normal(0, 0.0003), float(ix.lon[row]) + rng.normal(0, 0.0003)
        for p in engine.reverse(lon=lon, lat=lat, zoom=18):
            a = p.address
            road = a.get("road")
            if p.housenumber and road:
                town = a.get("city") or a.get("town") or a.get("village") or a.get("municipality")
                out.setdefault((p.housenumber, road, town), (p.lat, p.lon, p.housenumber, road, town))
        if len(out) >= n:
            break
    return list(out.values())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--region", default="liechtenstein", help="liechtenstein, andorra or apidb (the peer's names)")
    ap.add_argument("--bundle", help="an existing bundle of the same extract")
    ap.add_argument("--nominatim", help="Nominatim's URL (default: benchmarks/peers/nominatim.sh's for the region)")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--connections", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--workers", type=int, default=1, help="geoengine serve worker processes (default 1)")
    args = ap.parse_args()
    nom = args.nominatim or PEER_URLS.get(args.region)
    if not shutil.which("wrk"):
        raise SystemExit("wrk is not installed (apt-get install wrk)")
    try:
        httpx.get(f"{nom}/status?format=json", timeout=5).raise_for_status()
    except (httpx.HTTPError, TypeError):
        raise SystemExit(f"Nominatim is not reachable at {nom}: run benchmarks/peers/nominatim.sh setup {args.region}") from None

    import geoengine
    from geoengine.config import Settings
    from geoengine.gateway import KeyStore

    data = Path(os.environ.get("GEOENGINE_DATA_MIRROR") or Path(__file__).resolve().parents[2] / "shared" / "data")
    home = Path(tempfile.mkdtemp(prefix="ge-bench-geocode-"))
    settings = Settings(home=home, data_mirror=str(data), gateway_host="bench.local")
    if args.bundle:
        bundle = Path(args.bundle)
    else:
        from geoengine.bundler.pipeline import build, default_out, resolve_inputs
        from geoengine.progress import NullProgress

        target = str(data / EXTRACTS[args.region]) if args.region in EXTRACTS else args.region
        inputs = resolve_inputs(target, settings)
        bundle = build(inputs, default_out(inputs, settings), settings, progress=NullProgress())
    engine = geoengine.open(bundle, settings=settings)
    addrs = harvest(engine, args.queries)
    rng = np.random.default_rng(3)
    enc = httpx.QueryParams
    search_paths = [f"/search?{enc({'q': f'{road} {num}' + (f', {town}' if town else ''), 'format': 'jsonv2', 'addressdetails': 1, 'limit': 5})}"
                    for _, _, num, road, town in addrs]
    rev_paths = []
    for lat, lon, *_ in addrs:
        d, b = rng.uniform(0, 40), rng.uniform(0, 2 * np.pi)
        rev_paths.append(f"/reverse?{enc({'lat': round(lat + d * np.cos(b) / 111_320, 7), 'lon': round(lon + d * np.sin(b) / (111_320 * np.cos(np.radians(lat))), 7), 'format': 'jsonv2', 'zoom': 18})}")

    key, _ = KeyStore(settings.state).create("unlimited", "bench")
    port = free_port()
    env = {**os.environ, **settings.to_env()}
    server = subprocess.Popen([sys.executable, "-m", "geoengine", "serve", "--bundle", str(bundle), "--port", str(port),
                               "--workers", str(args.workers), "--no-access-log"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    geo = f"http://127.0.0.1:{port}"
    headers = {"X-Gateway-Key": key, "X-Gateway-Host": settings.gateway_host}
    results = {"region": args.region, "bundle": str(bundle), "nominatim": nom, "addresses": len(addrs),
               "connections": args.connections, "seconds": args.seconds, "geoengine_workers": args.workers,
               "nominatim_workers": int(os.environ.get("NOMINATIM_WORKERS", "1")), "rows": []}
    try:
        with httpx.Client(timeout=60, headers=headers) as gc, httpx.Client(timeout=60) as nc:
            for _ in range(300):
                try:
                    if gc.get(f"{geo}/health").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                time.sleep(0.2)
            else:
                raise SystemExit(f"geoengine serve did not start: {server.stderr.read().decode()[-2000:]}")
            # one pass of each list first (both warm; also checks both answer 200 with a list/object)
            for paths, what in ((search_paths, "search"), (rev_paths, "reverse")):
                bad = 0
                for p in paths:
                    g, n = gc.get(geo + p), nc.get(nom + p)
                    bad += (g.status_code != 200) + (n.status_code != 200)
                print(f"{what}: {len(paths)} paths, {bad} non-200 answers in the warm-up pass")
            print(f"\nwrk, {args.connections} connections, {args.seconds:g} s each; geoengine serve --workers "
                  f"{args.workers}, Nominatim {results['nominatim_workers']} worker(s) + PostgreSQL "
                  f"({len(addrs)} addresses of {bundle.name}):")
            for what, paths in (("search", search_paths), ("reverse", rev_paths)):
                n = wrk_run(nom, paths, {}, args.connections, args.seconds)
                for bust in (False, True):
                    g = wrk_run(geo, paths, headers, args.connections, args.seconds, bust=bust)
                    label = f"{what} computed" if bust else what
                    row = {"what": label, "geoengine_rps": round(g[0], 1), "geoengine_p50_ms": g[1],
                           "geoengine_p95_ms": g[2], "geoengine_errors": g[3], "nominatim_rps": round(n[0], 1),
                           "nominatim_p50_ms": n[1], "nominatim_p95_ms": n[2], "nominatim_errors": n[3],
                           "ratio": round(g[0] / n[0], 1) if n[0] else None}
                    results["rows"].append(row)
                    print(f"  {label:<17} geoengine {g[0]:8.0f} req/s ({g[1]:.2f} / {g[2]:.2f} ms, {g[3]} errors)   "
                          f"nominatim {n[0]:6.0f} req/s ({n[1]:.2f} / {n[2]:.2f} ms, {n[3]} errors)   "
                          f"ratio {row['ratio']}x")
    finally:
        server.terminate()
        server.wait(20)
    out = Path(__file__).resolve().parent / "results" / "geocode_dialects.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=1))
    print(f"\n{out}")


if __name__ == "__main__":
    main()
