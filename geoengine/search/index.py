"""The search index: answering search, reverse and lookup from a bundle's `search/` files.

Writing those files is `write.py`; parsing and checking request arguments is `requests.py`.

The files under `<bundle>/search/` are described in `write.py`.
"""

from __future__ import annotations

import bisect
import itertools
import json
import math
import threading
import time
from functools import lru_cache
from pathlib import Path

import numpy as np
from rapidfuzz import fuzz, process
from rapidfuzz.distance import OSA

from geoengine.arrays import readonly, unique
from geoengine.errors import InvalidRequest, NotFound, UpstreamError
from geoengine.geo import EARTH_RADIUS_M as EARTH_M
from geoengine.geo import haversine_m
from geoengine.lru import ByteLRU
from geoengine.search.admin import ADMIN_LEVELS, CITY, COUNTRY, COUNTY, NEIGHBOURHOOD, POSTCODE, STATE, SUBURB
from geoengine.search.kernels import (
    code_points,
    gather_postings,
    match_matrix,
    osa_scan,
    vocab_chars,
    warm_kernels,
)
from geoengine.search.requests import (
    MAX_RADIUS_M,
    _check_point,
    _check_size,
    parse_bbox,
    parse_countries,
    parse_radius,
    parse_types,
)
from geoengine.search.store import Strings
from geoengine.search.text import max_typos, normalise
from geoengine.search.write import (
    PREFIX_LENGTHS,
    SEP,
    STRING_COLUMNS,
    TYPES,
    name_hash,
)

# ranking (see docs/search.md)
W_COVERAGE = 2.0
W_IMPORTANCE = 1.0
PREFIX_BASE = 0.85  # a prefix of the last query word: PREFIX_BASE + PREFIX_SHARE * (share of the word typed)
PREFIX_SHARE = 0.15
W_EXACT = 0.6
W_PRIMARY = 0.3
W_NAME_PREFIX = 0.1
W_STARTS = 0.4
ALT_FACTOR = 0.9
W_RATIO = 0.2
BIAS_WEIGHT = 1.0
BIAS_DECAY_KM = 25.0
W_REGION = 1.0  # without a location: documents of the bundle's region (and exact names of major places)
MAJOR_IMPORTANCE = 0.65  # GeoNames importance of about 100,000 people: a major place
CANDIDATES = 40  # documents scored in full: the best by the coarse score, plus every exact name match
MAX_QUERY_TOKENS = 12  # words beyond the 12th are ignored
ROW_CACHE = 4096  # documents whose name text and Search Result the query path keeps (per cache, ~10 MB)
TOKEN_CACHE_BYTES = 8 << 20  # the token matches kept (documents and qualities), in bytes
REVERSE_STREET_DEG = 0.006  # Nominatim's reverse looks for streets, addresses and POIs within this
MINOR_STREETS = {"service", "track", "footway", "path", "cycleway", "steps", "bridleway", "motorway_link", "trunk_link",
                 "primary_link", "secondary_link", "tertiary_link"}  # Nominatim's address rank 27 (minor streets)
# the deepest hierarchy level reverse answers at each zoom (Nominatim's REVERSE_MAX_RANKS): -1 none
REVERSE_ZOOM_SLOT = (-1, -1, -1, COUNTRY, COUNTRY, STATE, STATE, STATE, COUNTY, COUNTY, CITY, CITY, CITY, CITY, SUBURB,
                     NEIGHBOURHOOD, NEIGHBOURHOOD, NEIGHBOURHOOD, NEIGHBOURHOOD)


# --------------------------------------------------------------------------------------------- query
def segment_distance_m(lat0: float, lon0: float, seg: np.ndarray) -> np.ndarray:
    """Distance from (lat0, lon0) to each segment (lon1, lat1, lon2, lat2), in a local plane."""
    kx = math.cos(math.radians(lat0)) * math.pi / 180 * EARTH_M
    ky = math.pi / 180 * EARTH_M
    x1 = (seg[:, 0] - lon0) * kx
    y1 = (seg[:, 1] - lat0) * ky
    x2 = (seg[:, 2] - lon0) * kx
    y2 = (seg[:, 3] - lat0) * ky
    dx, dy = x2 - x1, y2 - y1
    ll = dx * dx + dy * dy
    with np.errstate(invalid="ignore", divide="ignore"):
        t = np.where(ll > 0, -(x1 * dx + y1 * dy) / ll, 0.0)
    t = np.clip(t, 0.0, 1.0)
    return np.hypot(x1 + t * dx, y1 + t * dy)


def _covers(toks: list[str], prefix_last: bool, text: str) -> bool:
    """Every query token matches a word of `text` (normalised; variants joined by SEP)."""
    text = text.replace(SEP, " ")
    return all(_name_coverage([t], prefix_last and i == len(toks) - 1, text) > 0 for i, t in enumerate(toks))


def _letter_range(words: list[str], letter: str) -> tuple[int, int]:
    """Rows [lo, hi) of the sorted list `words` that start with `letter`."""
    return bisect.bisect_left(words, letter), bisect.bisect_left(words, letter + "\U0010ffff")


def _name_coverage(toks: list[str], prefix_last: bool, name: str) -> float:
    """Mean over query tokens of the best match quality against the words of one normalised name, with
    the qualities of the vocabulary matching (exact 1.0, prefix PREFIX_BASE + PREFIX_SHARE * share, typo 0.8 - 0.1 * d)."""
    words = name.split()
    if not words:
        return 0.0
    total = 0.0
    last = len(toks) - 1
    for i, tok in enumerate(toks):
        if tok in words:
            total += 1.0
            continue
        best = 0.0
        k = max_typos(tok)
        is_prefix = prefix_last and i == last
        for w in words:
            if is_prefix and w.startswith(tok):
                best = max(best, PREFIX_BASE + PREFIX_SHARE * len(tok) / len(w))
            elif k:
                d = OSA.distance(tok, w, score_cutoff=k)
                if d <= k:
                    best = max(best, 0.8 - 0.1 * d)
                elif is_prefix and len(w) > len(tok):
                    d = OSA.distance(tok, w[:len(tok)], score_cutoff=k)
                    if d <= k:
                        best = max(best, 0.55 + 0.2 * len(tok) / len(w) - 0.1 * (d - 1))
        total += best
    return total / len(toks)


class Matches:
    """The token matches of a query, compact: `cols` the sorted rows of the documents that any query token
    matches, `mat[i, j]` the best match quality of token i in document cols[j] (0: no match). Only these
    documents can be candidates, so the ranking never touches an array over every document."""

    __slots__ = ("cols", "mat")

    def __init__(self, cols: np.ndarray, mat: np.ndarray):
        self.cols = cols
        self.mat = mat

    def rows(self, idx) -> Matches:
        """The matches of the query tokens `idx` only (over the same documents)."""
        return Matches(self.cols, self.mat[idx])

    def take(self, rows: np.ndarray) -> np.ndarray:
        """(tokens, len(rows)) match qualities of arbitrary document rows (0 where none matches)."""
        out = np.zeros((len(self.mat), len(rows)), np.float32)
        if len(self.cols) and len(rows):
            pos = np.minimum(np.searchsorted(self.cols, rows), len(self.cols) - 1)
            hit = self.cols[pos] == rows
            out[:, hit] = self.mat[:, pos[hit]]
        return out


