"""The headline tile figure: recorded map sessions replayed with wrk, against nginx, in the same run.

`benchmarks/data/tile_sessions.json` (made by record_tile_session.py) holds the tile requests the
server's map page made in Chromium while a user panned and zoomed over the Andorra bundle, in order, and
the headers the browser sent with them. This script replays them against:

    geoengine   `geoengine serve --bundle B` as users start it: default settings (a worker per core,
                access log ON, written to a file and its lines counted), nothing else
    nginx       (Debian) serving the same tiles as static gzip files, as many workers, missing tiles
                answered 204 as geoengine does

with the same wrk script. Every request carries the browser's recorded headers (User-Agent, Accept,
Accept-Encoding "gzip, deflate, br, zstd", Accept-Language, Referer, Sec-Fetch-*, sec-ch-ua...) and an
authorisation, one row per `--auth`:

    session   the page session cookie, as the map page sends it (the headline). Each replayed user
              session gets a fresh cookie (minted by the server's own signer from its state database,
              as `GET /` issues them), renewed every 500 requests, so no cookie goes over the
              per-session rate limit (GEOENGINE_SESSION_RATE, 600 a minute) that a person never reaches
    key       the same browser headers with `X-Gateway-Key` and `X-Gateway-Host` instead of the
              cookie (an API key behind a gateway, the form of serve_bench's other rows)

wrk's Lua has no connection id: each wrk thread (2) keeps one cursor per connection it holds (c/2),
each starting at its own offset of the recorded sequence (c evenly spaced offsets over all sessions),
and takes the cursors in turn, so c users' sessions are in flight at once, each in its recorded order
(as a browser spreads one user's tile requests over its keep-alive connections). In the session rows
no request repeats another's bytes: the cookie differs per user, and a user never asks twice for a tile
within a session. In the key rows two users on the same tile send the same bytes (one key); the server
keeps no answers by request bytes (its memo went, issue 27), so that does not favour it.

    PYTHONPATH=. python benchmarks/tiles_session_bench.py --bundle ANDORRA_BUNDLE --concurrency 16,64 \
        --duration 5 --repeat 2

Prints req/s, p50/p99, server CPU per request and non-2xx per row and the ratio to nginx. With
`--profile` it also samples the geoengine workers with py-spy (benchmarks/.peers/pyspy, installed by
the script) during one more c=64 run and prints the functions that took the most samples.
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
import urllib.request
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from serve_bench import run_wrk  # noqa: E402
from tiles_bench import (  # noqa: E402
    ensure_apt,
    free_port,
    nginx_tiles,
    region_bundle,
    stop,
    tile_list,
    wait_http,
    write_static,
)

PY = sys.executable
SESSIONS = ROOT / "benchmarks" / "data" / "tile_sessions.json"
PYSPY = ROOT / "benchmarks" / ".peers" / "pyspy"
RENEW = 500  # requests per cookie at most


# ------------------------------------------------------------------------------------------ wrk
def lua_replay(paths: list[str], first: list[bool], headers: dict, cookies: list[str], conc: int, threads: int,
               auth_header: str | None) -> str:
    """wrk script: per thread one cursor per connection, each at its own offset of `paths`; a cursor
    takes a new cookie from `cookies` at each session start and every RENEW requests."""
    def s(v: str) -> str:
        return "[==[" + v + "]==]"

    hdr = ", ".join(f"[ {s(k)} ] = {s(v)}" for k, v in headers.items())
    return f"""
local paths = {{{", ".join(s(p) for p in paths)}}}
local first = {{{", ".join("true" if f else "false" for f in first)}}}
local cookies = {{{", ".join(s(c) for c in cookies)}}}
local n, ncook, conc, nthreads = #paths, #cookies, {conc}, {threads}
local counter = 0
function setup(thread)
  thread:set("tid", counter)
  counter = counter + 1
end
local slots, cursor, hdrs, used, nextc = 0, {{}}, {{}}, {{}}, {{}}
function init(args)
  local t = tonumber(tid) or 0
  slots = math.floor(conc / nthreads) + ((t < conc % nthreads) and 1 or 0)
  local base = t * math.floor(conc / nthreads) + math.min(t, conc % nthreads)
  for k = 1, slots do
    local g = base + k - 1  -- this connection's number among all
    cursor[k] = math.floor(g * n / conc) + 1
    local h = {{{hdr}}}
    hdrs[k] = h
    nextc[k] = g + 1
    used[k] = 0
    {"h[ " + s(auth_header) + " ] = cookies[nextc[k]]" if auth_header else ""}
  end
