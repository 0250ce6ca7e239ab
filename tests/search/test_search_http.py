"""The search endpoints over HTTP (in-process client with valid gateway headers): fields, bounds, errors."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import geoengine

RESULT_FIELDS = {"address", "id", "score", "index", "doc_type", "display_name", "name", "name_en", "place_class", "category",
                 "importance", "location", "canonical_id", "source"}


@pytest.fixture(scope="module")
def client(api_client, andorra):
    return api_client(andorra)


def test_search_response_shape(client):
    r = client.get("/search", params={"q": "Andorra la Vella", "size": 3})
    assert r.status_code == 200
    body = r.json()
    assert set(body) == {"query", "total", "took_ms", "results"} and body["query"] == "Andorra la Vella"
    assert isinstance(body["took_ms"], int) and body["total"] >= 1 and len(body["results"]) <= 3
    first = body["results"][0]
    assert set(first) == RESULT_FIELDS and first["name"] == "Andorra la Vella"
    assert set(first["location"]) == {"lat", "lon"}


def test_search_with_bias_and_types(client):
    r = client.get("/search", params={"q": "hotel", "types": "poi", "lat": 42.5769, "lon": 1.6677, "size": 25})
    assert r.status_code == 200
    res = r.json()["results"]
    assert res and all(x["doc_type"] == "poi" for x in res)


def test_empty_types_means_every_type(client):
    a = client.get("/search", params={"q": "hotel", "types": ""}).json()
    b = client.get("/search", params={"q": "hotel"}).json()
    assert a["results"] == b["results"] and a["total"] == b["total"]


def test_reverse_response_shape(client):
    r = client.get("/search/reverse", params={"lat": 42.5075, "lon": 1.5218, "radius": "500m"})
    assert r.status_code == 200
    body = r.json()
    assert set(body) == {"lat", "lon", "took_ms", "results"} and 1 <= len(body["results"]) <= 5
    d = [x["distance_m"] for x in body["results"]]
    assert d == sorted(d) and d[-1] <= 500
    assert all(set(x) == RESULT_FIELDS | {"distance_m"} for x in body["results"])


def test_detail_by_id_and_canonical_id(client):
    first = client.get("/search", params={"q": "Andorra la Vella"}).json()["results"][0]
    r = client.get(f"/search/detail/{first['canonical_id']}")
    assert r.status_code == 200 and r.json()["id"] == first["canonical_id"]
    assert RESULT_FIELDS <= set(r.json())


def test_detail_missing_is_404(client):
    r = client.get("/search/detail/osm:node:0")
    assert r.status_code == 404
    body = r.json()
    assert body["status"] == 404 and "osm:node:0" in body["detail"]


@pytest.mark.parametrize(("path", "params", "field"), [
    ("/search", {}, "q"),
    ("/search", {"q": "a"}, "q"),
    ("/search", {"q": "Ordino", "size": 0}, "size"),
    ("/search", {"q": "Ordino", "size": 26}, "size"),
    ("/search", {"q": "Ordino", "size": "ten"}, "size"),
    ("/search", {"q": "Ordino", "lat": 42.5}, "lon"),
    ("/search", {"q": "Ordino", "lon": 1.5}, "lat"),
    ("/search", {"q": "Ordino", "lat": 91, "lon": 1.5}, "lat"),
    ("/search", {"q": "Ordino", "lat": "north", "lon": 1.5}, "lat"),
    ("/search", {"q": "Ordino", "types": "road"}, "types"),
    ("/search/reverse", {"lon": 1.5}, "lat"),
    ("/search/reverse", {"lat": 42.5}, "lon"),
    ("/search/reverse", {"lat": 42.5, "lon": 1.5, "radius": "2 km"}, "radius"),
    ("/search/reverse", {"lat": 42.5, "lon": 1.5, "radius": "5mi"}, "radius"),
    ("/search/reverse", {"lat": 42.5, "lon": 1.5, "radius": "-1km"}, "radius"),
    ("/search/reverse", {"lat": 42.5, "lon": 1.5, "radius": "0km"}, "radius"),
    ("/search/reverse", {"lat": 42.5, "lon": 1.5, "radius": "km"}, "radius"),
    ("/search/reverse", {"lat": 42.5, "lon": 1.5, "size": 0}, "size"),
    ("/search/reverse", {"lat": 42.5, "lon": 1.5, "size": 11}, "size"),
    ("/search/reverse", {"lat": 42.5, "lon": 1.5, "types": "poi,x"}, "types"),
    ("/search", {"q": "hotel", "categories": "no such thing"}, "categories"),
    ("/search", {"q": "hotel", "categories": ",,"}, "categories"),
    ("/search", {"q": "hotel", "bbox": "1,42"}, "bbox"),
    ("/search", {"q": "hotel", "bbox": "2,42,1,43"}, "bbox"),
    ("/search", {"q": "hotel", "bbox": "1,42,2,nan"}, "bbox"),
    ("/search", {"q": "hotel", "countries": "AND"}, "countries"),
    ("/search", {"q": "hotel", "countries": "ad,x"}, "countries"),
    ("/search/reverse", {"lat": 42.5, "lon": 1.5, "categories": "amenity=no_such_value"}, "categories"),
    ("/search/reverse", {"lat": 42.5, "lon": 1.5, "categories": "x" * 300}, "categories"),
])
def test_bad_parameters_are_400_with_field(client, path, params, field):
    r = client.get(path, params=params)
    assert r.status_code == 400, r.text
    body = r.json()
    assert body["status"] == 400 and r.headers["content-type"].startswith("application/problem+json")
    assert field in [e["field"] for e in body.get("errors", [])], body


def test_unreadable_index_is_502(api_client, andorra, tmp_path, settings):
    broken = tmp_path / "broken"
    shutil.copytree(andorra.path, broken)
    (broken / "search" / "lat.npy").write_bytes(b"not a numpy file")
    engine = geoengine.open(broken, settings=settings)
    c = api_client(engine)
    for path, params in [("/search", {"q": "Ordino"}), ("/search/reverse", {"lat": 42.5, "lon": 1.5}),
                         ("/search/detail/geonames:3041563", {})]:
        r = c.get(path, params=params)
        assert r.status_code == 502, r.text
        assert r.json()["status"] == 502


def test_openapi_documents_search(client):
    doc = client.get("/openapi.json").json()
    params = {p["name"] for p in doc["paths"]["/search"]["get"]["parameters"]}
    assert {"q", "types", "lat", "lon", "size", "categories", "bbox", "countries"} <= params
    assert {"lat", "lon", "size", "types", "radius", "categories"} <= {
        p["name"] for p in doc["paths"]["/search/reverse"]["get"]["parameters"]}
    detail = doc["paths"]["/search/detail/{doc_id}"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    props = doc["components"]["schemas"][detail["$ref"].rsplit("/", 1)[1]]["properties"]
    assert {"names", "categories", "address", "osm", "tags", "geometry", "merged"} <= set(props)
    assert np.isin(["200", "400", "502"], list(doc["paths"]["/search"]["get"]["responses"])).all()


def test_fast_path_answers_like_the_engine(client, andorra):
    """/search and /search/reverse are answered by a raw route for plainly valid requests: same body as
    the engine's (apart from took_ms), JSON content type."""
    r = client.get("/search", params={"q": "Sant Jul", "lat": 42.52, "lon": 1.56, "size": 4, "types": "place"})
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    want = andorra.search("Sant Jul", lat=42.52, lon=1.56, size=4, types="place")
    got = r.json()
    assert {**got, "took_ms": 0} == {**want, "took_ms": 0}
    r = client.get("/search/reverse", params={"lat": 42.5075, "lon": 1.5218, "radius": "500m", "size": 3})
    want = andorra.reverse(lat=42.5075, lon=1.5218, radius="500m", size=3)
    assert r.status_code == 200 and {**r.json(), "took_ms": 0} == {**want, "took_ms": 0}


