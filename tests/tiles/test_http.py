"""The tile endpoints through the façade, in process."""

from __future__ import annotations

import gzip

import pytest

from geoengine.config import Settings

from .tiles_helpers import ANDORRA_LA_VELLA, decode, lonlat_tile

GZ = {"Accept-Encoding": "gzip"}
ID = {"Accept-Encoding": "identity"}


@pytest.fixture(scope="module", params=["fast-path", "route"])
def client(request, andorra, api_client, settings, keystore, api_key):
    """The app as served (tile requests answered by TileFastPath before the router), and the same app
    without that middleware (tile requests reach the raw Starlette route)."""
    if request.param == "fast-path":
        return api_client(andorra)
    from starlette.testclient import TestClient

    from geoengine.server.app import create_app
    from geoengine.server.dispatch import Middleware as TileFastPath

    app = create_app(andorra, settings, keystore)
    app.user_middleware = [m for m in app.user_middleware if m.cls is not TileFastPath]
    c = TestClient(app, raise_server_exceptions=False)
    c.headers.update({"X-Gateway-Key": api_key, "X-Gateway-Host": settings.gateway_host})
    return c


@pytest.fixture(scope="module")
def z14():
    x, y = lonlat_tile(*ANDORRA_LA_VELLA, 14)
    return f"/tiles/andorra/14/{x}/{y}"


def test_sources(client):
    r = client.get("/sources")
    assert r.status_code == 200
    (entry,) = r.json()["sources"]
    assert set(entry) == {"id", "name", "format", "minzoom", "maxzoom", "bounds", "center", "tiles", "tilejson"}
    assert entry["id"] == "andorra" and entry["format"] == "pbf"
    assert (entry["minzoom"], entry["maxzoom"]) == (0, 14)
    assert len([float(v) for v in entry["bounds"].split(",")]) == 4
    assert len(entry["center"].split(",")) == 3
    assert entry["tiles"] == "http://testserver/tiles/andorra/{z}/{x}/{y}"
    assert entry["tilejson"] == "http://testserver/tiles/andorra"


def test_sources_honour_proxy_headers_from_trusted_proxies(andorra, settings, keystore, api_key):
    from starlette.testclient import TestClient

    from geoengine.server.app import create_app

    # the TestClient's peer is "testclient": trusted here, so its forwarded headers count
    s = Settings(home=settings.home, gateway_host=settings.gateway_host, forwarded_allow_ips="testclient")
    client = TestClient(create_app(andorra, s, keystore))
    client.headers.update({"X-Gateway-Key": api_key, "X-Gateway-Host": s.gateway_host})
    r = client.get("/sources", headers={"X-Forwarded-Proto": "https", "X-Forwarded-Host": "maps.example.org, inner"})
    entry = r.json()["sources"][0]
    assert entry["tiles"] == "https://maps.example.org/tiles/andorra/{z}/{x}/{y}"
    r = client.get("/tiles/andorra", headers={"X-Forwarded-Proto": "https", "X-Forwarded-Host": "maps.example.org"})
    assert r.json()["tiles"] == ["https://maps.example.org/tiles/andorra/{z}/{x}/{y}"]


def test_proxy_headers_from_anyone_else_are_ignored(client):
    r = client.get("/sources", headers={"X-Forwarded-Proto": "https", "X-Forwarded-Host": "attacker.example"})
    assert r.json()["sources"][0]["tiles"] == "http://testserver/tiles/andorra/{z}/{x}/{y}"


def test_public_url_setting_wins(andorra, settings, keystore, api_key):
    from starlette.testclient import TestClient

    from geoengine.server.app import create_app

    s = Settings(home=settings.home, gateway_host=settings.gateway_host, public_url="https://tiles.example.com/geo/")
    c = TestClient(create_app(andorra, s, keystore))
    c.headers.update({"X-Gateway-Key": api_key, "X-Gateway-Host": s.gateway_host})
    entry = c.get("/sources", headers={"X-Forwarded-Host": "ignored"}).json()["sources"][0]
    assert entry["tiles"] == "https://tiles.example.com/geo/tiles/andorra/{z}/{x}/{y}"
    assert entry["tilejson"] == "https://tiles.example.com/geo/tiles/andorra"


