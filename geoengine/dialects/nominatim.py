"""Nominatim's v1 API (https://nominatim.org/release-docs/latest/api/Overview/) over the engine:
/search, /reverse, /lookup, /details and /status with Nominatim's parameters, response shapes and
error bodies.

No HTTP here: the thin routes (geoengine/server/routes/nominatim.py) hand the query parameters (a
mapping of str, the last value of a repeated one, as Nominatim reads them) and the Accept-Language
header to `search`, `reverse`, `lookup`, `details` or `status`; each returns a `Reply` (HTTP status,
document, media type). The engine calls are the geocoder's: `engine.geocode`, `engine.reverse(zoom=)`,
`engine.lookup` (docs/geocoding.md).

Parameters are read as Nominatim 5 reads them (nominatim_api/v1/server_glue.py and its ASGI adaptor):
- an integer is `int(value)` ("Parameter 'limit' must be a number." otherwise), a float refuses NaN and
  infinities, a boolean is false only for "0";
- `limit` is clamped to 1..50, `zoom` to 0..18; country codes that are not two letters are dropped;
  `featureType` other than country/state/city/settlement keeps only the address layer;
- errors are HTTP 400 (404 for /details of an unknown place) with Nominatim's JSON error object
  `{"error": {"code": 400, "message": "..."}}`, also for an unknown `format`, where Nominatim itself
  answers in plain text (its formatter is not chosen yet).
What differs from Nominatim is listed in docs/geocoding.md: no XML output (`format=xml` and a /reverse or
/lookup without `format`, whose default is XML, are the format error), `place_id` is the search index row
of the bundle, and polygon output is the point where the bundle holds no polygon.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from geoengine import __version__
from geoengine.dialects import DialectError, Reply, replies
from geoengine.services.geocoding_docs import (
    GEOCODEJSON_RANKS,
    address_rank,
    bbox_of,
    dedupe_places,
    importance,
    label_tag,
    ordered_address,
    osm_ref_of_place_id,
)

LICENCE = "Data © OpenStreetMap contributors, ODbL 1.0. http://osm.org/copyright"
JSON = "application/json; charset=utf-8"
TEXT = "text/plain; charset=utf-8"
# The formats Nominatim offers that this dialect writes (Nominatim also has xml; /details and /status
# have their own lists).
FORMATS = ("geojson", "geocodejson", "json", "jsonv2")  # in the order of Nominatim's message (less xml)
STRUCTURED = ("amenity", "street", "city", "county", "state", "postalcode", "country")
LAYERS = ("address", "poi", "railway", "natural", "manmade")
FEATURE_TYPES = ("country", "state", "city", "settlement")
MAX_LIMIT = 50
LOOKUP_MAX_COUNT = 50  # Nominatim's NOMINATIM_LOOKUP_MAX_COUNT default
OSM_TYPE_LETTER = {"node": "N", "way": "W", "relation": "R"}
OSM_TYPE_NAME = {"N": "node", "W": "way", "R": "relation"}


class NominatimError(DialectError):
    """An answer in Nominatim's error shape: HTTP `status` with {"error": {"code", "message"}}."""

    def body(self) -> dict:
        return {"error": {"code": self.status, "message": self.message}}


# -- parameters, as Nominatim's ASGI adaptor reads them -------------------------------------------------
class Params:
    __slots__ = ("raw", "header_lang")

    def __init__(self, raw: Mapping[str, str], accept_language: str | None = None):
        self.raw = raw
        self.header_lang = accept_language

    def get(self, name: str, default: str | None = None) -> str | None:
        return self.raw.get(name, default)

    def get_int(self, name: str, default: int | None = None) -> int:
        return self._number(name, default, int)

    def get_float(self, name: str, default: float | None = None) -> float:
        return self._number(name, default, float)

    def _number(self, name: str, default, kind):
        v = self.raw.get(name)
        if v is None:
            if default is not None:
                return default
            raise NominatimError(f"Parameter '{name}' missing.")
        try:
            x = kind(v)
        except ValueError:
            raise NominatimError(f"Parameter '{name}' must be a number.") from None
        if not math.isfinite(x):
            raise NominatimError(f"Parameter '{name}' must be a number.")
        return x

    def get_bool(self, name: str, default: bool) -> bool:
        v = self.raw.get(name)
        return default if v is None else v != "0"

    def languages(self) -> list[str]:
        """accept-language parameter, else the Accept-Language header: language codes by preference
        (each region form followed by its base language, as Nominatim's Locales does)."""
        text = self.raw.get("accept-language") or self.header_lang or ""
        ranked = []
        for i, part in enumerate(text.split(",")):
            lang, _, q = part.strip().partition(";")
            lang = lang.strip().lower().replace("_", "-")
            if not lang or lang == "*":
                continue
            weight = 1.0
            q = q.strip()
            if q.startswith("q="):
                try:
                    weight = float(q[2:])
                except ValueError:
                    weight = 0.0
            ranked.append((-weight, i, lang))
        out: list[str] = []
        for _, _, lang in sorted(ranked):
            for code in (lang, lang.split("-")[0]):
                if code not in out:
                    out.append(code)
        return out

    def lang(self) -> str | None:
        langs = self.languages()
        return langs[0].split("-")[0] if langs else None


