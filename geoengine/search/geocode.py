"""The geocoder on top of `SearchIndex`: free-form and structured address queries, special phrases,
coordinates, filters, and the `Place` / `Places` results of `engine.geocode`, `engine.reverse(zoom=)`
and `engine.lookup` (see docs/search.md, Geocoding).

A query is read in this order (geoengine.search.query):
1. a coordinate pair at its start or end: alone, the query is a reverse lookup; with words, a location bias
   (and the anchor of "<category> near <coordinates>");
2. "[key=value]": the category of that tag, near the place the other words name;
3. a house number among the words ("Meritxell 11 Andorra la Vella", "11 Avinguda Meritxell",
   "Andorra la Vella, Avinguda Meritxell 11"): the documents carrying that number whose street is named by
   some of the other words, the remaining words naming their town, postcode, region or country (their
   context); when no document has the number, the street itself (no house number then);
4. otherwise the search index's ranking, and for a "name, town" query the documents whose name holds some
   words and whose context the rest.
Words are matched through their abbreviation variants ("Av." = Avinguda, "c/" = Carrer, "Str." =
Strasse, "St" = Street or Saint): `query.Abbreviations`.

Candidates are scored by how well the query words are explained: by the document's own name (the match
qualities of the index: exact 1, prefix, typo) or by its context (every word of its display name after
the name, its addr:* parts, and the admin units around it when the index has them). Only the documents
one word names are looked at, then a bounded number of the best of them (`CONTEXT_CANDIDATES`) are read
in full.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field
from functools import lru_cache

import numpy as np
from rapidfuzz.distance import OSA

from geoengine.errors import FieldError, InvalidRequest
from geoengine.geo import haversine_m
from geoengine.search.categories import CONNECTORS, strip_connectors
from geoengine.search.query import (
    abbreviations,
    extract_coordinates,
    extract_osm_tag,
    is_housenumber,
    query_tokens,
)
from geoengine.search.requests import four_numbers
from geoengine.search.text import max_typos, normalise

LAYERS = ("address", "poi", "railway", "natural", "manmade")
FEATURE_TYPES = {"country": (4, 4), "state": (8, 8), "city": (14, 16), "settlement": (8, 20)}
# Nominatim's place_rank by class (its address-levels defaults)
PLACE_RANKS = {"continent": 2, "country": 4, "state": 8, "region": 10, "province": 10, "county": 12,
               "municipality": 14, "city": 16, "borough": 18, "town": 18, "village": 19, "hamlet": 20,
               "suburb": 19, "island": 17, "quarter": 20, "neighbourhood": 22, "isolated_dwelling": 22,
               "farm": 22, "islet": 20, "square": 25, "locality": 25, "city_block": 25, "plot": 25,
               "street": 26, "address": 30}
RAILWAY_KEYS = {"railway", "public_transport", "aerialway"}
NATURAL_KEYS = {"natural", "waterway"}
MANMADE_KEYS = {"man_made"}
MAX_LIMIT = 50
_CONNECTOR_WORDS = {normalise(c) for cs in CONNECTORS.values() for c in cs if " " not in c}
CONTEXT_CANDIDATES = 300  # documents read in full (context words) per query
GUESSED_STREET = 0.15  # a numbered document whose street the build guessed ranks below one tagged with it
VARIANT_FACTOR = 0.98  # a word matched through an abbreviation counts a little less than as typed
W_NAME = 2.0
W_NAME_SHARE = 0.4  # the share of the document's name words the query holds
W_IMP = 0.3
W_REGION = 0.5
W_BIAS = 1.0
W_STREET_SHARE = 0.05  # the street the words name whole before one they name part of
W_EXACT_NUMBER = 0.02  # the house number as typed before a number it is part of ("11" before "11 a")
TIEBREAK_MARGIN = 0.06  # those two are read for the rows within this of the best ...
TIEBREAK_ROWS = 50  # ... at most this many


# ------------------------------------------------------------------------------------------ results
@dataclass(slots=True)
class Place:
    """One geocoding result (Nominatim's fields; `place_id` is the row of the search index)."""

    place_id: int
    osm_type: str | None
    osm_id: int | None
    lat: float
    lon: float
    name: str | None
    display_name: str
    category: str | None
    type: str | None
    place_rank: int
    importance: float
    address: dict = field(default_factory=dict)
    boundingbox: tuple[float, float, float, float] | None = None
    extratags: dict = field(default_factory=dict)
    namedetails: dict = field(default_factory=dict)
    housenumber: str | None = None
    layer: str = "address"
    doc_id: str = ""
    score: float | None = None
    distance_m: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)


class Places(list):
    """A list of `Place` with `to_pandas()` (one row per place) and `to_geopandas()` (a Point per place)."""

    def to_pandas(self):
        from geoengine.frames import places_frame

        return places_frame(self, geo=False)

    def to_geopandas(self):
        from geoengine.frames import places_frame

        return places_frame(self, geo=True)


# ------------------------------------------------------------------------------------------ arguments
def _err(name: str, msg: str) -> InvalidRequest:
    return InvalidRequest.field(name, msg)


def parse_viewbox(viewbox) -> tuple[float, float, float, float] | None:
    """Nominatim's viewbox: 'x1,y1,x2,y2' (any two opposite corners) or a 4-sequence -> (minlon, minlat, maxlon, maxlat)."""
    if viewbox is None or (isinstance(viewbox, str) and not viewbox.strip()):
        return None
    vals = four_numbers(viewbox)
    if vals is None:
        raise _err("viewbox", "viewbox must be four finite numbers: x1,y1,x2,y2")
    x1, y1, x2, y2 = vals
    if not all(-180 <= x <= 180 for x in (x1, x2)) or not all(-90 <= y <= 90 for y in (y1, y2)):
        raise _err("viewbox", "viewbox longitudes must be within -180..180 and latitudes within -90..90")
    if x1 == x2 or y1 == y2:
        raise _err("viewbox", "viewbox must have an area (two different longitudes and latitudes)")
    return min(x1, x2), min(y1, y2), max(x1, x2), max(y1, y2)


def parse_countrycodes(codes) -> set[str] | None:
    if codes is None or (isinstance(codes, str) and not codes.strip()):
        return None
    vals = [c.strip() for c in codes.split(",")] if isinstance(codes, str) else [str(c).strip() for c in codes]
    vals = [v.upper() for v in vals if v]
    if not vals or any(len(v) != 2 or not v.isascii() or not v.isalpha() for v in vals):
        raise _err("countrycodes", "countrycodes must be ISO 3166-1 alpha-2 codes such as ad,li")
    return set(vals)


