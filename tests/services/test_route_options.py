"""date_time, elevation_interval, alternates and linear_references applied to typed routes on the
Andorra bundle (geoengine.services.route_options), and through the engine's /route document."""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import pytest

from geoengine.errors import InvalidRequest, Unprocessable
from geoengine.geo import cumulative_distance_m, decode_polyline
from geoengine.services import route_options as extras
from geoengine.services.documents.trip import trip_document
from geoengine.services.route import RouteRequest

from .conftest import ANDORRA

F = "%Y-%m-%dT%H:%M"


def _locs(*names, waits=None):
    out = [{"lon": ANDORRA[n][0], "lat": ANDORRA[n][1]} for n in names]
    for i, w in (waits or {}).items():
        out[i]["waiting_secs"] = w
    return out


def _waits(locs):
    return [loc.get("waiting_secs", 0) for loc in locs]


def _best(engine, **fields):
    return engine.compute_route(**fields).best


def _t(s):
    return datetime.strptime(s, F)


def test_depart_at_times_follow_the_trip(andorra):
    locs = _locs("andorra_la_vella", "canillo", "pas_de_la_casa", waits={0: 120, 1: 600})
    route = _best(andorra, locations=locs)
    extras.apply_date_time(route, {"type": 1, "value": "2026-03-01T08:00"}, _waits(locs))
    trip = trip_document(route)
    legs = trip["legs"]
    assert trip["departure"] == "2026-03-01T08:00"
    # leaves the first stop after its wait
    assert legs[0]["departure"] == "2026-03-01T08:02"
    # the second leg leaves after the 10 minute stop
    gap = _t(legs[1]["departure"]) - _t(legs[0]["arrival"])
    assert timedelta(minutes=9) <= gap <= timedelta(minutes=11)
    # arrival = departure + total time (within minute rounding)
    span = (_t(trip["arrival"]) - _t(trip["departure"])).total_seconds()
    assert abs(span - trip["summary"]["time"]) <= 120
    assert [loc["date_time"] for loc in trip["locations"]] == [trip["departure"], legs[0]["arrival"], legs[1]["arrival"]]
    # maneuver times are monotone and chain
    for leg in legs:
        ms = leg["maneuvers"]
        assert ms[0]["departure"] == leg["departure"]
        for a, b in zip(ms[:-1], ms[1:], strict=True):
            assert a["arrival"] == b["departure"] or _t(b["departure"]) >= _t(a["arrival"])
        assert _t(ms[-1]["arrival"]) <= _t(leg["arrival"]) + timedelta(minutes=1)


def test_arrive_by_ends_at_the_given_time(andorra):
    locs = _locs("sant_julia", "encamp")
    route = _best(andorra, locations=locs)
    extras.apply_date_time(route, {"type": 2, "value": "2026-03-01T09:30"}, _waits(locs))
    trip = trip_document(route)
    assert trip["arrival"] == "2026-03-01T09:30"
    span = (_t(trip["arrival"]) - _t(trip["departure"])).total_seconds()
    assert abs(span - trip["summary"]["time"]) <= 60


def test_current_uses_now(andorra):
    route = _best(andorra, locations=_locs("sant_julia", "encamp"))
    extras.apply_date_time(route, {"type": 0}, now=datetime(2030, 1, 2, 3, 4, 59))
    assert trip_document(route)["departure"] == "2030-01-02T03:04"


@pytest.mark.parametrize("dt, field", [
    ({"type": 1}, "date_time.value"),
    ({"type": 1, "value": "2026-13-01T08:00"}, "date_time.value"),
    ({"type": 2, "value": "tomorrow"}, "date_time.value"),
    ({"type": 7, "value": "2026-03-01T08:00"}, "date_time.type"),
    ({"type": "1", "value": "2026-03-01T08:00"}, "date_time.type"),
    ("2026-03-01T08:00", "date_time"),
])
def test_bad_date_time(andorra, dt, field):
    route = _best(andorra, locations=_locs("sant_julia", "encamp"))
    with pytest.raises(InvalidRequest) as e:
        extras.apply_date_time(route, dt)
    assert e.value.errors[0].field == field


