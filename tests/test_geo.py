"""geoengine.geo: distances, bearings and polyline codecs, against documented values and against a
plain-Python reading of Google's algorithm written here independently; line simplification against
shapely (GEOS)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geoengine.errors import InvalidRequest
from geoengine.geo import (
    EARTH_RADIUS_M,
    bearing_deg,
    check_coordinates,
    cumulative_distance_m,
    decode_polyline,
    encode_polyline,
    haversine_m,
    segment_lengths_m,
    simplify_line,
)

# Google's documented example (developers.google.com/maps/documentation/utilities/polylinealgorithm)
GOOGLE_POINTS = [(38.5, -120.2), (40.7, -120.95), (43.252, -126.453)]
GOOGLE_ENCODED = "_p~iF~ps|U_ulLnnqC_mqNvxq`@"


def reference_encode(points, precision):
    """Google's algorithm, step by step, one character at a time (the slow, obvious way)."""
    factor = 10**precision
    out = []
    prev = [0, 0]
    for lat, lon in points:
        for k, value in enumerate((lat, lon)):
            scaled = int(math.floor(abs(value) * factor + 0.5)) * (1 if value >= 0 else -1)
            delta = scaled - prev[k]
            prev[k] = scaled
            v = delta << 1
            if delta < 0:
                v = ~v
            while v >= 0x20:
                out.append(chr((0x20 | (v & 0x1F)) + 63))
                v >>= 5
            out.append(chr(v + 63))
    return "".join(out)


def test_google_documented_example_precision5():
    lats, lons = zip(*GOOGLE_POINTS, strict=True)
    assert encode_polyline(lats, lons, precision=5) == GOOGLE_ENCODED
    dlats, dlons = decode_polyline(GOOGLE_ENCODED, precision=5)
    np.testing.assert_allclose(dlats, lats, atol=1e-9)
    np.testing.assert_allclose(dlons, lons, atol=1e-9)


def test_google_single_value_example():
    # The documented worked example: -179.9832104 encodes to "`~oia@" at precision 5.
    encoded = encode_polyline([0.0], [-179.9832104], precision=5)
    assert encoded == "?" + "`~oia@"


def test_precision6_is_scaled_precision5():
    lats, lons = zip(*GOOGLE_POINTS, strict=True)
    p6 = encode_polyline(lats, lons, precision=6)
    assert p6 == reference_encode(GOOGLE_POINTS, 6)
    assert p6 != GOOGLE_ENCODED
    dlats, dlons = decode_polyline(p6)  # default precision is 6
    np.testing.assert_allclose(dlats, lats, atol=1e-12)
    np.testing.assert_allclose(dlons, lons, atol=1e-12)


coords = st.lists(
    st.tuples(
        st.floats(-90, 90, allow_nan=False, allow_infinity=False),
        st.floats(-180, 180, allow_nan=False, allow_infinity=False),
    ),
    min_size=1,
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(coords, st.sampled_from([5, 6]))
def test_encode_matches_reference_and_round_trips(points, precision):
    lats = np.array([p[0] for p in points])
    lons = np.array([p[1] for p in points])
    encoded = encode_polyline(lats, lons, precision)
    assert encoded == reference_encode(points, precision)
    dlats, dlons = decode_polyline(encoded, precision)
    half = 0.5 / 10**precision + 1e-12
    assert np.all(np.abs(dlats - lats) <= half)
    assert np.all(np.abs(dlons - lons) <= half)
    # decoded values sit on the grid, so a second round trip is exact
    assert encode_polyline(dlats, dlons, precision) == encoded


def test_empty_polyline():
    assert encode_polyline([], [], 6) == ""
    lats, lons = decode_polyline("", 6)
    assert lats.size == 0 and lons.size == 0


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("_p~iF~ps|U_ulL nnqC", "position 14"),  # a space is outside the alphabet
        ("_p~iF~ps|U_ulLnnqC_mqNvxq", "truncated"),  # cut inside a value
        ("_p~iF~ps|U_ulL", "odd number"),  # latitude without longitude
        ("_p~iF~ps|U\u00e9", "ASCII"),
        ("~" * 30, "too long"),  # continuation bits that never stop
    ],
)
def test_malformed_polylines_are_invalid_requests(text, needle):
    with pytest.raises(InvalidRequest) as err:
        decode_polyline(text, 6)
    assert err.value.errors[0].field == "encoded_polyline"
    assert needle in err.value.errors[0].message


def law_of_cosines_m(lat1, lon1, lat2, lon2):
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dl = math.radians(lon2 - lon1)
    c = math.sin(p1) * math.sin(p2) + math.cos(p1) * math.cos(p2) * math.cos(dl)
    return EARTH_RADIUS_M * math.acos(max(-1.0, min(1.0, c)))


