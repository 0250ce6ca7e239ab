"""Record real map sessions of the server's own map page in Chromium: every tile URL the page asks for,
in order, and the request headers the browser sends with them.

`geoengine serve` (default settings) serves the bundle; Debian's chromium, driven by Playwright (the
setup of tests/web), opens the map page `/` in a fresh profile (so an empty browser cache), waits for
the first view, then acts like a user with the mouse: drags to pan, turns the wheel and double-clicks
to zoom in, wheels out again, each step seeded and kept over the bundle's bounds, and waits for the
tiles of each view to load before the next. MapLibre's own requests (from its web workers) are caught on
the browser context.

The result goes to `benchmarks/data/tile_sessions.json`: per session the tile paths in request order
(`/tiles/{source}/{z}/{x}/{y}`, no host, no key, no cookie), the status each got, the zooms and the
actions taken; once, the header names and values the browser sent with a tile request, with the page
session cookie's value, the host and the port replaced by placeholders. `tiles_session_bench.py`
replays it with wrk.

    PYTHONPATH=. python benchmarks/record_tile_session.py --bundle ANDORRA_BUNDLE --sessions 4

Needs chromium (`apt-get install -y chromium`) and the map page's assets (`./dev setup`, or
`--web-assets /path/to/web` of a checkout where it ran).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.web.browser import CHROMIUM_FLAGS, chromium_path, free_port, stop, wait_until_up  # noqa: E402

OUT = ROOT / "benchmarks" / "data" / "tile_sessions.json"
TILE = re.compile(r"^/tiles/([^/]+)/(\d+)/(\d+)/(\d+)$")
LOGGED = re.compile(r'"GET (/tiles/[^/ ?]+/\d+/\d+/\d+)(?:\?\S*)? HTTP/[\d.]+" (\d{3})')
SETTLED = ("document.body.dataset.ready === '1' && window.geoengineMap.loaded() "
           "&& window.geoengineMap.areTilesLoaded()")


def web_assets(explicit: str | None) -> Path | None:
    """The map page's installed assets: --web-assets, this checkout's web/, or the main checkout's."""
    for c in [explicit, ROOT / "web", ROOT.parent / "main" / "web"]:
        if c and (Path(c) / "node_modules" / "maplibre-gl").is_dir() and (Path(c) / "build" / "fonts").is_dir():
            return Path(c)
    return None


class Session:
    """One user's visit: a fresh browser context on the map page, its tile requests recorded."""

    def __init__(self, browser, base: str, viewport: dict, rng: random.Random):
        self.base, self.rng = base, rng
        self.ctx = browser.new_context(viewport=viewport)
        self.page = self.ctx.new_page()
        self.tiles: list[str] = []
        self.status: dict[str, int] = {}
        self.headers: dict | None = None
        self.actions: list[str] = []
        self.errors: list[str] = []
        self.conditional = 0  # requests the browser sent with If-None-Match (revalidations)
        self.ctx.on("request", self._request)
        self.ctx.on("response", self._response)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))

    def _request(self, req):
        path = req.url[len(self.base):] if req.url.startswith(self.base) else None
        if path and TILE.match(path):
            self.tiles.append(path)
            headers = req.all_headers()
            if self.headers is None:
                self.headers = headers
            if "if-none-match" in headers:
                self.conditional += 1

    def _response(self, resp):
        path = resp.url[len(self.base):] if resp.url.startswith(self.base) else None
        if path and TILE.match(path):
            self.status[str(resp.status)] = self.status.get(str(resp.status), 0) + 1

    def settle(self):
        self.page.wait_for_function(SETTLED, timeout=120_000)
        self.page.wait_for_timeout(250)  # a user looks at the view before the next move

    def state(self) -> tuple[float, float, float]:
        c = self.page.evaluate("(() => { const m = window.geoengineMap, c = m.getCenter(); "
                               "return [c.lng, c.lat, m.getZoom()]; })()")
        return c[0], c[1], c[2]

    def toward(self, bounds, width, height) -> tuple[float, float]:
        """Pixel offset of a drag: random, but back toward the bundle when the centre has left it."""
        w, s, e, n = bounds
        lon, lat, _ = self.state()
        dx = self.rng.uniform(-0.35, 0.35) * width
        dy = self.rng.uniform(-0.35, 0.35) * height
        inset_lon, inset_lat = (e - w) * 0.15, (n - s) * 0.15
        # Dragging right moves the view west; dragging down moves it north.
        if lon < w + inset_lon:
            dx = -abs(dx)
        elif lon > e - inset_lon:
            dx = abs(dx)
        if lat < s + inset_lat:
            dy = abs(dy)
        elif lat > n - inset_lat:
            dy = -abs(dy)
        return dx, dy

    def walk(self, steps: int, bounds, viewport, zooms: tuple[int, int]):
        width, height = viewport["width"], viewport["height"]
        cx, cy = width / 2, height / 2
        mouse = self.page.mouse
        for _ in range(steps):
            _, _, z = self.state()
            r = self.rng.random()
            if r < 0.5 or (r < 0.75 and z >= zooms[1]) or (r >= 0.75 and z <= zooms[0]):
                dx, dy = self.toward(bounds, width, height)
                x0, y0 = cx + self.rng.uniform(-100, 100), cy + self.rng.uniform(-80, 80)
                mouse.move(x0, y0)
                mouse.down()
                mouse.move(x0 + dx, y0 + dy, steps=12)
                mouse.up()
                self.actions.append(f"pan {dx:+.0f},{dy:+.0f}")
            elif r < 0.75:
                x, y = cx + self.rng.uniform(-200, 200), cy + self.rng.uniform(-150, 150)
                mouse.move(x, y)
                if self.rng.random() < 0.5:
                    mouse.dblclick(x, y)
                    self.actions.append("dblclick zoom in")
                else:
                    for _ in range(3):
                        mouse.wheel(0, -120)
                        self.page.wait_for_timeout(60)
                    self.actions.append("wheel zoom in")
            else:
                mouse.move(cx + self.rng.uniform(-150, 150), cy + self.rng.uniform(-100, 100))
                for _ in range(3):
                    mouse.wheel(0, 120)
                    self.page.wait_for_timeout(60)
                self.actions.append("wheel zoom out")
            self.page.wait_for_timeout(400)  # the animation runs out
            self.settle()
            self.actions[-1] += f" -> z{self.state()[2]:.2f}"

    def close(self):
        if self.ctx is not None:
            self.ctx.close()
            self.ctx = None