@pytest.mark.parametrize("shape_format", ["polyline6", "geojson"])
def test_elevation_along_legs(andorra, shape_format):
    locs = _locs("andorra_la_vella", "pas_de_la_casa")
    route = _best(andorra, locations=locs, shape_format=shape_format)
    extras.apply_elevation(andorra, route, 50.0)
    leg = trip_document(route, shape_format)["legs"][0]
    if shape_format == "geojson":
        a = np.asarray(leg["shape"]["coordinates"])
        lon, lat = a[:, 0], a[:, 1]
    else:
        lat, lon = decode_polyline(leg["shape"], 6)
    length = cumulative_distance_m(lat, lon)[-1]
    h = leg["elevation"]
    assert leg["elevation_interval"] == 50.0
    assert len(h) == int(np.ceil(length / 50.0)) + (1 if length % 50.0 == 0 else 0) or len(h) == int(length // 50) + 2
    # Andorra la Vella is ~1020 m, Pas de la Casa ~2080 m; the road climbs over the Envalira pass (~2400 m)
    assert 950 < h[0] < 1150 and 1950 < h[-1] < 2200
    assert 2300 < max(x for x in h if x is not None) < 2500
    # samples equal the elevation at the first and last shape points
    assert h[0] == pytest.approx(float(andorra.elevation(lat=[lat[0]], lon=[lon[0]])[0]), abs=0.1)
    assert h[-1] == pytest.approx(float(andorra.elevation(lat=[lat[-1]], lon=[lon[-1]])[0]), abs=0.1)


def test_elevation_sampling_spacing():
    lat = np.array([42.5, 42.5, 42.51])
    lon = np.array([1.5, 1.51, 1.51])
    slon, slat, d = extras.sample_along(lon, lat, 100.0)
    assert d[0] == 0 and np.all(np.diff(d)[:-1] == 100.0) and d[-1] == pytest.approx(cumulative_distance_m(lat, lon)[-1])
    step = cumulative_distance_m(slat, slon)
    gaps = np.diff(step)[:-1]
    # straight-line gaps are 100 m, except the one cutting the corner
    assert (gaps <= 100.0 + 1e-3).all() and (~np.isclose(gaps, 100.0, atol=0.5)).sum() == 1


def test_elevation_too_many_samples_is_400(andorra):
    route = _best(andorra, locations=_locs("andorra_la_vella", "pas_de_la_casa"))
    with pytest.raises(InvalidRequest) as e:
        extras.apply_elevation(andorra, route, 0.5)
    assert e.value.errors[0].field == "elevation_interval"


def test_elevation_without_dem_is_422(liechtenstein):
    if liechtenstein.bundle.has_stage("elevation"):
        pytest.skip("this Liechtenstein bundle has elevation data")
    route = _best(liechtenstein, locations=[{"lon": 9.5215, "lat": 47.1410}, {"lon": 9.5095, "lat": 47.1650}])
    with pytest.raises(Unprocessable):
        extras.apply_elevation(liechtenstein, route, 30.0)


def test_date_time_and_elevation_through_the_engine(andorra):
    req = RouteRequest.model_validate({"locations": _locs("encamp", "canillo"), "elevation_interval": 200,
                                       "date_time": {"type": 1, "value": "2026-06-01T12:00"}})
    doc = andorra.route(req)
    leg = doc["trip"]["legs"][0]
    assert leg["departure"] == "2026-06-01T12:00" and len(leg["elevation"]) >= 2


def test_route_alternates_with_extras(andorra):
    req = RouteRequest.model_validate({"locations": _locs("andorra_la_vella", "ordino"), "alternates": 2,
                                       "elevation_interval": 100,
                                       "date_time": {"type": 1, "value": "2026-06-01T12:00"}})
    doc = andorra.route(req)
    alts = doc["alternates"]
    assert 1 <= len(alts) <= 2
    best = doc["trip"]
    for a in alts:
        t = a["trip"]
        assert t["legs"][0]["shape"] != best["legs"][0]["shape"]
        assert best["summary"]["time"] <= t["summary"]["time"] <= 1.5 * best["summary"]["time"] + 1
        assert t["departure"] == "2026-06-01T12:00" and t["legs"][0]["elevation"]


def test_no_alternates_key_without_option(andorra):
    req = RouteRequest.model_validate({"locations": _locs("andorra_la_vella", "ordino")})
    assert "alternates" not in andorra.route(req)


def test_linear_references_through_apply(andorra):
    from geoengine.routing.openlr import decode

    req = RouteRequest.model_validate({"locations": _locs("andorra_la_vella", "ordino"), "alternates": 1,
                                       "linear_references": True})
    doc = andorra.route(req)
    refs = doc["trip"]["linear_references"]
    assert refs and all(len(decode(r)["points"]) == 2 for r in refs)
    for a in doc["alternates"]:
        assert a["trip"]["linear_references"] and a["trip"]["linear_references"] != refs


def test_route_with_options_is_route_plus_extras(andorra):
    body = {"locations": _locs("encamp", "canillo"), "elevation_interval": 250, "alternates": 1,
            "date_time": {"type": 2, "value": "2026-06-01T12:00"}, "linear_references": True}
    doc = andorra.route_with_options(body)
    plain = andorra.route(body)
    assert doc["trip"]["summary"] == plain["trip"]["summary"]
    assert doc["trip"]["arrival"] == "2026-06-01T12:00"
    assert doc["trip"]["legs"][0]["elevation"] and doc["trip"]["linear_references"]
    assert "alternates" in doc
    with pytest.raises(InvalidRequest):
        andorra.route_with_options({**body, "date_time": {"type": 1}})
