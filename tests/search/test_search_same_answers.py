"""The query path's caches (token matches, per-document text and results) never change an answer: on the
real Andorra and Liechtenstein bundles, every search and reverse call answers the same with every cache
emptied before it and with the caches warm; the typo kernel finds what rapidfuzz finds."""

from __future__ import annotations

import random

import pytest
from rapidfuzz import process
from rapidfuzz.distance import OSA

from geoengine.search.index import _letter_range
from geoengine.search.kernels import code_points, osa_scan


def _queries(engine, n_names: int, seed: int = 3):
    """Search and reverse calls: prefixes of real names (2-6 letters, all but the last word plus 2 letters),
    full names, names with a trailing space, a letter dropped or added, with and without a location,
    types, sizes, filters; category words alone and with place names; points near documents."""
    ix = engine.search_index
    rng = random.Random(seed)
    rows = list(range(ix.n))
    rng.shuffle(rows)
    names = [n for n in (ix.cols["name"][r] for r in rows[:4 * n_names]) if n][:n_names]
    bb = engine.bbox
    c = ((bb[1] + bb[3]) / 2, (bb[0] + bb[2]) / 2)
    calls = []
    for i, name in enumerate(names):
        qs = {name, name[:2], name[:3], name[:4], name[:6], name.lower() + " ", name[:5] + " "}
        words = name.split()
        if len(words) > 1:
            qs.add(" ".join(words[:-1]) + " " + words[-1][:2])
        if len(name) > 5:
            j = rng.randrange(1, len(name) - 1)
            qs |= {name[:j] + name[j + 1:], name[:j] + "x" + name[j:]}
        for q in sorted(qs):
            if len(q.strip()) < 2:
                continue
            calls.append({"q": q, "size": 5})
            if i % 3 == 0:
                calls.append({"q": q, "size": 10, "lat": c[0], "lon": c[1]})
            if i % 5 == 1:
                calls.append({"q": q, "size": 25, "types": "place"})
            if i % 7 == 2:
                calls.append({"q": q, "size": 3, "types": "poi", "lat": c[0] + 0.01, "lon": c[1] - 0.01})
            if i % 13 == 4:
                calls.append({"q": q, "size": 8, "bbox": f"{bb[0]},{bb[1]},{c[1]},{bb[3]}"})
            if i % 17 == 5:
                calls.append({"q": q, "countries": "li,ad"})
    for q in ["hotel", "restaurant", "pic de", "pharmacy", "Apotheke", "hotel Vaduz", "pizza Encamp", "hotel near Encamp",
              "Carrer", "carrer ", "sch", "va", "Paris", "cafe Schaan", "Banc", "Cap de Guiló", "Carrer Gil Torres",
              "Arinsal hotel", "Sant Julià de Lòria", "München", "zz", "a b c d e f g h i j k l m n o", "!!"]:
        for kw in ({}, {"lat": c[0], "lon": c[1]}, {"types": "poi"}, {"categories": "amenity/restaurant"}):
            calls.append({"q": q, **kw})
    reverse = []
    for k, r in enumerate(rows[:150]):
        lat, lon = float(ix.lat[r]) + 0.0004, float(ix.lon[r]) - 0.0003
        reverse.append({"lat": lat, "lon": lon})
        if k % 4 == 0:
            reverse.append({"lat": lat, "lon": lon, "radius": "500m", "size": 10})
        if k % 5 == 1:
            reverse.append({"lat": lat, "lon": lon, "types": "poi", "size": 3})
        if k % 7 == 2:
            reverse.append({"lat": lat, "lon": lon, "categories": "restaurant", "radius": "5km"})
    return calls, reverse


def _answer(fn, **kw):
    try:
        out = fn(**kw)
    except Exception as exc:  # the same error for the same bad request
        return repr(exc)
    return {**out, "took_ms": 0}


def _empty_caches(ix) -> None:
    ix._tok_cache.clear()
    ix._row_text.cache_clear()
    ix._result_base.cache_clear()


@pytest.mark.parametrize("region", ["andorra", "liechtenstein"])
def test_cached_answers_are_the_uncached_ones(engine_for, region):
    engine = engine_for(region)
    ix = engine.search_index
    calls, reverse = _queries(engine, 150)
    assert len(calls) > 1000
    cold = []
    for kw in calls:
        _empty_caches(ix)
        cold.append(_answer(ix.search, **kw))
    for kw in reverse:
        _empty_caches(ix)
        cold.append(_answer(ix.reverse, **kw))
    assert sum(isinstance(a, dict) and len(a["results"]) > 0 for a in cold) > 0.8 * len(cold)
    for _ in range(2):  # the caches filled by the round before (and by earlier calls of this round)
        warm = [_answer(ix.search, **kw) for kw in calls] + [_answer(ix.reverse, **kw) for kw in reverse]
        assert warm == cold


def test_results_are_fresh_dicts(andorra):
    """The per-document cache hands out copies: changing a result does not change the next answer."""
    first = andorra.search("Ordino", size=3)["results"]
    first[0]["name"] = "changed"
    first[0]["location"]["lat"] = 0.0
    again = andorra.search("Ordino", size=3)["results"][0]
    assert again["name"] != "changed" and again["location"]["lat"] != 0.0


def test_typo_scan_matches_rapidfuzz(liechtenstein):
    """`kernels.osa_scan` finds the same words at the same distances as rapidfuzz's OSA over the same run of
    the vocabulary (words of one length with the token's first letter, or all of them; the prefix tables)."""
    ix = liechtenstein.search_index
    ix.warm()
    chars, offs = ix._chars()
    rng = random.Random(5)
    for trial in range(400):
        w = rng.choice(ix.vocab)
        if len(w) < 4:
            continue
        for _ in range(rng.randint(0, 3)):  # edits: substitution, deletion, insertion, swap
            i, op = rng.randrange(len(w)), rng.randrange(4)
            if op == 0:
                w = w[:i] + rng.choice("aeiourstnxé") + w[i + 1:]
            elif op == 1 and len(w) > 4:
                w = w[:i] + w[i + 1:]
            elif op == 2:
                w = w[:i] + rng.choice("aeiourstn") + w[i:]
            elif i + 1 < len(w):
                w = w[:i] + w[i + 1] + w[i] + w[i + 2:]
        k = 1 if len(w) <= 7 else 2
        cp = code_points(w)
        runs = []
        for length in range(len(w) - k, len(w) + k + 1):
            words, rows = ix._length_bucket(length)
            runs.append((words, rows, length))
        prefixes, _, starts = ix._prefix_starts(len(w))
        runs.append((prefixes, starts, len(w)))
        for words, rows, length in runs:
            lo, hi = (0, len(words)) if trial % 10 == 0 else _letter_range(words, w[0])
            want = sorted((lo + j, d) for _, d, j in process.extract(w, words[lo:hi], scorer=OSA.distance,
                                                                      score_cutoff=k, limit=None))
            js, ds = osa_scan(cp, k, chars, offs, rows, lo, hi, length)
            assert sorted(zip(js.tolist(), ds.tolist(), strict=True)) == want, (w, length)