def parse_format(p: Params, default: str, formats: tuple[str, ...] = FORMATS) -> str:
    fmt = p.get("format", default)
    if fmt not in formats:
        raise NominatimError("Parameter 'format' must be one of: " + ", ".join(formats))
    return fmt


def parse_viewbox(text: str) -> tuple[float, float, float, float]:
    """Nominatim's Bbox.from_param: four finite numbers x1,y1,x2,y2 (any two corners), clamped to the
    world; (min_lon, min_lat, max_lon, max_lat)."""
    seq = text.split(",")
    if len(seq) != 4:
        raise NominatimError("Bounding box parameter needs 4 coordinates.")
    try:
        x1, y1, x2, y2 = filter(math.isfinite, map(float, seq))
    except ValueError:
        raise NominatimError("Bounding box parameter needs to be numbers.") from None
    x1, x2 = min(180.0, max(-180.0, x1)), min(180.0, max(-180.0, x2))
    y1, y2 = min(90.0, max(-90.0, y1)), min(90.0, max(-90.0, y2))
    if x1 == x2 or y1 == y2:
        raise NominatimError("Bounding box with invalid parameters.")
    return min(x1, x2), min(y1, y2), max(x1, x2), max(y1, y2)


def parse_countries(text: str | None) -> list[str] | None:
    """Nominatim's format_country: two-letter values, lower-cased; the rest dropped (None: no filter).
    [] when every two-letter value is no letter pair (no country has such a code: nothing matches)."""
    if not text:
        return None
    codes = [c.lower() for c in text.split(",") if len(c) == 2]
    if not codes:
        return None
    return [c for c in codes if c.isascii() and c.isalpha()]


def parse_excluded(text: str | None) -> list[str] | None:
    """exclude_place_ids: place ids (numbers) and OSM ids (N123, W45, R6), comma-separated."""
    if not text:
        return None
    out = []
    for item in (s.strip() for s in text.split(",")):
        if not item:
            continue
        if item.isdecimal():
            if int(item) > 0:
                out.append(str(int(item)))
        elif len(item) > 1 and item[0].upper() in "NWR" and item[1:].isdecimal():
            out.append(item[0].upper() + str(int(item[1:])))
        else:
            raise NominatimError(f"Invalid exclude ID: {item}")
    return out or None


def _has_words(text: str) -> bool:
    return any(ch.isalnum() for ch in text)


def _place_ids(engine, excluded: list[str] | None) -> list[int] | None:
    """exclude_place_ids as the engine's place ids: OSM ids (N123) looked up."""
    if not excluded:
        return None
    out = [int(v) for v in excluded if v.isdecimal()]
    osm = [v for v in excluded if not v.isdecimal()]
    if osm:
        out.extend(pl.place_id for pl in engine.lookup(osm))
    return out or None


def parse_layers(text: str | None) -> list[str] | None:
    """Nominatim's get_layers: comma-separated names, any case, blanks skipped; None when none is named."""
    if text is None:
        return None
    out = []
    for s in text.split(","):
        s = s.strip()
        if not s:
            continue
        if s.lower() not in LAYERS:
            raise NominatimError(f"Parameter 'layer' must be a comma-separated list of: {', '.join(LAYERS)}")
        out.append(s.lower())
    return out or None


def geometry_options(p: Params, fmt: str) -> tuple[str, ...]:
    """The polygon outputs asked for (Nominatim allows one by default: POLYGON_OUTPUT_MAX_TYPES=1)."""
    kinds = []
    if p.get_bool("polygon_geojson", False):
        kinds.append("geojson")
    if fmt not in ("geojson", "geocodejson"):
        for k in ("text", "kml", "svg"):
            if p.get_bool("polygon_" + k, False):
                kinds.append(k)
    if len(kinds) > 1:
        raise NominatimError("Too many polygon output options selected.")
    p.get_float("polygon_threshold", 0.0)  # read for its errors; geometries are points or boxes
    return tuple(kinds)