def test_haversine_known_distances():
    # a degree of arc on the sphere, along the equator and along a meridian
    degree = 2 * math.pi * EARTH_RADIUS_M / 360
    assert haversine_m(0, 0, 0, 1) == pytest.approx(degree, rel=1e-12)
    assert haversine_m(10, 20, 11, 20) == pytest.approx(degree, rel=1e-12)
    assert haversine_m(0, 0, 0, 180) == pytest.approx(math.pi * EARTH_RADIUS_M, rel=1e-12)
    # Andorra la Vella to Encamp, about 5.7 km (checked against the law of cosines)
    d = float(haversine_m(42.5063, 1.5218, 42.5345, 1.5803))
    assert d == pytest.approx(law_of_cosines_m(42.5063, 1.5218, 42.5345, 1.5803), rel=1e-6)
    assert 5_500 < d < 6_000


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(-80, 80), st.floats(-179, 179), st.floats(-80, 80), st.floats(-179, 179)),
        min_size=1,
        max_size=20,
    )
)
def test_haversine_vectorised_matches_scalar_formula(rows):
    a = np.array(rows)
    d = haversine_m(a[:, 0], a[:, 1], a[:, 2], a[:, 3])
    expected = [law_of_cosines_m(*r) for r in rows]
    # the law of cosines loses precision for short distances: compare with an absolute floor
    np.testing.assert_allclose(d, expected, rtol=1e-6, atol=0.5)
    np.testing.assert_allclose(d, haversine_m(a[:, 2], a[:, 3], a[:, 0], a[:, 1]), rtol=1e-12, atol=1e-9)


def test_bearings():
    assert bearing_deg(0, 0, 1, 0) == pytest.approx(0)
    assert bearing_deg(0, 0, 0, 1) == pytest.approx(90)
    assert bearing_deg(0, 0, -1, 0) == pytest.approx(180)
    assert bearing_deg(0, 0, 0, -1) == pytest.approx(270)
    assert bearing_deg(42.5, 1.5, 42.5, 1.5) == 0.0
    # north-east on the equator, and the initial bearing on a great circle from Paris to New York
    assert bearing_deg(0, 0, 1, 1) == pytest.approx(45.0, abs=0.01)
    assert bearing_deg(48.8566, 2.3522, 40.7128, -74.0060) == pytest.approx(291.8, abs=0.1)
    b = bearing_deg(np.array([0.0, 10.0]), np.array([0.0, 10.0]), np.array([-1.0, 10.0]), np.array([-1e-9, 9.0]))
    assert np.all((b >= 0) & (b < 360))


def test_cumulative_distance():
    lats = np.array([42.5, 42.51, 42.52, 42.52])
    lons = np.array([1.5, 1.5, 1.51, 1.51])
    cum = cumulative_distance_m(lats, lons)
    seg = segment_lengths_m(lats, lons)
    assert cum.shape == (4,)
    assert cum[0] == 0.0
    np.testing.assert_allclose(np.diff(cum), seg)
    assert cum[-1] == cum[-2]  # repeated point adds nothing
    assert cumulative_distance_m([42.5], [1.5]).tolist() == [0.0]
    assert cumulative_distance_m([], []).size == 0


def test_check_coordinates_names_the_point():
    check_coordinates([0, 90, -90], [180, -180, 0])
    with pytest.raises(InvalidRequest) as err:
        check_coordinates([0, 91], [0, 0], field="shape")
    assert err.value.errors[0].field == "shape[1].lat"
    with pytest.raises(InvalidRequest) as err:
        check_coordinates([0, 0, 0], [0, 0, float("nan")])
    assert err.value.errors[0].field == "shape[2].lon"


def _shapely_simplify(coords, tol):
    from shapely import LineString

    return np.asarray(LineString(coords).simplify(tol, preserve_topology=False).coords)


def test_simplify_keeps_exactly_the_points_geos_keeps_on_real_routes(andorra):
    """Douglas-Peucker as OSRM's overview=simplified uses it: the same points as shapely (GEOS), on the
    shapes of real Andorra routes at the overview's tolerance and others."""
    net = andorra.network("auto")
    ids = np.flatnonzero(net.in_component)
    rng = np.random.default_rng(5)
    compared = 0
    for a, b in rng.choice(ids, (80, 2)):
        try:
            trip = andorra.route(locations=[{"lon": float(net.lon[a]), "lat": float(net.lat[a])},
                                            {"lon": float(net.lon[b]), "lat": float(net.lat[b])}])
        except Exception:  # noqa: BLE001 - a pair without a route is simply not compared
            continue
        lat, lon = decode_polyline(trip["trip"]["legs"][0]["shape"], 6)
        coords = np.column_stack([lon, lat])
        span = float(np.hypot(*(coords.max(axis=0) - coords.min(axis=0))))
        for tol in (span / 2000.0, 1e-5, 1e-4, 0.0):
            want = _shapely_simplify(coords, tol)
            got = simplify_line(coords, tol)
            assert got.shape == want.shape and np.array_equal(got, want), (a, b, tol)
            compared += 1
    assert compared >= 200
    assert len(simplify_line(coords, 1e-4)) < len(coords)  # it does simplify


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(-5, 5), st.integers(-5, 5)), min_size=2, max_size=40),
       st.sampled_from([0.0, 0.5, 1.0, 2.5]))
def test_simplify_matches_geos_on_degenerate_lines(points, tol):
    """Small integer grids: repeated points, closed loops, collinear runs, back-and-forth lines, ties."""
    coords = np.asarray(points, np.float64)
    want = _shapely_simplify(coords, tol)
    got = simplify_line(coords, tol)
    assert got.shape == want.shape and np.array_equal(got, want)
