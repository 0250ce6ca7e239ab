"""The computation moved out of the dialects and the façade (issue 27: layers point downhill), tested where
it now lives: services/osrm_steps.py (OSRM steps, intersections, annotations, waypoints),
services/valhalla_edges.py (edge attributes, locate, expansion edges, resampling), services/geocoding_docs.py
(Nominatim's ranks, labels, boxes, deduplication; Photon's layers and osm_tag filters) and
services/map_assets.py (the map page's glyph PBFs, signed distance fields and sprite PNGs). Real Andorra
data where the function reads a graph, a route or places; the end-to-end answers stay covered by
tests/server."""

from __future__ import annotations

import io
import zlib
from types import SimpleNamespace

import numpy as np
import pytest

from geoengine.geo import haversine_m
from geoengine.services import geocoding_docs as G
from geoengine.services import map_assets as M
from geoengine.services import osrm_steps as S
from geoengine.services import valhalla_edges as V

A = (1.5218, 42.5063)  # Andorra la Vella
B = (1.5800, 42.5350)  # Encamp
Q = {"geometries": "polyline", "overview": "full", "steps": True, "annotations": ["duration", "distance", "speed"],
     "generate_hints": True}


# -- osrm_steps -----------------------------------------------------------------------------------------
def test_modifier_thresholds():
    assert [S._modifier(a) for a in (0, 19.9, -20, 59, 60, -139, 140, 169, 170, -180)] == [
        "straight", "straight", "slight left", "slight right", "right", "left", "sharp right", "sharp right",
        "uturn", "uturn"]


def test_summary_names_the_two_longest_streets_in_route_order():
    steps = [{"name": "A", "distance": 10}, {"name": "B", "distance": 50}, {"name": "", "distance": 99},
             {"name": "C", "distance": 40}, {"name": "A", "distance": 35}]
    assert S._summary(steps) == "A, B"  # A 45 m, B 50 m, C 40 m; A comes first


def test_turn_delays_are_spread_so_steps_add_up_to_the_leg():
    steps = [{"duration": 10.0, "weight": 10.0}, {"duration": 30.0, "weight": 30.0}]
    S._spread_turn_delays(steps, 48.0)
    assert [s["duration"] for s in steps] == [12.0, 36.0] and steps[1]["weight"] == 36.0
    untouched = [{"duration": 0.0, "weight": 0.0}]
    S._spread_turn_delays(untouched, 5.0)
    assert untouched[0]["duration"] == 0.0


def test_segment_seconds_follow_the_edges_and_add_up_to_the_leg():
    seg_m = np.array([10.0, 30.0, 20.0])
    leg = SimpleNamespace(shape_begin=np.array([0, 2]), shape_end=np.array([2, 3]),
                          edge_time_s=np.array([4.0, 6.0]), time_s=20.0)
    t = S._segment_seconds(leg, seg_m)
    # edge 0 (4 s) over 10 m + 30 m, edge 1 (6 s) over 20 m, then scaled from 10 s to the leg's 20 s
    assert np.allclose(t, [2.0, 6.0, 12.0])
    no_edges = SimpleNamespace(shape_begin=None, shape_end=None, edge_time_s=None, time_s=6.0)
    assert np.allclose(S._segment_seconds(no_edges, seg_m), [1.0, 3.0, 2.0])


def test_route_object_on_a_real_route(andorra):
    route = andorra.compute_route({"locations": [{"lon": A[0], "lat": A[1]}, {"lon": B[0], "lat": B[1]}],
                                   "costing": "auto", "directions_options": {"directions_type": "maneuvers"}}).best
    r = S.route_object(route, Q, "driving", graph=andorra.graph)
    leg, typed = r["legs"][0], route.legs[0]
    assert r["distance"] == pytest.approx(typed.length_m, abs=0.1)
    steps = leg["steps"]
    assert steps[0]["maneuver"]["type"] == "depart" and steps[-1]["maneuver"]["type"] == "arrive"
    assert sum(s["duration"] for s in steps) == pytest.approx(leg["duration"], abs=0.1 * len(steps))
    assert sum(s["distance"] for s in steps) == pytest.approx(leg["distance"], rel=0.01)
    crossed = 0
    for s in steps[1:-1]:
        m = s["maneuver"]
        first = s["intersections"][0]
        # the maneuver's own arms: the way back in and the way out carry its bearings
        assert first["bearings"][first["in"]] == (m["bearing_before"] + 180) % 360
        assert first["bearings"][first["out"]] == m["bearing_after"]
        assert first["entry"][first["in"]] is False or len(first["bearings"]) == 2
        for x in s["intersections"][1:]:  # junctions passed: more than two arms, sorted bearings
            crossed += 1
            assert len(x["bearings"]) > 2 and x["bearings"] == sorted(x["bearings"]) and x["entry"][x["out"]]
    assert crossed > 0
    ann = leg["annotation"]
    assert len(ann["distance"]) == len(typed.lon) - 1
    assert sum(ann["distance"]) == pytest.approx(typed.length_m, rel=0.01)
    assert sum(ann["duration"]) == pytest.approx(typed.time_s, rel=0.02)
    wps = S.waypoints(route, Q, andorra, "auto")
    # each waypoint is named after the street its leg starts or ends on
    assert [w["name"] for w in wps] == S.edge_names(andorra, [typed.edges[0], typed.edges[-1]])
    assert any(s["name"] for s in steps)