class SearchIndex:
    """A read-only search index opened from `<bundle>/search/`."""

    def __init__(self, folder: str | Path):
        folder = Path(folder)
        self.folder = folder
        try:
            self.cols = {c: Strings(folder, c) for c in STRING_COLUMNS}
            self.names = Strings(folder, "names")
            self.lat = np.load(folder / "lat.npy", mmap_mode="r")
            self.lon = np.load(folder / "lon.npy", mmap_mode="r")
            self.importance = np.load(folder / "importance.npy", mmap_mode="r")
            self.canon = np.load(folder / "canon.npy", mmap_mode="r")
            self.kind = np.load(folder / "kind.npy", mmap_mode="r")
            self.id_order = np.load(folder / "id_order.npy", mmap_mode="r")
            self.post_ptr = np.load(folder / "post_ptr.npy", mmap_mode="r")
            self.post_doc = np.load(folder / "post_doc.npy", mmap_mode="r")
            self.items = np.load(folder / "items.npy", mmap_mode="r")
            self.item_doc = np.load(folder / "item_doc.npy", mmap_mode="r")
            self.vocab = (folder / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            raise UpstreamError(f"the search index in {folder} cannot be read: {exc}") from exc
        # plain ndarray views of the same mapped memory for the query path: indexing a np.memmap builds
        # a memmap object per access (a third of a search's time went there)
        for name in ("lat", "lon", "importance", "canon", "kind", "id_order", "post_ptr", "post_doc", "items", "item_doc"):
            setattr(self, "_" + name, getattr(self, name).view(np.ndarray))
        self.n = len(self.lat)
        if not (len(self.canon) == len(self.kind) == self.n == len(self.cols["id"])
                and len(self.post_ptr) == len(self.vocab) + 1):
            raise UpstreamError(f"the search index in {folder} is inconsistent (column lengths differ): rebuild the bundle")
        try:
            self.vocab_len = np.load(folder / "vocab_len.npy")
        except (OSError, ValueError) as exc:
            raise UpstreamError(f"the search index in {folder} cannot be read: {exc}") from exc
        try:  # absent in bundles built before they existed: exact names and first words then compete like any match
            self._name_key = np.load(folder / "name_key.npy")
            self._name_key_doc = np.load(folder / "name_key_doc.npy")
            self._first_tok = np.load(folder / "first_tok.npy", mmap_mode="r").view(np.ndarray)
        except FileNotFoundError:
            self._name_key = self._name_key_doc = self._first_tok = None
        except (OSError, ValueError) as exc:
            raise UpstreamError(f"the search index in {folder} cannot be read: {exc}") from exc
        self._load_extras(folder)
        self._prefix_tables: dict[int, tuple[list[str], np.ndarray]] = {}
        self._len_buckets: dict[int, tuple[list[str], np.ndarray]] = {}
        self._prefix_first: dict[int, np.ndarray] = {}
        self._vocab_chars: tuple[np.ndarray, np.ndarray] | None = None
        self._slot: np.ndarray | None = None  # scratch of `kernels.match_matrix`, used under the lock
        self._tok_cache = ByteLRU(TOKEN_CACHE_BYTES)  # (token, is_prefix) -> (documents, qualities)
        self._lock = threading.Lock()
        self._rtree = None
        # per-document caches of the query path, bounded (documents are immutable in a bundle): the text the
        # final score reads, and the JSON-ready Search Result without its score
        self._row_text = lru_cache(maxsize=ROW_CACHE)(self._row_text_uncached)
        self._result_base = lru_cache(maxsize=ROW_CACHE)(self._result_base_uncached)
        self._address = lru_cache(maxsize=ROW_CACHE)(self._address_uncached)
        self._display = lru_cache(maxsize=ROW_CACHE)(self._display_uncached)

    def _load_extras(self, folder: Path) -> None:
        """Categories, region, countries and details (see `write_extras`); a bundle built before them opens
        without categories, with OSM documents as its region and without country filters or details."""
        from geoengine.search.categories import CategoryTerms

        self.cat_ids: list[str] = []
        self.cat_meta: dict = {}
        self.cat_terms: CategoryTerms | None = None
        self._cat_ptr = np.zeros(1, np.int64)
        self._cat_doc = np.zeros(0, np.int32)
        self._country = None
        self.detail = None
        try:
            if (folder / "categories.json").exists():
                self.cat_meta = json.loads((folder / "categories.json").read_text(encoding="utf-8"))
                self.cat_ids = list(self.cat_meta["ids"])
                self.cat_terms = CategoryTerms(self.cat_meta["terms"])
                self._cat_ptr = np.load(folder / "cat_ptr.npy")
                self._cat_doc = np.load(folder / "cat_doc.npy", mmap_mode="r").view(np.ndarray)
            if (folder / "region.npy").exists():
                self._region = np.load(folder / "region.npy").astype(bool)
            else:
                src = self.cols["source"]
                self._region = np.fromiter((src[i] == "osm" for i in range(self.n)), bool, self.n)
            if (folder / "country.npy").exists():
                self._country = np.load(folder / "country.npy", mmap_mode="r").view(np.ndarray)
            if (folder / "detail.off.npy").exists():
                self.detail = Strings(folder, "detail")
        except (OSError, ValueError, KeyError, UnicodeDecodeError) as exc:
            raise UpstreamError(f"the search index in {folder} cannot be read: {exc}") from exc
        self._load_address_files(folder)
        self._cat_index = {p: k for k, p in enumerate(self.cat_ids)}
        if len(self._region) != self.n or len(self._cat_ptr) != len(self.cat_ids) + 1:
            raise UpstreamError(f"the search index in {folder} is inconsistent (category/region files): rebuild the bundle")

    def _load_address_files(self, folder: Path) -> None:
        """The hierarchy and address columns (see `write_address_files`); a bundle built before them opens with
        `admin` of -1 and addresses of the country code only."""
        self.admin = np.full((self.n, len(ADMIN_LEVELS)), -1, np.int32)
        self._unit_slot = np.zeros(0, np.int8)
        self._unit_row = np.zeros(0, np.int32)
        self._street_row = None
        self._unit_key = self._unit_names = None
        self._postcode_units: dict[str, np.ndarray] | None = None
        self._addr_cols: dict[str, Strings] = {}
        if not (folder / "admin.npy").exists():
            return
        try:
            self.admin = np.load(folder / "admin.npy", mmap_mode="r").view(np.ndarray)
            self._unit_slot = np.load(folder / "unit_slot.npy")
            self._unit_row = np.load(folder / "unit_row.npy")
            self._street_row = np.load(folder / "street_row.npy", mmap_mode="r").view(np.ndarray)
            self._unit_key = Strings(folder, "unit_key")
            self._unit_names = Strings(folder, "unit_names")
            self._addr_cols = {c: Strings(folder, c) for c in ("housenumber", "street", "addr_place", "osm_tag")}
        except (OSError, ValueError) as exc:
            raise UpstreamError(f"the search index in {folder} cannot be read: {exc}") from exc
        if self.admin.shape != (self.n, len(ADMIN_LEVELS)) or len(self._street_row) != self.n:
            raise UpstreamError(f"the search index in {folder} is inconsistent (address files): rebuild the bundle")

    # -- addresses and the hierarchy (see admin.py) ------------------------------------------------
    @lru_cache(maxsize=4096)  # noqa: B019 (the index lives as long as the process; units are few)
    def _unit(self, uid: int) -> tuple[str, dict]:
        """(address key, names) of an administrative unit."""
        return self._unit_key[uid], json.loads(self._unit_names[uid])

    def admin_unit_names(self, uid: int) -> list[str]:
        """Every name and name:xx of an administrative unit, normalised as search/text.py does."""
        out: list[str] = []
        for v in self._unit(int(uid))[1].values():
            nv = normalise(v)
            if nv and nv not in out:
                out.append(nv)
        return out

    def admin_unit_row(self, uid: int) -> int:
        """The row of the unit's own document (-1: none)."""
        return int(self._unit_row[uid]) if 0 <= uid < len(self._unit_row) else -1

    def admin_unit_key(self, uid: int) -> str:
        """The unit's address key (country, state, county, municipality, city/town/village, suburb, ...)."""
        return self._unit(int(uid))[0]

    def housenumber(self, row: int) -> str | None:
        col = self._addr_cols.get("housenumber")
        return col[row] if col is not None else None

    def postcode_rows(self, postcode: str) -> np.ndarray:
        """Rows whose postcode (addr:postcode, else the postal_code boundary or nearest postcode) is
        `postcode` (normalised), in row order: one comparison of the admin array's postcode column."""
        if self._postcode_units is None:
            by_name: dict[str, list[int]] = {}
            for uid in np.flatnonzero(self._unit_slot == POSTCODE).tolist():  # the units, not the documents
                for name in self.admin_unit_names(uid):
                    by_name.setdefault(name, []).append(uid)
            self._postcode_units = {k: np.asarray(v, np.int32) for k, v in by_name.items()}
        uids = self._postcode_units.get(normalise(postcode))
        if uids is None or not len(uids):
            return np.zeros(0, np.int64)
        return np.flatnonzero(np.isin(self.admin[:, POSTCODE], uids))

    def postcode(self, row: int) -> str | None:
        u = int(self.admin[row, POSTCODE])
        return self._unit(u)[1].get("name") if u >= 0 else None

    def osm_type(self, row: int) -> str | None:
        """'N', 'W' or 'R' (a street: its smallest way; an interpolated number: its way); None for GeoNames."""
        kind = self.cols["id"][row].split(":", 2)
        if kind[0] != "osm":
            return None
        return {"node": "N", "way": "W", "relation": "R", "street": "W", "interpolation": "W"}.get(kind[1])

    def osm_id(self, row: int) -> int | None:
        parts = self.cols["id"][row].split(":")
        return int(parts[2]) if parts[0] == "osm" and len(parts) > 2 and parts[1] != "addrstreet" else None

    def _osm_tag(self, row: int) -> tuple[str | None, str | None]:
        col = self._addr_cols.get("osm_tag")
        tag = col[row] if col is not None else None
        if tag:
            k, _, v = tag.partition("=")
            return k, v
        c = self.cols
        idx, pc, cat = c["index"][row], c["place_class"][row], c["category"][row]
        if idx == "pois":
            return pc, cat
        if idx == "streets":
            return "highway", cat
        if idx == "addresses":
            return "place", "house"
        return "place", pc

    def osm_key(self, row: int) -> str | None:
        """The OSM key of the tag that makes the document (amenity, place, highway, building, boundary)."""
        return self._osm_tag(row)[0]

    def osm_value(self, row: int) -> str | None:
        """Its value (restaurant, town, residential, house, administrative)."""
        return self._osm_tag(row)[1]

    def address(self, row: int, lang: str | None = None) -> dict:
        """Nominatim's address object of a document (house_number, road, neighbourhood, suburb,
        village/town/city, municipality, county, state, postcode, country, country_code), the names of the
        parents in `lang` (name:xx, e.g. "de" or "de,en") where they have one. A new dict each call."""
        return dict(self._address(int(row), lang or None))

    def _address_uncached(self, row: int, lang: str | None) -> dict:
        from geoengine.search.admin import DISPLAY_SLOTS, country_label, make_address, unit_name

        adm = self.admin[row]
        parents = []
        for slot in DISPLAY_SLOTS:
            u = int(adm[slot])
            if u >= 0:
                key, names = self._unit(u)
                parents.append((key, unit_name(names, lang)))
        cu, pu = int(adm[COUNTRY]), int(adm[POSTCODE])
        code = int(self._country[row]) if self._country is not None else 0
        cc = chr(code >> 8) + chr(code & 0xFF) if code else None
        c = self.cols
        idx = c["index"][row]
        name = c["name"][row]
        if lang and (idx in ("pois", "streets", "places")):
            name = self._own_name(row, lang) or name
        own = (c["place_class"][row], name) if idx == "pois" and name else None
        cols = self._addr_cols
        road = None
        if idx == "streets":
            road = name
        elif cols:
            road = cols["street"][row]
            srow = int(self._street_row[row])
            if road and lang and srow >= 0:
                road = self._own_name(srow, lang) or road
        place = cols["addr_place"][row] if cols and not road and idx in ("addresses", "pois") else None
        if self.cols["source"][row] != "osm" and self.detail is not None:
            state = json.loads(self.detail[row] or "{}").get("address", {}).get("state")
            if state and not any(k in ("state", "region") for k, _ in parents):
                parents.append(("state", state))
        return make_address(own=own, housenumber=cols["housenumber"][row] if cols else None, road=road, place=place,
                            parents=parents, postcode=self._unit(pu)[1].get("name") if pu >= 0 else None,
                            country=country_label(self._unit(cu)[1] if cu >= 0 else None, cc, lang), country_code=cc)

    def _own_name(self, row: int, lang: str) -> str | None:
        """The document's name:xx in `lang` (the first of a list such as "de,en" that it has)."""
        raw = self.detail[row] if self.detail is not None else None
        if not raw:
            return None
        from geoengine.search.admin import unit_name

        names = json.loads(raw).get("names") or {}
        return unit_name(names, lang) if any(k.startswith("name:") for k in names) else None

    def display_name(self, row: int, lang: str | None = None) -> str:
        """Name, house number, road, neighbourhood, ..., postcode, country (Nominatim's order), in `lang`."""
        if not lang or self._unit_names is None:
            return self.cols["display_name"][row]
        return self._display(int(row), lang)

    def _display_uncached(self, row: int, lang: str) -> str:
        from geoengine.search.admin import make_display

        c = self.cols
        idx = c["index"][row]
        address = self._address(row, lang)
        if self.cols["source"][row] != "osm" and (self.admin[row, :POSTCODE] < 0).all():
            return c["display_name"][row]
        if idx == "addresses":
            name = None
        elif c["name"][row]:
            name = self._own_name(row, lang) or c["name"][row]
        else:  # an unnamed POI: its category label, as stored
            name = (c["display_name"][row] or "").split(", ")[0] or None
        if idx == "streets":  # the settlement the street was grouped by, second in the stored display name
            stored = (c["display_name"][row] or "").split(", ")
            if len(stored) > 1:
                address = {"road": address.get("road"), "_town": stored[1], **address}
        return make_display(name, address, skip=c["place_class"][row] if idx == "pois" else None)

    def reverse_zoom(self, lat: float, lon: float, zoom: int) -> int:
        """The row answering Nominatim's reverse at `zoom` (clamped to 0-18), or -1: 18 the nearest address,
        POI or street within 0.006 degree (Nominatim's search distance), 17 the nearest street, 16 the
        nearest major street (not service, track-like paths or links), 15 neighbourhood, 14 suburb, 10-13
        village/town/city, 8-9 county, 5-7 state, 3-4 country. A level with nothing there gives the next
        larger one that has something; the administrative units are those of the nearest document."""
        lat, lon = _check_point(lat, lon, required=True)
        zoom = min(18, max(0, int(zoom)))
        if zoom >= 16:
            row = self._nearest(lat, lon, REVERSE_STREET_DEG * EARTH_M * math.pi / 180, zoom)
            if row >= 0:
                return row
        top = REVERSE_ZOOM_SLOT[zoom]
        if top < 0:
            return -1
        near = self._nearest(lat, lon, MAX_RADIUS_M, -1)
        if near < 0:
            return -1
        adm = self.admin[near]
        for slot in range(top, -1, -1):
            u = int(adm[slot])
            if u >= 0 and self._unit_row[u] >= 0:
                return int(self._unit_row[u])
        return -1

    def _nearest(self, lat: float, lon: float, metres: float, zoom: int) -> int:
        """The nearest document within `metres`: zoom 18 addresses, POIs and streets; 17 streets; 16 major
        streets; -1 any document but streets with a hierarchy. -1 when none."""
        r = min(metres, 250.0)
        c = self.cols
        while True:
            dlat = r / (math.pi / 180 * EARTH_M)
            dlon = min(180.0, dlat / max(math.cos(math.radians(lat)), 1e-6))
            with self._lock:
                hits = np.fromiter(self._tree().intersection((lon - dlon, lat - dlat, lon + dlon, lat + dlat)), np.int64)
            if len(hits):
                dist = segment_distance_m(lat, lon, np.asarray(self._items[hits]))
                docs = np.asarray(self._item_doc[hits])
                order = np.lexsort((docs, dist))
                for j in order.tolist():
                    if dist[j] > r:
                        break
                    row = int(docs[j])
                    idx = c["index"][row]
                    if zoom == 18 and idx in ("addresses", "pois", "streets"):
                        return row
                    if zoom in (16, 17) and idx == "streets" and (zoom == 17 or c["category"][row] not in MINOR_STREETS):
                        return row
                    if zoom < 0 and idx != "streets" and (self.admin[row, :POSTCODE] >= 0).any():
                        return row
            if r >= metres:
                return -1
            r = min(metres, r * 4)

    def warm(self) -> None:
        """Prepare the typo tables (vocabulary by length, prefix tables, code points) and the R-tree up front."""
        with self._lock:
            for length in PREFIX_LENGTHS:
                self._prefix_starts(length)
            for length in range(2, int(self.vocab_len.max(initial=0)) + 1):
                self._length_bucket(length)
            self._tree()
            self._chars()
        warm_kernels(self.folder)  # loads the compiled kernels (typos, postings, match matrix)

    # -- helpers --------------------------------------------------------------------------------
    def _tree(self):
        """The R-tree over the items' boxes, bulk-loaded from `items.npy` on first use (~0.2 s per
        200k items). It lives in memory: libspatialindex rewrites a disk index's header on close,
        which an immutable, shared bundle must not allow."""
        if self._rtree is None:
            import rtree

            try:
                items = np.asarray(self._items, dtype=np.float64)
                mins = np.ascontiguousarray(np.minimum(items[:, :2], items[:, 2:]))
                maxs = np.ascontiguousarray(np.maximum(items[:, :2], items[:, 2:]))
                props = rtree.index.Property()
                props.leaf_capacity = 64
                props.fill_factor = 0.9
                if len(items):
                    self._rtree = rtree.index.Index((np.arange(len(items), dtype=np.int64), mins, maxs), properties=props)
                else:
                    self._rtree = rtree.index.Index(properties=props)
            except Exception as exc:  # a corrupt items file, or libspatialindex's own errors
                raise UpstreamError(f"the spatial index in {self.folder} cannot be built: {exc}") from exc
        return self._rtree

    def result(self, row: int, score: float | None = None, distance_m: float | None = None) -> dict:
        """A Search Result dict (the spec's fields; `distance_m` only when given); a new dict each call."""
        d = self._result_base(row).copy()
        d["location"] = d["location"].copy()
        d["address"] = d["address"].copy()
        if score is not None:
            d["score"] = round(float(score), 4)
        if distance_m is not None:
            d["distance_m"] = round(float(distance_m), 1)
        return d

    def _result_base_uncached(self, row: int) -> dict:
        """The Search Result of a document with a null score (cached per row; `result` copies it)."""
        c = self.cols
        return {
            "id": c["id"][row], "score": None, "index": c["index"][row],
            "doc_type": c["doc_type"][row], "display_name": c["display_name"][row], "name": c["name"][row],
            "name_en": c["name_en"][row], "place_class": c["place_class"][row], "category": c["category"][row],
            "importance": round(float(self._importance[row]), 4),
            "location": {"lat": round(float(self._lat[row]), 7), "lon": round(float(self._lon[row]), 7)},
            "canonical_id": c["id"][int(self._canon[row])], "source": c["source"][row],
            "address": self._address(row, None),
        }

    def _prefix_table(self, length: int) -> tuple[list[str], np.ndarray]:
        """Distinct vocabulary prefixes of `length` letters and their vocabulary rows [start, end)."""
        table = self._prefix_tables.get(length)
        if table is None:
            if length in PREFIX_LENGTHS:
                prefixes = (self.folder / f"prefix{length}.txt").read_text(encoding="utf-8").split("\n")[:-1]
                ranges = np.load(self.folder / f"prefix{length}.npy")
            else:
                prefixes, starts = [], []
                for i, t in enumerate(self.vocab):
                    if len(t) >= length and (not prefixes or t[:length] != prefixes[-1]):
                        prefixes.append(t[:length])
                        starts.append(i)
                ends = [bisect.bisect_left(self.vocab, p + "\U0010ffff", lo=a) for p, a in zip(prefixes, starts, strict=True)]
                ranges = np.column_stack([np.asarray(starts, np.int64), np.asarray(ends, np.int64)]).reshape(-1, 2)
            table = (prefixes, ranges)
            self._prefix_tables[length] = table
        return table

    def _length_bucket(self, length: int) -> tuple[list[str], np.ndarray]:
        """Vocabulary tokens of exactly `length` letters and their rows (for typo matching)."""
        bucket = self._len_buckets.get(length)
        if bucket is None:
            rows = np.flatnonzero(self.vocab_len == length)
            bucket = ([self.vocab[i] for i in rows.tolist()], rows)
            self._len_buckets[length] = bucket
        return bucket

    def _postings(self, toks: list, quals: list) -> tuple[np.ndarray, np.ndarray]:
        """Documents and float32 qualities of vocabulary tokens (`toks`: arrays or lists of token rows, `quals`:
        one quality per token), in the order given."""
        if not toks:
            return np.zeros(0, np.int32), np.zeros(0, np.float32)
        t = (toks[0] if len(toks) == 1 else np.concatenate(toks)).astype(np.int64, copy=False)
        q = (quals[0] if len(quals) == 1 else np.concatenate(quals)).astype(np.float64, copy=False)
        return gather_postings(self._post_ptr, self._post_doc, t, q)

    def _chars(self) -> tuple[np.ndarray, np.ndarray]:
        """The vocabulary as code points (see `kernels.vocab_chars`), made on first use."""
        if self._vocab_chars is None:
            self._vocab_chars = vocab_chars(self.vocab)
        return self._vocab_chars

    def _prefix_starts(self, length: int) -> tuple[list[str], np.ndarray, np.ndarray]:
        """`_prefix_table(length)` plus the vocabulary row of each prefix's first word (contiguous)."""
        prefixes, ranges = self._prefix_table(length)
        starts = self._prefix_first.get(length)
        if starts is None:
            starts = self._prefix_first[length] = np.ascontiguousarray(ranges[:, 0], np.int64)
        return prefixes, ranges, starts

    def _token_matches(self, tok: str, is_prefix: bool) -> tuple[np.ndarray, np.ndarray]:
        """Documents and match qualities of one query token (see docs/search.md, Query, step 1), from a small
        cache bounded in bytes: autocomplete sends the words already typed again with every keystroke.
        Called under the lock."""
        key = (tok, is_prefix)
        hit = self._tok_cache.get(key)
        if hit is not None:
            return hit
        out = self._token_matches_uncached(tok, is_prefix)
        for a in out:  # kept or not: the same read-only arrays either way
            a.flags.writeable = False
        self._tok_cache.put(key, out, out[0].nbytes + out[1].nbytes)
        return out

    def _token_matches_uncached(self, tok: str, is_prefix: bool) -> tuple[np.ndarray, np.ndarray]:
        vocab = self.vocab
        toks: list = []  # vocabulary rows, and their qualities
        quals: list = []
        a = bisect.bisect_left(vocab, tok)
        if is_prefix:
            b = bisect.bisect_left(vocab, tok + "\U0010ffff")
            if b > a:
                lens = self.vocab_len[a:b]
                toks.append(np.arange(a, b))
                quals.append(np.where(lens == len(tok), 1.0, PREFIX_BASE + PREFIX_SHARE * len(tok) / np.maximum(lens, 1)))
        elif a < len(vocab) and vocab[a] == tok:
            toks.append(np.array([a], np.int64))
            quals.append(np.ones(1))
        k = max_typos(tok)
        if k:
            # typos: first among tokens with the same first letter; anywhere only when that finds nothing
            cp = code_points(tok)
            chars, offs = self._chars()
            for anywhere in (False, True):
                if anywhere and toks:
                    break
                for length in range(len(tok) - k, len(tok) + k + 1):
                    words, rows = self._length_bucket(length)
                    lo, hi = (0, len(words)) if anywhere else _letter_range(words, tok[0])
                    js, ds = osa_scan(cp, k, chars, offs, rows, lo, hi, length)
                    typo = ds > 0
                    if typo.any():
                        toks.append(rows[js[typo]])
                        quals.append(0.8 - 0.1 * ds[typo])
                if is_prefix:
                    prefixes, se, starts = self._prefix_starts(len(tok))
                    lo, hi = (0, len(prefixes)) if anywhere else _letter_range(prefixes, tok[0])
                    js, ds = osa_scan(cp, k, chars, offs, starts, lo, hi, len(tok))
                    for j, d in zip(js.tolist(), ds.tolist(), strict=True):
                        if d > 0:
                            s, e = int(se[j, 0]), int(se[j, 1])
                            lens = self.vocab_len[s:e]
                            toks.append(np.arange(s, e))
                            quals.append(0.55 + 0.2 * len(tok) / np.maximum(lens, 1) - 0.1 * (d - 1))
        return self._postings(toks, quals)

    def _exact_rows(self, qn: str) -> np.ndarray:
        """Rows whose normalised name or English name is `qn` (by the sorted hashes of name_key.npy)."""
        if self._name_key is None:
            return np.zeros(0, np.int32)
        h = name_hash(qn)
        a = int(np.searchsorted(self._name_key, h, side="left"))
        b = int(np.searchsorted(self._name_key, h, side="right"))
        return self._name_key_doc[a:b]

    # -- filters --------------------------------------------------------------------------------
    def category_rows(self, cids) -> np.ndarray:
        """Sorted unique rows of the documents of categories `cids` (indices into `cat_ids`)."""
        parts = [self._cat_doc[int(self._cat_ptr[c]):int(self._cat_ptr[c + 1])] for c in cids]
        parts = [p for p in parts if len(p)]
        if not parts:
            return np.zeros(0, np.int32)
        return unique(np.concatenate(parts)) if len(parts) > 1 else np.asarray(parts[0])

    def parse_categories(self, categories) -> list[int] | None:
        """`categories` filter (comma-separated string or list) -> category indices of this bundle (possibly
        none present); None when not given. Each value is a preset id (`amenity/pharmacy`), a tag
        (`amenity=pharmacy`) or a category word in any of the languages (`pharmacy`, `Apotheke`)."""
        from geoengine.search.categories import global_terms, vocabulary

        if categories is None or (isinstance(categories, str) and not categories.strip()):
            return None
        vals = ([v.strip() for v in categories.split(",")] if isinstance(categories, str)
                else [str(v).strip() for v in categories])
        vals = [v for v in vals if v]
        if not vals or len(vals) > 20:
            raise InvalidRequest.field("categories", "categories must list 1 to 20 comma-separated categories")
        known = vocabulary()["categories"]
        out: set[int] = set()
        for v in vals:
            if v in known:
                pids = [v]
            elif "=" in v:
                key, _, val = v.partition("=")
                pids = [p for p, c in known.items() if p.split("/", 1)[0] == key.strip() and c["tags"].get(key.strip()) == val.strip()]
            else:
                pids = (self.cat_terms.lookup(normalise(v)) if self.cat_terms else []) or global_terms().lookup(normalise(v))
            if not pids:
                raise InvalidRequest.field("categories", f"'{v[:60]}' is not a category: use a preset id such as "
                                                         "amenity/pharmacy, a tag such as amenity=pharmacy, or a category word")
            out.update(self._cat_index[p] for p in pids if p in self._cat_index)
        return sorted(out)

    def _filter_mask(self, kinds, cids, box, codes) -> np.ndarray | None:
        """Boolean mask over documents of every filter given, or None when there is none."""
        mask = None
        if kinds is not None:
            mask = np.isin(self._kind, kinds)
        if cids is not None:
            m = np.zeros(self.n, bool)
            m[self.category_rows(cids)] = True
            mask = m if mask is None else mask & m
        if box is not None:
            m = (self._lon >= box[0]) & (self._lon <= box[2]) & (self._lat >= box[1]) & (self._lat <= box[3])
            mask = m if mask is None else mask & m
        if codes is not None:
            m = np.isin(self._country, codes) if self._country is not None else np.zeros(self.n, bool)
            mask = m if mask is None else mask & m
        return mask

    # -- public ---------------------------------------------------------------------------------
    def search(self, q: str, types=None, lat=None, lon=None, size: int = 10, categories=None, bbox=None,
               countries=None) -> dict:
        t0 = time.perf_counter()
        if not isinstance(q, str) or len(q.strip()) < 2:
            raise InvalidRequest.field("q", "q must have at least 2 characters")
        size = _check_size(size, 1, 25)
        kinds = parse_types(types)
        point = _check_point(lat, lon, required=False)
        cids = self.parse_categories(categories)
        box = parse_bbox(bbox)
        codes = parse_countries(countries)
        filtered = cids is not None or box is not None or codes is not None
        mask = self._filter_mask(kinds, cids, box, codes) if filtered else None
        qn = normalise(q)
        toks = qn.split()[:MAX_QUERY_TOKENS]
        if not toks:
            return {"query": q, "total": 0, "took_ms": int((time.perf_counter() - t0) * 1000), "results": []}
        prefix_last = not q[-1].isspace()
        parsed = self.cat_terms.parse(toks) if self.cat_terms is not None else None
        text = best = None
        if parsed is not None and (kinds is None or TYPES["poi"] in kinds):
            if parsed[1]:
                # category + other words: when the text ranking's best answer is named by every word of the
                # query and is not of the category ("Cap de Guiló", "Carrer Gil Torres"), it is a name
                best = self._match_matrix(toks, prefix_last)
                text = self._text_search(qn, toks, prefix_last, point, kinds if mask is None else None, mask, size,
                                         best=best)
                if text[0] and self._named_by(text[0][0], toks, prefix_last) and not self._in_categories(text[0][0], parsed[0]):
                    parsed = None
            found = (self._category_search(qn, toks, parsed, prefix_last, point, mask, kinds, size, best)
                     if parsed else None)
            if found is not None:
                rows, scores, total = found
                return {"query": q, "total": total, "took_ms": int((time.perf_counter() - t0) * 1000),
                        "results": [self.result(r, sc) for r, sc in zip(rows, scores, strict=True)]}
        rows, scores, total = text or self._text_search(qn, toks, prefix_last, point, kinds if mask is None else None,
                                                        mask, size)
        return {"query": q, "total": total, "took_ms": int((time.perf_counter() - t0) * 1000),
                "results": [self.result(r, sc) for r, sc in zip(rows, scores, strict=True)]}

    def _match_matrix(self, toks, prefix_last) -> Matches:
        """The best match quality of each query token in each document that any token matches (see `Matches`)."""
        per_tok = []
        with self._lock:
            for i, tok in enumerate(toks):
                per_tok.append(self._token_matches(tok, prefix_last and i == len(toks) - 1))
            bounds = np.array([0, *itertools.accumulate(len(d) for d, _ in per_tok)], np.int64)
            if len(per_tok) == 1:
                docs, quals = per_tok[0]
            else:
                docs = np.concatenate([d for d, _ in per_tok])
                quals = np.concatenate([q for _, q in per_tok])
            # read-only whether they came from the token cache or were just made: one kernel signature
            docs, quals = readonly(docs), readonly(quals)
            cols = unique(docs)
            if self._slot is None:
                self._slot = np.zeros(self.n, np.int32)
            return Matches(cols, match_matrix(cols, docs, quals, bounds, self._slot))

    def _text_search(self, qn, toks, prefix_last, point, kinds, mask, size, *, allow_missing=True, best=None):
        """(canonical rows, scores, total) of the text ranking (see docs/search.md, Query); `best`: the
        token matches of `toks` when already computed."""
        if best is None:
            best = self._match_matrix(toks, prefix_last)
        cols, mat = best.cols, best.mat
        matched = (mat > 0).sum(axis=0)
        coverage = mat.sum(axis=0) / len(toks)
        need = len(toks)
        ok = matched >= need
        if kinds is not None or mask is not None:
            allowed = np.isin(self._kind[cols], kinds) if kinds is not None else np.ones(len(cols), bool)
            if mask is not None:
                allowed &= mask[cols]
            ok &= allowed
        if allow_missing and not ok.any() and len(toks) > 1:
            ok = matched >= need - 1
            if kinds is not None or mask is not None:
                ok &= allowed
        sel = np.flatnonzero(ok)
        if len(sel) == 0:
            return [], [], 0
        cand, cov = cols[sel], coverage[sel]
        imp = np.asarray(self._importance[cand], np.float64)
        if point is not None:
            d_km = haversine_m(point[0], point[1], np.asarray(self._lat[cand]), np.asarray(self._lon[cand])) / 1000.0
            bias = BIAS_WEIGHT * np.exp(-d_km / BIAS_DECAY_KM)
            region = np.zeros(len(cand), bool)
        else:  # region before world: the bundle's own documents get W_REGION (see docs/search.md)
            region = self._region[cand]
            bias = W_REGION * region
        coarse = W_COVERAGE * cov + W_IMPORTANCE * imp + bias
        if self._first_tok is not None:  # the name (or English name) starts with the query's first word
            a = bisect.bisect_left(self.vocab, toks[0])
            b = (bisect.bisect_left(self.vocab, toks[0] + "\U0010ffff") if prefix_last and len(toks) == 1
                 else a + (a < len(self.vocab) and self.vocab[a] == toks[0]))
            ft = self._first_tok[cand]
            coarse = coarse + W_STARTS * ((ft >= a) & (ft < b)).any(axis=1)
        total = int(len(unique(self._canon[cand])))
        if len(cand) > CANDIDATES:
            keep = np.zeros(len(cand), bool)
            keep[np.argpartition(-coarse, CANDIDATES)[:CANDIDATES]] = True
            exact_rows = self._exact_rows(qn)
            if len(exact_rows):
                keep |= np.isin(cand, exact_rows)  # documents named exactly so are always scored
            cand, cov, imp, bias, region = cand[keep], cov[keep], imp[keep], bias[keep], region[keep]
        scores = []
        row_text = self._row_text
        q_start = SEP + qn
        alt_exact_ok = len(qn) >= 4  # an alternate name counts as an exact match only from 4 letters (short ones are codes)
        no_point = point is None
        extract_one, ratio_scorer = process.extractOne, fuzz.ratio
        for row, cov_j, im, bi, reg in zip(cand.tolist(), cov.tolist(), imp.tolist(), bias.tolist(), region.tolist(),
                                           strict=True):
            variants, primary, en, joined = row_text(row)
            # text: the query against the document's own names (name, name:en), else against any variant
            # (alternate, old, other-language names) at ALT_FACTOR of its value
            text = _name_coverage(toks, prefix_last, primary)
            if en and en != primary:
                text = max(text, _name_coverage(toks, prefix_last, en))
            text = max(text, ALT_FACTOR * cov_j)
            exact_main = qn == primary or qn == en
            exact = exact_main or (alt_exact_ok and qn in variants)  # qn holds no SEP: equal to a whole variant
            starts = primary.startswith(qn) or (bool(en) and en.startswith(qn))  # the name starts with the query
            name_prefix = exact or starts or joined.startswith(qn) or q_start in joined  # a variant starts with it
            ratio = extract_one(qn, variants, scorer=ratio_scorer)[1] / 100.0 if variants else 0.0
            if no_point and not reg and exact_main and im >= MAJOR_IMPORTANCE:
                bi = W_REGION  # the exact full name of a major world place competes as if it were regional
            scores.append(W_COVERAGE * text + W_EXACT * exact + W_PRIMARY * exact_main + W_STARTS * starts
                          + W_NAME_PREFIX * name_prefix + W_RATIO * ratio + W_IMPORTANCE * im + bi)
        order = np.argsort(-np.asarray(scores, np.float64), kind="stable")
        rows, out_scores, seen = [], [], set()
        canon = self._canon[cand].tolist()
        for j in order.tolist():
            c = canon[j]
            if c in seen:
                continue
            seen.add(c)
            rows.append(c)
            out_scores.append(scores[j])
            if len(rows) == size:
                break
        return rows, out_scores, total

    def _row_text_uncached(self, row: int) -> tuple[list[str], str, str, str]:
        """(normalised name variants, primary name, normalised English name, the variants joined by SEP) of a
        document: what the final text score reads (cached per row, see `__init__`)."""
        joined = self.names[row] or ""
        variants = joined.split(SEP) if joined else []
        return variants, variants[0] if variants else "", normalise(self.cols["name_en"][row] or ""), joined

    def _named_by(self, row: int, toks: list[str], prefix_last: bool) -> bool:
        """Every query word matches the document's own name or English name."""
        _, primary, en, _ = self._row_text(row)
        return _covers(toks, prefix_last, primary) or (bool(en) and _covers(toks, prefix_last, en))

    def _in_categories(self, row: int, pids: list[str]) -> bool:
        """The document (or a member of its canonical group) has one of the categories `pids`."""
        cids = [self._cat_index[p] for p in pids if p in self._cat_index]
        rows = self.category_rows(cids)
        return bool(len(rows)) and bool(np.isin(self._canon[rows], self._canon[row]).any())

    def _category_search(self, qn, toks, parsed, prefix_last, point, mask, kinds, size, best=None):
        """(rows, scores, total) of a category query, or None to fall back to the text ranking.

        The POIs of the categories are the candidates. Without other words: nearest first to the
        location when one is given, else by importance (named before unnamed). With other words ("pizza
        Encamp", "hotel near Vaduz"): POIs whose own name holds every other word come first; the others
        follow nearest first to the place those words name (best place match, region first), or when
        they name no place, only the POIs whose name or display name (street, locality) holds them."""
        pids, rest = parsed
        cids = [self._cat_index[p] for p in pids if p in self._cat_index]
        share = self.cat_meta.get("named_share")
        if share and len(cids) > 1:  # one word, several categories ("banco": bank and bench): those mostly named
            top_share = max(share[c] for c in cids)
            cids = [c for c in cids if share[c] >= 0.5 * top_share]
        rows = self.category_rows(cids)
        if mask is not None:
            rows = rows[mask[rows]]
        elif kinds is not None:
            rows = rows[np.isin(self._kind[rows], kinds)]
        rows = unique(self._canon[rows])  # each group once, measured at its canonical document
        if len(rows) == 0:
            return None
        exact = self._exact_rows(qn)  # a major place named exactly so is not a category query ("Hospital" town)
        if len(exact) and (self._importance[exact] >= MAJOR_IMPORTANCE).any() and not np.isin(exact, rows).any():
            return None
        anchor = point
        full = np.zeros(len(rows))
        if rest:
            display = self.cols["display_name"]
            # the other words are the query's last (or first) words: their rows of the token match matrix
            idx = list(range(len(toks) - len(rest), len(toks))) if toks[len(toks) - len(rest):] == rest else list(range(len(rest)))
            sub = best.rows(idx) if best is not None else self._match_matrix(rest, prefix_last)
            own = (sub.take(rows) > 0).all(axis=0)  # every other word matches a name variant
            # how well the query names a POI whose names hold every other word: the match quality of the
            # whole query against its own name (typos and prefixes count less), +1 for the exact name
            for j in np.flatnonzero(own).tolist():
                primary = self._row_text(int(rows[j]))[1]
                own_q = _name_coverage(qn.split(), prefix_last, primary) if primary else 0.0
                full[j] = 1.0 + own_q + (qn == primary)
            place, _, _ = self._text_search(" ".join(rest), rest, prefix_last, point, [TYPES["place"]], None, 1,
                                            allow_missing=False, best=sub)
            if place:
                anchor = (float(self._lat[place[0]]), float(self._lon[place[0]]))
            else:
                ctx = own | np.array([_covers(rest, prefix_last, normalise(display[r] or "")) for r in rows.tolist()], bool)
                if not ctx.any():
                    return None
                rows, full = rows[ctx], full[ctx]
        imp = np.asarray(self._importance[rows], np.float64)
        if anchor is not None:
            d_km = haversine_m(anchor[0], anchor[1], np.asarray(self._lat[rows]), np.asarray(self._lon[rows])) / 1000.0
            scores = full + 1.0 / (1.0 + d_km)
        else:
            scores = full + imp
        order = np.lexsort((rows, -scores))[:size]
        return rows[order].tolist(), scores[order].tolist(), int(len(rows))

    def reverse(self, lat, lon, radius="2km", size: int = 5, types=None, categories=None) -> dict:
        t0 = time.perf_counter()
        lat, lon = _check_point(lat, lon, required=True)
        metres = parse_radius(radius)
        size = _check_size(size, 1, 10)
        kinds = parse_types(types)
        cids = self.parse_categories(categories)
        mask = self._filter_mask(kinds, cids, None, None) if cids is not None else None
        # Grow the search box from 250 m until it holds enough documents or reaches the radius: every
        # item within distance r of the point meets the box of half-size r, so the documents found
        # within r are exactly the nearest ones. (Dense town centres hold thousands of items in 2 km.)
        results = []
        r = min(metres, 250.0)
        while True:
            dlat = r / (math.pi / 180 * EARTH_M)
            dlon = min(180.0, dlat / max(math.cos(math.radians(lat)), 1e-6))
            with self._lock:
                tree = self._tree()
                if r < 1000.0:  # few items: the generator is cheaper; many: the vectorised query (~35% less)
                    hits = np.fromiter(tree.intersection((lon - dlon, lat - dlat, lon + dlon, lat + dlat)), np.int64)
                else:
                    hits = tree.intersection_v(np.array([[lon - dlon, lat - dlat]]), np.array([[lon + dlon, lat + dlat]]))[0]
            if len(hits):
                dist = segment_distance_m(lat, lon, np.asarray(self._items[hits]))
                docs = np.asarray(self._item_doc[hits])
                keep = dist <= r
                if mask is not None:
                    keep &= mask[docs]
                elif kinds is not None:
                    keep &= np.isin(np.asarray(self._kind[docs]), kinds)
                docs, dist = docs[keep], dist[keep]
            else:
                docs, dist = np.zeros(0, np.int32), np.zeros(0)
            if r >= metres or len(unique(docs)) >= 3 * size:
                break
            r = min(metres, r * 4)
        if len(docs):
            order = np.lexsort((docs, dist))
            # one result per canonical group: the canonical document at its own distance when that is
            # within the radius, else the nearest member itself (which names its canonical_id)
            seen: set[int] = set()
            picked: list[tuple[float, int]] = []
            for j in order.tolist():
                row = int(docs[j])
                c = int(self._canon[row])
                if c in seen:
                    continue
                seen.add(c)
                if c != row:
                    dc = float(haversine_m(lat, lon, np.array([self._lat[c]]), np.array([self._lon[c]]))[0])
                    if dc <= r:  # within the searched distance, so the order stays exact
                        row, dist_j = c, dc
                    else:
                        dist_j = float(dist[j])
                else:
                    dist_j = float(dist[j])
                picked.append((dist_j, row))
                if len(picked) >= 3 * size:
                    break
            picked.sort()
            for dist_j, row in picked[:size]:
                results.append(self.result(row, 1.0 / (1.0 + dist_j / 100.0), distance_m=dist_j))
        return {"lat": lat, "lon": lon, "took_ms": int((time.perf_counter() - t0) * 1000), "results": results}

    def row_of(self, doc_id: str) -> int | None:
        ids = self.cols["id"]
        lo, hi = 0, self.n
        while lo < hi:
            mid = (lo + hi) // 2
            if ids[int(self._id_order[mid])] < doc_id:
                lo = mid + 1
            else:
                hi = mid
        if lo < self.n and ids[int(self._id_order[lo])] == doc_id:
            return int(self._id_order[lo])
        return None

    def place(self, doc_id: str) -> dict:
        """One document by id: the Search Result fields (score null) plus its full details:
        `names` (name, name:xx, alt_name, ...), `categories` ([{id, tags, names: {lang: name}}]),
        `address` (addr:* parts without the prefix, the street of an unnamed POI, `country_code`),
        `osm` ({type, id}; a street: {type: way, ids}), `tags` (opening_hours, phone, website,
        wheelchair, ...), `geometry` (GeoJSON: a Point, or a street's MultiLineString) and `merged`
        (the Search Result of every document of its canonical group, the canonical one first)."""
        row = self.row_of(doc_id) if isinstance(doc_id, str) and doc_id else None
        if row is None:
            raise NotFound(f"no search document has the id '{doc_id}'")
        out = self.result(row)
        raw = self.detail[row] if self.detail is not None else None
        det = json.loads(raw) if raw else {}
        names = det.get("names") or ({"name": out["name"]} if out["name"] else {})
        address = dict(det.get("address") or {})
        if self._country is not None and int(self._country[row]):
            code = int(self._country[row])
            address.setdefault("country_code", chr(code >> 8) + chr(code & 0xFF))
        # the Nominatim address object, and over it the object's own addr:* parts (street, housenumber, city, ...)
        # and its upper-case country_code, as this detail always gave them
        address = {**out["address"], **address}
        cats = []
        for pid in det.get("categories", []):
            cats.append({"id": pid, "tags": self.cat_meta.get("tags", {}).get(pid, {}),
                         "names": self.cat_meta.get("names", {}).get(pid, {})})
        kind, _, num = out["id"].partition(":")[2].partition(":")
        if out["source"] != "osm" or kind == "addrstreet":  # a street only addresses name: no OSM object
            osm = None
        elif kind == "street":
            osm = {"type": "way", "ids": det.get("osm_ways", [int(num)])}
        elif kind == "interpolation":  # a number of an addr:interpolation way
            osm = {"type": "way", "id": int(num.split(":")[0])}
        else:
            osm = {"type": kind, "id": int(num)}
        members = np.flatnonzero(self._canon == self._canon[row])
        canon = int(self._canon[row])
        merged = [self.result(int(m)) for m in sorted(members.tolist(), key=lambda m: (m != canon, m))]
        out.update({"names": names, "categories": cats, "address": address, "osm": osm,
                    "tags": det.get("tags") or {}, "geometry": self._geometry(row), "merged": merged})
        return out

    def _geometry(self, row: int) -> dict:
        """GeoJSON of a document: its street lines (segments chained back into polylines), else its point."""
        if self.cols["index"][row] == "streets":
            seg = np.asarray(self._items[self._item_doc == row])
            if len(seg):
                lines: list[list[list[float]]] = []
                for x1, y1, x2, y2 in seg.tolist():
                    if lines and lines[-1][-1] == [round(x1, 7), round(y1, 7)]:
                        lines[-1].append([round(x2, 7), round(y2, 7)])
                    else:
                        lines.append([[round(x1, 7), round(y1, 7)], [round(x2, 7), round(y2, 7)]])
                return {"type": "MultiLineString", "coordinates": lines}
        return {"type": "Point", "coordinates": [round(float(self._lon[row]), 7), round(float(self._lat[row]), 7)]}