@pytest.mark.parametrize("prefix", ["", "size=05&"])  # the fast path, and FastAPI's route (size=05)
def test_filters_over_http(client, andorra, prefix):
    r = client.get(f"/search?{prefix}q=Carrer&categories=&bbox=1.50,42.49,1.54,42.52&countries=ad")
    assert r.status_code == 200, r.text
    want = andorra.search("Carrer", bbox="1.50,42.49,1.54,42.52", countries="ad", size=5 if prefix else 10)
    assert {**r.json(), "took_ms": 0} == {**want, "took_ms": 0} and want["results"]
    r = client.get(f"/search/reverse?{prefix}lat=42.5075&lon=1.5218&radius=20km&categories=amenity%2Ffuel")
    assert r.status_code == 200, r.text
    res = r.json()["results"]
    assert res and all(x["category"] == "fuel" for x in res)
    r = client.get(f"/search?{prefix}q=Apotheke&lat=42.5075&lon=1.5218")
    res = r.json()["results"]
    assert len(res) >= 3 and all(set(x) == RESULT_FIELDS for x in res) and res[0]["category"] == "pharmacy"


def test_detail_has_the_full_document(client):
    hit = client.get("/search", params={"q": "Andorra la Vella"}).json()["results"][0]
    d = client.get(f"/search/detail/{hit['id']}").json()
    assert set(d) == RESULT_FIELDS | {"names", "categories", "address", "osm", "tags", "geometry", "merged"}
    assert {m["source"] for m in d["merged"]} == {"osm", "geonames"} and d["geometry"]["type"] == "Point"


@pytest.mark.parametrize("query", ["q=Ordino&q=Canillo", "q=Ordino&size=03", "q=Ordino&lat=4.25e1&lon=1.5",
                                   "q=Ordino&size=%2B5"])
def test_unusual_but_valid_queries_go_through_fastapi(client, query):
    """Repeated parameters and numbers the fast path does not parse itself are judged by FastAPI."""
    r = client.get(f"/search?{query}")
    assert r.status_code == 200, r.text
    assert r.json()["results"]


def test_head_is_not_served_by_the_fast_path(client):
    """Starlette adds HEAD to a GET route; the fast path leaves it to the FastAPI route (GET only: 405)."""
    assert client.head("/search", params={"q": "Ordino"}).status_code == 405