def _choice_list(value, name: str, allowed) -> set[str] | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    vals = [v.strip().lower() for v in value.split(",")] if isinstance(value, str) else [str(v).strip().lower() for v in value]
    vals = [v for v in vals if v]
    bad = [v for v in vals if v not in allowed]
    if bad or not vals:
        raise _err(name, f"{name} must be one or more of {', '.join(allowed)}; got '{value}'")
    return set(vals)


def _text(value, name: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise _err(name, f"{name} must be a string")
    value = value.strip()
    if len(value) > 255:
        raise _err(name, f"{name} must be at most 255 characters")
    return value or None


# ------------------------------------------------------------------------------------------ the geocoder
class Geocoder:
    """Geocoding over one `SearchIndex` (cached on it: `geocoder_for(ix)`)."""

    def __init__(self, ix):
        self.ix = ix
        self.abbr = abbreviations()
        self._addr = None  # (rows with a house number (sorted), their normalised numbers) made on first use
        self._doc_class = None
        self._numbered = None
        self._place_ranks = None
        self._context = lru_cache(maxsize=8192)(self._context_uncached)
        self._detail = lru_cache(maxsize=4096)(self._detail_uncached)

    def warm(self) -> None:
        """Make the per-index tables (document classes, numbered rows, place ranks) now, at start-up,
        rather than in a worker's first geocoding request."""
        self.doc_class()
        self.address_rows()
        self.numbered()
        self.place_ranks()

    # -- per-row facts ------------------------------------------------------------------------------
    def doc_class(self) -> np.ndarray:
        """int8 per row: 0 place, 1 poi, 2 street, 3 address (from the first byte of the `index` column)."""
        if self._doc_class is None:
            col = self.ix.cols["index"]
            off = np.asarray(col.off[:-1])
            first = np.asarray(col.blob[off]) if len(off) else np.zeros(0, np.uint8)
            length = np.diff(np.asarray(col.off))
            cls = np.zeros(len(off), np.int8)
            cls[first == ord("s")] = 2
            cls[first == ord("a")] = 3
            cls[(first == ord("p")) & (length == 4)] = 1  # pois (places has 6 letters)
            self._doc_class = cls
        return self._doc_class

    def _detail_uncached(self, row: int) -> dict:
        raw = self.ix.detail[row] if self.ix.detail is not None else None
        try:
            return json.loads(raw) if raw else {}
        except ValueError:
            return {}

    def _addr_col(self, name: str):
        """The index's address column `name` (housenumber, street, addr_place), None in an index built before them."""
        return (getattr(self.ix, "_addr_cols", None) or {}).get(name)

    def housenumber(self, row: int) -> str | None:
        col = self._addr_col("housenumber")
        if col is not None:
            return col[row]
        return (self._detail(row).get("address") or {}).get("housenumber")

    def street_of(self, row: int) -> str | None:
        """The street of a numbered document (addr:street, else the nearest street the build gave it), else its
        addr:place."""
        col = self._addr_col("street")
        if col is not None:
            return col[row] or self._addr_col("addr_place")[row]
        a = self._detail(row).get("address") or {}
        return a.get("street") or a.get("place")

    def address_rows(self) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """(rows that carry a house number, {normalised number: its rows}). Made once per index from the
        documents' details (addr:housenumber): the detail column is searched for the key as bytes, so only
        the documents with a number are read."""
        if self._addr is None:
            rows: list[int] = []
            by_num: dict[str, list[int]] = {}
            det = self.ix.detail
            col = self._addr_col("housenumber")
            if col is not None:  # the index's house number column: the rows with a value, read as bytes
                off = np.asarray(col.off)
                lens = np.diff(off)
                first = np.asarray(col.blob[np.minimum(off[:-1], max(len(col.blob) - 1, 0))]) if len(col.blob) else lens * 0
                for row in np.flatnonzero((lens > 1) | ((lens == 1) & (first != 0))).tolist():
                    hn = col[row]
                    if hn:
                        rows.append(row)
                        for part in _number_forms(hn):
                            by_num.setdefault(part, []).append(row)
            elif det is not None and len(det):
                buf = det._buf
                off = np.asarray(det.off)
                key = b'"housenumber":"'
                pos = buf.find(key)
                last = -1
                while pos >= 0:
                    row = int(np.searchsorted(off, pos, side="right")) - 1
                    if row != last:
                        last = row
                        hn = self.housenumber(row)
                        if hn:
                            rows.append(row)
                            for part in _number_forms(hn):
                                by_num.setdefault(part, []).append(row)
                    pos = buf.find(key, int(off[row + 1]) if row + 1 < len(off) else len(buf))
            self._addr = (np.asarray(rows, np.int32), {k: np.asarray(v, np.int32) for k, v in by_num.items()})
        return self._addr

    def place_ranks(self) -> tuple[np.ndarray, np.ndarray]:
        """(rows of the bundle's own places, their address ranks: a town, village or hamlet counts as a city,
        16, as in Nominatim's address ranks). Made once per index."""
        if getattr(self, "_place_ranks", None) is None:
            rows = np.flatnonzero((self.doc_class() == 0) & self.ix._region)
            ranks = np.array([self.place_rank(r) for r in rows.tolist()], np.int64)
            ranks = np.where((ranks >= SETTLEMENT_RANK[0]) & (ranks <= SETTLEMENT_RANK[1]), 16, ranks)
            self._place_ranks = (rows, ranks)
        return self._place_ranks

    def numbered(self) -> np.ndarray:
        """bool per row: the document carries a house number."""
        if getattr(self, "_numbered", None) is None:
            m = np.zeros(self.ix.n, bool)
            m[self.address_rows()[0]] = True
            self._numbered = m
        return self._numbered

    def _context_uncached(self, row: int) -> frozenset[str]:
        """The normalised words that place a document: its display name after its own name, its addr:*
        parts (city, postcode, place, suburb, ...) and, when the index has them, its admin units' names."""
        ix = self.ix
        words: set[str] = set()
        disp = ix.cols["display_name"][row] or ""
        parts = disp.split(", ")
        for p in parts[1:]:
            words.update(normalise(p).split())
        addr = self._detail(row).get("address") or {}
        for k, v in addr.items():
            if k not in ("housenumber", "street") and isinstance(v, str):
                words.update(normalise(v).split())
        admin = getattr(ix, "admin", None)
        names = getattr(ix, "admin_unit_names", None)
        if admin is not None and names is not None:
            for uid in np.asarray(admin[row]).tolist():
                if uid >= 0:
                    for nm in names(uid):
                        words.update(nm.split())
        f = getattr(ix, "postcode", None)
        pc = f(row) if f is not None else None
        if pc:
            words.update(normalise(pc).split())
        if ix._country is not None and int(ix._country[row]):
            code = int(ix._country[row])
            words.add((chr(code >> 8) + chr(code & 0xFF)).lower())
        return frozenset(words)

    # -- token matching -----------------------------------------------------------------------------
    def _variants(self, toks: list[str]) -> list[tuple[str, ...]]:
        return [self.abbr.variants(t) for t in toks]

    def _name_matrix(self, toks: list[str], prefix_last: bool):
        """(document rows, (tokens, rows) best name-match quality of each query word through any of its
        abbreviation variants)."""
        variants = self._variants(toks)
        flat, owner, factor = [], [], []
        for i, vs in enumerate(variants):
            for k, v in enumerate(vs):
                flat.append(v)
                owner.append(i)
                factor.append(1.0 if k == 0 else VARIANT_FACTOR)
        m = self.ix._match_matrix(flat, False)
        if prefix_last and toks:  # the last word as typed may be a prefix
            last = self.ix._match_matrix([toks[-1]], True)
            cols = np.union1d(m.cols, last.cols)
            mat_a, mat_b = m.take(cols), last.take(cols)
            flat.append(toks[-1])
            owner.append(len(toks) - 1)
            factor.append(1.0)
            mat = np.vstack([mat_a, mat_b])
        else:
            cols, mat = m.cols, m.mat
        out = np.zeros((len(toks), len(cols)), np.float32)
        own = np.asarray(owner)
        mat = mat * np.asarray(factor, np.float32)[:, None]
        for i in range(len(toks)):
            rows = np.flatnonzero(own == i)
            if len(rows):
                out[i] = mat[rows].max(axis=0)
        return cols, out

    def _ctx_quality(self, tok_variants: tuple[str, ...], ctx: frozenset[str], is_last: bool) -> float:
        """How well one query word names something of a document's context (1 exact, 0.85 prefix of the last
        word, 0.7 one typo)."""
        for v in tok_variants:
            if v in ctx:
                return 1.0
        tok = tok_variants[0]
        if is_last and len(tok) >= 3 and any(w.startswith(tok) for w in ctx):
            return 0.85
        k = max_typos(tok)
        if k:
            for w in ctx:
                if abs(len(w) - len(tok)) <= k and OSA.distance(tok, w, score_cutoff=k) <= k:
                    return 0.7
        return 0.0

    def _rank(self, rows: np.ndarray, name_q: np.ndarray, variants, *, name_only: np.ndarray | None,
              ctx_only: np.ndarray | None, prefix_last: bool, point, need_all: bool, extra=None):
        """Score candidate rows: each query word explained by the name (`name_q[t, j]`) or by the context.
        `name_only` / `ctx_only`: boolean per word (structured fields: the street words only by the name,
        the city words only by the context). Returns (rows, scores, coverage)."""
        n_tok = name_q.shape[0]
        if len(rows) == 0:
            return rows, np.zeros(0), np.zeros(0)
        nq = name_q.copy()
        if ctx_only is not None:
            nq[ctx_only] = 0.0
        # coarse: the name's share of the words, importance, region; the best CONTEXT_CANDIDATES read in full
        imp = np.asarray(self.ix._importance[rows], np.float64)
        coarse = nq.sum(axis=0) + 0.1 * imp + 0.2 * self.ix._region[rows]
        if extra is not None:
            coarse = coarse + extra
        if len(rows) > CONTEXT_CANDIDATES:
            keep = np.argpartition(-coarse, CONTEXT_CANDIDATES)[:CONTEXT_CANDIDATES]
            rows, nq, imp, coarse = rows[keep], nq[:, keep], imp[keep], coarse[keep]
            if extra is not None:
                extra = extra[keep]
        scores = np.full(len(rows), -np.inf)
        cover = np.zeros(len(rows))
        explained = np.zeros(len(rows), np.int64)
        last = n_tok - 1
        for j, row in enumerate(rows.tolist()):
            ctx = self._context(row)
            total = 0.0
            named = 0
            for t in range(n_tok):
                q_name = float(nq[t, j])
                q_ctx = 0.0 if name_only is not None and name_only[t] else self._ctx_quality(variants[t], ctx, prefix_last and t == last)
                if q_name > 0:
                    named += 1
                if q_name > 0 or q_ctx > 0:
                    explained[j] += 1
                total += max(q_name, 0.95 * q_ctx)
            if named == 0:
                continue
            cov = total / n_tok
            cover[j] = cov
            scores[j] = W_NAME * cov + W_IMP * imp[j] + W_REGION * float(self.ix._region[row])
            if extra is not None:
                scores[j] += extra[j]
        if point is not None:
            d_km = haversine_m(point[0], point[1], np.asarray(self.ix._lat[rows]), np.asarray(self.ix._lon[rows])) / 1000.0
            scores = scores + W_BIAS * np.exp(-d_km / point[2])
        ok = np.isfinite(scores)
        if need_all:
            ok &= explained >= n_tok - (1 if n_tok >= 4 else 0)
        order = np.flatnonzero(ok)[np.argsort(-scores[ok], kind="stable")]
        return rows[order], scores[order], cover[order]

    # -- the queries ------------------------------------------------------------------------------
    def _address(self, toks, prefix_last, point, ctx_only=None, allow_fallback=True):
        """[(row, score, housenumber or None)] of an address query, or None when it holds no house number."""
        nums = [i for i, t in enumerate(toks) if is_housenumber(t) and (ctx_only is None or not ctx_only[i])]
        if not nums or len(toks) < 2:
            return None
        _, by_num = self.address_rows()
        cls = self.doc_class()
        best = None  # (coverage, an address, results)
        relaxed = []
        for ni in nums:
            rest = [t for i, t in enumerate(toks) if i != ni]
            rest_ctx = None if ctx_only is None else np.delete(ctx_only, ni)
            if not any(not is_housenumber(t) or (rest_ctx is not None and not rest_ctx[i]) for i, t in enumerate(rest)):
                continue
            variants = self._variants(rest)
            cols, name_q = self._name_matrix(rest, prefix_last and ni != len(toks) - 1)
            cand = by_num.get(toks[ni])
            a_rows = np.zeros(0, np.int64)
            if cand is not None and len(cand):
                # a numbered document's street is named in its detail (addr:street), its own name may be the
                # label "street number" (address documents) or a POI's name: match the words against both
                q, share = self._street_quality(cand, rest, variants, cols, name_q, with_share=True)
                # the address itself before a POI at the same address; an object tagged with its street
                # (addr:street, addr:place) before one the build gave the nearest street; the street the words
                # name whole before one they name part of ("Pradafant" before "Untere Pradafant"); the number
                # as typed before one it is part of ("11" before "11 a")
                bonus = 0.1 * (cls[cand] == 3) - GUESSED_STREET * self._guessed_street(cand) + W_STREET_SHARE * share
                a_rows, a_scores, a_cover = self._rank(cand, q, variants, name_only=None, ctx_only=rest_ctx,
                                                       prefix_last=prefix_last, point=point, need_all=True, extra=bonus)
                number = toks[ni]
                a_rows, a_scores, a_cover = _tiebreak(a_rows, a_scores, a_cover, lambda rows, number=number: W_EXACT_NUMBER * np.array(
                    [normalise(self.housenumber(r) or "").replace(" ", "") == number for r in rows.tolist()], float))
            # the street (or place, for addr:place addresses) of these words: the answer when the number is
            # not in the data, and when it names the street better than the numbered documents do (a typo)
            named = (cls[cols] == 0) | (cls[cols] == 2) | ((cls[cols] == 1) & ~self.numbered()[cols])
            s_bonus = np.where(cls[cols[named]] == 2, 0.5, np.where(cls[cols[named]] == 0, 0.3, 0.0))
            s_rows, s_scores, s_cover = self._rank(cols[named], name_q[:, named], variants, name_only=None,
                                                   ctx_only=rest_ctx, prefix_last=prefix_last, point=point,
                                                   need_all=True, extra=s_bonus)
            s_rows, s_scores, s_cover = _tiebreak(s_rows, s_scores, s_cover,
                                                  lambda rows, v=variants: W_STREET_SHARE * self._name_share(rows, v))
            if allow_fallback and not len(a_rows):
                # the number is not in the data: the street of the numbered documents these words name, when
                # they explain the words better than a street document alone (a street that crosses into the
                # town of the query, while its document carries the town it was grouped by)
                v_rows, v_scores, v_cover = self._street_by_addresses(cols, rest, variants, name_q, rest_ctx,
                                                                      prefix_last, point)
                if len(v_rows) and (not len(s_rows) or v_cover[0] > s_cover[0] + 1e-9):
                    s_rows, s_scores, s_cover = v_rows, v_scores, v_cover
            # several numbers ("Autauga County 4 720"): the reading that explains the words best, an address
            # before a street at equal coverage, the first number before the next
            if len(a_rows) and (not len(s_rows) or a_cover[0] >= s_cover[0] - 1e-9):
                if best is None or a_cover[0] > best[0] + 1e-9 or (a_cover[0] > best[0] - 1e-9 and not best[1]):
                    best = (float(a_cover[0]), True,  # the number as the document has it ("3-7" for "3")
                            [(int(r), float(s) + 1.0, self.housenumber(int(r)) or toks[ni])
                             for r, s in zip(a_rows.tolist(), a_scores.tolist(), strict=True)])
            elif len(s_rows) and allow_fallback:
                if best is None or s_cover[0] > best[0] + 1e-9:
                    best = (float(s_cover[0]), False,
                            [(int(r), float(s), None) for r, s in zip(s_rows.tolist(), s_scores.tolist(), strict=True)])
            if best is None and allow_fallback and len(rest) >= 2:
                # the town not matched (a street that crosses a boundary): the street by its name alone
                # and the words next to the number name it (all word orders put the street beside its number)
                adj = [i for i in (ni - 1, ni) if 0 <= i < len(rest)]
                near = named & (name_q[adj].max(axis=0) > 0)
                r_rows, r_scores, r_cover = self._rank(cols[near], name_q[:, near], variants, name_only=None,
                                                       ctx_only=rest_ctx, prefix_last=prefix_last, point=point,
                                                       need_all=False, extra=s_bonus[near[named]])
                good = r_cover >= (len(rest) - 1) / len(rest) * 0.95 - 1e-9
                relaxed += [(int(r), float(s) - 1.0, None) for r, s in zip(r_rows[good].tolist(), r_scores[good].tolist(), strict=True)]
        if best is not None:
            return best[2]
        if relaxed:
            return sorted(relaxed, key=lambda x: -x[1])
        return None

    def _guessed_street(self, rows: np.ndarray) -> np.ndarray:
        """bool per row: the document's street was not tagged (addr:street / addr:place) but guessed by the
        build (the nearest street)."""
        if self._addr_col("street") is None:
            return np.zeros(len(rows), bool)
        out = np.zeros(len(rows), bool)
        for j, row in enumerate(rows.tolist()):
            a = self._detail(row).get("address") or {}
            out[j] = not (a.get("street") or a.get("place")) and bool(self.ix.detail[row])
        return out

    def _street_quality(self, cand: np.ndarray, rest, variants, cols, name_q, with_share: bool = False):
        """(words, candidates) name quality of numbered documents: the better of their own name (the index's
        match) and their street (addr:street / addr:place) against the query words. `with_share`: also the
        share of each candidate's street words the query words name (0 without a street)."""
        own = np.zeros((len(rest), len(cand)), np.float32)
        share = np.zeros(len(cand))
        if len(cols):
            pos = np.minimum(np.searchsorted(cols, cand), len(cols) - 1)
            hit = cols[pos] == cand
            own[:, hit] = name_q[:, pos[hit]]
        streets = {}
        for j, row in enumerate(cand.tolist()):
            s = self.street_of(row)
            if not s:
                continue
            if s not in streets:
                words = normalise(s).split()
                streets[s] = (np.array([_word_quality(vs, words) for vs in variants], np.float32),
                              _words_share(variants, words))
            own[:, j] = np.maximum(own[:, j], streets[s][0])
            share[j] = streets[s][1]
        return (own, share) if with_share else own

    def _name_share(self, rows: np.ndarray, variants) -> np.ndarray:
        """Per row: the share of the words of its primary name that the query words name."""
        out = np.zeros(len(rows))
        for j, row in enumerate(rows.tolist()):
            out[j] = _words_share(variants, self.ix._row_text(row)[1].split())
        return out

    def _street_by_addresses(self, cols, rest, variants, name_q, rest_ctx, prefix_last, point):
        """(street rows, scores, coverage) of the streets of the numbered documents the words name (their street
        by name, the other words by their context: town, postcode), best first; empty in an index without
        streets of addresses."""
        street_row = getattr(self.ix, "_street_row", None)
        empty = np.zeros(0, np.int64), np.zeros(0), np.zeros(0)
        if street_row is None or not len(cols):
            return empty
        on = cols[self.numbered()[cols]]
        on = on[np.asarray(street_row[on]) >= 0]
        if not len(on):
            return empty
        q = self._street_quality(on, rest, variants, cols, name_q)
        rows, scores, cover = self._rank(on, q, variants, name_only=None, ctx_only=rest_ctx, prefix_last=prefix_last,
                                         point=point, need_all=True)
        streets = np.asarray(street_row[rows]).astype(np.int64)
        _, first = np.unique(streets, return_index=True)
        first = np.sort(first)
        return _tiebreak(streets[first], scores[first] + 0.5, cover[first],
                         lambda rows: W_STREET_SHARE * self._name_share(rows, variants))

    def geocode(self, q=None, *, street=None, city=None, county=None, state=None, country=None, postalcode=None,
                amenity=None, limit=10, lang=None, viewbox=None, bounded=False, countrycodes=None, layer=None,
                feature_type=None, exclude_place_ids=None, lat=None, lon=None, location_bias_scale=None,
                osm_tag=None, dedupe=True) -> list[tuple[int, float, str | None, float | None]]:
        """[(row, score, house number matched or None, distance_m or None)] best first; see Engine.geocode."""
        fields = {k: _text(v, k) for k, v in (("street", street), ("city", city), ("county", county), ("state", state),
                                              ("country", country), ("postalcode", postalcode), ("amenity", amenity))}
        structured = any(fields.values())
        if q is not None and not isinstance(q, str):
            raise _err("q", "q must be a string")
        q = (q or "").strip()
        if len(q) > 255:
            raise _err("q", "q must be at most 255 characters")
        if structured and q:
            raise InvalidRequest(errors=[FieldError("q", "q cannot be combined with the structured fields "
                                                         "street, city, county, state, country, postalcode, amenity")])
        if isinstance(limit, bool) or not isinstance(limit, (int, np.integer)) or not 1 <= int(limit) <= MAX_LIMIT:
            raise _err("limit", f"limit must be an integer from 1 to {MAX_LIMIT}")
        limit = int(limit)
        box = parse_viewbox(viewbox)
        if not isinstance(bounded, bool):
            raise _err("bounded", "bounded must be true or false")
        codes = parse_countrycodes(countrycodes)
        layers = _choice_list(layer, "layer", LAYERS)
        ftypes = _choice_list(feature_type, "feature_type", tuple(FEATURE_TYPES))
        excluded = _exclude(exclude_place_ids)
        point = None
        if lat is not None or lon is not None:
            from geoengine.search.requests import _check_point

            point = _check_point(lat, lon, required=False)
        scale = 25.0
        if location_bias_scale is not None:
            try:
                s = float(location_bias_scale)
            except (TypeError, ValueError):
                raise _err("location_bias_scale", "location_bias_scale must be a number") from None
            if not (0.0 <= s <= 1.0) or math.isnan(s):
                raise _err("location_bias_scale", "location_bias_scale must be between 0 and 1")
            scale = 5.0 + 95.0 * s  # Photon: 0 (the point counts most: 5 km) .. 1 (100 km)
        tags = parse_osm_tags(osm_tag)
        if not structured and not q:
            raise _err("q", "q or one of the structured fields is required")
        want = min(MAX_LIMIT, limit * 3 + len(excluded))
        if box is not None and not bounded and point is None:
            point = ((box[1] + box[3]) / 2, (box[0] + box[2]) / 2)
        bias = None if point is None else (point[0], point[1], scale)
        filt = _Filter(self, box if bounded else None, codes, layers, ftypes, excluded, tags)

        if structured:
            found = self._structured(fields, bias, want, filt)
        else:
            found = self._free(q, bias, want, filt)
        out, seen_canon, seen_label = [], set(), set()
        for row, score, hn, dist in found:
            if not filt.ok(row):
                continue
            if dedupe:
                c = int(self.ix._canon[row])
                label = (self.ix.cols["display_name"][row], self.doc_class()[row], hn)
                if c in seen_canon or label in seen_label:
                    continue
                seen_canon.add(c)
                seen_label.add(label)
            out.append((row, score, hn, dist))
            if len(out) == limit:
                break
        return out

    def _free(self, q, bias, want, filt):
        ix = self.ix
        rest, tag_k, tag_v = extract_osm_tag(q)
        rest, clat, clon = extract_coordinates(rest)
        anchor = bias
        if clat is not None:
            anchor = (clat, clon, bias[2] if bias else 25.0)
            if not rest.strip() and tag_k is None:  # only coordinates: the nearest document
                rev = ix.reverse(clat, clon, radius="100km", size=10)
                return [(ix.row_of(r["id"]), r["score"], None, r["distance_m"]) for r in rev["results"]]
        if tag_k is not None:
            return self._tagged(tag_k, tag_v, rest, anchor, want, filt)
        toks = query_tokens(rest)[:12]
        if clat is not None:  # "pharmacy near 47.16,9.51": the connector before the coordinates goes
            toks = strip_connectors(toks, at_start=False) if len(toks) > 1 else toks
            if len(toks) == 1 or toks[-1] not in _CONNECTOR_WORDS:
                rest = " ".join(toks)
            else:
                rest = " ".join(toks[:-1])
                toks = toks[:-1]
        if not toks:
            return []
        if ix.cat_terms is not None and ix.cat_terms.parse(toks) is None:
            # "restaurants in Vaduz", "pharmacies near ...": the category word in the singular
            for i in (0, len(toks) - 1):
                for sing in _singulars(toks[i]):
                    alt = toks[:i] + [sing] + toks[i + 1:]
                    if ix.cat_terms.parse(alt) is not None and ix.cat_terms.parse(alt)[0]:
                        toks = alt
                        rest = " ".join(alt)
                        break
                else:
                    continue
                break
        prefix_last = False  # a geocoding query is complete (autocomplete is GET /search)
        addr = self._address(toks, prefix_last, anchor)
        if addr is not None:
            return [(r, s, hn, None) for r, s, hn in addr]
        numbers = {t for t in toks if is_housenumber(t)}
        # the index's ranking (names, categories: "pharmacy near Vaduz"), then "name, town" by context
        kw = {}
        if anchor is not None:
            kw = {"lat": anchor[0], "lon": anchor[1]}
        if filt.box is not None:
            kw["bbox"] = filt.box
        if filt.codes:
            kw["countries"] = sorted(filt.codes)
        if filt.ftypes is not None or (filt.layers is not None and "address" not in filt.layers):
            kw["types"] = "place" if filt.ftypes is not None else "poi"  # the index's own kinds, before the limit
        try:
            res = ix.search(rest if len(rest.strip()) >= 2 else rest + " ", size=25, **kw)["results"]
        except Exception:  # a filter that leaves nothing to search
            res = []
        found = [(ix.row_of(r["id"]), r["score"], None, None) for r in res]
        is_cat = ix.cat_terms is not None and ix.cat_terms.parse(toks) is not None
        if len(toks) >= 2 and not is_cat:
            variants = self._variants(toks)
            cols, name_q = self._name_matrix(toks, prefix_last)
            rows, scores, cover = self._rank(cols, name_q, variants, name_only=None, ctx_only=None,
                                             prefix_last=prefix_last, point=anchor, need_all=True)
            if len(rows) and (not found or self._better(rows[0], toks, found[0][0])):
                ctx = [(int(r), float(s) + 10.0, None, None) for r, s in zip(rows.tolist(), scores.tolist(), strict=True)]
                found = ctx + found
        if numbers:  # an address query whose number was not found: no other numbered document
            found = [f for f in found if f[0] is not None and (not self.numbered()[f[0]]
                                                               or normalise(self.housenumber(f[0]) or "") in numbers)]
        return found

    def _better(self, row: int, toks: list[str], other: int) -> bool:
        """The context ranking's best document explains every word while the index's best leaves words out
        of its name (a "name, town" query)."""
        _, primary, en, _ = self.ix._row_text(other)
        names = set(primary.split()) | set(en.split())
        missing = [t for t in toks if not any(v in names for v in self.abbr.variants(t))]
        return bool(missing) and row != other

    def _tagged(self, key, val, rest, anchor, want, filt):
        ix = self.ix
        from geoengine.search.categories import vocabulary

        known = vocabulary()["categories"]
        pids = [p for p, c in known.items() if p.split("/", 1)[0] == key and c["tags"].get(key) == val]
        cids = [ix._cat_index[p] for p in pids if p in ix._cat_index]
        rows = ix.category_rows(cids)
        if not len(rows):
            # no preset names the tag: the documents whose OSM key and value it is (POIs keep the key as
            # place_class and the value as category)
            return []
        rows = np.unique(np.asarray(ix._canon[rows]))
        where = anchor
        if rest.strip():
            toks = query_tokens(rest)
            if toks:
                try:
                    res = ix.search(rest, types="place", size=1)["results"]
                except InvalidRequest:
                    res = []
                if res:
                    where = (res[0]["location"]["lat"], res[0]["location"]["lon"], 25.0)
        if where is not None:
            d = haversine_m(where[0], where[1], np.asarray(ix._lat[rows]), np.asarray(ix._lon[rows]))
            order = np.argsort(d, kind="stable")[:want * 4]
            return [(int(rows[j]), float(1.0 / (1.0 + d[j] / 1000.0)), None, float(d[j])) for j in order.tolist()]
        imp = np.asarray(ix._importance[rows])
        order = np.argsort(-imp, kind="stable")[:want * 4]
        return [(int(rows[j]), float(imp[j]), None, None) for j in order.tolist()]

    def _structured(self, f, bias, want, filt):
        ix = self.ix
        if f["amenity"]:
            where = " ".join(v for k in ("street", "city", "county", "state", "postalcode", "country") if (v := f[k]))
            q = f["amenity"] + (" in " + where if where else "")
            return self._free(q, bias, want, filt)
        name_toks = query_tokens(f["street"] or "")
        ctx_toks = []
        for k in ("city", "county", "state", "postalcode", "country"):
            if f[k]:
                ctx_toks += query_tokens(f[k])
        if not name_toks:
            # no street: the smallest of the places given (city, else county, state, postcode, country)
            for k in ("city", "county", "state", "country"):
                if f[k]:
                    toks = query_tokens(f[k])
                    if not toks:  # punctuation only (",,,"): nothing of this field to match
                        continue
                    others = [t for t in ctx_toks if t not in toks]
                    variants = self._variants(toks + others)
                    cols, nq = self._name_matrix(toks + others, False)
                    cls = self.doc_class()
                    keep = cls[cols] == 0
                    ctx_only = np.array([False] * len(toks) + [True] * len(others))
                    rows, scores, _ = self._rank(cols[keep], nq[:, keep], variants, name_only=None, ctx_only=ctx_only,
                                                 prefix_last=False, point=bias, need_all=True)
                    extra = np.array([PLACE_RANKS.get(ix.cols["place_class"][r] or "", 25) for r in rows.tolist()])
                    out = [(int(r), float(s) - 0.001 * e, None, None) for r, s, e in zip(rows.tolist(), scores.tolist(), extra.tolist(), strict=True)]
                    out.sort(key=lambda x: -x[1])
                    if out:
                        return out
            if f["postalcode"]:  # the addresses of that postcode (the index's postcode column), in row order
                rows = ix.postcode_rows(f["postalcode"])
                rows = rows[self.doc_class()[rows] == 3][:want]
                return [(int(r), 1.0, None, None) for r in rows.tolist()]
            return []
        toks = name_toks + ctx_toks
        ctx_only = np.array([False] * len(name_toks) + [True] * len(ctx_toks))
        addr = self._address(toks, False, bias, ctx_only=ctx_only)
        if addr is not None:
            return [(r, s, hn, None) for r, s, hn in addr]
        variants = self._variants(toks)
        cols, nq = self._name_matrix(toks, False)
        rows, scores, _ = self._rank(cols, nq, variants, name_only=None, ctx_only=ctx_only, prefix_last=False,
                                     point=bias, need_all=True)
        return [(int(r), float(s), None, None) for r, s in zip(rows.tolist(), scores.tolist(), strict=True)]

    # -- results ----------------------------------------------------------------------------------------
    def layer_of(self, row: int) -> str:
        cls = int(self.doc_class()[row])
        if cls != 1:
            return "address"
        key = self.ix.cols["place_class"][row]
        if key in RAILWAY_KEYS:
            return "railway"
        if key in NATURAL_KEYS:
            return "natural"
        if key in MANMADE_KEYS:
            return "manmade"
        return "poi"

    def osm_key_value(self, row: int) -> tuple[str | None, str | None]:
        ix = self.ix
        fk, fv = getattr(ix, "osm_key", None), getattr(ix, "osm_value", None)
        if fk is not None and fv is not None:
            return fk(row), fv(row)
        cls = int(self.doc_class()[row])
        pc, cat = ix.cols["place_class"][row], ix.cols["category"][row]
        if cls == 2:
            return "highway", cat
        if cls == 3:
            return "place", "house"
        if cls == 1:
            return pc, cat
        return "place", pc

    def place_rank(self, row: int) -> int:
        cls = int(self.doc_class()[row])
        if cls == 3 or cls == 1:
            return 30
        if cls == 2:
            return 26
        return PLACE_RANKS.get(self.ix.cols["place_class"][row] or "", 25)

    def osm_identity(self, row: int) -> tuple[str | None, int | None]:
        ix = self.ix
        ft, fi = getattr(ix, "osm_type", None), getattr(ix, "osm_id", None)
        if ft is not None and fi is not None:
            t = ft(row)
            return ({"N": "node", "W": "way", "R": "relation"}.get(t) if t else None), fi(row)
        src, kind, num = (ix.cols["id"][row].split(":") + ["", ""])[:3]
        if src != "osm" or not num.isdigit():
            return None, None
        return ("way" if kind == "street" else kind), int(num)

    def address_of(self, row: int, lang=None, housenumber: str | None = None) -> dict:
        ix = self.ix
        f = getattr(ix, "address", None)
        if f is not None and callable(f):
            try:
                a = dict(f(row, lang))
            except TypeError:
                a = dict(f(row))
        else:
            a = self._fallback_address(row)
        if housenumber is None and int(self.doc_class()[row]) in (0, 2):
            a.pop("house_number", None)
        return a

    def _fallback_address(self, row: int) -> dict:
        """Nominatim's address keys from what the index holds before the hierarchy: addr:* tags, the
        display name's locality and country."""
        ix = self.ix
        det = self._detail(row).get("address") or {}
        out: dict = {}
        hn = det.get("housenumber")
        if hn:
            out["house_number"] = hn
        street = det.get("street")
        cls = int(self.doc_class()[row])
        if cls == 2:
            street = ix.cols["name"][row]
        if street:
            out["road"] = street
        parts = (ix.cols["display_name"][row] or "").split(", ")
        if det.get("city"):
            out["city"] = det["city"]
        elif len(parts) >= 3:
            out["city"] = parts[-3] if cls != 0 else parts[-2]
        if det.get("postcode"):
            out["postcode"] = det["postcode"]
        if len(parts) >= 2:
            out["country"] = parts[-1]
        if ix._country is not None and int(ix._country[row]):
            code = int(ix._country[row])
            out["country_code"] = (chr(code >> 8) + chr(code & 0xFF)).lower()
        return out

    def place(self, row: int, *, lang=None, housenumber: str | None = None, score=None, distance_m=None) -> Place:
        ix = self.ix
        osm_type, osm_id = self.osm_identity(row)
        key, val = self.osm_key_value(row)
        det = self._detail(row)
        address = self.address_of(row, lang, housenumber)
        fd = getattr(ix, "display_name", None)
        display = None
        if callable(fd):
            try:
                display = fd(row, lang)
            except TypeError:
                display = None
        if display is None:
            display = ix.cols["display_name"][row] or ""
        lat, lon = float(ix._lat[row]), float(ix._lon[row])
        name = ix.cols["name"][row]
        if int(self.doc_class()[row]) == 3:
            name = None  # an address has no name of its own (its label is street + number)
        names = dict(det.get("names") or ({"name": name} if name else {}))
        return Place(place_id=int(row), osm_type=osm_type, osm_id=osm_id, lat=round(lat, 7), lon=round(lon, 7),
                     name=name, display_name=display, category=key, type=val, place_rank=self.place_rank(row),
                     importance=round(float(ix._importance[row]), 5), address=address,
                     boundingbox=(lat, lat, lon, lon), extratags=dict(det.get("tags") or {}), namedetails=names,
                     housenumber=housenumber if housenumber is not None else (
                         self.housenumber(row) if int(self.doc_class()[row]) in (1, 3) else None),
                     layer=self.layer_of(row), doc_id=ix.cols["id"][row],
                     score=None if score is None else round(float(score), 4),
                     distance_m=None if distance_m is None else round(float(distance_m), 1))


def parse_osm_tags(value) -> list[tuple[bool, str, str]] | None:
    """Photon's osm_tag filters (a string or a list): "key:value", "key", ":value", each negated by a leading
    "!" -> [(include, key or "", value or "")]; None when not given."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    vals = [value] if isinstance(value, str) else list(value)
    out = []
    for v in vals:
        if not isinstance(v, str) or not v.strip():
            raise _err("osm_tag", "osm_tag must be key:value, key, :value or one of them negated with !")
        v = v.strip()
        include = not v.startswith("!")
        key, _, val = v.lstrip("!").partition(":")
        if not key and not val or any(c.isspace() for c in key + val):
            raise _err("osm_tag", f"'{v[:40]}' is not key:value, key, :value or one of them negated with !")
        out.append((include, key, val))
    return out


class _Filter:
    def __init__(self, geo: Geocoder, box, codes, layers, ftypes, excluded, tags=None):
        self.geo, self.box, self.codes, self.layers, self.ftypes, self.excluded = geo, box, codes, layers, ftypes, excluded
        self.tags = tags

    def _tag_ok(self, row: int) -> bool:
        k, v = self.geo.osm_key_value(row)

        def hit(key, val):
            return (not key or key == k) and (not val or val == v)

        inc = [t for t in self.tags if t[0]]
        if inc and not any(hit(key, val) for _, key, val in inc):
            return False
        return not any(hit(key, val) for ok, key, val in self.tags if not ok)

    def ok(self, row) -> bool:
        if row is None:
            return False
        ix = self.geo.ix
        if row in self.excluded:
            return False
        if self.box is not None:
            x, y = float(ix._lon[row]), float(ix._lat[row])
            if not (self.box[0] <= x <= self.box[2] and self.box[1] <= y <= self.box[3]):
                return False
        if self.codes is not None:
            code = int(ix._country[row]) if ix._country is not None else 0
            if not code or (chr(code >> 8) + chr(code & 0xFF)) not in self.codes:
                return False
        if self.layers is not None and self.geo.layer_of(row) not in self.layers:
            return False
        if self.tags and not self._tag_ok(row):
            return False
        if self.ftypes is not None:
            if int(self.geo.doc_class()[row]) != 0:
                return False
            rank = self.geo.place_rank(row)
            if not any(FEATURE_TYPES[f][0] <= rank <= FEATURE_TYPES[f][1] for f in self.ftypes):
                return False
        return True


def _exclude(ids) -> set[int]:
    if ids is None or (isinstance(ids, str) and not ids.strip()):
        return set()
    vals = [v.strip() for v in ids.split(",")] if isinstance(ids, str) else list(ids)
    out = set()
    for v in vals:
        try:
            out.add(int(v))
        except (TypeError, ValueError):
            raise _err("exclude_place_ids", "exclude_place_ids must be place ids (integers)") from None
    return out


def _singulars(tok: str) -> list[str]:
    """English and Romance plurals of a category word: restaurants -> restaurant, pharmacies -> pharmacy,
    hoteles -> hotel."""
    out = []
    if len(tok) > 4 and tok.endswith("ies"):
        out.append(tok[:-3] + "y")
    if len(tok) > 4 and tok.endswith("es"):
        out.append(tok[:-2])
    if len(tok) > 3 and tok.endswith("s"):
        out.append(tok[:-1])
    return out


def _number_forms(hn: str) -> list[str]:
    """The normalised numbers an addr:housenumber answers to: "93" -> [93]; "12a" -> [12a]; "12 a" -> [12a];
    "3;5" / "3,5" -> [3, 5]; "3-5" -> [3-5, 35 (the words joined), 3, 5]."""
    out = []
    for part in hn.replace(",", ";").split(";"):
        n = normalise(part)
        if not n:
            continue
        words = n.split()
        if len(words) == 2 and all(w[:1].isdigit() for w in words) and re.search(r"\d\s*[-/]\s*\d", part):
            out.append("-".join(words))  # "3-7", "12/1": the range or fraction as typed
        joined = n.replace(" ", "")
        if is_housenumber(joined):
            out.append(joined)
        for w in n.split():
            if is_housenumber(w) and w not in out:
                out.append(w)
    return out


def _tiebreak(rows: np.ndarray, scores: np.ndarray, cover: np.ndarray, bonus) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ranked (rows, scores, coverage) with `bonus(rows)` (small: at most TIEBREAK_MARGIN) added to the rows
    within TIEBREAK_MARGIN of the best (at most TIEBREAK_ROWS of them) and those re-sorted: the rows below
    cannot overtake them, so the bonus is read for a bounded few rows only."""
    if len(rows) < 2:
        return rows, scores, cover
    k = min(TIEBREAK_ROWS, int(np.searchsorted(-scores, -(scores[0] - TIEBREAK_MARGIN), side="right")))
    if k < 2:
        return rows, scores, cover
    rows, scores, cover = rows.copy(), scores.copy(), cover.copy()
    head = scores[:k] + np.asarray(bonus(rows[:k]), np.float64)
    order = np.argsort(-head, kind="stable")
    rows[:k], scores[:k], cover[:k] = rows[:k][order], head[order], cover[:k][order]
    return rows, scores, cover


def _words_share(variants: list[tuple[str, ...]], words: list[str]) -> float:
    """The share of `words` that some query word names (exactly or through an abbreviation variant)."""
    if not words:
        return 0.0
    named = {v for vs in variants for v in vs}
    return sum(1 for w in words if w in named) / len(words)


def _word_quality(variants: tuple[str, ...], words: list[str]) -> float:
    """Best match of a query word (through its variants) against a name's words: 1 exact, 0.8/0.7 typos."""
    if any(v in words for v in variants):
        return 1.0
    tok = variants[0]
    k = max_typos(tok)
    best = 0.0
    if k:
        for w in words:
            if abs(len(w) - len(tok)) <= k:
                d = OSA.distance(tok, w, score_cutoff=k)
                if d <= k:
                    best = max(best, 0.8 - 0.1 * d)
    return best


def geocoder_for(ix) -> Geocoder:
    """The geocoder of a search index (one per index object)."""
    g = getattr(ix, "_geocoder", None)
    if g is None:
        g = Geocoder(ix)
        ix._geocoder = g
    return g




# ------------------------------------------------------------------------------------------ reverse, lookup
# Nominatim's reverse zoom -> the largest place_rank answered (3-4 country ... 18 building)
ZOOM_RANK = {0: 4, 1: 4, 2: 4, 3: 4, 4: 4, 5: 8, 6: 8, 7: 8, 8: 12, 9: 12, 10: 16, 11: 16, 12: 19, 13: 19,
             14: 22, 15: 22, 16: 26, 17: 26, 18: 30}


def check_zoom(zoom) -> int:
    if isinstance(zoom, bool) or not isinstance(zoom, (int, np.integer)) or not 0 <= int(zoom) <= 18:
        raise _err("zoom", "zoom must be an integer from 0 (country) to 18 (building)")
    return int(zoom)


def reverse_row(geo: Geocoder, lat: float, lon: float, zoom: int) -> tuple[int, str | None, float | None] | None:
    """(row, house number, distance_m) answering Nominatim's reverse at `zoom`, or None. Uses the index's
    `reverse_zoom` when it has one (the administrative hierarchy); else the nearest document of the level."""
    ix = geo.ix
    f = getattr(ix, "reverse_zoom", None)
    if f is not None:
        row = f(lat, lon, zoom)
        if row is None or row < 0:
            return None
        hn = geo.housenumber(row) if zoom >= 18 else None
        d = float(haversine_m(lat, lon, np.array([ix._lat[row]]), np.array([ix._lon[row]]))[0])
        return int(row), hn, d
    max_rank = ZOOM_RANK[zoom]
    cls = geo.doc_class()
    if max_rank >= 30:
        res = ix.reverse(lat, lon, radius="100m", size=10)["results"]
        for r in res:
            row = ix.row_of(r["id"])
            if row is not None and cls[row] in (1, 3) and geo.housenumber(row):
                return row, geo.housenumber(row), r["distance_m"]
    if max_rank >= 26:
        res = ix.reverse(lat, lon, radius="1km", size=10)["results"]
        for r in res:
            row = ix.row_of(r["id"])
            if row is not None and cls[row] == 2:
                return row, None, r["distance_m"]
    rows, ranks = geo.place_ranks()
    ok = ranks <= max_rank
    if max_rank >= 16:
        ok &= ranks >= 16 if max_rank < 26 else ranks >= 0
    if not ok.any():
        return None
    rows = rows[ok]
    d = haversine_m(lat, lon, np.asarray(ix._lat[rows]), np.asarray(ix._lon[rows]))
    k = int(np.argmin(d))
    return int(rows[k]), None, float(d[k])


SETTLEMENT_RANK = (16, 20)


def lookup_rows(ix, ids) -> list[int]:
    """Rows of Nominatim's osm_ids ("N123,W456,R789" or a list); unknown ids are left out."""
    if ids is None or (isinstance(ids, str) and not ids.strip()):
        raise _err("osm_ids", "osm_ids must list one or more ids such as N123,W456,R789")
    vals = [v.strip() for v in ids.split(",")] if isinstance(ids, str) else [str(v).strip() for v in ids]
    vals = [v for v in vals if v]
    if not vals or len(vals) > MAX_LIMIT:
        raise _err("osm_ids", f"osm_ids must list 1 to {MAX_LIMIT} ids")
    out = []
    for v in vals:
        t, num = v[:1].upper(), v[1:]
        if t not in ("N", "W", "R") or not num.isdigit():
            raise _err("osm_ids", f"'{v[:40]}' is not an OSM id like N123, W456 or R789")
        kinds = {"N": ("node",), "W": ("way", "street"), "R": ("relation",)}[t]
        for k in kinds:
            row = ix.row_of(f"osm:{k}:{int(num)}")
            if row is not None:
                if row not in out:
                    out.append(row)
                break
    return out