def _options(p: Params, geometry: tuple[str, ...], addressdetails: bool) -> dict:
    """What the results carry: address (by default on /reverse and /lookup), extratags, namedetails and
    the polygon outputs."""
    return {"addressdetails": p.get_bool("addressdetails", addressdetails),
            "extratags": p.get_bool("extratags", False), "namedetails": p.get_bool("namedetails", False),
            "geometry": geometry}


# -- writing results -------------------------------------------------------------------------------
def _point_geometry(place) -> dict:
    return {"type": "Point", "coordinates": [round(place.lon, 7), round(place.lat, 7)]}


def _geometry(place, wanted: bool) -> dict:
    """The place's geometry when `wanted` (polygon_geojson) and the bundle holds one, else its point."""
    return (getattr(place, "geometry", None) if wanted else None) or _point_geometry(place)


def _osm_ident(place) -> dict:
    """osm_type and osm_id of a place with an OSM id (none for another source)."""
    if OSM_TYPE_LETTER.get(place.osm_type) is None or place.osm_id is None:
        return {}
    return {"osm_type": place.osm_type, "osm_id": place.osm_id}


def _geometry_fields(place, kinds: tuple[str, ...]) -> dict:
    out = {}
    lon, lat = f"{place.lon:.7f}", f"{place.lat:.7f}"
    for k in kinds:
        if k == "geojson":
            out["geojson"] = _geometry(place, True)
        elif k == "text":
            out["geotext"] = f"POINT({lon} {lat})"
        elif k == "kml":
            out["geokml"] = f"<Point><coordinates>{lon},{lat}</coordinates></Point>"
        elif k == "svg":
            out["svg"] = f'cx="{lon}" cy="{-place.lat:.7f}"'
    return out


def json_object(place, class_key: str, opts: dict) -> dict:
    """One result of format json (`class_key` "class") or jsonv2 ("category")."""
    o: dict[str, Any] = {"place_id": place.place_id, "licence": LICENCE, **_osm_ident(place)}
    o.update({"lat": f"{place.lat:.7f}", "lon": f"{place.lon:.7f}", class_key: place.category or "",
              "type": place.type or "", "place_rank": int(place.place_rank or 30), "importance": importance(place),
              "addresstype": label_tag(place), "name": place.name or "", "display_name": place.display_name or ""})
    if opts.get("addressdetails"):
        o["address"] = ordered_address(place)
    o.update(_extras(place, opts))
    b = bbox_of(place)
    o["boundingbox"] = [f"{b[0]:.7f}", f"{b[1]:.7f}", f"{b[2]:.7f}", f"{b[3]:.7f}"]
    o.update(_geometry_fields(place, opts.get("geometry", ())))
    return o


def _extras(place, opts: dict) -> dict:
    """`extratags` and `namedetails` when asked for."""
    return {k: getattr(place, k) or {} for k in ("extratags", "namedetails") if opts.get(k)}


def geojson_feature(place, opts: dict) -> dict:
    props: dict[str, Any] = {"place_id": place.place_id, **_osm_ident(place)}
    props.update({"place_rank": int(place.place_rank or 30), "category": place.category or "",
                  "type": place.type or "", "importance": importance(place), "addresstype": label_tag(place),
                  "name": place.name or "", "display_name": place.display_name or ""})
    if opts.get("addressdetails"):
        props["address"] = ordered_address(place)
    props.update(_extras(place, opts))
    b = bbox_of(place)
    geom = _geometry(place, "geojson" in opts.get("geometry", ()))
    return {"type": "Feature", "properties": props,
            "bbox": [round(b[2], 7), round(b[0], 7), round(b[3], 7), round(b[1], 7)], "geometry": geom}


def geocodejson_feature(place, opts: dict) -> dict:
    g: dict[str, Any] = {"place_id": place.place_id, **_osm_ident(place)}
    g.update({"osm_key": place.category or "", "osm_value": place.type or "",
              "type": GEOCODEJSON_RANKS[max(3, min(28, address_rank(place)))]})
    distance = getattr(place, "distance_m", None)
    if distance is not None:
        g["accuracy"] = int(distance)
    g["label"] = place.display_name or ""
    if place.name:
        g["name"] = place.name
    if opts.get("addressdetails"):
        addr = place.address or {}
        if addr.get("postcode"):
            g["postcode"] = addr["postcode"]
        if addr.get("house_number"):
            g["housenumber"] = addr["house_number"]
        if addr.get("road") and place.name != addr["road"]:
            g["street"] = addr["road"]
        for key, kind in (("neighbourhood", "locality"), ("suburb", "district"), ("city_district", "district"),
                          ("village", "city"), ("town", "city"), ("city", "city"), ("county", "county"),
                          ("state", "state"), ("country", "country")):
            if addr.get(key) and kind not in g and addr[key] != place.name:
                g[kind] = addr[key]
        if addr.get("country_code"):
            g["country_code"] = addr["country_code"]
        g["admin"] = {}
    if opts.get("extratags"):
        g["extra"] = place.extratags or {}
    geom = _geometry(place, "geojson" in opts.get("geometry", ()))
    return {"type": "Feature", "properties": {"geocoding": g}, "geometry": geom}