def test_nearest_waypoints_one_per_segment(andorra):
    prof = andorra.router.profile("auto")
    c = andorra.snapper.snap(A[0], A[1], prof.usable, index=0, field="coordinates", at_least=5)
    wps = S.nearest_waypoints(andorra, c, 5, {"generate_hints": False})
    g = andorra.graph
    assert 1 <= len(wps) <= 5
    assert [w["distance"] for w in wps] == sorted(w["distance"] for w in wps)
    osm = set(np.asarray(g.node_osm_id).tolist())
    assert all(len(w["nodes"]) == 2 and set(w["nodes"]) <= osm and "hint" not in w for w in wps)


def test_table_document_scales_rounds_and_snaps(andorra):
    coords = np.array([A, B], dtype=np.float64)
    q = {"sources": [0], "destinations": None, "radius": [None, None], "scale_factor": 2.0, "fallback_speed": None,
         "fallback_coordinate": "input", "annotations": ["duration", "distance"], "skip_waypoints": False,
         "generate_hints": False}
    doc = S.table_document(andorra, coords, "auto", None, q)
    res = andorra.router.matrix(coords[:1], coords, "auto", None)
    assert doc["durations"] == np.round(np.asarray(res.time_s, dtype=np.float64) * 2.0, 1).tolist()
    assert doc["distances"] == np.round(np.asarray(res.distance_m, dtype=np.float64), 1).tolist()
    assert [len(doc["sources"]), len(doc["destinations"])] == [1, 2]
    assert all(w["distance"] >= 0 and "hint" not in w for w in doc["sources"] + doc["destinations"])
    assert "fallback_speed_cells" not in doc


def test_table_values_leave_cells_without_a_route_null():
    assert S._table_values(np.array([[1.04, np.inf]]), np.array([[False, True]])) == [[1.0, None]]


# -- valhalla_edges -------------------------------------------------------------------------------------
def test_expansion_edges_equal_a_plain_reading():
    rng = np.random.default_rng(5)
    n = 400
    start = rng.uniform(0, 100, n)
    end = np.where(rng.random(n) < 0.5, start + rng.uniform(0, 20, n), np.inf)
    reach = SimpleNamespace(start=start, end=end)
    for dedupe in (False, True):
        edges, value, settled = V.expansion_edges(reach, 60.0, dedupe=dedupe)
        want = []
        for e in range(n):
            if np.isfinite(end[e]):
                want.append((end[e], e, True))
            elif start[e] <= 60.0:
                want.append((max(start[e], 0.0), e, False))
        if dedupe:
            best = {}
            for v, e, s in want:
                if e >> 1 not in best or (v, e) < best[e >> 1][:2]:
                    best[e >> 1] = (v, e, s)
            want = list(best.values())
        want.sort(key=lambda t: (t[0], t[1]))
        assert list(zip(value.tolist(), edges.tolist(), settled.tolist(), strict=True)) == want


def test_edge_coordinates_are_the_graph_shapes(andorra):
    g = andorra.graph
    edges = np.array([0, 1, 7, 40, 41, len(g.edge_src) - 1], np.int64)
    coords = V.edge_coordinates(g, edges)
    for e, cs in zip(edges.tolist(), coords, strict=True):
        a, b = int(g.shape_offsets[e >> 1]), int(g.shape_offsets[(e >> 1) + 1])
        want = np.column_stack([np.asarray(g.shape_lon[a:b], np.float64), np.asarray(g.shape_lat[a:b], np.float64)])
        assert np.allclose(cs, want[::-1] if e & 1 else want, rtol=0, atol=2e-6)  # rounded to 6 places
    assert V.edge_coordinates(g, np.zeros(0, np.int64)) == []


