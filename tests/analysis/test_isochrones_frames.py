"""engine.isochrones (many origins) and the pandas / GeoPandas conversions of engine results."""

from __future__ import annotations

import numpy as np
import pytest

import geoengine
from geoengine.errors import InvalidRequest


def test_isochrones_equal_one_by_one(andorra, town_points):
    origins = town_points[:4]
    many = andorra.isochrones(origins, [5, {"distance": 2}], costing="auto")
    assert len(many) == 4
    for (lon, lat), fc in zip(origins.tolist(), many, strict=True):
        one = andorra.isochrone(locations=[{"lon": lon, "lat": lat}], costing="auto",
                                contours=[{"time": 5}, {"distance": 2}], show_locations=False)
        assert fc == one


def test_isochrones_as_geodataframe(andorra, town_points):
    gdf = andorra.isochrones(town_points[:6], [4, 8], costing="pedestrian", as_frame=True)
    assert gdf.crs.to_epsg() == 4326
    assert set(gdf["origin"]) <= set(range(6)) and {"contour", "metric"} <= set(gdf.columns)
    assert (gdf.geom_type.isin(["Polygon", "MultiPolygon"])).all()
    # the 8-minute area of an origin covers its 4-minute area (each simplified on its own: up to a margin)
    for o in set(gdf["origin"]):
        big = gdf[(gdf.origin == o) & (gdf.contour == 8)].geometry
        small = gdf[(gdf.origin == o) & (gdf.contour == 4)].geometry
        if len(big) and len(small):
            assert big.iloc[0].intersection(small.iloc[0]).area >= 0.95 * small.iloc[0].area
            assert big.iloc[0].area > small.iloc[0].area


def test_isochrones_bad_input(andorra, town_points):
    for kwargs, field in [
        (dict(origins=np.empty((0, 2)), contours=[5]), "origins"),
        (dict(origins=[[1.5, np.nan]], contours=[5]), "origins[0]"),
        (dict(origins=town_points[:2], contours=[]), "contours"),
        (dict(origins=town_points[:2], contours=["ten"]), "contours"),
    ]:
        with pytest.raises(InvalidRequest) as exc:
            andorra.isochrones(**kwargs)
        assert exc.value.errors[0].field == field
    with pytest.raises(InvalidRequest):
        andorra.isochrones(town_points[:2], [500])  # over the 120-minute maximum


def test_matrix_to_pandas_long_form(andorra, town_points):
    m = andorra.matrix(town_points[:3], town_points[3:7])
    df = geoengine.to_pandas(m)
    assert list(df.columns) == ["source", "target", "time_s", "distance_m"] and len(df) == 12
    assert df.loc[(df.source == 2) & (df.target == 1), "time_s"].item() == m.time_s[2, 1]


def test_route_search_reverse_to_geopandas(andorra, town_points):
    (a, b) = town_points[:2].tolist()
    doc = andorra.route(locations=[{"lon": a[0], "lat": a[1]}, {"lon": b[0], "lat": b[1]}])
    gdf = geoengine.to_geopandas(doc)
    assert gdf.crs.to_epsg() == 4326 and len(gdf) == 1 and gdf.geom_type.iloc[0] == "LineString"
    # the leg's length on the ellipsoid equals the summary's length (km) within a percent
    length_km = gdf.to_crs(gdf.estimate_utm_crs()).length.iloc[0] / 1000
    assert length_km == pytest.approx(doc["trip"]["summary"]["length"], rel=0.01, abs=0.02)
    res = andorra.search("andorra", size=5)
    g2 = geoengine.to_geopandas(res)
    assert len(g2) == len(res["results"]) > 0 and g2.geom_type.eq("Point").all()
    rev = andorra.reverse(lat=42.5063, lon=1.5218)
    g3 = geoengine.to_geopandas(rev)
    assert len(g3) == len(rev["results"]) and "distance_m" in g3.columns
    with pytest.raises(InvalidRequest):
        geoengine.to_pandas(42)
