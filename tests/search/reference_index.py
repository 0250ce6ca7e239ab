"""The search query path as it was before its CPU was cut (issue 16, commit 61a41dd), kept verbatim as a
reference: the tests check that the index answers every query exactly as this does.

`ReferenceIndex` overrides the methods that changed (token matching by rapidfuzz over the vocabulary, the
dense token match matrix over every document, the per-candidate scoring loop, result assembly, the
category path and reverse) with their old code; everything else (parsing, filters, tables) is shared.
"""

from __future__ import annotations

import bisect
import math
import time

import numpy as np
from rapidfuzz import fuzz, process
from rapidfuzz.distance import OSA

from geoengine.arrays import unique
from geoengine.errors import InvalidRequest
from geoengine.geo import EARTH_RADIUS_M as EARTH_M
from geoengine.geo import haversine_m
from geoengine.search.index import (
    ALT_FACTOR,
    BIAS_DECAY_KM,
    BIAS_WEIGHT,
    CANDIDATES,
    MAJOR_IMPORTANCE,
    MAX_QUERY_TOKENS,
    PREFIX_BASE,
    PREFIX_SHARE,
    SEP,
    TYPES,
    W_COVERAGE,
    W_EXACT,
    W_IMPORTANCE,
    W_NAME_PREFIX,
    W_PRIMARY,
    W_RATIO,
    W_REGION,
    W_STARTS,
    SearchIndex,
    _check_point,
    _check_size,
    _covers,
    _letter_range,
    _name_coverage,
    parse_bbox,
    parse_countries,
    parse_radius,
    parse_types,
    segment_distance_m,
)
from geoengine.search.text import max_typos, normalise