end
local i = 0
request = function()
  i = i + 1
  local k = (i % slots) + 1
  local c = cursor[k]
  {f'''if used[k] >= {RENEW} or (first[c] and used[k] > 0) then
    nextc[k] = ((nextc[k] + conc - 1) % ncook) + 1
    hdrs[k][ {s(auth_header)} ] = cookies[nextc[k]]
    used[k] = 0
  end
  used[k] = used[k] + 1''' if auth_header else ""}
  cursor[k] = (c % n) + 1
  return wrk.format("GET", paths[c], hdrs[k])
end
"""


def children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


# -------------------------------------------------------------------------------------- servers
def serve_geoengine(bundle: Path, home: Path, workdir: Path, workers: int | None):
    """`geoengine serve` as a user starts it; its access log (stdout) goes to a file."""
    port = free_port()
    env = {**os.environ, "GEOENGINE_HOME": str(home), "PYTHONPATH": str(ROOT)}
    for k in [k for k in env if k.startswith("GEOENGINE_") and k not in ("GEOENGINE_HOME", "GEOENGINE_DATA_MIRROR")]:
        del env[k]  # default settings: nothing from the caller's environment
    cmd = [PY, "-m", "geoengine", "serve", "--bundle", str(bundle), "--host", "127.0.0.1", "--port", str(port)]
    if workers:
        cmd += ["--workers", str(workers)]
    log = workdir / f"serve-{port}.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT)
    ok = wait_http(f"http://127.0.0.1:{port}/", timeout=600)
    return proc, f"http://127.0.0.1:{port}", log, ok


def serve_nginx(root: Path, workdir: Path, workers: int):
    """nginx on the same tiles as files (tiles_bench.write_static); a missing tile answers 204."""
    return nginx_tiles(root, workdir, workers, name="nginx-session", missing_204=True, timeout=30)


# ---------------------------------------------------------------------------------- the replay
def load_sessions(path: Path) -> tuple[list[str], list[bool], dict, dict]:
    doc = json.loads(path.read_text())
    paths, first = [], []
    for s in doc["sessions"]:
        for j, p in enumerate(s["tiles"]):
            paths.append(p)
            first.append(j == 0)
    return paths, first, doc["headers"], doc


def browser_headers(recorded: dict, host: str) -> dict:
    """The recorded browser headers for this server (Host is wrk's own), without the cookie."""
    skip = {"host", "cookie", "connection", "x-gateway-key", "x-gateway-host"}
    return {k: v.replace("{host}", host) for k, v in recorded.items() if k.lower() not in skip}


def mint_cookies(home: Path, n: int) -> list[str]:
    """Page session cookies signed with the deployment's secret (as `GET /` issues them)."""
    from geoengine.config import Settings
    from geoengine.server.web.session import COOKIE, SessionSigner, load_secret

    settings = Settings(home=home)
    signer = SessionSigner(load_secret(settings.state), settings.session_ttl_s)
    return [f"{COOKIE}={signer.issue()[0]}" for _ in range(n)]


def check_cookie(base: str, path: str, headers: dict) -> tuple[int, str]:
    """A cookie the page itself got from `GET /` answers a recorded tile (the replay's path is real)."""
    with urllib.request.urlopen(base + "/", timeout=30) as r:
        cookie = r.headers["set-cookie"].split(";")[0]
    req = urllib.request.Request(base + path, headers={**headers, "Cookie": cookie})
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.status, r.headers.get("content-encoding", "")


def ensure_pyspy() -> Path | None:
    binary = PYSPY / "bin" / "py-spy"
    if not binary.exists():
        subprocess.run([PY, "-m", "pip", "install", "-q", "--target", str(PYSPY), "py-spy"], capture_output=True)
    return binary if binary.exists() else None


def profile(base: str, script: str, pid: int, workdir: Path, seconds: int, threads: int, label: str) -> list[str]:
    """py-spy over every worker during a c=64 replay; the top functions by own and by total samples."""
    binary = ensure_pyspy()
    if binary is None:
        return ["py-spy could not be installed"]
    raw = workdir / f"profile-{label}.txt"
    spy = subprocess.Popen([str(binary), "record", "--subprocesses", "--nonblocking", "-r", "250", "-d",
                            str(seconds + 2), "-f", "raw", "-o", str(raw), "-p", str(pid)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(1.5)
    run_wrk(base, script, 64, seconds, workdir, [pid], threads)
    spy.wait(timeout=120)
    if not raw.exists():
        return [f"py-spy wrote nothing: {spy.stderr.read().decode()[-400:]}"]
    own, total, samples = Counter(), Counter(), 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        k = int(count)
        frames = stack.split(";")[1:]  # the first frame is the process
        samples += k
        if frames:
            own[_short(frames[-1])] += k
        for f in {_short(f) for f in frames}:
            total[f] += k
    out = [f"py-spy, {label}: {samples} busy samples over the workers at c=64"]
    out.append("  own samples (where the CPU is):")
    out += [f"    {100 * v / samples:5.1f} %  {f}" for f, v in own.most_common(20)]
    out.append("  inclusive (a function and what it calls; frames under 90 % of the samples):")
    out += [f"    {100 * v / samples:5.1f} %  {f}" for f, v in total.most_common()
            if v < 0.9 * samples and not f.startswith(("process ", " spawn_main"))][:32]
    return out


def _short(frame: str) -> str:
    """`func (path/to/file.py:123)` -> `func (file.py)`."""
    m = re.match(r"(.*) \((.*?):\d+\)$", frame)
    if not m:
        return frame
    name, path = m.groups()
    parts = Path(path).parts
    tail = "/".join(parts[-2:]) if len(parts) > 1 else path
    return f"{name} ({tail})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--region", default="andorra")
    ap.add_argument("--bundle", help="serve this bundle (built by `geoengine build andorra`) instead of building one")
    ap.add_argument("--sessions", default=str(SESSIONS), help="recorded sessions (record_tile_session.py)")
    ap.add_argument("--concurrency", default="16,64")
    ap.add_argument("--duration", type=float, default=5.0, help="seconds per wrk run")
    ap.add_argument("--repeat", type=int, default=2, help="wrk runs per point; the best by req/s is reported")
    ap.add_argument("--auth", default="session,key", help="rows: session (the page's cookie), key (gateway key)")
    ap.add_argument("--no-archive", action="store_true", help="skip the reference row: the archive's every tile "
                    "cycled with only Accept-Encoding: gzip and the gateway key (serve_bench's tile row)")
    ap.add_argument("--workers", type=int, help="geoengine workers (default: the server's default, a worker per "
                    "core); nginx runs as many")
    ap.add_argument("--profile", action="store_true", help="py-spy the workers during one more c=64 session run")
    ap.add_argument("--json", help="write the figures here")
    args, _ = ap.parse_known_args()
    conc = [int(c) for c in args.concurrency.split(",")]
    auths = args.auth.split(",")
    ensure_apt({"wrk": "wrk", "nginx": "nginx-light"})
    if not shutil.which("wrk"):
        print("wrk is not installed (apt-get install wrk)")
        return 1
    paths, first, recorded_headers, doc = load_sessions(Path(args.sessions))
    workers = args.workers or os.cpu_count() or 1
    threads = 2
    print(f"tiles_session_bench: {len(paths)} recorded tile requests in {len(doc['sessions'])} sessions "
          f"({len(set(paths))} distinct tiles, {doc['browser']}, {doc['viewport']}), {args.duration:g}s per run, "
          f"best of {args.repeat}, concurrency {conc}, {workers} workers, {os.cpu_count()} cores; load average "
          f"{os.getloadavg()[0]:.1f} (the machine may be shared)", flush=True)
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="tile-session-bench-") as tmp:
        work = Path(tmp)
        work.chmod(0o755)  # nginx workers run as an unprivileged user
        home = work / "home"
        bundle = Path(args.bundle).resolve() if args.bundle else region_bundle(args.region, home)
        mbtiles = next((bundle / "tiles").glob("*.mbtiles"))
        root = work / "nginx-root"
        write_static(mbtiles, root, mbtiles.stem)
        from geoengine.config import Settings
        from geoengine.gateway import KeyStore

        settings = Settings(home=home)
        key, _ = KeyStore(settings.state).create("unlimited", "bench")
        cookies = mint_cookies(home, 20_000)

        def script_for(auth: str, host: str) -> str:
            h = browser_headers(recorded_headers, host)
            if auth == "key":
                h.update({"X-Gateway-Key": key, "X-Gateway-Host": settings.gateway_host})
                return lua_replay(paths, first, h, [""], max(conc), threads, None)
            return lua_replay(paths, first, h, cookies, max(conc), threads, "Cookie")

        archive = [f"/tiles/{mbtiles.stem}/{z}/{x}/{y}" for z, x, y in tile_list(mbtiles)]

        def archive_script(gateway: bool) -> str:
            h = {"Accept-Encoding": "gzip"}
            if gateway:
                h.update({"X-Gateway-Key": key, "X-Gateway-Host": settings.gateway_host})
            return lua_replay(archive, [False] * len(archive), h, [""], max(conc), threads, None)

        def record(kind, peer, base, script, pids):
            run_wrk(base, script, 4, 1, work, pids, threads)  # warm-up
            for c in conc:
                # the cursors are laid out for max(conc) connections; fewer connections use the first ones
                runs = [run_wrk(base, script.replace(f"conc, nthreads = #paths, #cookies, {max(conc)},",
                                                     f"conc, nthreads = #paths, #cookies, {c},"),
                                c, args.duration, work, pids, threads) for _ in range(args.repeat)]
                r = max(runs, key=lambda run: run["rps"])
                r.update(kind=kind, peer=peer, concurrency=c, workers=workers)
                rows.append(r)
                print(f"  {kind:<16} {peer:<10} c={c:<3} {r['rps']:>9.0f} req/s  p50 {r['p50_ms']:6.2f} ms  "
                      f"p99 {r['p99_ms']:6.2f} ms  cpu {r['cpu_ms_per_req']:.3f} ms/req  non-2xx {r['non2xx']} "
                      f"{r['socket_errors']}", flush=True)

        proc, base, log, ok = serve_geoengine(bundle, home, work, args.workers)
        profile_lines: list[str] = []
        try:
            if not ok:
                print("geoengine did not start:", log.read_text()[-1500:])
                return 1
            host = base.split("//")[1]
            status, enc = check_cookie(base, paths[0], browser_headers(recorded_headers, host))
            print(f"  a cookie from GET / on {paths[0]}: HTTP {status}, content-encoding {enc or '-'}")
            lines0 = log.read_text(errors="replace").count("\n")
            for auth in auths:
                record(f"tiles-session-{auth}", "geoengine", base, script_for(auth, host), [proc.pid])
            if not args.no_archive:
                record("tiles-archive-key", "geoengine", base, archive_script(True), [proc.pid])
            logged = log.read_text(errors="replace").count("\n") - lines0
            served = sum(r["requests"] for r in rows)
            print(f"  access log: {logged} lines written during the runs ({served} requests measured, plus warm-ups)")
            if args.profile:
                for auth in auths:
                    profile_lines += profile(base, script_for(auth, host), proc.pid, work, 8, threads,
                                             f"tiles-session-{auth}")
        finally:
            stop(proc)
        nproc, nbase, nok = serve_nginx(root, work, workers)
        try:
            if nok:
                host = nbase.split("//")[1]
                record("tiles-session", "nginx", nbase, script_for("session", host), [nproc.pid])
                if not args.no_archive:
                    record("tiles-archive", "nginx", nbase, archive_script(False), [nproc.pid])
            else:
                print("nginx did not start:", nproc.stderr.read().decode()[-800:] if nproc.stderr else "")
        finally:
            stop(nproc)
    print("\nratios (geoengine / nginx, req/s; p99 at c=64 against the 5 ms goal):")
    by = {(r["kind"], r["peer"], r["concurrency"]): r for r in rows}
    for auth in auths:
        for c in conc:
            g, n = by.get((f"tiles-session-{auth}", "geoengine", c)), by.get(("tiles-session", "nginx", c))
            if g and n:
                goal = f"  p99 {'<=' if g['p99_ms'] <= 5 else '>'} 5 ms" if c == 64 else ""
                print(f"  tiles-session-{auth:<8} c={c:<3} {g['rps'] / n['rps']:.2f}x nginx  (p99 {g['p99_ms']:.2f} "
                      f"ms against nginx's {n['p99_ms']:.2f}){goal}")
    for c in conc:
        g, n = by.get(("tiles-archive-key", "geoengine", c)), by.get(("tiles-archive", "nginx", c))
        if g and n:
            print(f"  tiles-archive-key      c={c:<3} {g['rps'] / n['rps']:.2f}x nginx  (p99 {g['p99_ms']:.2f} ms against "
                  f"nginx's {n['p99_ms']:.2f}; reference: the archive's tiles cycled, gateway headers only)")
    for line in profile_lines:
        print(line)
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "profile": profile_lines}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
