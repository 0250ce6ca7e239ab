"""Photon's API under /photon (geoengine/dialects/photon.py) on the Andorra bundle: the GeoJSON
FeatureCollection and its properties against the engine's places, the filters, and Photon's 400
{"message"} answers for the bad inputs Photon's own API tests refuse (komoot/photon ApiIntegrationTest)."""

from __future__ import annotations

import pytest

from geoengine.geo import haversine_m

POINT = {"lat": 42.5063, "lon": 1.5218}
PROPS = {"osm_id", "osm_type", "osm_key", "osm_value", "name", "housenumber", "street", "postcode", "city",
         "locality", "district", "county", "state", "country", "countrycode", "type", "extent"}


@pytest.fixture(scope="module")
def client(api_client, andorra):
    return api_client(andorra)


def _ok(client, path, params):
    r = client.get(path, params=params)
    assert r.status_code == 200, (params, r.text)
    assert r.headers["content-type"] == "application/json"
    doc = r.json()
    assert doc["type"] == "FeatureCollection"
    return doc["features"]


def _bad(client, path, params):
    r = client.get(path, params=params)
    assert r.status_code == 400, (params, r.text)
    assert r.headers["content-type"] == "application/json"
    body = r.json()
    assert list(body) == ["message"] and body["message"], body
    return body["message"]


def test_search_features_are_the_engines_places(client, andorra):
    places = andorra.geocode("Andorra la Vella", limit=5)
    feats = _ok(client, "/photon/api", {"q": "Andorra la Vella", "limit": 5})
    assert len(feats) == len(places) > 0
    for f, p in zip(feats, places, strict=True):
        props = f["properties"]
        assert set(props) <= PROPS, set(props) - PROPS
        assert f["geometry"] == {"type": "Point", "coordinates": [p.lon, p.lat]}
        assert (props["osm_key"], props["osm_value"]) == (p.category, p.type)
        assert props["osm_type"] == {"node": "N", "way": "W", "relation": "R"}[p.osm_type]
        assert props["osm_id"] == p.osm_id
        assert props.get("countrycode") == (p.address.get("country_code") or "").upper() or "countrycode" not in props
        assert props["type"] in ("house", "street", "locality", "district", "city", "county", "state", "country",
                                 "other")
    top = feats[0]["properties"]
    assert top["name"] == "Andorra la Vella" and top["countrycode"] == "AD"


def test_reverse_is_the_nearest_address(client, andorra):
    places = andorra.reverse(lon=POINT["lon"], lat=POINT["lat"], zoom=18)
    feats = _ok(client, "/photon/reverse", POINT)
    assert len(feats) == len(places) == 1
    assert feats[0]["properties"]["osm_id"] == places[0].osm_id
    if places[0].housenumber:
        assert feats[0]["properties"]["housenumber"] == places[0].housenumber
    # a radius smaller than the distance to it leaves nothing
    d = float(haversine_m(POINT["lat"], POINT["lon"], places[0].lat, places[0].lon))
    if d > 2:
        assert _ok(client, "/photon/reverse", {**POINT, "radius": d / 2000}) == []


def test_filters(client):
    for tag in ("place", "place:town", "highway"):
        feats = _ok(client, "/photon/api", {"q": "Andorra", "osm_tag": tag, "limit": 10})
        key, _, value = tag.partition(":")
        assert all(f["properties"]["osm_key"] == key for f in feats), tag
        assert all(f["properties"]["osm_value"] == value for f in feats) if value else True
    some = _ok(client, "/photon/api", {"q": "Andorra", "limit": 10})
    without = _ok(client, "/photon/api", {"q": "Andorra", "osm_tag": "!place", "limit": 10})
    assert all(f["properties"]["osm_key"] != "place" for f in without)
    assert len(some) > 0
    feats = _ok(client, "/photon/api", {"q": "Andorra", "layer": "street", "limit": 10})
    assert all(f["properties"]["type"] == "street" for f in feats)
    inside = _ok(client, "/photon/api", {"q": "Carrer", "bbox": "1.50,42.49,1.54,42.52", "limit": 20})
    assert inside and all(1.50 <= f["geometry"]["coordinates"][0] <= 1.54 and
                          42.49 <= f["geometry"]["coordinates"][1] <= 42.52 for f in inside)


def test_limit_is_clamped(client):
    one = _ok(client, "/photon/api", {"q": "Carrer", "limit": 1})
    assert len(one) == 1
    assert _ok(client, "/photon/api", {"q": "Carrer", "limit": 0}) == one
    assert len(_ok(client, "/photon/api", {"q": "Carrer", "limit": 500})) <= 50
    assert len(_ok(client, "/photon/api", {"q": "Carrer"})) <= 15  # Photon's default


def test_language(client):
    a = _ok(client, "/photon/api", {"q": "Andorra", "lang": "en"})
    b = client.get("/photon/api", params={"q": "Andorra"}, headers={"Accept-Language": "en-GB,en;q=0.8"}).json()
    assert a == b["features"]


