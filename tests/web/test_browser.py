"""The map page in a real browser: Debian's chromium driven by Playwright, against `geoengine serve`
started on loopback by the test (it stops by itself). Screenshots go to tests/web/screenshots/ (or
GEOENGINE_SCREENSHOTS) for people to look at."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ..conftest import SHARED_DATA
from .browser import (
    CHROMIUM_FLAGS,
    SCREENSHOTS,
    chromium_path,
    free_port,
    image_stats,
    start_server,
    stop,
    wait_until_up,
)

pytestmark = pytest.mark.e2e

VIEW = {"width": 960, "height": 680}
MAP_BOX = (360, 0, 950, 650)  # the map area right of the side panel, above the attribution
# Two points on streets of Andorra la Vella and Escaldes, and a spot in the old town.
A, B = (1.5218, 42.5063), (1.5333, 42.5107)


@pytest.fixture(scope="module")
def server(build_region, tmp_path_factory):
    bundle = build_region("andorra")
    home = tmp_path_factory.mktemp("web-e2e")
    port, page_port, other_port = free_port(), free_port(), free_port()
    allowed = f"http://127.0.0.1:{page_port}"
    env = {**os.environ, "GEOENGINE_HOME": str(home), "GEOENGINE_DATA_MIRROR": str(SHARED_DATA),
           "GEOENGINE_CORS_ORIGINS": allowed}
    env.pop("GEOENGINE_BUNDLE", None)
    made = subprocess.run([sys.executable, "-m", "geoengine", "keys", "publishable", "--plan", "free",
                           "--origin", allowed, "--scope", "tiles", "--scope", "search", "--label", "e2e page"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    pk = made.stdout.strip().splitlines()[-1]
    assert pk.startswith("pk_")
    log = home / "serve.log"
    proc = start_server(bundle, port, env, log)
    try:
        wait_until_up(proc, f"http://127.0.0.1:{port}/", log)
        yield {"url": f"http://127.0.0.1:{port}", "pk": pk, "page_port": page_port, "other_port": other_port}
    finally:
        stop(proc)


@pytest.fixture(scope="module")
def browser():
    exe = chromium_path()
    if exe is None:
        pytest.fail("Debian's chromium is missing: ./dev test installs it (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=CHROMIUM_FLAGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def shots():
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS


class Page:
    """A page of the map with the console and failed responses recorded."""

    def __init__(self, browser, url: str):
        self.ctx = browser.new_context(viewport=VIEW)
        self.page = self.ctx.new_page()
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page.on("console", lambda m: self.errors.append(f"console: {m.text} @ {m.location.get('url')}")
                     if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("request", lambda r: self.errors.append(f"key sent to {r.url}")
                     if "x-gateway-key" in r.headers else None)
        self.page.on("response", lambda r: self.errors.append(f"HTTP {r.status} {r.url}") if r.status >= 400 else None)
        self.page.goto(url)
        self.settle()

    def settle(self, timeout: float = 60_000):
        self.page.wait_for_function("document.body.dataset.ready === '1' && window.geoengineMap.loaded() "
                                    "&& window.geoengineMap.areTilesLoaded()", timeout=timeout)

    def pixel(self, lon: float, lat: float) -> tuple[float, float]:
        p = self.page.evaluate("([lon, lat]) => window.geoengineMap.project([lon, lat])", [lon, lat])
        return p["x"], p["y"]

    def click_lonlat(self, lon: float, lat: float):
        x, y = self.pixel(lon, lat)
        self.page.mouse.click(x, y)

    def close(self):
        self.ctx.close()


def _data_box(p: Page) -> tuple[int, int, int, int]:
    """The part of the map area (right of the panel) where the extract's bounds are drawn."""
    b = p.page.evaluate("""() => { const s = window.geoengineMap.getSource('protomaps').bounds;
        const m = window.geoengineMap; const a = m.project([s[0], s[3]]), c = m.project([s[2], s[1]]);
        return [a.x, a.y, c.x, c.y]; }""")
    x0, y0 = max(MAP_BOX[0], int(b[0]) + 2), max(MAP_BOX[1], int(b[1]) + 2)
    x1, y1 = min(MAP_BOX[2], int(b[2]) - 2), min(MAP_BOX[3], int(b[3]) - 2)
    assert x1 - x0 > 100 and y1 - y0 > 100, (x0, y0, x1, y1)
    return x0, y0, x1, y1