class ReferenceIndex(SearchIndex):
    """A SearchIndex answering with the code of 61a41dd."""

    def result(self, row: int, score: float | None = None, distance_m: float | None = None) -> dict:
        """A Search Result dict (the spec's fields; `distance_m` only when given)."""
        c = self.cols
        d = {
            "id": c["id"][row], "score": None if score is None else round(float(score), 4), "index": c["index"][row],
            "doc_type": c["doc_type"][row], "display_name": c["display_name"][row], "name": c["name"][row],
            "name_en": c["name_en"][row], "place_class": c["place_class"][row], "category": c["category"][row],
            "importance": round(float(self._importance[row]), 4),
            "location": {"lat": round(float(self._lat[row]), 7), "lon": round(float(self._lon[row]), 7)},
            "canonical_id": c["id"][int(self._canon[row])], "source": c["source"][row],
        }
        if distance_m is not None:
            d["distance_m"] = round(float(distance_m), 1)
        return d

    def _postings(self, ranges: list[tuple[int, int, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
        """Documents and qualities of vocabulary ranges [a, b) with one quality per token."""
        docs, quals = [], []
        ptr = self._post_ptr
        for a, b, q in ranges:
            pa, pb = int(ptr[a]), int(ptr[b])
            if pb <= pa:
                continue
            docs.append(np.asarray(self._post_doc[pa:pb]))
            counts = np.diff(np.asarray(ptr[a:b + 1]))
            quals.append(np.repeat(q.astype(np.float32), counts))
        if not docs:
            return np.zeros(0, np.int32), np.zeros(0, np.float32)
        return np.concatenate(docs), np.concatenate(quals)

    def _token_matches(self, tok: str, is_prefix: bool) -> tuple[np.ndarray, np.ndarray]:
        vocab = self.vocab
        ranges = []
        a = bisect.bisect_left(vocab, tok)
        if is_prefix:
            b = bisect.bisect_left(vocab, tok + "\U0010ffff")
            if b > a:
                lens = self.vocab_len[a:b]
                q = np.where(lens == len(tok), 1.0, PREFIX_BASE + PREFIX_SHARE * len(tok) / np.maximum(lens, 1))
                ranges.append((a, b, q))
        elif a < len(vocab) and vocab[a] == tok:
            ranges.append((a, a + 1, np.ones(1)))
        k = max_typos(tok)
        if k:
            # typos: first among tokens with the same first letter; anywhere only when that finds nothing
            for anywhere in (False, True):
                if anywhere and ranges:
                    break
                for length in range(len(tok) - k, len(tok) + k + 1):
                    words, rows = self._length_bucket(length)
                    lo, hi = (0, len(words)) if anywhere else _letter_range(words, tok[0])
                    for _, d, j in process.extract(tok, words[lo:hi], scorer=OSA.distance, score_cutoff=k, limit=None):
                        if d > 0:
                            i = int(rows[lo + j])
                            ranges.append((i, i + 1, np.array([0.8 - 0.1 * d])))
                if is_prefix:
                    prefixes, se = self._prefix_table(len(tok))
                    lo, hi = (0, len(prefixes)) if anywhere else _letter_range(prefixes, tok[0])
                    for _, d, j in process.extract(tok, prefixes[lo:hi], scorer=OSA.distance, score_cutoff=k, limit=None):
                        if d > 0:
                            s, e = int(se[lo + j, 0]), int(se[lo + j, 1])
                            lens = self.vocab_len[s:e]
                            ranges.append((s, e, 0.55 + 0.2 * len(tok) / np.maximum(lens, 1) - 0.1 * (d - 1)))
        return self._postings(ranges)

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

    def _match_matrix(self, toks, prefix_last) -> np.ndarray:
        """(len(toks), n) best match quality of each query token in each document (0: no match)."""
        best = np.zeros((len(toks), self.n), np.float32)
        with self._lock:
            for i, tok in enumerate(toks):
                docs, qual = self._token_matches(tok, prefix_last and i == len(toks) - 1)
                order = np.argsort(qual, kind="stable")
                best[i, docs[order]] = qual[order]
        return best

    def _text_search(self, qn, toks, prefix_last, point, kinds, mask, size, *, allow_missing=True, best=None):
        """(canonical rows, scores, total) of the text ranking (see docs/search.md, Query); `best`: the
        token match matrix of `toks` when already computed."""
        if best is None:
            best = self._match_matrix(toks, prefix_last)
        matched = (best > 0).sum(axis=0)
        coverage = best.sum(axis=0) / len(toks)
        need = len(toks)
        ok = matched >= need
        if kinds is not None:
            ok &= np.isin(self._kind, kinds)
        if mask is not None:
            ok &= mask
        if allow_missing and not ok.any() and len(toks) > 1:
            ok = matched >= need - 1
            if kinds is not None:
                ok &= np.isin(self._kind, kinds)
            if mask is not None:
                ok &= mask
        cand = np.flatnonzero(ok)
        if len(cand) == 0:
            return [], [], 0
        imp = np.asarray(self._importance[cand], np.float64)
        if point is not None:
            d_km = haversine_m(point[0], point[1], np.asarray(self._lat[cand]), np.asarray(self._lon[cand])) / 1000.0
            bias = BIAS_WEIGHT * np.exp(-d_km / BIAS_DECAY_KM)
            region = np.zeros(len(cand), bool)
        else:  # region before world: the bundle's own documents get W_REGION (see docs/search.md)
            region = self._region[cand]
            bias = W_REGION * region
        coarse = W_COVERAGE * coverage[cand] + W_IMPORTANCE * imp + bias
        if self._first_tok is not None:  # the name (or English name) starts with the query's first word
            a = bisect.bisect_left(self.vocab, toks[0])
            b = (bisect.bisect_left(self.vocab, toks[0] + "\U0010ffff") if prefix_last and len(toks) == 1
                 else a + (a < len(self.vocab) and self.vocab[a] == toks[0]))
            ft = self._first_tok[cand]
            coarse = coarse + W_STARTS * ((ft >= a) & (ft < b)).any(axis=1)
        total = int(len(unique(np.asarray(self._canon[cand]))))
        if len(cand) > CANDIDATES:
            keep = np.zeros(len(cand), bool)
            keep[np.argpartition(-coarse, CANDIDATES)[:CANDIDATES]] = True
            keep |= np.isin(cand, self._exact_rows(qn))  # documents named exactly so are always scored
            cand, imp, bias, region = cand[keep], imp[keep], bias[keep], region[keep]
        scores = np.empty(len(cand))
        name_en, names = self.cols["name_en"], self.names
        q_var, q_start = SEP + qn + SEP, SEP + qn
        alt_exact_ok = len(qn) >= 4  # an alternate name counts as an exact match only from 4 letters (short ones are codes)
        no_point = point is None
        for j, (row, cov, im, bi, reg) in enumerate(zip(cand.tolist(), coverage[cand].tolist(), imp.tolist(),
                                                        bias.tolist(), region.tolist(), strict=True)):
            joined = names[row] or ""
            wrapped = SEP + joined + SEP
            primary = joined.split(SEP, 1)[0]
            en = normalise(name_en[row] or "")
            # text: the query against the document's own names (name, name:en), else against any variant
            # (alternate, old, other-language names) at ALT_FACTOR of its value
            text = _name_coverage(toks, prefix_last, primary)
            if en and en != primary:
                text = max(text, _name_coverage(toks, prefix_last, en))
            text = max(text, ALT_FACTOR * cov)
            exact_main = qn == primary or qn == en
            exact = exact_main or (alt_exact_ok and q_var in wrapped)
            starts = primary.startswith(qn) or (bool(en) and en.startswith(qn))  # the name starts with the query
            name_prefix = exact or starts or q_start in wrapped
            ratio = process.extractOne(qn, joined.split(SEP), scorer=fuzz.ratio)[1] / 100.0 if joined else 0.0
            if no_point and not reg and exact_main and im >= MAJOR_IMPORTANCE:
                bi = W_REGION  # the exact full name of a major world place competes as if it were regional
            scores[j] = (W_COVERAGE * text + W_EXACT * exact + W_PRIMARY * exact_main + W_STARTS * starts
                         + W_NAME_PREFIX * name_prefix + W_RATIO * ratio + W_IMPORTANCE * im + bi)
        order = np.argsort(-scores, kind="stable")
        rows, out_scores, seen = [], [], set()
        for j in order.tolist():
            c = int(self._canon[cand[j]])
            if c in seen:
                continue
            seen.add(c)
            rows.append(c)
            out_scores.append(float(scores[j]))
            if len(rows) == size:
                break
        return rows, out_scores, total

    def _named_by(self, row: int, toks: list[str], prefix_last: bool) -> bool:
        """Every query word matches the document's own name or English name."""
        primary = (self.names[row] or "").split(SEP, 1)[0]
        en = normalise(self.cols["name_en"][row] or "")
        return _covers(toks, prefix_last, primary) or (bool(en) and _covers(toks, prefix_last, en))

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
            names, display = self.names, self.cols["display_name"]
            # the other words are the query's last (or first) words: their rows of the token match matrix
            idx = list(range(len(toks) - len(rest), len(toks))) if toks[len(toks) - len(rest):] == rest else list(range(len(rest)))
            sub = best[idx] if best is not None else self._match_matrix(rest, prefix_last)
            own = (sub[:, rows] > 0).all(axis=0)  # every other word matches a name variant
            # how well the query names a POI whose names hold every other word: the match quality of the
            # whole query against its own name (typos and prefixes count less), +1 for the exact name
            for j in np.flatnonzero(own).tolist():
                primary = (names[int(rows[j])] or "").split(SEP, 1)[0]
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