def test_resample_steps_along_the_line():
    lats, lons = np.array([42.50, 42.51, 42.51]), np.array([1.50, 1.50, 1.52])
    la, lo = V.resample(lats, lons, 100.0)
    total = float(haversine_m(lats[:-1], lons[:-1], lats[1:], lons[1:]).sum())
    assert len(la) == int(np.ceil(total / 100.0)) + 1
    d = haversine_m(la[:-1], lo[:-1], la[1:], lo[1:])
    assert (d <= 100.0 + 1e-6).all() and np.allclose(d[:5], 100.0)  # chords: shorter only across the corner
    assert (la[0], lo[0], la[-1], lo[-1]) == (42.50, 1.50, 42.51, 1.52)
    assert V.resample(lats[:1], lons[:1], 100.0)[0].tolist() == [42.50]


def test_locate_and_edge_attributes_on_the_real_graph(andorra):
    from geoengine.services.models import Location

    docs = V.locate_documents(andorra, [Location(lon=A[0], lat=A[1]), Location(lon=0.0, lat=0.0)], "auto", None,
                              verbose=True)
    near, far = docs
    assert far["edges"] is None and far["reason"]
    assert near["edges"] and near["edges"][0]["side_of_street"] in ("left", "right", "neither")
    g = andorra.graph
    first = near["edges"][0]
    e = first["edge_id"]["id"]
    assert first["way_id"] == int(g.seg_way[e >> 1]) and 0.0 <= first["percent_along"] <= 1.0
    attrs = V.edge_attributes(g, [{"id": e}])[0]
    assert attrs["road_class"] == first["edge"]["classification"]["classification"]
    assert attrs["traversability"] in ("both", "forward") and attrs["drive_on_right"] is True


def test_expansion_document_columns_and_warnings(andorra):
    loc = SimpleNamespace(lon=A[0], lat=A[1])
    doc = V.expansion_document(andorra, loc, "auto", None, "time", 60.0, ["duration", "edge_id", "distance"], False)
    feats = doc["features"]
    assert feats and doc["properties"] == {"algorithm": "dijkstras", "metric": "time"}
    assert all(set(f["properties"]) == {"duration", "edge_id"} and f["properties"]["duration"] <= 60.0 for f in feats)
    assert doc["warnings"] == ["distance is not available for a time expansion"]


def test_resampled_profile_steps_along_the_shape(andorra):
    from geoengine.services.elevation import resampled_profile

    lats, lons = np.array([A[1], B[1]]), np.array([A[0], B[0]])
    plain = resampled_profile(andorra, None, lats=lats, lons=lons)
    assert plain.lats.tolist() == lats.tolist()
    every = resampled_profile(andorra, 500.0, lats=lats, lons=lons)
    assert len(every.lats) == len(V.resample(lats, lons, 500.0)[0]) > 2


# -- geocoding_docs -------------------------------------------------------------------------------------
def _place(**kw):
    base = dict(place_id=1, osm_type="node", osm_id=1, category="place", type="village", place_rank=19,
                housenumber=None, extratags=None, boundingbox=None, lat=42.5, lon=1.5, address=None,
                importance=None, display_name="x", name="x")
    return SimpleNamespace(**{**base, **kw})


def test_nominatim_ranks_labels_and_boxes():
    assert G.address_rank(_place(housenumber="3")) == 30 and G.address_rank(_place(place_rank=None)) == 30
    assert G.label_tag(_place(category="boundary", type="administrative", place_rank=16)) == "city"
    assert G.label_tag(_place(category="highway", type="residential", place_rank=26)) == "road"
    assert G.label_tag(_place(category="place", type="postcode")) == "postcode"
    assert G.bbox_of(_place()) == pytest.approx((42.48, 42.52, 1.48, 1.52))  # a village node: 0.02 degrees
    way = _place(osm_type="way", boundingbox=(42.4, 42.6, 1.4, 1.6))
    assert G.bbox_of(way) == (42.4, 42.6, 1.4, 1.6)
    assert G.importance(_place(place_rank=30)) == pytest.approx(0.00001)
    addr = {"country": "Andorra", "road": "Carrer", "house_number": "3", "postcode": "AD500", "odd": "?"}
    assert list(G.ordered_address(_place(address=addr))) == ["house_number", "road", "postcode", "odd", "country"]


def test_dedupe_places_keeps_one_per_object_and_per_label():
    ps = [_place(place_id=1, osm_id=1), _place(place_id=2, osm_id=1), _place(place_id=3, osm_id=2),
          _place(place_id=4, osm_id=3, display_name="other"), _place(place_id=5, osm_id=4, display_name="third")]
    assert [p.place_id for p in G.dedupe_places(ps, 10)] == [1, 4, 5]
    assert [p.place_id for p in G.dedupe_places(ps, 2)] == [1, 4]


