"""The documents of a search index as columns (row i = document i), filled by `osm.read_osm` (the OSM
points), then `documents.build_documents` (streets, GeoNames, display names, canonical ids)."""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

import numpy as np


class TextColumn:
    """Strings (or None) kept as one UTF-8 buffer and each value's start and end (`col[k]` decodes value k;
    a value set again is appended and the old bytes left): a Python string a value cost its header and the
    allocator's slack, and freed strings left holes among the documents' own."""

    def __init__(self):
        self.buf = bytearray()
        self.start = array("q")  # -1: None
        self.stop = array("q")

    def __len__(self) -> int:
        return len(self.start)

    def append(self, text: str | None) -> None:
        self.start.append(-1)
        self.stop.append(-1)
        if text is not None:
            self[len(self.start) - 1] = text

    def __setitem__(self, k: int, text: str | None) -> None:
        if text is None:
            self.start[k] = self.stop[k] = -1
            return
        self.start[k] = len(self.buf)
        self.buf += text.encode("utf-8")
        self.stop[k] = len(self.buf)

    def __getitem__(self, k: int) -> str | None:
        a = self.start[k]
        return None if a < 0 else self.buf[a:self.stop[k]].decode("utf-8")


@dataclass
class DocSet:
    """Column lists of every document (row i = document i)."""

    id: list[str] = field(default_factory=list)
    index: list[str] = field(default_factory=list)
    doc_type: list[str] = field(default_factory=list)
    name: list[str] = field(default_factory=list)
    name_en: list[str | None] = field(default_factory=list)
    names: list[list[str]] = field(default_factory=list)
    display_name: list[str] = field(default_factory=list)
    place_class: list[str | None] = field(default_factory=list)
    category: list[str | None] = field(default_factory=list)
    importance: array = field(default_factory=lambda: array("d"))
    lat: array = field(default_factory=lambda: array("d"))
    lon: array = field(default_factory=lambda: array("d"))
    source: list[str] = field(default_factory=list)
    kind: list[str] = field(default_factory=list)  # n | w | r | g (for canonical preference)
    categories: list[list[str] | tuple] = field(default_factory=list)  # search categories (iD preset ids) of POIs
    detail: TextColumn = field(default_factory=TextColumn)  # JSON of names, address, tags, osm ways (/search/detail)
    country: list[str | None] = field(default_factory=list)  # ISO 3166-1 alpha-2 code
    region: list[bool] = field(default_factory=list)  # of the bundle's own region (OSM, GeoNames inside its bbox)
    # addr:* of the object (None when absent); `street` is the street the address belongs to once resolved
    housenumber: list[str | None] = field(default_factory=list)
    street: list[str | None] = field(default_factory=list)
    addr_place: list[str | None] = field(default_factory=list)
    postcode: list[str | None] = field(default_factory=list)
    osm_tag: list[str | None] = field(default_factory=list)  # key=value of the tag that makes the document
    street_row: array = field(default_factory=lambda: array("q"))  # the street document of an address or POI (-1)
    admin: np.ndarray | None = None  # (n, 8) int32 administrative unit per level (admin.ADMIN_LEVELS), -1: none
    units: object | None = None  # admin.Units
    canonical: np.ndarray | None = None  # row of each document's canonical document
    # reverse-geocoding items: (m, 4) segments (lon1, lat1, lon2, lat2) and their (m,) int32 document rows
    seg: np.ndarray = field(default_factory=lambda: np.zeros((0, 4)))
    seg_doc: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))

    def __len__(self) -> int:
        return len(self.id)

    def segments(self) -> tuple[np.ndarray, np.ndarray]:
        """((m, 4) segments, (m,) int32 document rows)."""
        return self.seg, self.seg_doc

    def set_polylines(self, xy: np.ndarray, ranges: np.ndarray, rows: np.ndarray) -> None:
        """The segments of polylines `xy[start:stop]` (`ranges` (p, 2)) of documents `rows` (p,): each pair of
        consecutive vertices, a polyline of one point a zero-length segment. One array for all of them
        (an array per polyline cost more than its segments)."""
        k = ranges[:, 1] - ranges[:, 0]
        nseg = np.maximum(k - 1, 1)
        first = np.repeat(ranges[:, 0] - np.cumsum(nseg) + nseg, nseg) + np.arange(int(nseg.sum()))
        second = first + (np.repeat(k, nseg) > 1)
        self.seg = np.empty((len(first), 4))
        self.seg[:, :2] = xy[first]
        self.seg[:, 2:] = xy[second]
        self.seg_doc = np.repeat(np.asarray(rows, np.int32), nseg)

    def add(self, *, id, index, doc_type, name, name_en, names, place_class, category, importance, lat, lon,
            source, kind, display_name="", categories=None, detail=None, country=None, region=True, housenumber=None,
            street=None, addr_place=None, postcode=None, osm_tag=None):
        self.id.append(id)
        self.index.append(index)
        self.doc_type.append(doc_type)
        self.name.append(name)
        self.name_en.append(name_en)
        self.names.append(names)
        self.display_name.append(display_name)
        self.place_class.append(place_class)
        self.category.append(category)
        self.importance.append(float(importance))
        self.lat.append(float(lat))
        self.lon.append(float(lon))
        self.source.append(source)
        self.kind.append(kind)
        self.categories.append(categories or ())  # one shared empty tuple for the many without
        self.detail.append(detail)
        self.country.append(country)
        self.region.append(bool(region))
        self.housenumber.append(housenumber)
        self.street.append(street)
        self.addr_place.append(addr_place)
        self.postcode.append(postcode)
        self.osm_tag.append(osm_tag)
        self.street_row.append(-1)
        return len(self.id) - 1
