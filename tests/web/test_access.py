"""The map page, page sessions, CORS and publishable keys through the real app, in process."""

from __future__ import annotations

import dataclasses

import pytest
from starlette.testclient import TestClient

from geoengine.gateway import KeyStore
from geoengine.gateway.publishable import PublishableKeys, normalise_origin, parse_origins, path_scope
from geoengine.server.app import create_app
from geoengine.server.web.session import COOKIE, RateLimiter, SessionSigner

ALLOWED = "https://maps.example.org"
OTHER = "https://evil.example.net"


@pytest.fixture(scope="module")
def web_settings(settings, tmp_path_factory):
    home = tmp_path_factory.mktemp("web-home")
    return dataclasses.replace(settings, state=home / "state.sqlite3", cors_origins=f"{ALLOWED}, http://127.0.0.1:9",
                               session_rate=50, session_plan="free")


@pytest.fixture(scope="module")
def app(andorra, web_settings):
    # Compile the routing kernels before the first timed request (the machine may be busy).
    andorra.route(locations=[{"lon": 1.5218, "lat": 42.5063}, {"lon": 1.5333, "lat": 42.5107}])
    return create_app(andorra, web_settings, KeyStore(web_settings.state))


def client(app) -> TestClient:
    return TestClient(app, raise_server_exceptions=False)


def _problem(r, status):
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    body = r.json()
    assert body["status"] == status and body["detail"]
    return body


# -- the page -------------------------------------------------------------------------------------------
def test_page_is_served_without_a_key_and_sets_a_session_cookie(app):
    c = client(app)
    r = c.get("/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert '<div id="map"' in r.text and "/web/app.js" in r.text
    cookie = r.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}=") and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert "Max-Age=" in cookie and "Path=/" in cookie
    assert "gk_" not in r.text and "pk_" not in r.text and "X-Gateway-Key" not in r.text


@pytest.mark.parametrize("path, ctype", [
    ("/web/app.js", "text/javascript"),
    ("/web/app.css", "text/css"),
    ("/web/lib/maplibre-gl/maplibre-gl.mjs", "text/javascript"),
    ("/web/lib/maplibre-gl/maplibre-gl.css", "text/css"),
    ("/web/lib/basemaps/basemaps.js", "text/javascript"),
    ("/web/fonts/Noto Sans Regular/0-255.pbf", "application/x-protobuf"),
    ("/web/fonts/Noto Sans Medium/0-255.pbf", "application/x-protobuf"),
    ("/web/fonts/Noto Sans Italic/256-511.pbf", "application/x-protobuf"),
    ("/web/sprites/light.json", "application/json"),
    ("/web/sprites/light@2x.png", "image/png"),
])
def test_assets_are_served_locally(app, path, ctype):
    r = client(app).get(path)
    assert r.status_code == 200 and r.headers["content-type"].startswith(ctype) and len(r.content) > 0


def test_no_page_script_names_a_remote_host(app):
    c = client(app)
    for path in ("/", "/web/app.js"):
        text = c.get(path).text
        for host in ("unpkg", "jsdelivr", "cdn.", "protomaps.github.io", "api.protomaps"):
            assert host not in text, (path, host)


@pytest.mark.parametrize("path", ["/web/../../pyproject.toml", "/web/%2e%2e/%2e%2e/pyproject.toml",
                                  "/web/lib/maplibre-gl/../../../package.json", "/web/nope.js", "/web/",
                                  "/web/fonts/Noto Sans Regular/..%2F..%2F..%2Fpackage.json"])
def test_asset_paths_cannot_escape(app, path):
    r = client(app).get(path)
    # 404 from the asset server, or 403 from the gateway when the client normalised the dots away.
    _problem(r, 404 if r.status_code != 403 else 403)
    assert "[project]" not in r.text and "maplibre" not in r.text


def test_glyph_pbf_holds_sdf_glyphs(app):
    data = client(app).get("/web/fonts/Noto Sans Regular/0-255.pbf").content
    assert b"Noto Sans Regular" in data and b"0-255" in data
    assert len(data) > 20_000  # 190-odd glyphs of about 30x30 bytes each


