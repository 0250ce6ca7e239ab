"""unsnappable="nan" for engine.matrix and engine.route_many, snap distances, route_many geometry."""

from __future__ import annotations

import numpy as np
import pytest

import geoengine
from geoengine.errors import InvalidRequest, Unsnappable


@pytest.fixture(scope="module")
def mixed_points(andorra):
    """100 random points over Andorra la Vella / Escaldes: most near a road, some on slopes without one
    (the issue's report: 99 of 500 such points made a whole matrix call fail)."""
    rng = np.random.default_rng(0)
    return np.column_stack([rng.uniform(1.50, 1.56, 100), rng.uniform(42.49, 42.53, 100)])


def _named(exc) -> set[int]:
    return {int(e.field.split("[")[1].rstrip("]")) for e in exc.errors}


def test_matrix_nan_marks_exactly_the_unsnappable_points(andorra, mixed_points):
    with pytest.raises(Unsnappable) as exc:
        andorra.matrix(mixed_points, mixed_points[:10])
    bad = _named(exc.value)
    assert 0 < len(bad) < 100
    m = andorra.matrix(mixed_points, mixed_points[:10], unsnappable="nan")
    assert set(np.flatnonzero(~m.snapped.sources).tolist()) == bad
    ok_s, ok_t = m.snapped
    assert np.isnan(m.time_s[~ok_s]).all() and np.isnan(m.distance_m[:, ~ok_t]).all()
    assert not np.isnan(m.time_s[np.ix_(ok_s, ok_t)]).any()
    ref = andorra.matrix(mixed_points[ok_s], mixed_points[:10][ok_t])
    assert m.time_s[np.ix_(ok_s, ok_t)].tobytes() == ref.time_s.tobytes()
    assert m.distance_m[np.ix_(ok_s, ok_t)].tobytes() == ref.distance_m.tobytes()
    d = m.snap_distance_m.sources
    assert np.isnan(d[~ok_s]).all() and (d[ok_s] >= 0).all() and np.isfinite(d[ok_s]).all()
    # the snap distance is the distance to the snapped point the result reports
    from geoengine.geo import haversine_m

    i = int(np.flatnonzero(ok_s)[0])
    far = haversine_m(mixed_points[i, 1], mixed_points[i, 0], m.sources[i, 1], m.sources[i, 0])  # lat first
    assert float(far) == pytest.approx(d[i], abs=1.0)
    df = geoengine.to_pandas(m)
    assert len(df) == 1000 and df.time_s.isna().sum() == np.isnan(m.time_s).sum()


def test_route_many_nan_and_geometry(andorra, mixed_points):
    o, d = mixed_points[:60], mixed_points[40:100]
    with pytest.raises(Unsnappable):
        andorra.route_many(o, d)
    r = andorra.route_many(o, d, unsnappable="nan", geometry=True)
    both = r.snapped.origins & r.snapped.destinations
    assert np.isnan(r.time_s[~both]).all() and not np.isnan(r.time_s[both]).any()
    t, dist = andorra.route_many(o[both], d[both])
    assert r.time_s[both].tobytes() == t.tobytes() and r.distance_m[both].tobytes() == dist.tobytes()
    gdf = r.to_geopandas()
    assert gdf.crs.to_epsg() == 4326 and len(gdf) == 60
    routed = np.isfinite(r.time_s)
    assert gdf.geometry[routed].notna().all() and gdf.geometry[~routed].isna().all()
    lengths = gdf[routed].to_crs(gdf[routed].estimate_utm_crs()).length.to_numpy()
    np.testing.assert_allclose(lengths, r.distance_m[routed], rtol=0.01, atol=2.0)
    t2, d2 = r  # still unpacks as (time_s, distance_m)
    assert t2 is r.time_s


def test_bad_unsnappable_value(andorra, mixed_points):
    for call in (lambda: andorra.matrix(mixed_points[:2], mixed_points[:2], unsnappable="skip"),
                 lambda: andorra.route_many(mixed_points[:2], mixed_points[:2], unsnappable=None)):
        with pytest.raises(InvalidRequest) as exc:
            call()
        assert exc.value.errors[0].field == "unsnappable"
    with pytest.raises(InvalidRequest) as exc:
        andorra.route_many(mixed_points[:2], mixed_points[:3])
    assert exc.value.errors[0].field == "destinations"
    r = andorra.route_many(mixed_points[:3], mixed_points[:3], unsnappable="nan")
    with pytest.raises(InvalidRequest) as exc:
        r.to_geopandas()
    assert exc.value.errors[0].field == "geometry"


@pytest.mark.parametrize("call, field", [
    (lambda e, p: e.matrix(np.empty((0, 2)), p), "sources"),
    (lambda e, p: e.matrix([], p), "sources"),
    (lambda e, p: e.matrix(p, []), "targets"),
    (lambda e, p: e.matrix(p, [1.5, 42.5, 1.6]), "targets"),
    (lambda e, p: e.matrix([["a", "b"]], p), "sources"),
    (lambda e, p: e.matrix(np.zeros((2, 3)), p), "sources"),
    (lambda e, p: e.route_many([], []), "origins"),
    (lambda e, p: e.route_many(p, np.zeros((1, 2, 2))[..., :1]), "destinations"),
])
def test_empty_or_malformed_point_arrays_name_their_field(andorra, mixed_points, call, field):
    """An empty sources (or targets) array is the caller's error, named, not numpy's ValueError."""
    with pytest.raises(InvalidRequest) as exc:
        call(andorra, mixed_points[:3])
    assert exc.value.status == 400 and [e.field for e in exc.value.errors] == [field]