def render(places, fmt: str, opts: dict, single: bool = False):
    """The document of a result list in `fmt`; `single` (reverse): one object, or Nominatim's
    {"error": "Unable to geocode"} when there is none."""
    if single and not places:
        return {"error": "Unable to geocode"}
    if fmt in ("json", "jsonv2"):
        key = "class" if fmt == "json" else "category"
        items = [json_object(p, key, opts) for p in places]
        return items[0] if single else items
    if fmt == "geojson":
        return {"type": "FeatureCollection", "licence": LICENCE,
                "features": [geojson_feature(p, opts) for p in places]}
    head = {"version": "0.1.0", "attribution": LICENCE, "licence": "ODbL"}
    if opts.get("query") is not None:
        head["query"] = opts["query"]
    return {"type": "FeatureCollection", "geocoding": head, "features": [geocodejson_feature(p, opts) for p in places]}


# -- endpoints: each a Reply, its refusals Nominatim's error objects (JSON, `JSON`'s media type) --------
@replies(NominatimError)
def search(engine, params: Mapping[str, str], accept_language: str | None = None) -> Reply:
    """GET /search?format=...: free-form (`q`) or structured search."""
    p = Params(params, accept_language)
    fmt = parse_format(p, "jsonv2")
    geometry = geometry_options(p, fmt)
    countries = parse_countries(p.get("countrycodes"))
    excluded = parse_excluded(p.get("exclude_place_ids"))
    vb = p.get("viewbox") or p.get("viewboxlbrt")
    viewbox = parse_viewbox(vb) if vb else None
    bounded = p.get_bool("bounded", False)
    dedupe = p.get_bool("dedupe", True)
    limit = max(1, min(MAX_LIMIT, p.get_int("limit", 10)))
    feature_type = p.get("featureType")
    layers = ["address"] if feature_type is not None else parse_layers(p.get("layer"))
    if feature_type not in FEATURE_TYPES:
        feature_type = None
    q = p.get("q")
    parts = {k: p.get(k) for k in STRUCTURED if p.get(k)}
    if q is not None and parts:
        raise NominatimError("Structured query parameters(amenity, street, city, county, state, postalcode, "
                             "country) cannot be used together with 'q' parameter.")
    opts = {**_options(p, geometry, False), "query": q if q is not None else ", ".join(parts.values())}
    if (q is None and not parts) or (q is not None and q and not q.strip()):
        raise NominatimError("Nothing to search for.")
    # Nominatim 5 answers [] to an empty q, and to text without a letter or digit (",,,") in q or in
    # every structured field (such a field is dropped where others have words)
    parts = {k: v for k, v in parts.items() if _has_words(v)}
    if q == "" or countries == [] or (q is not None and not _has_words(q)) or (q is None and not parts):
        places = []
    else:
        want = min(MAX_LIMIT, limit + min(10, limit)) if dedupe else limit
        places = list(engine.geocode(
            q, **parts, limit=want, lang=p.lang(), viewbox=viewbox, bounded=bounded, countrycodes=countries,
            layer=layers, feature_type=feature_type, exclude_place_ids=_place_ids(engine, excluded),
            dedupe=dedupe))
        places = dedupe_places(places, limit) if dedupe else places[:limit]
    return Reply(200, render(places, fmt, opts))


@replies(NominatimError)
def reverse(engine, params: Mapping[str, str], accept_language: str | None = None) -> Reply:
    """GET /reverse?lat=..&lon=..&format=...: the place at a point, at the detail `zoom` asks for."""
    p = Params(params, accept_language)
    fmt = parse_format(p, "xml")
    lat, lon = p.get_float("lat"), p.get_float("lon")
    geometry = geometry_options(p, fmt)
    zoom = max(0, min(18, p.get_int("zoom", 18)))
    layers = parse_layers(p.get("layer"))
    opts = _options(p, geometry, True)
    if -90 <= lat <= 90 and -180 <= lon <= 180:
        places = list(engine.reverse(lon=lon, lat=lat, zoom=zoom, lang=p.lang()))
    else:
        places = []  # Nominatim 5: 200 and "Unable to geocode"
    if layers is not None:
        places = [pl for pl in places if pl.layer in layers]
    return Reply(200, render(places[:1], fmt, opts, single=True))


