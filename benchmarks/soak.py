"""Soak: mixed route / matrix / search / tiles / elevation load against `geoengine serve --workers 2` on
loopback for a fixed time, bounded concurrency; reports errors, throughput and resident memory growth
of the server processes (from minute 2 to the end), and optionally sends SIGHUP mid-run (a reload of
the bundle, which must cost no failed request).

    python benchmarks/soak.py --bundle .geoengine/bundles/andorra --minutes 10 --hup-at 300

It is a benchmark, not a unit test: no peer runs here (the figures are absolute), and the machine it
runs on should be described with them. Exit status 1 when any request failed or memory grew 10% or more.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
HOST = "soak.test"
# Andorra: points on the road network and a search vocabulary
POINTS = [(1.5218, 42.5063), (1.5333, 42.5107), (1.5485, 42.5123), (1.6437, 42.5762), (1.5197, 42.5445), (1.4913, 42.4637), (1.5803, 42.5345),
          (1.7333, 42.5426), (1.5660, 42.5100), (1.5100, 42.4990)]
WORDS = ["andorra", "encamp", "canillo", "ordino", "escaldes", "sant julia", "pas de la casa", "la massana"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def children(pid: int) -> set[int]:
    """The direct child processes of `pid` (the server's workers)."""
    out: set[int] = set()
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            out.update(int(k) for k in (task / "children").read_text().split())
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        pass
    return out


def rss_kib(pid: int) -> int:
    """Resident memory of `pid` and all its descendants (KiB), from /proc."""
    total, todo, seen = 0, [pid], set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
            for child in Path(f"/proc/{p}/task").iterdir():
                kids = Path(f"/proc/{p}/task/{child.name}/children").read_text().split()
                todo.extend(int(k) for k in kids)
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return total


def one_request(client: httpx.Client, rng: random.Random) -> tuple[str, int]:
    kind = rng.choices(["route", "matrix", "search", "tile", "elevation"], [3, 1, 3, 4, 2])[0]
    a, b = rng.sample(POINTS, 2)
    if kind == "route":
        r = client.post("/route", json={"locations": [{"lon": a[0], "lat": a[1]}, {"lon": b[0], "lat": b[1]}]})
    elif kind == "matrix":
        pts = [{"lon": p[0], "lat": p[1]} for p in rng.sample(POINTS, 5)]
        r = client.post("/matrix", json={"sources": pts, "targets": pts})
    elif kind == "search":
        r = client.get("/search", params={"q": rng.choice(WORDS), "size": 5})
    elif kind == "tile":
        z = rng.randint(8, 14)
        n = 1 << z
        x = int((a[0] + 180) / 360 * n)
        import math

        lat = math.radians(a[1])
        y = int((1 - math.log(math.tan(lat) + 1 / math.cos(lat)) / math.pi) / 2 * n)
        r = client.get(f"/tiles/andorra/{z}/{x + rng.randint(-1, 1)}/{y + rng.randint(-1, 1)}")
    else:
        r = client.post("/elevation", json={"shape": [{"lat": p[1], "lon": p[0]} for p in POINTS]})
    return kind, r.status_code


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bundle", default=str(ROOT / ".geoengine" / "bundles" / "andorra"), help="bundle folder")
    ap.add_argument("--minutes", type=float, default=10.0, help="duration (default 10)")
    ap.add_argument("--clients", type=int, default=8, help="concurrent clients (default 8)")
    ap.add_argument("--workers", type=int, default=2, help="server worker processes (default 2)")
    ap.add_argument("--hup-at", type=float, default=None, metavar="SECONDS", help="send SIGHUP at this time")
    ap.add_argument("--json", metavar="FILE", help="also write the summary here")
    args = ap.parse_args(argv)

    home = Path(tempfile.mkdtemp(prefix="geoengine-soak-"))
    env = {**os.environ, "GEOENGINE_HOME": str(home), "GEOENGINE_GATEWAY_HOST": HOST, "GEOENGINE_LOG_LEVEL": "warning"}
    env.pop("GEOENGINE_REDIS_URL", None)
    made = subprocess.run([sys.executable, "-m", "geoengine", "keys", "create", "--plan", "unlimited"], env=env,
                          capture_output=True, text=True, check=True)
    key = made.stdout.strip().splitlines()[-1]
    port = free_port()
    log = open(home / "serve.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "geoengine", "serve", "--bundle", args.bundle, "--port", str(port),
                             "--workers", str(args.workers), "--no-access-log"], env=env, stdout=log,
                            stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    headers = {"X-Gateway-Key": key, "X-Gateway-Host": HOST}
    deadline = time.time() + 300
    while True:
        try:
            if httpx.get(base + "/health", headers=headers, timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.time() > deadline:
            print((home / "serve.log").read_text()[-3000:], file=sys.stderr)
            return 1
        time.sleep(0.5)

    duration = args.minutes * 60
    stop = threading.Event()
    counts: dict[str, int] = {}
    errors: list = []
    lock = threading.Lock()

    def client_loop(i):
        rng = random.Random(i)
        with httpx.Client(base_url=base, headers=headers, timeout=60) as c:
            while not stop.is_set():
                try:
                    kind, status = one_request(c, rng)
                except httpx.HTTPError as exc:
                    kind, status = "?", repr(exc)
                with lock:
                    counts[kind] = counts.get(kind, 0) + 1
                    if status not in (200, 204):
                        errors.append((round(time.time() - t0, 1), kind, status))

    t0 = time.time()
    threads = [threading.Thread(target=client_loop, args=(i,), daemon=True) for i in range(args.clients)]
    for t in threads:
        t.start()
    samples = []
    hup_sent = False
    workers_before: set[int] = set()
    workers_after: set[int] = set()
    while time.time() - t0 < duration:
        time.sleep(min(10.0, max(0.1, duration - (time.time() - t0))))
        el = time.time() - t0
        samples.append((round(el, 1), rss_kib(proc.pid), sum(counts.values())))
        print(f"{el:7.1f}s  requests {samples[-1][2]:8d}  errors {len(errors):4d}  rss {samples[-1][1] / 1024:8.1f} MiB",
              flush=True)
        if hup_sent:  # the workers serving after the reload (settled once the old ones have exited)
            workers_after = children(proc.pid)
        if args.hup_at is not None and not hup_sent and el >= args.hup_at:
            workers_before = children(proc.pid)
            proc.send_signal(signal.SIGHUP)
            hup_sent = True
            print(f"{el:7.1f}s  SIGHUP sent", flush=True)
    stop.set()
    for t in threads:
        t.join(60)
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
    after2 = [s for s in samples if s[0] >= 120] or samples
    base_rss, end_rss = after2[0][1], samples[-1][1]
    growth = (end_rss - base_rss) / base_rss * 100 if base_rss else 0.0
    total = sum(counts.values())
    summary = {"minutes": args.minutes, "clients": args.clients, "workers": args.workers, "requests": total,
               "per_kind": counts, "rps": round(total / duration, 1), "errors": len(errors), "first_errors": errors[:10],
               "rss_mib_from": round(base_rss / 1024, 1), "rss_mib_end": round(end_rss / 1024, 1),
               "rss_growth_pct": round(growth, 2), "sighup_at_s": args.hup_at if hup_sent else None}
    if hup_sent:  # a reload that replaced no worker proves nothing about reloads
        summary.update(workers_before_hup=sorted(workers_before), workers_at_end=sorted(workers_after),
                       # children that are not workers (multiprocessing's resource tracker) stay
                       workers_replaced=len(workers_before - workers_after) >= args.workers
                       and len(workers_after - workers_before) >= args.workers)
    print(json.dumps(summary, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2))
    replaced = summary.get("workers_replaced", True)
    return 0 if not errors and growth < 10 and replaced else 1


if __name__ == "__main__":
    sys.exit(main())
