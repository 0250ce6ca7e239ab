"""TEMPORARY: a thin adapter giving the geocoder contract's calls (engine.geocode, engine.reverse(zoom=),
engine.lookup returning Place objects) over today's engine.search / engine.reverse / engine.place, until
geo-query's engine.geocode lands. `api(engine)` returns the engine itself once it has `geocode`."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field

from geoengine.errors import NotFound

_RANK = {"country": 4, "state": 8, "region": 8, "county": 12, "city": 16, "town": 18, "village": 19,
         "suburb": 20, "hamlet": 20, "neighbourhood": 22, "locality": 25, "street": 26, "address": 30}
_ADDR = {"housenumber": "house_number", "street": "road", "postcode": "postcode", "city": "city",
         "country_code": "country_code", "place": "road"}


@dataclass(slots=True)
class Place:
    place_id: int
    osm_type: str | None
    osm_id: int | None
    lat: float
    lon: float
    name: str | None
    display_name: str | None
    category: str | None
    type: str | None
    place_rank: int
    importance: float | None
    address: dict = field(default_factory=dict)
    boundingbox: tuple | None = None
    extratags: dict = field(default_factory=dict)
    namedetails: dict = field(default_factory=dict)
    housenumber: str | None = None
    layer: str | None = None
    distance_m: float | None = None


def api(engine):
    if hasattr(engine, "geocode") and hasattr(engine, "lookup") and \
            "zoom" in inspect.signature(engine.reverse).parameters:
        return engine
    return _Adapter(engine)


class _Adapter:
    def __init__(self, engine):
        self.engine = engine

    def _place(self, doc_id: str, distance=None) -> Place:
        d = self.engine.place(doc_id)
        idx = self.engine.search_index
        row = idx.row_of(d["id"])
        osm = d.get("osm") or {}
        pc = d.get("place_class") or ""
        if pc == "address":
            cat, typ = "place", "house"
        elif pc == "street":
            cat, typ = "highway", "residential"
        elif d.get("doc_type") == "poi":
            tags = (d.get("categories") or [{}])[0].get("tags") or {}
            cat, typ = next(iter(tags.items()), ("amenity", d.get("category") or "yes"))
        else:
            cat, typ = "place", pc or "locality"
        addr = {_ADDR[k]: v for k, v in (d.get("address") or {}).items() if k in _ADDR}
        return Place(place_id=int(row), osm_type=osm.get("type"), osm_id=osm.get("id") or (osm.get("ids") or [None])[0],
                     lat=d["location"]["lat"], lon=d["location"]["lon"], name=d.get("name"),
                     display_name=d.get("display_name"), category=cat, type=typ,
                     place_rank=_RANK.get(pc, 30), importance=d.get("importance"), address=addr,
                     namedetails={k: v for k, v in (d.get("names") or {}).items() if isinstance(v, str)},
                     extratags={k: str(v) for k, v in (d.get("tags") or {}).items()},
                     housenumber=(d.get("address") or {}).get("housenumber"), distance_m=distance)

    def geocode(self, q=None, *, street=None, city=None, county=None, state=None, country=None, postalcode=None,
                amenity=None, limit=10, lang=None, viewbox=None, bounded=False, countrycodes=None, layer=None,
                feature_type=None, exclude_place_ids=None, lat=None, lon=None, location_bias_scale=None,
                osm_tag=None, dedupe=True):
        text = q or ", ".join(v for v in (amenity, street, city, county, state, postalcode, country) if v)
        if len(text.strip()) < 2:
            return []
        bbox = ",".join(str(v) for v in viewbox) if (viewbox and bounded) else None
        res = self.engine.search(text, lat=lat, lon=lon, size=min(25, max(1, limit)), bbox=bbox,
                                 countries=",".join(countrycodes) if countrycodes else None)
        return [self._place(r["id"]) for r in res["results"]]

    def reverse(self, *, lon, lat, zoom=18, lang=None, layer=None):
        res = self.engine.reverse(lon=lon, lat=lat, size=1)
        return [self._place(r["id"], r.get("distance_m")) for r in res["results"][:1]]

    def lookup(self, ids, lang=None):
        out = []
        idx = self.engine.search_index
        for ref in ids:
            if ref.isdecimal():
                if int(ref) >= len(idx.cols["id"]):
                    continue
                doc = idx.cols["id"][int(ref)]
            else:
                doc = f"osm:{ {'N': 'node', 'W': 'way', 'R': 'relation'}[ref[0]]}:{ref[1:]}"
            try:
                out.append(self._place(doc))
            except NotFound:
                continue
        return out