@pytest.mark.parametrize("path,params,message", [
    ("/photon/api", {}, "q parameter is required"),
    ("/photon/api", {"q": "  "}, "q parameter is required"),
    ("/photon/api", {"q": "Andorra", "bogus": "thing"}, "Unknown query parameter 'bogus'"),
    ("/photon/api", {"q": "Andorra", "limit": "NaN"}, "limit"),
    ("/photon/api", {"q": "Andorra", "lat": 42.5}, "Missing parameter 'lon'."),
    ("/photon/api", {"q": "Andorra", "lon": 1.5}, "Missing parameter 'lat'."),
    ("/photon/api", {"q": "Andorra", "lat": 42.5, "lon": "NaN"}, "lon"),
    ("/photon/api", {"q": "Andorra", "lat": "bad", "lon": 1.5}, "lat"),
    ("/photon/api", {"q": "Andorra", "lat": 42.5, "lon": "Infinity"}, "lon"),
    ("/photon/api", {"q": "Andorra", "lat": "-Infinity", "lon": 1.5}, "lat"),
    ("/photon/api", {"q": "Andorra", "lat": 42.5, "lon": ""}, "lon"),
    ("/photon/api", {"q": "Andorra", "lat": 90.01, "lon": 1.5}, "Invalid value for 'lat' parameter."),
    ("/photon/api", {"q": "Andorra", "lat": 42.5, "lon": -180.01}, "Invalid value for 'lon' parameter."),
    ("/photon/api", {"q": "Andorra", "bbox": "9.6,52.3,9.8"}, "Invalid number of supplied coordinates"),
    ("/photon/api", {"q": "Andorra", "bbox": "9.6,52.3,NaN,9.8"}, "Invalid bounds for parameter 'bbox'"),
    ("/photon/api", {"q": "Andorra", "bbox": "9.6,52.3,r34,9.8"}, "Invalid number of supplied coordinates"),
    ("/photon/api", {"q": "Andorra", "bbox": "9.6,-92,9.8,14"}, "Invalid bounds"),
    ("/photon/api", {"q": "Andorra", "bbox": "-181, 9, 4, 12"}, "Invalid bounds"),
    ("/photon/api", {"q": "Andorra", "osm_tag": "bad:bad:bad"}, "Invalid format for osm_tag parameter."),
    ("/photon/api", {"q": "Andorra", "osm_tag": "key:"}, "Invalid format for osm_tag parameter."),
    ("/photon/api", {"q": "Andorra", "layer": "suburb"}, "Unknown layer type."),
    ("/photon/api", {"q": "Andorra", "lang": "xx"}, "Language is not supported."),
    ("/photon/api", {"q": "Andorra", "lat": 42.5, "lon": 1.5, "location_bias_scale": "bad"}, "location_bias_scale"),
    ("/photon/api", {"q": "Andorra", "zoom": "near"}, "zoom"),
    ("/photon/reverse", {"lat": 42.5}, "Missing parameter 'lon'."),
    ("/photon/reverse", {"lon": 1.5}, "Missing parameter 'lat'."),
    ("/photon/reverse", {"lat": "Nan", "lon": 1.5}, "lat"),
    ("/photon/reverse", {"lat": 42.5, "lon": 180.01}, "Invalid value for 'lon' parameter."),
    ("/photon/reverse", {**POINT, "radius": "bad"}, "radius"),
    ("/photon/reverse", {**POINT, "radius": "0.0"}, "radius"),
    ("/photon/reverse", {**POINT, "radius": "-10.0"}, "radius"),
    ("/photon/reverse", {**POINT, "q": "x"}, "Unknown query parameter 'q'"),
])
def test_bad_input_is_photons_400(client, path, params, message):
    assert message in _bad(client, path, params)


def test_repeated_osm_tag_and_layer(client):
    r = client.get("/photon/api?q=Andorra&layer=city&layer=street&limit=20")
    assert r.status_code == 200
    assert all(f["properties"]["type"] in ("city", "street") for f in r.json()["features"])
    r = client.get("/photon/api?q=Andorra&osm_tag=place&osm_tag=highway&limit=20")
    assert r.status_code == 200
    assert all(f["properties"]["osm_key"] in ("place", "highway") for f in r.json()["features"])


def test_never_a_server_error(client):
    garbage = ["", " ", "abc", "NaN", "1e400", "-1", "0", "99999999999999999999999", ",,,", "1,2,3,4", "%00", "é",
               ":", "!", "a" * 3000]
    for path, base in (("/photon/api", {"q": "Andorra"}), ("/photon/reverse", POINT)):
        for name in ("q", "lat", "lon", "limit", "lang", "osm_tag", "bbox", "layer", "location_bias_scale", "zoom",
                     "radius", "dedupe"):
            for value in garbage:
                r = client.get(path, params={**base, name: value})
                assert r.status_code in (200, 400), (path, name, value, r.status_code, r.text[:200])