def test_tilejson(client):
    r = client.get("/tiles/andorra")
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    doc = r.json()
    assert doc["tilejson"] == "3.0.0"
    for key in ("name", "attribution", "scheme", "format", "tiles", "minzoom", "maxzoom", "bounds", "center",
                "vector_layers"):
        assert key in doc
    assert all("{z}" in t and "{x}" in t and "{y}" in t and t.startswith("http") for t in doc["tiles"])
    w, s, e, n = doc["bounds"]
    assert -180 <= w < e <= 180 and -90 <= s < n <= 90
    assert w <= doc["center"][0] <= e and s <= doc["center"][1] <= n
    assert doc["minzoom"] <= doc["center"][2] <= doc["maxzoom"]
    ids = [lay["id"] for lay in doc["vector_layers"]]
    assert {"earth", "water", "roads", "places", "pois", "buildings", "boundaries"} <= set(ids)
    assert all(isinstance(lay["fields"], dict) for lay in doc["vector_layers"])


def test_tilejson_unknown_source(client):
    r = client.get("/tiles/nowhere")
    assert r.status_code == 404 and r.json()["status"] == 404


def test_tile_gzip(client, z14):
    r = client.get(z14, headers=GZ)
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/x-protobuf"
    assert r.headers["cache-control"] == "public, max-age=86400"
    assert r.headers["content-encoding"] == "gzip"
    assert r.headers["etag"].startswith('"')
    # The client library transparently decompressed it.
    names = {f["properties"].get("name") for f in decode(r.content)["roads"]["features"]}
    assert "Avinguda Meritxell" in names


def test_tile_identity_for_clients_without_gzip(client, z14):
    gz = client.get(z14, headers=GZ)
    r = client.get(z14, headers=ID)
    assert r.status_code == 200 and "content-encoding" not in r.headers
    assert r.content[:2] != b"\x1f\x8b"
    assert r.content == gz.content
    assert int(r.headers["content-length"]) == len(r.content)
    assert r.headers["etag"] != gz.headers["etag"]
    q0 = client.get(z14, headers={"Accept-Encoding": "gzip;q=0, deflate"})
    assert "content-encoding" not in q0.headers


def test_suffixes(client, z14):
    plain = client.get(z14, headers=ID).content
    for suffix in (".pbf", ".mvt"):
        r = client.get(z14 + suffix, headers=ID)
        assert r.status_code == 200 and r.content == plain


def test_etag_304(client, z14):
    for headers in (GZ, ID):
        etag = client.get(z14, headers=headers).headers["etag"]
        r = client.get(z14, headers={**headers, "If-None-Match": etag})
        assert r.status_code == 304 and r.content == b""
        assert r.headers["etag"] == etag and r.headers["cache-control"] == "public, max-age=86400"
        assert client.get(z14, headers={**headers, "If-None-Match": f'"other", W/{etag}'}).status_code == 304
        assert client.get(z14, headers={**headers, "If-None-Match": '"other"'}).status_code == 200


def test_no_tile_is_204(client):
    r = client.get("/tiles/andorra/14/0/0")
    assert r.status_code == 204 and r.content == b""
    assert client.get("/tiles/andorra/20/0/0.pbf").status_code == 204


@pytest.mark.parametrize(("path", "field"), [
    ("/tiles/andorra/23/0/0", "z"),
    ("/tiles/andorra/-1/0/0", "z"),
    ("/tiles/andorra/2/4/0", "x"),
    ("/tiles/andorra/2/0/4", "y"),
    ("/tiles/andorra/14/16384/0", "x"),
    ("/tiles/andorra/3/0/-1", "y"),
    ("/tiles/andorra/a/0/0", "z"),
    ("/tiles/andorra/3/1.5/0", "x"),
    ("/tiles/andorra/3/1/1.png", "y"),
    ("/tiles/andorra/3/1/1_0", "y"),
])
def test_bad_coordinates_400(client, path, field):
    r = client.get(path)
    assert r.status_code == 400
    body = r.json()
    assert r.headers["content-type"] == "application/problem+json"
    assert body["status"] == 400 and [e["field"] for e in body["errors"]] == [field]


def test_unknown_source_404(client):
    r = client.get("/tiles/nowhere/0/0/0")
    assert r.status_code == 404 and r.json()["title"] == "Not found"


def test_head(client, z14):
    r = client.head(z14, headers=GZ)
    assert r.status_code == 200 and r.content == b""
    assert int(r.headers["content-length"]) > 0 and r.headers["content-encoding"] == "gzip"


def test_gateway_still_guards_tiles(client, z14):
    r = client.get(z14, headers={"X-Gateway-Key": "gk_bad_key"})
    assert r.status_code == 403


