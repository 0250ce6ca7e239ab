"""Search, reverse and lookup through the library on the real Andorra bundle (OSM + GeoNames)."""

from __future__ import annotations

import numpy as np
import pytest

from geoengine.errors import InvalidRequest, NotFound
from geoengine.geo import haversine_m
from geoengine.search.text import normalise, tokens

SPEC_FIELDS = {"address", "id", "score", "index", "doc_type", "display_name", "name", "name_en", "place_class", "category",
               "importance", "location", "canonical_id", "source"}


def top(engine, q, **kw):
    return engine.search(q, **kw)["results"]


def test_normalise_folds_case_and_accents():
    assert normalise("Sant Julià de Lòria") == "sant julia de loria"
    assert normalise("MÜNCHEN") == normalise("munchen")
    assert tokens("l’Aldosa de Canillo") == ["l", "aldosa", "de", "canillo"]
    assert normalise("Łódź Øresund Straße") == "lodz oresund strasse"


def test_full_name_finds_the_town_once(andorra):
    res = andorra.search("Andorra la Vella")
    first = res["results"][0]
    assert set(first) == SPEC_FIELDS
    assert first["name"] == "Andorra la Vella" and first["doc_type"] == "place" and first["source"] == "osm"
    assert first["place_class"] == "town" and first["id"] == first["canonical_id"]
    # GeoNames describes the same town: it shares the canonical id and is not returned a second time
    same = [r for r in res["results"] if normalise(r["name"]) == "andorra la vella"]
    assert len(same) == 1
    loc = first["location"]
    assert abs(loc["lat"] - 42.507) < 0.02 and abs(loc["lon"] - 1.52) < 0.02


def test_geonames_member_points_to_the_osm_canonical_document(andorra):
    ix = andorra.search_index
    town = top(andorra, "Andorra la Vella")[0]
    members = [i for i in range(ix.n) if int(ix.canon[i]) == ix.row_of(town["id"]) and ix.cols["id"][i] != town["id"]
               and ix.cols["source"][i] == "geonames"]  # (the parish's boundary relation is a member too)
    assert members, "the GeoNames row of Andorra la Vella is not merged"
    member = andorra.place(ix.cols["id"][members[0]])
    assert member["source"] == "geonames" and member["canonical_id"] == town["id"]
    assert andorra.place(member["canonical_id"])["id"] == town["id"]


@pytest.mark.parametrize(("query", "expected"), [
    ("Sant Jul", "Sant Julià de Lòria"),       # prefix of the last word
    ("Sant Julia de Loria", "Sant Julià de Lòria"),  # no accents
    ("Loria", "Sant Julià de Lòria"),          # one word of the name
    ("Escaldws", "les Escaldes"),              # one typo
    ("Ordinno", "Ordino"),                     # one typo (insertion)
    ("Avinguda Merit", "Avinguda Meritxell"),  # a street, by prefix
    ("Our Lady of Meritxell", "Santuario Nostra Senyora de Maritxell"),  # English name of a POI
    ("ord", "Ordino"),                          # three letters
])
def test_queries_find_the_expected_document_first(andorra, query, expected):
    names = [r["name"] for r in top(andorra, query, lat=42.52, lon=1.56)]
    assert names and names[0] == expected, names


def test_exact_name_of_a_small_world_city_comes_first(andorra):
    """'Tan-Tan' (tokens tan, tan) matches hundreds of more important places through their alternate
    names; the exact-name lookup keeps it among the fully scored candidates, and it comes first."""
    first = top(andorra, "Tan-Tan")[0]
    assert first["name"] == "Tan-Tan" and first["source"] == "geonames"


def test_world_city_by_accent_free_and_local_name(andorra):
    first = top(andorra, "Munchen")[0]
    assert first["source"] == "geonames" and first["display_name"].endswith("DE")
    assert first["name"] in ("Munich", "München")
    assert top(andorra, "München")[0]["id"] == first["id"]


def test_types_filter(andorra):
    pois = top(andorra, "hotel", types="poi", size=25)
    assert pois and all(r["doc_type"] == "poi" for r in pois)
    places = top(andorra, "Canillo", types=["place"], size=25)
    assert places and all(r["doc_type"] == "place" for r in places)


def test_location_bias_prefers_nearby_results(andorra):
    soldeu = (42.5769, 1.6677)
    sant_julia = (42.4637, 1.4913)
    a = top(andorra, "hotel", types="poi", lat=soldeu[0], lon=soldeu[1])[0]["location"]
    b = top(andorra, "hotel", types="poi", lat=sant_julia[0], lon=sant_julia[1])[0]["location"]
    da = haversine_m(*soldeu, np.array([a["lat"]]), np.array([a["lon"]]))[0]
    db = haversine_m(*soldeu, np.array([b["lat"]]), np.array([b["lon"]]))[0]
    assert da < 3000 < db


def test_size_and_total(andorra):
    res = andorra.search("hotel", size=3)
    assert len(res["results"]) == 3 and res["total"] >= 3
    assert len(andorra.search("hotel", size=25)["results"]) <= 25
    assert andorra.search("zzqqxxyy")["results"] == []