@replies(NominatimError)
def lookup(engine, params: Mapping[str, str], accept_language: str | None = None) -> Reply:
    """GET /lookup?osm_ids=N1,W2,R3&format=...: places by OSM id, in the order asked."""
    p = Params(params, accept_language)
    fmt = parse_format(p, "xml")
    geometry = geometry_options(p, fmt)
    ids = []
    for oid in (p.get("osm_ids") or "").split(","):
        oid = oid.strip()
        if len(oid) > 1 and oid[0] in "RNWrnw" and oid[1:].isdecimal():
            ids.append(oid[0].upper() + str(int(oid[1:])))
    if len(ids) > LOOKUP_MAX_COUNT:
        raise NominatimError("Too many object IDs.")
    opts = _options(p, geometry, True)
    places = list(engine.lookup(ids, lang=p.lang())) if ids else []
    return Reply(200, render(places, fmt, opts))


@replies(NominatimError)
def details(engine, params: Mapping[str, str], accept_language: str | None = None) -> Reply:
    """GET /details?place_id=.. or ?osmtype=N&osmid=..: one place with its names, address and tags."""
    p = Params(params, accept_language)
    parse_format(p, "json", ("json",))
    place_id = p.get_int("place_id", 0)
    if place_id:
        ref = osm_ref_of_place_id(engine, place_id)
        if ref is None:
            raise NominatimError("No place with that OSM ID found.", 404)
    elif p.get("osmtype") is not None:
        osmtype = p.get("osmtype").upper()
        osmid = p.get_int("osmid")
        if osmtype not in OSM_TYPE_NAME:
            raise NominatimError("No place with that OSM ID found.", 404)
        ref = f"{osmtype}{osmid}"
    else:
        raise NominatimError("Missing ID parameter 'place_id' or 'osmtype'.")
    geojson = p.get_bool("polygon_geojson", False)
    places = list(engine.lookup([ref], lang=p.lang()))
    if not places:
        raise NominatimError("No place with that OSM ID found.", 404)
    place = places[0]
    addr = ordered_address(place)
    centroid, geom = _point_geometry(place), _geometry(place, geojson)
    doc: dict[str, Any] = {"place_id": place.place_id}
    if place.osm_type and place.osm_id is not None:
        doc["osm_type"] = OSM_TYPE_LETTER[place.osm_type]
        doc["osm_id"] = place.osm_id
    doc.update({
        "category": place.category or "", "type": place.type or "", "admin_level": 15,
        "localname": place.name or "", "names": place.namedetails or ({"name": place.name} if place.name else {}),
        "addresstags": {k: v for k, v in addr.items() if k in ("house_number", "road", "postcode", "city")},
        "housenumber": getattr(place, "housenumber", None), "calculated_postcode": addr.get("postcode"),
        "country_code": addr.get("country_code"), "importance": place.importance,
        "calculated_importance": importance(place), "extratags": place.extratags or {},
        "rank_address": address_rank(place), "rank_search": int(place.place_rank or 30),
        "isarea": geom.get("type", "").endswith("Polygon"), "centroid": centroid, "geometry": geom,
        "address": [{"localname": v, "class": "place", "type": k, "isaddress": True}
                    for k, v in addr.items() if k != "country_code"],
    })
    for k in ("housenumber", "calculated_postcode", "country_code", "importance"):
        if doc[k] is None:
            del doc[k]
    return Reply(200, doc)


@replies(NominatimError)
def status(engine, params: Mapping[str, str], accept_language: str | None = None) -> Reply:
    """GET /status?format=text|json: "OK", or {status, message, data_updated, software_version,
    database_version}."""
    if parse_format(Params(params), "text", ("text", "json")) == "text":
        return Reply(200, "OK", TEXT)
    info = engine.info()
    doc = {"status": 0, "message": "OK"}
    # the OSM data's own timestamp (advanced by `geoengine update`, docs/updates.md), else when it was built
    updated = info.get("data_timestamp") or info.get("built")
    if updated:
        doc["data_updated"] = updated
    doc["software_version"] = f"geoengine {__version__}"
    doc["database_version"] = str(info.get("built_by") or __version__)
    return Reply(200, doc)