def test_cache_clear(client, andorra, z14, keystore, settings):
    assert client.post("/tiles/andorra/cache/clear").status_code == 403  # the tests' key has no admin scope
    admin, _ = keystore.create("unlimited", "tile admin", scopes=["admin"])
    client.headers["X-Gateway-Key"], plain = admin, client.headers["X-Gateway-Key"]
    try:
        _cache_clear(client, z14)
    finally:
        client.headers["X-Gateway-Key"] = plain


def _cache_clear(client, z14):
    client.post("/tiles/andorra/cache/clear")
    client.get(z14, headers=GZ)
    client.get("/tiles/andorra/13/0/0")
    r = client.post("/tiles/andorra/cache/clear")
    assert r.status_code == 200 and r.json() == {"cleared": 2, "source": "andorra"}
    assert client.post("/tiles/andorra/cache/clear").json() == {"cleared": 0, "source": "andorra"}
    assert client.post("/tiles/nowhere/cache/clear").status_code == 404
    assert client.get("/tiles/andorra/cache/clear").status_code in (204, 400, 404, 405)


def test_tiles_do_not_count_against_the_quota(andorra, settings, keystore):
    from starlette.testclient import TestClient

    from geoengine.server.app import create_app

    key, record = keystore.create("free", "tile quota test")
    c = TestClient(create_app(andorra, settings, keystore))
    c.headers.update({"X-Gateway-Key": key, "X-Gateway-Host": settings.gateway_host})
    for _ in range(5):
        assert c.get("/tiles/andorra/0/0/0").status_code == 200
    assert c.get("/sources").status_code == 200
    assert c.get("/tiles/andorra").status_code == 200
    assert not any(k.startswith("non_tile") for k in keystore.usage(record.id))
    c.get("/health")
    assert any(k.startswith("non_tile") for k in keystore.usage(record.id))


def test_openapi_documents_tiles(client):
    paths = client.get("/openapi.json").json()["paths"]
    for p in ("/sources", "/tiles/{source}", "/tiles/{source}/{z}/{x}/{y}", "/tiles/{source}/cache/clear"):
        assert p in paths
    tile = paths["/tiles/{source}/{z}/{x}/{y}"]["get"]
    assert {"200", "204", "304", "400", "404"} <= set(tile["responses"])
    assert "application/x-protobuf" in tile["responses"]["200"]["content"]


def test_gzip_bytes_are_what_the_archive_stores(client, andorra, z14):
    x, y = z14.split("/")[-2:]
    stored = andorra.tiles.get("andorra", 14, int(x), int(y))
    r = client.get(z14, headers=ID)
    assert gzip.decompress(stored) == r.content


def test_raster_source_content_type(andorra, settings, keystore, api_key, tmp_path):
    """A non-vector archive in the extra folder is served with its own media type, uncompressed."""
    import sqlite3
    import zlib

    from starlette.testclient import TestClient

    import geoengine
    from geoengine.server.app import create_app

    def png1x1() -> bytes:
        def chunk(kind, data):
            return len(data).to_bytes(4, "big") + kind + data + zlib.crc32(kind + data).to_bytes(4, "big")
        ihdr = (1).to_bytes(4, "big") * 2 + bytes([8, 0, 0, 0, 0])
        return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\x00\x80")) + chunk(b"IEND", b"")

    db = sqlite3.connect(tmp_path / "shade.mbtiles")
    db.executescript("CREATE TABLE metadata (name TEXT, value TEXT); CREATE TABLE tiles (zoom_level INTEGER,"
                     " tile_column INTEGER, tile_row INTEGER, tile_data BLOB);")
    db.executemany("INSERT INTO metadata VALUES (?, ?)", [("name", "shade"), ("format", "png"), ("minzoom", "0"),
                                                         ("maxzoom", "0")])
    db.execute("INSERT INTO tiles VALUES (0, 0, 0, ?)", (png1x1(),))
    db.commit()
    db.close()
    s = Settings(home=settings.home, gateway_host=settings.gateway_host, tiles_dir=tmp_path)
    c = TestClient(create_app(geoengine.open(andorra.path, settings=s), s, keystore))
    c.headers.update({"X-Gateway-Key": api_key, "X-Gateway-Host": s.gateway_host})
    r = c.get("/tiles/shade/0/0/0", headers=GZ)
    assert r.status_code == 200 and r.headers["content-type"] == "image/png"
    assert "content-encoding" not in r.headers and r.content == png1x1()
    entry = {e["id"]: e for e in c.get("/sources").json()["sources"]}["shade"]
    assert entry["format"] == "png" and entry["bounds"] == "-180,-85.0511288,180,85.0511288"