def test_photon_layers_and_tag_filters():
    assert G.layer_of(_place(housenumber="1")) == "house"
    assert [G.layer_of(_place(place_rank=r)) for r in (26, 22, 16, 4, 2)] == ["street", "locality", "city",
                                                                              "country", "other"]
    shop = _place(category="shop", type="bakery")
    assert G.tag_match(shop, ["shop"]) and G.tag_match(shop, [":bakery"]) and G.tag_match(shop, ["shop:bakery"])
    assert not G.tag_match(shop, ["!shop"]) and not G.tag_match(shop, ["shop:!bakery"])
    assert G.tag_match(shop, ["amenity", "shop:bakery"]) and not G.tag_match(shop, ["amenity"])
    village = _place()  # place rank 19: Photon's district layer
    assert G.filtered_places([shop, village], ["district"], None) == [shop, village]
    assert G.filtered_places([shop, village], ["city"], None) == []
    assert G.filtered_places([shop, village], None, ["shop"]) == [shop]


def test_photon_reverse_radius_keeps_the_places_within():
    near, far = _place(lat=42.5, lon=1.5), _place(lat=42.51, lon=1.5)  # 0 m and about 1.1 km away
    assert G.filtered_places([near, far], None, None, (42.5, 1.5, 1000.0)) == [near]
    assert G.filtered_places([near, far], None, None, (42.5, 1.5, 1200.0)) == [near, far]


def test_osm_ref_of_a_real_search_row(andorra):
    ids = andorra.search_index.cols["id"]
    row = next(i for i in range(len(ids)) if ids[i].startswith("osm:node:"))
    assert G.osm_ref_of_place_id(andorra, row) == "N" + ids[row].split(":")[2]
    assert G.osm_ref_of_place_id(andorra, -1) is None and G.osm_ref_of_place_id(andorra, len(ids)) is None


# -- map_assets -----------------------------------------------------------------------------------------
def _read_fields(buf: bytes) -> list[tuple[int, int, object]]:
    """A protobuf message's (field, wire type, value) triples: varints and length-delimited bytes."""
    out, i = [], 0

    def varint():
        nonlocal i
        shift = v = 0
        while True:
            b = buf[i]
            i += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return v

    while i < len(buf):
        key = varint()
        if key & 7 == 0:
            out.append((key >> 3, 0, varint()))
        else:
            n = varint()
            out.append((key >> 3, 2, buf[i:i + n]))
            i += n
    return out


def test_glyph_protobuf_round_trips():
    g = M.encode_glyph(65, b"\x01\x02", 2, 1, -3, 17, 300)
    fields = _read_fields(g)
    zigzag = {f: v for f, w, v in fields if f in (5, 6)}
    assert [(f, v) for f, _, v in fields if f not in (5, 6)] == [(1, 65), (2, b"\x01\x02"), (3, 2), (4, 1), (7, 300)]
    assert {f: (v >> 1) ^ -(v & 1) for f, v in zigzag.items()} == {5: -3, 6: 17}
    top = _read_fields(M.encode_range("Noto Sans Regular", 256, [g]))
    stack = _read_fields(top[0][2])
    assert stack[0][2] == b"Noto Sans Regular" and stack[1][2] == b"256-511" and stack[2][2] == g


def test_sdf_is_high_inside_and_falls_off_outside():
    alpha = np.zeros((20, 20))
    alpha[5:15, 5:15] = 1.0
    d = M.sdf(alpha).astype(int)
    b = M.BUFFER
    assert d.shape == (20 + 2 * b, 20 + 2 * b)
    assert d[10 + b, 10 + b] > 191 > d[b, b]  # the centre is inside the edge value 191, the corner outside
    row = d[10 + b, b + 5:b + 10]  # from the square's left edge inwards: never decreasing
    assert (np.diff(row) >= 0).all()
    assert d[0, 0] == 0


def test_png_decodes_to_the_same_pixels():
    from PIL import Image

    rgba = np.zeros((3, 4, 4))
    rgba[1, 2] = (255, 10, 20, 128)
    img = Image.open(io.BytesIO(M.png(rgba)))
    assert img.size == (4, 3) and img.mode == "RGBA"
    assert np.array_equal(np.asarray(img), rgba.astype(np.uint8))
    assert zlib.crc32(b"IEND") & 0xFFFFFFFF == int.from_bytes(M.png(rgba)[-4:], "big")