def test_reverse_nearest_first_within_radius(andorra):
    res = andorra.reverse(lat=42.5075, lon=1.5218, radius="500m", size=10)
    d = [r["distance_m"] for r in res["results"]]
    assert len(d) >= 3 and d == sorted(d) and d[-1] <= 500
    assert all(set(r) == SPEC_FIELDS | {"distance_m"} for r in res["results"])
    # each distance is the real distance to the point documents
    for r in res["results"]:
        if r["index"] != "streets":
            real = haversine_m(42.5075, 1.5218, np.array([r["location"]["lat"]]), np.array([r["location"]["lon"]]))[0]
            assert abs(real - r["distance_m"]) < max(2.0, 0.01 * real)
    pois = andorra.reverse(lat=42.5075, lon=1.5218, radius="2km", types="poi")["results"]
    assert pois and all(r["doc_type"] == "poi" for r in pois)


def test_reverse_measures_streets_to_their_geometry(andorra):
    ix = andorra.search_index
    items = np.asarray(ix.items)
    docs = np.asarray(ix.item_doc)
    seg = np.flatnonzero((items[:, 0] != items[:, 2]) | (items[:, 1] != items[:, 3]))
    # a street vertex far (> 150 m) from the street's centre point
    v_lon, v_lat = items[seg, 0], items[seg, 1]
    d_centre = np.array([haversine_m(v_lat[k], v_lon[k], np.array([ix.lat[docs[s]]]), np.array([ix.lon[docs[s]]]))[0]
                         for k, s in enumerate(seg[:2000])])
    k = int(np.argmax(d_centre))
    assert d_centre[k] > 150
    street = ix.cols["id"][int(docs[seg[k]])]
    res = andorra.reverse(lat=float(v_lat[k]), lon=float(v_lon[k]), radius="100m", size=10)["results"]
    hit = [r for r in res if r["id"] == street]
    assert hit and hit[0]["distance_m"] < 1.0


def test_detail_by_id_and_missing(andorra):
    first = top(andorra, "Ordino")[0]
    doc = andorra.place(first["id"])
    assert doc["id"] == first["id"] and doc["name"] == first["name"] and doc["score"] is None
    with pytest.raises(NotFound):
        andorra.place("osm:node:0")
    with pytest.raises(NotFound):
        andorra.place("")


@pytest.mark.parametrize(("call", "field"), [
    (lambda e: e.search("a"), "q"),
    (lambda e: e.search("  a "), "q"),
    (lambda e: e.search("Ordino", size=0), "size"),
    (lambda e: e.search("Ordino", size=26), "size"),
    (lambda e: e.search("Ordino", lat=42.5), "lon"),
    (lambda e: e.search("Ordino", lon=1.5), "lat"),
    (lambda e: e.search("Ordino", lat=95, lon=1.5), "lat"),
    (lambda e: e.search("Ordino", types="place,road"), "types"),
    (lambda e: e.reverse(lat=42.5, lon=1.5, radius="2 km"), "radius"),
    (lambda e: e.reverse(lat=42.5, lon=1.5, radius="5mi"), "radius"),
    (lambda e: e.reverse(lat=42.5, lon=1.5, radius="-1km"), "radius"),
    (lambda e: e.reverse(lat=42.5, lon=1.5, radius="0m"), "radius"),
    (lambda e: e.reverse(lat=42.5, lon=1.5, radius="500km"), "radius"),
    (lambda e: e.reverse(lat=42.5, lon=1.5, size=11), "size"),
    (lambda e: e.reverse(lat=42.5, lon=None), "lon"),
    (lambda e: e.reverse(lat=42.5, lon=181), "lon"),
])
def test_bad_input_names_the_field(andorra, call, field):
    with pytest.raises(InvalidRequest) as exc:
        call(andorra)
    assert field in [e.field for e in exc.value.errors]


def test_index_is_memory_mapped(andorra):
    from geoengine.search.index import SearchIndex

    ix = SearchIndex(andorra.path / "search")
    assert isinstance(ix.post_doc, np.memmap) and isinstance(ix.lat, np.memmap)
    assert ix.n == andorra.search_index.n


def test_reverse_agrees_with_brute_force(andorra):
    """The growing R-tree box finds the same nearest documents as measuring every item."""
    from geoengine.search.index import segment_distance_m

    ix = andorra.search_index
    items = np.asarray(ix.items)
    item_doc = np.asarray(ix.item_doc)
    canon = np.asarray(ix.canon)
    merged = set(canon[canon != np.arange(ix.n)].tolist()) | set(np.flatnonzero(canon != np.arange(ix.n)).tolist())
    rng = np.random.default_rng(11)
    checked = 0
    for _ in range(40):
        lat, lon = rng.uniform(42.45, 42.64), rng.uniform(1.45, 1.75)
        d = segment_distance_m(lat, lon, items)
        per_doc = np.full(ix.n, np.inf)
        np.minimum.at(per_doc, item_doc, d)
        nearest = np.argsort(per_doc)[:6]
        expect = per_doc[nearest][per_doc[nearest] <= 2000][:5]
        res = andorra.reverse(lat=lat, lon=lon, radius="2km", size=5)["results"]
        if any(ix.row_of(r["id"]) in merged for r in res) or merged & set(nearest.tolist()):
            continue  # a canonical group is reported at its canonical document's own distance
        got = [r["distance_m"] for r in res]
        assert np.allclose(got, expect, atol=0.15), (lat, lon, got, expect)
        checked += 1
    assert checked >= 20