def _not_blank(browser, png: bytes, box) -> dict:
    blank = browser.new_page()
    try:
        return image_stats(blank, png, box)
    finally:
        blank.close()


@pytest.fixture(scope="module")
def map_page(browser, server):
    p = Page(browser, server["url"] + "/#13/42.5075/1.53")
    yield p
    p.close()


def test_page_draws_the_basemap_with_labels_and_icons(browser, server, shots):
    """z8, z10, z13, z15: the canvas is not blank, labels are placed (glyphs served), nothing fails."""
    for z, lon, lat in [(8, 1.56, 42.55), (10, 1.56, 42.55), (13, 1.53, 42.5075), (15, 1.5218, 42.5063)]:
        p = Page(browser, f"{server['url']}/#{z}/{lat}/{lon}")
        try:
            png = p.page.screenshot(path=str(shots / f"basemap-z{z}.png"))
            stats = _not_blank(browser, png, _data_box(p))
            assert stats["variance"] > 30 and stats["colours"] > 50, (z, stats)
            # Labels need glyphs: rendered symbol features of the places / roads / water labels.
            labels = p.page.evaluate("""() => window.geoengineMap.queryRenderedFeatures()
                .filter(f => f.layer.type === 'symbol' && f.layer.layout && f.layer.layout['text-field'] !== undefined).length""")
            assert labels > 0, z
            assert not p.errors, p.errors
            assert not [u for u in p.requests if not u.startswith((server["url"], "data:", "blob:"))], \
                "the page fetched from another host"
        finally:
            p.close()


def test_search_box_autocompletes_and_shows_markers(map_page, shots):
    p = map_page
    p.page.fill("#search", "")
    p.page.type("#search", "andorra la", delay=40)
    p.page.wait_for_selector("#results li", timeout=20_000)
    items = p.page.locator("#results li").all_inner_texts()
    assert any("Andorra la Vella" in t for t in items), items
    searches = [u for u in p.requests if "/search?" in u]
    assert searches and all("lat=" in u and "lon=" in u for u in searches)  # biased to the map centre
    assert p.page.locator(".result-marker").count() >= 1
    p.page.screenshot(path=str(shots / "search.png"))
    assert not p.errors, p.errors


def test_search_box_finds_a_house_number_through_the_geocoder(map_page):
    """A query with a number also asks the geocoder (Nominatim's dialect, biased to the view), whose
    address is listed first; a query without one does not (the test above)."""
    p = map_page
    p.page.fill("#search", "")
    before = len(p.requests)
    p.page.type("#search", "Meritxell 11 Andorra la Vella", delay=20)
    p.page.wait_for_selector("#results li", timeout=20_000)
    p.page.wait_for_timeout(500)
    first = p.page.locator("#results li").first.inner_text()
    assert ", 11, Avinguda Meritxell" in first, first
    asked = [u for u in p.requests[before:] if "/search?" in u]
    assert any("format=jsonv2" in u and "viewbox=" in u for u in asked), asked
    assert not any("format=" in u for u in p.requests[:before] if "/search?" in u)
    assert not p.errors, p.errors


def test_the_page_holds_no_key_and_cannot_read_its_session(map_page, server):
    p = map_page
    assert p.page.evaluate("document.cookie") == ""  # HttpOnly: scripts never see the session
    html = p.page.content()
    assert "gk_" not in html and "pk_" not in html and server["pk"] not in html
    cookies = p.ctx.cookies()
    (session,) = [c for c in cookies if c["name"] == "geoengine_session"]
    assert session["httpOnly"] and session["sameSite"] == "Strict" and session["expires"] > 0


def test_click_shows_what_is_here(map_page, shots):
    p = map_page
    p.page.evaluate("window.geoengineMap.jumpTo({center: [1.5218, 42.5063], zoom: 15})")
    p.settle()
    p.click_lonlat(1.5218, 42.5063)
    popup = p.page.wait_for_selector(".maplibregl-popup .reverse", timeout=20_000)
    assert "m" in popup.inner_text() and len(popup.inner_text()) > 3
    p.page.screenshot(path=str(shots / "reverse.png"))
    assert not p.errors, p.errors