# -- page sessions -------------------------------------------------------------------------------------
def test_session_cookie_authorises_the_api_without_a_key(app):
    c = client(app)
    assert c.get("/").status_code == 200
    r = c.get("/search", params={"q": "andorra", "size": 3})
    assert r.status_code == 200 and r.json()["results"]
    r = c.post("/route", json={"locations": [{"lon": 1.5218, "lat": 42.5063}, {"lon": 1.5333, "lat": 42.5107}]})
    assert r.status_code == 200 and r.json()["trip"]["legs"]
    assert c.get("/sources").status_code == 200


def test_without_cookie_or_key_the_gateway_refuses(app):
    _problem(client(app).get("/search", params={"q": "andorra"}), 403)


def test_forged_and_expired_cookies_are_refused(app, web_settings):
    c = client(app)
    c.cookies.set(COOKIE, "0123456789abcdef.9999999999.deadbeef")
    body = _problem(c.get("/search", params={"q": "andorra"}), 403)
    assert "session" in body["detail"]
    signer = SessionSigner(b"another secret", 3600)
    value, _ = signer.issue()
    c.cookies.set(COOKIE, value)
    _problem(c.get("/search", params={"q": "andorra"}), 403)


def test_session_from_another_origin_is_refused(app):
    c = client(app)
    c.get("/")
    _problem(c.get("/search", params={"q": "andorra"}, headers={"Origin": OTHER}), 403)
    _problem(c.get("/search", params={"q": "andorra"}, headers={"Sec-Fetch-Site": "cross-site"}), 403)
    assert c.get("/search", params={"q": "andorra"}, headers={"Sec-Fetch-Site": "same-origin"}).status_code == 200


def test_session_may_not_clear_the_tile_cache(app):
    c = client(app)
    c.get("/")
    _problem(c.post("/tiles/andorra/cache/clear"), 403)


def test_session_rate_limit_is_its_own(app, web_settings):
    import time

    # The limit counts per minute window: start early in one so the whole burst falls inside it.
    if time.time() % 60 > 20:
        time.sleep(60.2 - time.time() % 60)
    a, b = client(app), client(app)
    a.get("/")
    b.get("/")
    statuses = [a.get("/costings").status_code for _ in range(web_settings.session_rate + 1)]
    assert statuses[:-1] == [200] * web_settings.session_rate
    body = _problem(a.get("/costings"), 429)
    assert "rate limit" in body["detail"]
    assert int(a.get("/costings").headers["retry-after"]) >= 1
    assert b.get("/costings").status_code == 200  # another session is not affected


def test_session_is_counted_on_its_plan(andorra, settings, tmp_path):
    st = dataclasses.replace(settings, state=tmp_path / "s.sqlite3", session_plan="tiny",
                             plans_file=None)
    from geoengine.gateway import Plan, Pool

    ks = KeyStore(st.state, {"tiny": Plan("tiny", (Pool("non_tile", "day", 3),))})
    c = client(create_app(andorra, st, ks))
    c.get("/")
    assert [c.get("/costings").status_code for _ in range(3)] == [200, 200, 200]
    body = _problem(c.get("/costings"), 429)
    assert "tiny" in body["detail"] and c.get("/costings").headers["retry-after"]
    assert c.get("/sources").status_code == 200  # tiles are outside the non-tile pool


def test_signer_and_limiter_units():
    s = SessionSigner(b"k" * 32, 60)
    value, sid = s.issue(now=1000.0)
    assert s.verify(value, now=1030.0) == sid
    assert s.verify(value, now=1061.0) is None
    assert s.verify(value.replace(sid, "f" * 16), now=1030.0) is None
    for bad in ("", "a.b.c", "x" * 500, f"{sid}.-1.{value.split('.')[2]}"):
        assert s.verify(bad, now=1030.0) is None
    lim = RateLimiter(2)
    assert [lim.hit("a", 120.0), lim.hit("a", 121.0)] == [0, 0]
    assert lim.hit("a", 150.0) == 31 and lim.hit("b", 150.0) == 0 and lim.hit("a", 180.5) == 0


