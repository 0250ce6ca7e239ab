"""pandas and GeoPandas conversions of engine results (`geoengine.to_pandas`, `geoengine.to_geopandas`).

Needs the optional extra `geoengine[analysis]` (pandas, geopandas, shapely). Every GeoDataFrame is in
EPSG:4326 with (lon, lat) coordinates.

| result                                    | to_pandas                                     | to_geopandas            |
|-------------------------------------------|-----------------------------------------------|-------------------------|
| `engine.matrix(...)` (MatrixResult)       | long form: source, target, time_s, distance_m | -                       |
| `engine.route(...)` trip document         | one row per leg: leg, time_s, distance_m      | LineString per leg      |
| `engine.isochrone(...)` FeatureCollection | properties                                    | one row per feature     |
| `engine.isochrones(...)` list             | properties + origin                           | one row per feature     |
| `engine.search(...)`, `engine.reverse`    | one row per result (flattened)                | Point per result        |
| `engine.geocode`, `reverse(zoom=)`, `lookup` (Places) | one row per place, `address.<key>` columns | Point per place |
| accessibility / nearest_pois results      | their `.to_pandas()`                          | their `.to_geopandas()` |
"""

from __future__ import annotations

import numpy as np

from geoengine.errors import InvalidRequest

CRS = "EPSG:4326"


def _pd():
    try:
        import pandas as pd
    except ImportError as exc:
        from geoengine.errors import Unavailable

        raise Unavailable("pandas is not installed: pip install 'geoengine[analysis]'") from exc
    return pd


def _gpd():
    try:
        import geopandas as gpd
    except ImportError as exc:
        from geoengine.errors import Unavailable

        raise Unavailable("geopandas is not installed: pip install 'geoengine[analysis]'") from exc
    return gpd


def points_frame(df, lon, lat):
    gpd = _gpd()
    return gpd.GeoDataFrame(df, geometry=gpd.points_from_xy(lon, lat), crs=CRS)


def matrix_frame(time_s: np.ndarray, distance_m: np.ndarray, extra: dict | None = None):
    """Long form of [N, M] arrays: one row per (source, target)."""
    pd = _pd()
    n, m = time_s.shape
    cols = {"source": np.repeat(np.arange(n), m), "target": np.tile(np.arange(m), n),
            "time_s": time_s.ravel(), "distance_m": distance_m.ravel()}
    cols.update(extra or {})
    return pd.DataFrame(cols)


def _trip_legs(doc: dict):
    from geoengine.geo import decode_polyline

    trip = doc.get("trip", doc)
    legs = trip.get("legs")
    if legs is None:
        return None
    rows = []
    for i, leg in enumerate(legs):
        s = leg.get("summary", {})
        shape = leg.get("shape")
        coords = None
        if isinstance(shape, str):
            lat, lon = _decode(decode_polyline, shape, 6)
            coords = np.column_stack([lon, lat])
        elif isinstance(shape, dict) and shape.get("type") == "LineString":
            coords = np.asarray(shape["coordinates"], dtype=np.float64)
        rows.append({"leg": i, "time_s": s.get("time"), "distance": s.get("length"), "coords": coords})
    return rows, trip.get("units", "kilometers")


def _decode(fn, shape: str, precision: int):
    out = fn(shape, precision)
    a = np.asarray(out, dtype=np.float64) if not isinstance(out, tuple) else None
    if a is not None and a.ndim == 2:
        return a[:, 0], a[:, 1]
    lat, lon = out
    return np.asarray(lat), np.asarray(lon)


def _features(result) -> list[dict] | None:
    if isinstance(result, dict) and result.get("type") == "FeatureCollection":
        return result["features"]
    if isinstance(result, list) and result and all(isinstance(r, dict) and r.get("type") == "FeatureCollection"
                                                    for r in result):
        feats = []
        for i, fc in enumerate(result):
            for f in fc["features"]:
                feats.append({**f, "properties": {"origin": i, **f.get("properties", {})}})
        return feats
    return None


def _search_rows(result: dict):
    rows = []
    for r in result.get("results", []):
        loc = r.get("location") or {}
        flat = {k: v for k, v in r.items() if not isinstance(v, dict | list)}
        flat["lon"], flat["lat"] = loc.get("lon", r.get("lon")), loc.get("lat", r.get("lat"))
        rows.append(flat)
    return rows


def to_pandas(result):
    """A pandas DataFrame of an engine result (see the module table)."""
    pd = _pd()
    if hasattr(result, "to_pandas"):
        return result.to_pandas()
    if hasattr(result, "time_s") and np.ndim(result.time_s) == 2:  # a matrix result
        return matrix_frame(np.asarray(result.time_s), np.asarray(result.distance_m))
    feats = _features(result)
    if feats is not None:
        return pd.DataFrame([f.get("properties", {}) for f in feats])
    if isinstance(result, dict) and "results" in result:
        return pd.DataFrame(_search_rows(result))
    if isinstance(result, dict) and ("trip" in result or "legs" in result):
        legs, units = _trip_legs(result)
        return pd.DataFrame([{k: v for k, v in r.items() if k != "coords"} for r in legs]).rename(
            columns={"distance": f"distance_{'km' if units == 'kilometers' else 'mi'}"})
    raise InvalidRequest.field("result", f"cannot convert a {type(result).__name__} to a DataFrame")


def to_geopandas(result):
    """A GeoDataFrame (EPSG:4326) of an engine result with geometry (see the module table)."""
    gpd = _gpd()
    if hasattr(result, "to_geopandas"):
        return result.to_geopandas()
    feats = _features(result)
    if feats is not None:
        feats = [f for f in feats if f.get("geometry") and f["geometry"].get("coordinates")]
        return gpd.GeoDataFrame.from_features(feats, crs=CRS)
    if isinstance(result, dict) and "results" in result:
        rows = _search_rows(result)
        df = _pd().DataFrame(rows)
        return points_frame(df, df.get("lon", []), df.get("lat", []))
    if isinstance(result, dict) and ("trip" in result or "legs" in result):
        from shapely import LineString

        legs, units = _trip_legs(result)
        geoms = [LineString(r["coords"]) if r["coords"] is not None and len(r["coords"]) > 1 else None for r in legs]
        df = _pd().DataFrame([{k: v for k, v in r.items() if k != "coords"} for r in legs]).rename(
            columns={"distance": f"distance_{'km' if units == 'kilometers' else 'mi'}"})
        return gpd.GeoDataFrame(df, geometry=geoms, crs=CRS)
    raise InvalidRequest.field("result", f"cannot convert a {type(result).__name__} to a GeoDataFrame")


PLACE_COLUMNS = ("place_id", "osm_type", "osm_id", "lat", "lon", "name", "display_name", "category", "type",
                 "place_rank", "importance", "housenumber", "layer", "doc_id", "score", "distance_m")


def places_frame(places, geo: bool):
    """One row per geocoding Place (`engine.geocode`, `engine.reverse(zoom=)`, `engine.lookup`): its scalar
    fields, the `address` parts as `address.<key>` columns, and with `geo` a Point per place."""
    pd = _pd()
    rows = []
    for p in places:
        row = {k: getattr(p, k) for k in PLACE_COLUMNS}
        for k, v in (p.address or {}).items():
            row[f"address.{k}"] = v
        rows.append(row)
    df = pd.DataFrame(rows, columns=None if rows else list(PLACE_COLUMNS))
    if not geo:
        return df
    return points_frame(df, df["lon"].to_numpy(float), df["lat"].to_numpy(float))