def test_two_clicks_draw_a_route_turn_list_and_profile(map_page, shots):
    p = map_page
    p.page.keyboard.press("Escape")
    p.page.click("#clear")
    p.page.check("input[name=mode][value=route]")
    p.page.evaluate("window.geoengineMap.fitBounds([[1.515, 42.503], [1.538, 42.513]], {duration: 0})")
    p.settle()
    p.click_lonlat(*A)
    p.click_lonlat(*B)
    p.page.wait_for_selector("#turns li", timeout=30_000)
    p.page.wait_for_function("Number(document.getElementById('profile').dataset.points) > 1", timeout=30_000)
    turns = p.page.locator("#turns li").all_inner_texts()
    assert len(turns) >= 2 and all(t.strip() for t in turns)
    assert "km" in p.page.inner_text("#route-summary")
    drawn = p.page.evaluate("window.geoengineMap.querySourceFeatures('routes').length")
    assert drawn >= 1
    p.page.wait_for_timeout(300)
    p.page.screenshot(path=str(shots / "route.png"))
    # Arabic turn list, right to left.
    p.page.select_option("#language", "ar")
    p.page.wait_for_function("document.getElementById('turns').getAttribute('dir') === 'rtl'", timeout=30_000)
    p.page.wait_for_function("/[\\u0600-\\u06FF]/.test(document.getElementById('turns').innerText)", timeout=30_000)
    p.page.screenshot(path=str(shots / "route-ar.png"))
    assert not p.errors, p.errors


def test_isochrone_overlay_appears(map_page, shots):
    p = map_page
    p.page.click("#clear")
    p.page.check("input[name=mode][value=isochrone]")
    p.page.select_option("#costing", "pedestrian")
    p.page.evaluate("window.geoengineMap.jumpTo({center: [1.5218, 42.5063], zoom: 14})")
    p.settle()
    p.click_lonlat(1.5218, 42.5063)
    p.page.wait_for_function("Number(document.body.dataset.isochrone) >= 3", timeout=60_000)
    p.settle()
    shown = p.page.evaluate("window.geoengineMap.queryRenderedFeatures({layers: ['isochrone-fill']}).length")
    assert shown >= 1
    p.page.screenshot(path=str(shots / "isochrone.png"))
    assert not p.errors, p.errors


# -- another origin: CORS and a publishable key, enforced by Chromium itself ----------------------------
PAGE = """<!doctype html><meta charset="utf-8"><title>other origin</title><script>
async function run() {
  const out = {};
  for (const [name, path] of [["search", "/search?q=andorra&size=2"], ["tile", "/tiles/andorra/12/2065/1512"],
                              ["route", "/costings"]]) {
    try {
      const r = await fetch("%(api)s" + path, {headers: {"X-Gateway-Key": "%(pk)s"}});
      out[name] = {status: r.status, bytes: (await r.arrayBuffer()).byteLength};
    } catch (e) { out[name] = {error: String(e)}; }
  }
  document.title = "done";
  window.results = out;
}
run();
</script>"""


def _serve_page(port: int, html: str) -> ThreadingHTTPServer:
    class H(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's naming
            body = html.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", port), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def _run_other_origin(browser, port: int, html: str) -> tuple[dict, list[str]]:
    srv = _serve_page(port, html)
    ctx = browser.new_context()
    page = ctx.new_page()
    console = []
    page.on("console", lambda m: console.append(m.text))
    try:
        page.goto(f"http://127.0.0.1:{port}/")
        page.wait_for_function("document.title === 'done'", timeout=30_000)
        return page.evaluate("window.results"), console
    finally:
        ctx.close()
        srv.shutdown()
        srv.server_close()


def test_allowed_origin_loads_tiles_and_search_with_a_publishable_key(browser, server):
    html = PAGE % {"api": server["url"], "pk": server["pk"]}
    results, _ = _run_other_origin(browser, server["page_port"], html)
    assert results["search"]["status"] == 200 and results["search"]["bytes"] > 50, results
    assert results["tile"]["status"] == 200 and results["tile"]["bytes"] > 100, results
    # Out of the key's scopes: the server answers 403 (readable: the origin is allowed).
    assert results["route"]["status"] == 403, results


def test_origin_not_in_the_allow_list_is_refused_by_the_browser(browser, server):
    html = PAGE % {"api": server["url"], "pk": server["pk"]}
    results, console = _run_other_origin(browser, server["other_port"], html)
    for name in ("search", "tile", "route"):
        assert "error" in results[name] and "TypeError" in results[name]["error"], results
    assert any("CORS" in line for line in console), console
    assert json.dumps(results)  # the page learnt nothing but the failure