def test_rate_limiter_at_max_sessions_forgets_the_oldest_window_first():
    lim = RateLimiter(1, max_sessions=2)
    assert lim.hit("a", 60.0) == 0 and lim.hit("b", 90.0) == 0  # both in minute 1
    assert lim.hit("a", 125.0) == 0  # a's window restarts in minute 2: a is now the newest
    assert lim.hit("c", 130.0) == 0  # a third session: b (minute 1) is forgotten, not a
    assert list(lim._windows) == ["a", "c"]
    assert lim.hit("a", 131.0) > 0 and lim.hit("c", 131.0) > 0  # their counts were kept
    assert lim.hit("a", 131.0) > 0 and list(lim._windows) == ["a", "c"]  # a refusal reorders nothing
    assert lim.hit("b", 132.0) == 0 and list(lim._windows) == ["c", "b"]  # b starts afresh; a goes


# -- CORS ----------------------------------------------------------------------------------------------
def test_preflight_from_an_allowed_origin_needs_no_key(app):
    r = client(app).options("/search", headers={"Origin": ALLOWED, "Access-Control-Request-Method": "GET",
                                                 "Access-Control-Request-Headers": "x-gateway-key"})
    assert r.status_code == 204
    assert r.headers["access-control-allow-origin"] == ALLOWED
    assert "x-gateway-key" in r.headers["access-control-allow-headers"].lower()
    assert "Origin" in r.headers["vary"]


def test_preflight_from_another_origin_is_refused_without_cors_headers(app):
    r = client(app).options("/search", headers={"Origin": OTHER, "Access-Control-Request-Method": "GET"})
    _problem(r, 403)
    assert "access-control-allow-origin" not in r.headers


def test_default_allow_list_is_empty(andorra, settings, tmp_path):
    st = dataclasses.replace(settings, state=tmp_path / "s.sqlite3")
    assert st.cors_origins is None
    c = client(create_app(andorra, st, KeyStore(st.state)))
    r = c.options("/search", headers={"Origin": ALLOWED, "Access-Control-Request-Method": "GET"})
    assert r.status_code == 403 and "access-control-allow-origin" not in r.headers


def test_gateway_key_responses_carry_cors_headers_for_allowed_origins(app, web_settings, api_key):
    c = client(app)
    ks = KeyStore(web_settings.state)
    key, _ = ks.create("unlimited", "cors")
    h = {"X-Gateway-Key": key, "X-Gateway-Host": web_settings.gateway_host}
    r = c.get("/search", params={"q": "andorra"}, headers={**h, "Origin": ALLOWED})
    assert r.status_code == 200 and r.headers["access-control-allow-origin"] == ALLOWED
    r = c.get("/search", params={"q": "andorra"}, headers={**h, "Origin": OTHER})
    assert r.status_code == 200 and "access-control-allow-origin" not in r.headers
    # Problem bodies for an allowed origin are readable by the page too.
    r = c.get("/search", params={"q": "a"}, headers={**h, "Origin": ALLOWED})
    assert r.status_code == 400 and r.headers["access-control-allow-origin"] == ALLOWED


# -- publishable keys ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pk(web_settings):
    store = PublishableKeys(web_settings.state)
    key, rec = store.create("free", [ALLOWED], ["tiles", "search"], "page")
    search_only, _ = store.create("free", [ALLOWED], ["search"], "search only")
    return key, rec, search_only


def test_publishable_key_from_its_origin_reads_tiles_and_search(app, pk):
    key, _, _ = pk
    c = client(app)
    h = {"X-Gateway-Key": key, "Origin": ALLOWED}
    r = c.get("/search", params={"q": "andorra"}, headers=h)
    assert r.status_code == 200 and r.headers["access-control-allow-origin"] == ALLOWED
    assert c.get("/tiles/andorra/12/2065/1512", headers=h).status_code == 200
    assert c.get("/tiles/andorra", headers=h).json()["tilejson"]


