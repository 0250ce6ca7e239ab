"""Photon's API (https://github.com/komoot/photon#search-api) over the engine: /api (search) and /reverse,
served under /photon, answering Photon's GeoJSON FeatureCollection.

No HTTP here: the thin routes (geoengine/server/routes/photon.py) hand the query string's (name, value)
pairs in order (Photon repeats `osm_tag` and `layer`) and the Accept-Language header to `search` or
`reverse`, which return (HTTP status, document). Errors are Photon's: HTTP 400 with {"message": "..."}
for an unknown parameter, a malformed number, a latitude or longitude out of range or given alone, a bad
bbox, osm_tag, layer or language, and a search without `q`.

Each feature's properties are Photon's: osm_type (N, W, R), osm_id, osm_key, osm_value, type (house,
street, locality, district, city, county, state, country, other), housenumber, name, street, locality,
district, city, county, state, country, postcode, countrycode (upper case) and extent
([min_lon, max_lat, max_lon, min_lat], for ways and relations), from the engine's Place.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from geoengine.dialects import DialectError, Reply, replies
from geoengine.services.geocoding_docs import filtered_places, layer_of

LANGUAGES = ("en", "de", "fr", "it")  # Photon's default language set
LAYERS = ("house", "street", "locality", "district", "city", "county", "state", "country", "other")
BASE = ("lang", "limit", "debug", "dedupe", "geometry", "osm_tag", "layer", "include", "exclude")
SEARCH_PARAMS = frozenset(BASE + ("lat", "lon", "location_bias_scale", "zoom", "bbox", "suggest_addresses", "q",
                                  "countrycode"))
REVERSE_PARAMS = frozenset(BASE + ("lat", "lon", "radius", "query_string_filter", "distance_sort"))
DEFAULT_LIMIT = 15  # Photon's request default
MAX_LIMIT = 50  # Photon's -max-results default
OSM_LETTER = {"node": "N", "way": "W", "relation": "R"}
BBOX_COUNT = ("Invalid number of supplied coordinates for parameter 'bbox', expected format is: "
              "minLon,minLat,maxLon,maxLat")
BBOX_BOUNDS = ("Invalid bounds for parameter 'bbox', expected values minLat, maxLat element [-90,90], "
               "minLon, maxLon element [-180,180]")


class PhotonError(DialectError):
    def body(self) -> dict:
        return {"message": self.message}


# -- parameters ----------------------------------------------------------------------------------------
class Params:
    def __init__(self, pairs: Iterable[tuple[str, str]], allowed: frozenset, accept_language: str | None):
        self.multi: dict[str, list[str]] = {}
        for k, v in pairs:
            self.multi.setdefault(k, []).append(v)
        for k in self.multi:
            if k not in allowed:
                raise PhotonError(f"Unknown query parameter '{k}'.  Allowed parameters are: "
                                  f"[{', '.join(sorted(allowed))}]")
        self.header_lang = accept_language

    def one(self, name: str) -> str | None:
        v = self.multi.get(name)
        return None if v is None else v[0]

    def all(self, name: str) -> list[str]:
        out = []
        for v in self.multi.get(name, ()):
            out.extend(s for s in v.split(",") if s)  # Photon's repeated parameters also take commas
        return out

    def double(self, name: str) -> float | None:
        return self._number(name, float)

    def integer(self, name: str) -> int | None:
        return self._number(name, lambda v: int(v.strip()))

    def _number(self, name: str, kind):
        v = self.one(name)
        if v is None:
            return None
        try:
            x = kind(v)
        except ValueError:
            raise PhotonError(f"Invalid value for '{name}' parameter.") from None
        if x != x:  # NaN
            raise PhotonError(f"Invalid value for '{name}' parameter.")
        return x

    def boolean(self, name: str, default: bool) -> bool:
        v = self.one(name)
        return default if v is None else v.lower() in ("1", "yes", "true")


def _lang(p: Params) -> str | None:
    lang = p.one("lang")
    if lang is not None:
        if lang != "default" and lang not in LANGUAGES:
            raise PhotonError("Language is not supported. Supported are: default, " + ", ".join(LANGUAGES))
        return None if lang == "default" else lang
    for part in (p.header_lang or "").split(","):
        code = part.split(";")[0].strip().lower()
        for c in (code, code.split("-")[0]):
            if c in LANGUAGES:
                return c
    return None


def _lat_lon(p: Params, mandatory: bool) -> tuple[float, float] | None:
    lat_s, lon_s = p.one("lat"), p.one("lon")
    if not mandatory and lat_s is None and lon_s is None:
        return None
    if lat_s is None:
        raise PhotonError("Missing parameter 'lat'.")
    if lon_s is None:
        raise PhotonError("Missing parameter 'lon'.")
    lat, lon = p.double("lat"), p.double("lon")
    if not -90.0 <= lat <= 90.0:
        raise PhotonError("Invalid value for 'lat' parameter.")
    if not -180.0 <= lon <= 180.0:
        raise PhotonError("Invalid value for 'lon' parameter.")
    return lat, lon


def _bbox(text: str | None) -> tuple[float, float, float, float] | None:
    if text is None:
        return None
    parts = text.split(",")
    if len(parts) != 4:
        raise PhotonError(BBOX_COUNT)
    vals = []
    for i, s in enumerate(parts):
        try:
            d = float(s)
        except ValueError:
            raise PhotonError(BBOX_COUNT) from None
        limit = 180 if i % 2 == 0 else 90
        if math.isnan(d) or not -limit <= d <= limit:
            raise PhotonError(BBOX_BOUNDS)
        vals.append(d)
    x1, y1, x2, y2 = vals
    return min(x1, x2), min(y1, y2), max(x1, x2), max(y1, y2)


def _osm_tags(values: list[str]) -> list[str]:
    """Photon's TagFilter grammar: key, !key, key:value, key:!value, !key:value, :value, :!value."""
    for f in values:
        parts = f.split(":")
        if len(parts) == 2:
            ok = bool(parts[1].lstrip("!").strip())
        else:
            ok = len(parts) == 1 and bool(f.lstrip("!"))
        if not ok:
            raise PhotonError("Invalid format for osm_tag parameter.")
    return values


