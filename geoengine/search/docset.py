"""The documents of a search index as columns (row i = document i), filled by `osm.read_osm` (the OSM
points), then `documents.build_documents` (streets, GeoNames, display names, canonical ids)."""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field, fields

import numpy as np

SEG_CHUNK = 1 << 17  # segments made per step by DocSet.set_polylines

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
        ends = np.cumsum(nseg)
        self.seg = np.empty((int(ends[-1]) if len(ends) else 0, 4))
        a = 0
        while a < len(k):  # about SEG_CHUNK segments a step (the index arrays and copies of all at once
            # were 60 MB over the segments at 64 copies of Liechtenstein)
            at = int(ends[a - 1]) if a else 0
            b = max(int(np.searchsorted(ends, at + SEG_CHUNK, "right")), a + 1)
            ns = nseg[a:b]
            first = np.repeat(ranges[a:b, 0] - np.cumsum(ns) + ns, ns) + np.arange(int(ns.sum()))
            second = first + (np.repeat(k[a:b], ns) > 1)
            self.seg[at:at + len(first), :2] = xy[first]
            self.seg[at:at + len(first), 2:] = xy[second]
            a = b
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


def _concat_text(a: TextColumn, b: TextColumn) -> None:
    """Append the values of `b` to `a` (their bytes as they are, the starts moved)."""
    shift = len(a.buf)
    a.buf += b.buf
    start = np.frombuffer(b.start, np.int64)
    stop = np.frombuffer(b.stop, np.int64)
    a.start.frombytes(np.where(start >= 0, start + shift, -1).tobytes())
    a.stop.frombytes(np.where(start >= 0, stop + shift, -1).tobytes())


def extend_docs(ds: DocSet, other: DocSet) -> None:
    """Append the documents of `other` (without hierarchy, canonical ids or polylines yet) to `ds`."""
    for f in fields(DocSet):
        mine, theirs = getattr(ds, f.name), getattr(other, f.name)
        if isinstance(mine, TextColumn):
            _concat_text(mine, theirs)
        elif isinstance(mine, (list, array)):
            mine.extend(theirs)


def take_docs(ds: DocSet, rows) -> DocSet:
    """A DocSet of rows `rows` of `ds` (their row columns, in that order)."""
    out = DocSet()
    rows = list(rows)
    for name in row_columns():
        col = getattr(ds, name)
        if isinstance(col, TextColumn):
            new = TextColumn()
            for r in rows:
                new.append(col[r])
        elif isinstance(col, array):
            new = array(col.typecode, [col[r] for r in rows])
        else:
            new = [col[r] for r in rows]
        setattr(out, name, new)
    return out


# the columns of few distinct values: one string object per value when unpacked (as the reader interns them)
_FEW = frozenset(("index", "doc_type", "place_class", "category", "source", "kind", "osm_tag", "categories",
                  "display_name", "country"))
_NESTED = frozenset(("names", "categories"))  # lists of lists of strings


def _pack_strings(values: list, out: dict, key: str) -> None:
    """Strings (or None) as one UTF-8 text and each one's length in characters (-1: None)."""
    out[key + ".len"] = np.fromiter((-1 if v is None else len(v) for v in values), np.int64, len(values))
    out[key + ".text"] = "".join([v for v in values if v]).encode("utf-8", "surrogatepass")


def _unpack_strings(packed: dict, key: str, few: bool) -> list:
    """`_pack_strings`' values again (a column of `few` distinct values shares one string object per value)."""
    lens = np.asarray(packed[key + ".len"])
    text = packed[key + ".text"].decode("utf-8", "surrogatepass")
    ends = np.cumsum(np.maximum(lens, 0))
    starts = (ends - np.maximum(lens, 0)).tolist()
    out = [text[a:b] for a, b in zip(starts, ends.tolist(), strict=True)]
    if few:
        seen: dict[str, str] = {}
        out = [seen.setdefault(v, v) for v in out]
    for i in np.flatnonzero(lens < 0).tolist():
        out[i] = None
    return out


def pack_columns(obj, names: list[str], out: dict | None = None, prefix: str = "") -> dict:
    """The columns `names` of `obj` (a DocSet, osm.StreetWays) as bytes and numpy arrays, to hand a forked
    process's documents to its parent without a Python object per value: array("q"/"d") columns as their
    bytes, TextColumns as their buffer and offsets, string columns as one text and lengths, lists of lists
    (names, categories) as their values flattened and each row's count (-1: None), flags as bytes."""
    out = {} if out is None else out
    for name in names:
        col, key = getattr(obj, name), prefix + name
        if isinstance(col, array):
            out[key + ".array"] = (col.typecode, col.tobytes())
        elif isinstance(col, TextColumn):
            out[key + ".textcol"] = (bytes(col.buf), col.start.tobytes(), col.stop.tobytes())
        elif name in _NESTED:
            out[key + ".count"] = np.fromiter((-1 if v is None else len(v) for v in col), np.int64, len(col))
            _pack_strings([x for v in col if v for x in v], out, key)
        elif name == "region":
            out[key + ".bool"] = np.asarray(col, bool)
        else:
            _pack_strings(col, out, key)
    return out


def unpack_columns(obj, names: list[str], packed: dict, prefix: str = ""):
    """Set the columns `names` of `obj` from `pack_columns`' output; returns `obj`."""
    for name in names:
        key = prefix + name
        if key + ".array" in packed:
            code, raw = packed[key + ".array"]
            col = array(code)
            col.frombytes(raw)
        elif key + ".textcol" in packed:
            col = TextColumn()
            buf, start, stop = packed[key + ".textcol"]
            col.buf = bytearray(buf)
            col.start.frombytes(start)
            col.stop.frombytes(stop)
        elif key + ".count" in packed:
            flat = _unpack_strings(packed, key, name in _FEW)
            counts = packed[key + ".count"].tolist()
            col, at = [], 0
            for n in counts:  # categories: () when empty, as DocSet.add keeps them; names: the list
                if n < 0:
                    col.append(None)
                elif n == 0:
                    col.append(() if name == "categories" else [])
                else:
                    col.append(flat[at:at + n])
                    at += n
        elif key + ".bool" in packed:
            col = packed[key + ".bool"].tolist()
        else:
            col = _unpack_strings(packed, key, name in _FEW)
        setattr(obj, name, col)
    return obj


def row_columns() -> list[str]:
    """The DocSet columns the OSM reader fills (one value a document)."""
    return [f.name for f in fields(DocSet) if f.name not in ("admin", "units", "canonical", "seg", "seg_doc")]