def test_publishable_key_is_refused_off_scope_origin_or_when_revoked(app, pk, web_settings):
    key, rec, search_only = pk
    c = client(app)
    body = _problem(c.post("/route", headers={"X-Gateway-Key": key, "Origin": ALLOWED},
                           json={"locations": [{"lon": 1.52, "lat": 42.5}, {"lon": 1.53, "lat": 42.51}]}), 403)
    assert "scopes" in body["detail"]
    _problem(c.get("/tiles/andorra/12/2065/1512", headers={"X-Gateway-Key": search_only, "Origin": ALLOWED}), 403)
    _problem(c.get("/search", params={"q": "andorra"}, headers={"X-Gateway-Key": key, "Origin": OTHER}), 403)
    _problem(c.get("/search", params={"q": "andorra"}, headers={"X-Gateway-Key": key}), 403)  # no Origin: not a page
    # An origin of the key that the deployment does not allow (not in GEOENGINE_CORS_ORIGINS).
    store = PublishableKeys(web_settings.state)
    k2, _ = store.create("free", ["https://not-allowed.example"], ["search"])
    _problem(c.get("/search", params={"q": "andorra"},
                   headers={"X-Gateway-Key": k2, "Origin": "https://not-allowed.example"}), 403)
    _problem(c.get("/search", params={"q": "andorra"}, headers={"X-Gateway-Key": key + "x", "Origin": ALLOWED}), 403)
    k3, r3 = store.create("free", [ALLOWED], ["search"])
    store.revoke(r3.id)
    _problem(c.get("/search", params={"q": "andorra"}, headers={"X-Gateway-Key": k3, "Origin": ALLOWED}), 403)


def test_publishable_key_is_counted_on_its_plan(app, pk, web_settings):
    key, rec, _ = pk
    ks = KeyStore(web_settings.state)
    before = ks.usage(rec.usage_id)
    client(app).get("/search", params={"q": "andorra"}, headers={"X-Gateway-Key": key, "Origin": ALLOWED})
    after = ks.usage(rec.usage_id)
    assert sum(after.values()) == sum(before.values()) + 1


def test_publishable_key_validation():
    assert normalise_origin("HTTPS://Maps.Example.org/") == "https://maps.example.org"
    assert normalise_origin("http://127.0.0.1:8080") == "http://127.0.0.1:8080"
    for bad in ("maps.example.org", "https://a.example/path", "ftp://a.example", "https://"):
        with pytest.raises(ValueError):
            normalise_origin(bad)
    assert parse_origins(None) == frozenset() and parse_origins("") == frozenset()
    assert path_scope("/tiles/andorra/1/0/0") == "tiles" and path_scope("/sources") == "tiles"
    assert path_scope("/search/reverse") == "search" and path_scope("/route") is None
    for path in ("/reverse", "/lookup", "/details", "/photon/api", "/photon/reverse"):  # the geocoding dialects
        assert path_scope(path) == "search", path
    assert path_scope("/status") is None and path_scope("/photon") is None
    assert path_scope("/tiles/andorra/cache/clear") is None


def test_publishable_store_rejects_bad_input(tmp_path):
    from geoengine.errors import InvalidRequest

    store = PublishableKeys(tmp_path / "s.sqlite3", {"free": None})
    for plan, origins, scopes in [("gold", [ALLOWED], ["tiles"]), ("free", [], ["tiles"]),
                                  ("free", ["nope"], ["tiles"]), ("free", [ALLOWED], ["routing"]),
                                  ("free", [ALLOWED], [])]:
        with pytest.raises(InvalidRequest):
            store.create(plan, origins, scopes)


def test_cli_publishable_keys(settings, tmp_path):
    import os
    import subprocess
    import sys

    env = {**os.environ, "GEOENGINE_HOME": str(tmp_path)}

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "geoengine", "keys", *args], env=env, capture_output=True,
                              text=True, timeout=120)

    assert "--origin" in cli("publishable", "--help").stdout
    bad = cli("publishable", "--plan", "free", "--origin", "maps.example.org", "--scope", "tiles")
    assert bad.returncode != 0 and "origin" in bad.stderr and "Traceback" not in bad.stderr
    bad = cli("publishable", "--plan", "free", "--origin", ALLOWED, "--scope", "routing")
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    made = cli("publishable", "--plan", "free", "--origin", ALLOWED, "--scope", "search")
    assert made.returncode == 0, made.stderr
    key = made.stdout.strip().splitlines()[-1]
    assert key.startswith("pk_")
    listed = cli("list")
    assert "publishable" in listed.stdout and ALLOWED in listed.stdout and key not in listed.stdout
    gone = cli("revoke", key)
    assert gone.returncode == 0 and "revoked publishable key" in gone.stdout
    assert PublishableKeys(tmp_path / "state.sqlite3").authenticate(key) is None