def _layers(values: list[str]) -> list[str]:
    if any(v not in LAYERS for v in values):
        raise PhotonError("Unknown layer type. Available layers: [" + ", ".join(LAYERS) + "]")
    return values


def _limit(p: Params, default: int) -> int:
    v = p.integer("limit")
    return default if v is None else max(1, min(MAX_LIMIT, v))


# -- features --------------------------------------------------------------------------------------------
def feature(place) -> dict:
    a = place.address or {}
    props: dict = {}
    letter = OSM_LETTER.get(place.osm_type or "")
    if letter is not None and place.osm_id is not None:
        props["osm_type"] = letter
        props["osm_id"] = place.osm_id
    kind = layer_of(place)
    for key, value in (("osm_key", place.category), ("osm_value", place.type), ("type", kind),
                       ("housenumber", getattr(place, "housenumber", None) or a.get("house_number"))):
        if value:
            props[key] = value
    if place.name and not (kind == "house" and place.name == props.get("housenumber")):
        props["name"] = place.name
    fields = (("street", a.get("road")), ("locality", a.get("neighbourhood") or a.get("quarter") or a.get("hamlet")),
              ("district", a.get("suburb") or a.get("city_district") or a.get("district")),
              ("city", a.get("city") or a.get("town") or a.get("village") or a.get("municipality")),
              ("county", a.get("county")), ("state", a.get("state")), ("country", a.get("country")))
    for key, value in fields:
        if value and not (kind == key and value == place.name):  # the place's own layer names it
            props[key] = value
    if a.get("postcode"):
        props["postcode"] = a["postcode"]
    if a.get("country_code"):
        props["countrycode"] = a["country_code"].upper()
    bb = place.boundingbox
    if bb is not None and place.osm_type in ("way", "relation") and bb[0] != bb[1] and bb[2] != bb[3]:
        min_lat, max_lat, min_lon, max_lon = (float(v) for v in bb)
        props["extent"] = [min_lon, max_lat, max_lon, min_lat]
    return {"type": "Feature", "properties": props,
            "geometry": {"type": "Point", "coordinates": [place.lon, place.lat]}}


def collection(places) -> dict:
    return {"type": "FeatureCollection", "features": [feature(p) for p in places]}


# -- endpoints: each a Reply, its refusals Photon's {"message"} ---------------------------------------------
@replies(PhotonError)
def search(engine, pairs: Iterable[tuple[str, str]], accept_language: str | None = None) -> Reply:
    """GET /photon/api?q=...: a FeatureCollection."""
    p = Params(pairs, SEARCH_PARAMS, accept_language)
    lang = _lang(p)
    limit = _limit(p, DEFAULT_LIMIT)
    p.boolean("debug", False)
    dedupe = p.boolean("dedupe", True)
    layers = _layers(p.all("layer"))
    tags = _osm_tags(p.all("osm_tag"))
    zoom = p.integer("zoom")
    scale = p.double("location_bias_scale")
    point = _lat_lon(p, mandatory=False)
    bbox = _bbox(p.one("bbox"))
    countries = [c.lower() for c in p.all("countrycode")] or None
    q = p.one("q") or ""
    if not q.strip():
        raise PhotonError("q parameter is required when no include categories are specified")
    del zoom  # Photon turns zoom into a bias radius; the engine's bias has its own (docs/geocoding.md)
    if scale is not None:
        scale = max(0.0, min(1.0, scale))
    # one plain key:value filter is the engine's; the rest of Photon's grammar (a key alone, negations,
    # several filters) filters a larger candidate list here
    k, _, v = tags[0].partition(":") if len(tags) == 1 else ("", "", "")
    engine_tag = tags[0] if k and v and "!" not in tags[0] else None
    post = bool(layers) or (bool(tags) and engine_tag is None)
    countries = [c for c in countries or () if len(c) == 2 and c.isascii() and c.isalpha()] or None
    places = list(engine.geocode(
        q, limit=min(MAX_LIMIT, limit * 3) if post else limit, lang=lang, viewbox=bbox,
        bounded=bbox is not None, countrycodes=countries, osm_tag=engine_tag, dedupe=dedupe,
        lat=None if point is None else point[0], lon=None if point is None else point[1],
        location_bias_scale=scale))
    return Reply(200, collection(filtered_places(places, layers, tags if engine_tag is None else None)[:limit]))


@replies(PhotonError)
def reverse(engine, pairs: Iterable[tuple[str, str]], accept_language: str | None = None) -> Reply:
    """GET /photon/reverse?lat=..&lon=..: a FeatureCollection of the place there."""
    p = Params(pairs, REVERSE_PARAMS, accept_language)
    lat, lon = _lat_lon(p, mandatory=True)
    lang = _lang(p)
    limit = _limit(p, 1)
    layers = _layers(p.all("layer"))
    tags = _osm_tags(p.all("osm_tag"))
    radius = p.double("radius")
    if radius is not None and not radius > 0:
        raise PhotonError("Invalid value for 'radius' parameter.")
    p.boolean("distance_sort", True)
    places = filtered_places(list(engine.reverse(lon=lon, lat=lat, zoom=18, lang=lang)), layers, tags,
                             None if radius is None else (lat, lon, radius * 1000))
    return Reply(200, collection(places[:limit]))