def record(bundle: Path, sessions: int, steps: int, seed: int, viewport: dict, assets: Path, out: Path,
           append: bool = False) -> dict:
    from playwright.sync_api import sync_playwright

    chromium = chromium_path()
    if chromium is None:
        raise SystemExit("chromium is missing: apt-get install -y chromium")
    with tempfile.TemporaryDirectory(prefix="tile-session-") as tmp:
        home = Path(tmp) / "home"
        port = free_port()
        env = {**os.environ, "GEOENGINE_HOME": str(home), "GEOENGINE_WEB_ASSETS": str(assets),
               "PYTHONPATH": str(ROOT)}
        log = Path(tmp) / "serve.log"
        with open(log, "w") as fh:  # as users start it: default settings, access log on
            proc = subprocess.Popen([sys.executable, "-m", "geoengine", "serve", "--bundle", str(bundle), "--host",
                                     "127.0.0.1", "--port", str(port), "--exit-after", "1800"],
                                    env=env, stdout=fh, stderr=subprocess.STDOUT)
        base = f"http://127.0.0.1:{port}"
        try:
            wait_until_up(proc, base + "/", log, timeout=600)
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
                version = browser.version
                recorded, headers = [], None
                for k in range(sessions):
                    rng = random.Random(seed + k)
                    s = Session(browser, base, viewport, rng)
                    offset = len(log.read_text(errors="replace"))
                    try:
                        t0 = time.time()
                        s.page.goto(base + "/")
                        s.settle()
                        src = s.page.evaluate("(() => { const b = window.geoengineMap.getSource('protomaps'); "
                                              "return [b.bounds, b.minzoom, b.maxzoom]; })()")
                        bounds = src[0]
                        s.actions.append(f"open -> z{s.state()[2]:.2f}")
                        s.walk(steps, bounds, viewport, (max(8, src[1]), src[2] + 2))
                        s.page.wait_for_timeout(1000)
                        s.close()
                        time.sleep(1.0)  # the last access-log lines are written
                        text = log.read_text(errors="replace")
                        logged = LOGGED.findall(text[offset:])
                        offset = len(text)
                        if s.errors:
                            print("page errors:", s.errors[:5])
                        tiles = [p for p, _ in logged]
                        status = dict(sorted(Counter(st for _, st in logged).items()))
                        zooms = sorted({int(TILE.match(p).group(2)) for p in tiles})
                        recorded.append({"seed": seed + k, "seconds": round(time.time() - t0, 1), "tiles": tiles,
                                         "status": status, "browser_requests": len(s.tiles),
                                         "browser_conditional": s.conditional, "zooms": zooms, "actions": s.actions})
                        headers = headers or s.headers
                        print(f"session {k}: {len(tiles)} tile requests reached the server ({len(set(tiles))} distinct; "
                              f"the page issued {len(s.tiles)}), zooms {zooms}, status {status}, {s.conditional} with If-None-Match, {len(s.actions)} actions", flush=True)
                    finally:
                        s.close()
                browser.close()
        finally:
            stop(proc)
    doc = {
        "what": "tile requests of the geoengine map page in Chromium while a user pans and zooms "
                "(benchmarks/record_tile_session.py); replayed by benchmarks/tiles_session_bench.py",
        "bundle": bundle.name, "browser": f"chromium {version}", "viewport": viewport,
        "recorded": time.strftime("%Y-%m-%d"),
        "headers": _scrub(headers or {}, port),
        "sessions": recorded,
    }
    if append and out.exists():
        doc["sessions"] = json.loads(out.read_text())["sessions"] + doc["sessions"]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    return doc


def _scrub(headers: dict, port: int) -> dict:
    """The browser's tile request headers without secrets or this run's address."""
    out = {}
    for k, v in headers.items():
        if k.startswith(":"):
            continue
        if k == "cookie":
            v = "geoengine_session={session}"
        elif k == "x-gateway-key":
            v = "{key}"
        v = v.replace(f"127.0.0.1:{port}", "{host}")
        out[k] = v
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bundle", required=True, help="a built bundle (geoengine build andorra)")
    ap.add_argument("--sessions", type=int, default=4, help="sessions, each a fresh browser profile")
    ap.add_argument("--steps", type=int, default=30, help="pans and zooms per session")
    ap.add_argument("--seed", type=int, default=27)
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=800)
    ap.add_argument("--web-assets", help="folder of the map page's installed assets (web/ after ./dev setup)")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--append", action="store_true", help="add the sessions to those already in --out")
    args = ap.parse_args()
    assets = web_assets(args.web_assets)
    if assets is None:
        print("the map page's assets are missing: run ./dev setup or pass --web-assets")
        return 1
    doc = record(Path(args.bundle).resolve(), args.sessions, args.steps, args.seed,
                 {"width": args.width, "height": args.height}, assets, Path(args.out), args.append)
    n = sum(len(s["tiles"]) for s in doc["sessions"])
    print(f"{n} tile requests in {len(doc['sessions'])} sessions -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
