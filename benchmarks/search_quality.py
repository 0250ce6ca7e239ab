"""Search quality and latency on a query set built from the bundle's own documents.

    python benchmarks/search_quality.py --region andorra [--places important|region|all] [--per-kind 200]
    python benchmarks/search_quality.py --bundle PATH

Query kinds, for OSM places, POIs and streets (biased to the extract's centre, as an app showing that
region would) and for GeoNames world cities (no bias):
  full       the document's name
  prefix3    the name with its last word cut to 3 letters ("Avinguda Mer"); single words: 3 letters
  typo1      one edit (substitution, deletion, insertion or swap) in the longest word of >= 5 letters
  no_accent  names with accents, typed without them
  english    documents whose name:en differs from name, searched by name:en
prefix3 is also split by ambiguity: prefixes that at most 5 distinct names of the index start with
(`prefix3 ≤5`) and the others (`prefix3 >5`); see NamesSharingPrefix.
A result counts as a hit when it is the document's canonical document or has the same normalised name
and index (documents of identical name cannot be told apart by text). Prints top-1 / top-5 hit rates and
the p50/p95 latency of engine.search, and of GET /search through the in-process HTTP client.

Issue 15 adds (when the bundle has categories):
  categories       every category with at least 3 POIs (canonical groups), its name in each of the seven
                   languages where iD translates it, searched near the median of its POIs: the share of
                   queries with >= 3 POIs of the category in the top 5, and of top 5s in nearest-first order;
                   without a location: the share whose results are all of the category and of the region
  region vs world  the full names and 3-letter prefixes (last word cut to 3 letters, 3+ letters in all)
                   of the regional documents, without a location: the share where a regional document
                   comes first; and the exact names of the world's 100 largest GeoNames cities: the share
                   where that city comes first
With --nominatim URL the category and regional queries also go to Nominatim (its /search, jsonv2) in the
same run: a category hit is a result whose class=type is one of the category's tags (Nominatim answers
category words only with its special phrases imported), a regional hit any result (its database holds
only the extract).
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
import unicodedata
from pathlib import Path

import numpy as np

import geoengine
from geoengine.search.text import normalise

LETTERS = "abcdefghijklmnopqrstuvwxyz"


def strip_accents(s: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFKD", s) if not unicodedata.combining(c))


def prefix3(name: str) -> str | None:
    words = name.split()
    if not words or len(words[-1]) < 4:
        return None
    return " ".join(words[:-1] + [words[-1][:3]])


def typo1(name: str, rng: random.Random) -> str | None:
    words = name.split()
    k = max(range(len(words)), key=lambda i: len(words[i]), default=None)
    if k is None or len(words[k]) < 5:
        return None
    w = words[k]
    i = rng.randrange(1, len(w) - 1)  # keep the first letter, like most typing slips
    op = rng.choice(["sub", "del", "ins", "swap"])
    if op == "sub":
        w = w[:i] + rng.choice([c for c in LETTERS if c != w[i].lower()]) + w[i + 1:]
    elif op == "del":
        w = w[:i] + w[i + 1:]
    elif op == "ins":
        w = w[:i] + rng.choice(LETTERS) + w[i:]
    else:
        w = w[:i] + w[i + 1] + w[i] + w[i + 2:]
    words[k] = w
    return " ".join(words)


def build_queries(ix, per_kind: int, seed: int = 7):
    rng = random.Random(seed)
    groups = {"osm places": [], "osm pois": [], "osm streets": [], "osm addresses": [], "world cities": []}
    for row in range(ix.n):
        src, index = ix.cols["source"][row], ix.cols["index"][row]
        if not ix.cols["name"][row]:  # unnamed POIs are found by category (see category_queries)
            continue
        if src == "osm" and index in ("places", "pois", "streets", "addresses"):
            groups[f"osm {index}"].append(row)
        elif src == "geonames":
            groups["world cities"].append(row)
    queries = []  # (group, kind, q, row)
    for group, rows in groups.items():
        rng.shuffle(rows)
        rows = rows[: per_kind]
        for row in rows:
            name = ix.cols["name"][row]
            queries.append((group, "full", name, row))
            if (p := prefix3(name)) is not None:
                queries.append((group, "prefix3", p, row))
            if (t := typo1(name, rng)) is not None:
                queries.append((group, "typo1", t, row))
            if strip_accents(name) != name:
                queries.append((group, "no_accent", strip_accents(name), row))
            en = ix.cols["name_en"][row]
            if en and normalise(en) != normalise(name):
                queries.append((group, "english", en, row))
    return queries


def is_hit(ix, result: dict, row: int) -> bool:
    if result["id"] == ix.cols["id"][int(ix.canon[row])] or result["canonical_id"] == ix.cols["id"][int(ix.canon[row])]:
        return True
    return normalise(result["name"] or "") == normalise(ix.cols["name"][row]) and result["index"] == ix.cols["index"][row]


AMBIGUOUS = 5  # a 3-letter prefix that more than 5 distinct names start with cannot single one out in a top 5


class NamesSharingPrefix:
    """How many distinct places (canonical groups) of the index have a name or English name that starts
    with a query: a measure of how ambiguous a prefix is, independent of any ranking. "Sch" in
    Liechtenstein starts 100+ names (Schaan, Schellenberg, Schlossweg, ...): no ranking can put a random
    one of them in a top 5, so prefix3 results are also reported separately for prefixes that at most
    AMBIGUOUS names share (where a good ranking must find the document) and for the others."""

    def __init__(self, ix):
        pairs = set()
        for row in range(ix.n):
            c = int(ix.canon[row])
            for name in (ix.cols["name"][row], ix.cols["name_en"][row]):
                if name:
                    pairs.add((normalise(name), c))
        self.pairs = sorted(pairs)
        self.keys = [p[0] for p in self.pairs]

    def count(self, q: str) -> int:
        import bisect

        qn = normalise(q)
        lo = bisect.bisect_left(self.keys, qn)
        hi = bisect.bisect_left(self.keys, qn + "\U0010ffff")
        return len({c for _, c in self.pairs[lo:hi]})


def category_queries(ix):
    """(preset id, language, word, lat, lon, member canonical rows) for every category with 3+ POIs."""
    out = []
    for c, pid in enumerate(getattr(ix, "cat_ids", [])):
        rows = ix.category_rows([c])
        members = set(np.asarray(ix.canon[rows]).tolist())
        if len(members) < 3:
            continue
        lat, lon = float(np.median(ix.lat[rows])), float(np.median(ix.lon[rows]))
        for lang, word in ix.cat_meta["names"][pid].items():
            out.append((pid, lang, word, lat, lon, members))
    return out


def run_categories(engine, ix, nominatim=None) -> None:
    from geoengine.geo import haversine_m

    qs = category_queries(ix)
    if not qs:
        print("\ncategories: the bundle has none (built before issue 15)")
        return
    by_lang: dict[str, list[int]] = {}
    times = []
    nomi: dict[str, list[int]] = {}
    for pid, lang, word, lat, lon, members in qs:
        t = time.perf_counter()
        res = engine.search(word, lat=lat, lon=lon, size=5)["results"]
        times.append(time.perf_counter() - t)
        hits = sum(ix.row_of(r["id"]) in members for r in res)
        d = haversine_m(lat, lon, np.array([r["location"]["lat"] for r in res]), np.array([r["location"]["lon"] for r in res]))
        plain = engine.search(word, size=5)["results"]
        in_region = bool(plain) and all(ix.row_of(r["id"]) in members for r in plain)
        s = by_lang.setdefault(lang, [0, 0, 0, 0])
        s[0] += 1
        s[1] += hits >= 3
        s[2] += bool(len(d)) and bool(np.all(np.diff(d) >= -1.0))
        s[3] += in_region
        if nominatim is not None:
            tags = {f"{k}={v}" for k, v in ix.cat_meta["tags"][pid].items()}
            got = nominatim_search(nominatim, word, lat, lon)
            n = nomi.setdefault(lang, [0, 0])
            n[0] += 1
            n[1] += sum(f"{r.get('category')}={r.get('type')}" in tags for r in got) >= 3
    print(f"\ncategory words ({len(qs)} queries: {len({q[0] for q in qs})} categories with 3+ POIs x languages)")
    print(f"{'lang':<6}{'n':>5}{'>=3 in top 5':>14}{'nearest 1st':>13}{'no loc: all of it':>19}"
          + (f"{'Nominatim >=3':>15}" if nominatim else ""))
    tot = [0, 0, 0, 0]
    for lang in sorted(by_lang):
        s = by_lang[lang]
        tot = [a + b for a, b in zip(tot, s, strict=True)]
        extra = f"{100 * nomi[lang][1] / nomi[lang][0]:>14.1f}%" if nominatim else ""
        print(f"{lang:<6}{s[0]:>5}{100 * s[1] / s[0]:>13.1f}%{100 * s[2] / s[0]:>12.1f}%{100 * s[3] / s[0]:>18.1f}%{extra}")
    print(f"{'all':<6}{tot[0]:>5}{100 * tot[1] / tot[0]:>13.1f}%{100 * tot[2] / tot[0]:>12.1f}%{100 * tot[3] / tot[0]:>18.1f}%")
    ms = np.array(times) * 1000
    print(f"category queries: p50 {np.percentile(ms, 50):.2f} ms, p95 {np.percentile(ms, 95):.2f} ms")


def largest_cities(n: int = 100):
    """(geonameid, name) of the n most populous places of the GeoNames table in ../shared/data."""
    from geoengine.search import geonames as gn

    path = Path(__file__).resolve().parents[2] / "shared" / "data" / "world" / "geonames-cities500.txt.gz"
    places = gn.read_places(path)
    order = np.argsort(-places.population, kind="stable")[:n]
    return [(str(places.ids[i]), places.name[i]) for i in order.tolist()]


def run_region_vs_world(engine, ix, queries, nominatim=None) -> None:
    region = getattr(ix, "_region", None)
    if region is None:
        region = np.array([ix.cols["source"][i] == "osm" for i in range(ix.n)])
    stats: dict[str, list[int]] = {}
    misses = []
    nomi = [0, 0]
    for group, kind, q, _row in queries:
        if not group.startswith("osm") or kind not in ("full", "prefix3") or len(normalise(q).replace(" ", "")) < 3:
            continue
        if kind == "prefix3" and len(normalise(q).split()[-1]) < 3:
            continue
        res = engine.search(q, size=5)["results"]
        ok = bool(res) and bool(region[ix.row_of(res[0]["id"])])
        s = stats.setdefault(f"{group} {kind}", [0, 0])
        s[0] += 1
        s[1] += ok
        if not ok and len(misses) < 8:
            misses.append((q, res[0]["name"] if res else None))
        if nominatim is not None:
            nomi[0] += 1
            nomi[1] += bool(nominatim_search(nominatim, q))
    print("\nregion before world (no location): a regional document first")
    tot = [0, 0]
    for k in sorted(stats):
        s = stats[k]
        tot = [a + b for a, b in zip(tot, s, strict=True)]
        print(f"  {k:<26}{s[0]:>6}{100 * s[1] / s[0]:>8.1f}%")
    if tot[0]:
        print(f"  {'all regional queries':<26}{tot[0]:>6}{100 * tot[1] / tot[0]:>8.1f}%   e.g. missed: {misses[:5]}")
    if nominatim is not None and nomi[0]:
        print(f"  Nominatim answers (any result) {100 * nomi[1] / nomi[0]:.1f}% of them")
    cities = largest_cities()
    first = 0
    wrong = []
    for gid, name in cities:
        res = engine.search(name, size=3)["results"]
        ok = bool(res) and (res[0]["id"] == f"geonames:{gid}" or
                            ix.cols["id"][int(ix.canon[ix.row_of(f"geonames:{gid}")])] == res[0]["id"]
                            if ix.row_of(f"geonames:{gid}") is not None else False)
        first += ok
        if not ok:
            wrong.append((name, res[0]["name"] if res else None))
    print(f"  world's {len(cities)} largest cities by exact name: {100 * first / len(cities):.1f}% first; not: {wrong[:8]}")


def nominatim_search(base: str, q: str, lat=None, lon=None) -> list[dict]:
    import httpx

    params = {"q": q, "format": "jsonv2", "limit": 5}
    if lat is not None:
        params["viewbox"] = f"{lon - 0.05},{lat + 0.05},{lon + 0.05},{lat - 0.05}"
    try:
        return httpx.get(f"{base.rstrip('/')}/search", params=params, timeout=10).json()
    except (httpx.HTTPError, ValueError):
        return []


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--region", default="andorra")
    ap.add_argument("--bundle")
    ap.add_argument("--places", default="important", choices=["important", "region", "all"])
    ap.add_argument("--per-kind", type=int, default=200)
    ap.add_argument("--http", action="store_true", help="also time GET /search through the in-process client")
    ap.add_argument("--nominatim", help="base URL of a Nominatim serving the same extract (category and regional queries)")
    ap.add_argument("--skip-names", action="store_true",
                    help="skip the name query set and engine timings (categories, region vs world and --http only)")
    ap.add_argument("--skip-issue15", action="store_true", help="skip the category and region-vs-world parts")
    args = ap.parse_args()
    from geoengine.config import Settings

    home = Path(tempfile.mkdtemp(prefix="ge-bench-search-"))
    settings = Settings(home=home, data_mirror=str(Path(__file__).resolve().parents[2] / "shared" / "data"),
                        search_places=args.places, gateway_host="bench.local")
    if args.bundle:
        bundle = Path(args.bundle)
    else:
        from geoengine.bundler.pipeline import build, default_out, resolve_inputs
        from geoengine.progress import NullProgress

        inputs = resolve_inputs(args.region, settings, progress=NullProgress())
        t0 = time.perf_counter()
        bundle = build(inputs, default_out(inputs, settings), settings, progress=NullProgress())
        print(f"built {bundle} in {time.perf_counter() - t0:.1f} s")
    engine = geoengine.open(bundle, settings=settings)
    m = engine.bundle.manifest["stages"]["search"]
    docs = m["counts"]["documents"]
    print(f"search stage: {docs:,} documents, {m['seconds']:.1f} s, {m['info']['bytes'] / 1e6:.1f} MB "
          f"({m['seconds'] / docs * 1e5:.1f} s and {m['info']['bytes'] / docs * 1e5 / 1e6:.1f} MB per 100k documents)")
    t0 = time.perf_counter()
    ix = engine.search_index
    t1 = time.perf_counter()
    engine.warm()
    print(f"index open {1000 * (t1 - t0):.0f} ms, warm {1000 * (time.perf_counter() - t1):.0f} ms")
    bbox = engine.bbox
    centre = ((bbox[1] + bbox[3]) / 2, (bbox[0] + bbox[2]) / 2) if bbox else (None, None)
    queries = build_queries(ix, args.per_kind)
    if not args.skip_issue15:
        run_categories(engine, ix, args.nominatim)
        run_region_vs_world(engine, ix, queries, args.nominatim)
    if not args.skip_names:
        shared = NamesSharingPrefix(ix)
        stats: dict[tuple[str, str], list] = {}
        times = []
        for group, kind, q, row in queries:
            if len(q.strip()) < 2:
                continue
            lat, lon = centre if group.startswith("osm") else (None, None)
            t = time.perf_counter()
            res = engine.search(q, lat=lat, lon=lon, size=5)["results"]
            times.append(time.perf_counter() - t)
            hits = [is_hit(ix, r, row) for r in res]
            kinds = [kind]
            if kind == "prefix3":
                kinds.append("prefix3 ≤5" if shared.count(q) <= AMBIGUOUS else "prefix3 >5")
            for k in kinds:
                s = stats.setdefault((group, k), [0, 0, 0])
                s[0] += 1
                s[1] += bool(hits[:1] and hits[0])
                s[2] += any(hits)
        print(f"\n{'group':<14}{'kind':<11}{'n':>6}{'top-1':>9}{'top-5':>9}")
        for kind in ("full", "prefix3", "prefix3 ≤5", "prefix3 >5", "typo1", "no_accent", "english"):
            tot = [0, 0, 0]
            for group in ("osm places", "osm pois", "osm streets", "osm addresses", "world cities"):
                s = stats.get((group, kind))
                if not s:
                    continue
                print(f"{group:<14}{kind:<11}{s[0]:>6}{100 * s[1] / s[0]:>8.1f}%{100 * s[2] / s[0]:>8.1f}%")
                tot = [a + b for a, b in zip(tot, s, strict=True)]
            if tot[0]:
                print(f"{'all':<14}{kind:<11}{tot[0]:>6}{100 * tot[1] / tot[0]:>8.1f}%{100 * tot[2] / tot[0]:>8.1f}%")
        ms = np.array(times) * 1000
        print(f"\nengine.search over {len(ms)} queries: p50 {np.percentile(ms, 50):.2f} ms, p95 {np.percentile(ms, 95):.2f} ms, "
              f"mean {statistics.fmean(ms):.2f} ms")
        rtimes = []
        rng = random.Random(3)
        for _ in range(300):
            row = rng.randrange(ix.n)
            t = time.perf_counter()
            engine.reverse(lat=float(ix.lat[row]) + 0.001, lon=float(ix.lon[row]), radius="2km")
            rtimes.append(time.perf_counter() - t)
        rms = np.array(rtimes) * 1000
        print(f"engine.reverse over 300 points: p50 {np.percentile(rms, 50):.2f} ms, p95 {np.percentile(rms, 95):.2f} ms")
    if args.http:
        from starlette.testclient import TestClient

        from geoengine.gateway import KeyStore
        from geoengine.server.app import create_app

        ks = KeyStore(settings.state)
        key, _ = ks.create("unlimited", "bench")
        client = TestClient(create_app(engine, settings, ks))
        client.headers.update({"X-Gateway-Key": key, "X-Gateway-Host": settings.gateway_host})
        ht = []
        for _, _, q, _ in queries[:100]:  # warm-up (caches, first imports), not timed
            if len(q.strip()) >= 2:
                client.get("/search", params={"q": q, "size": 5})
        for _, _, q, _ in queries[:500]:
            if len(q.strip()) < 2:
                continue
            t = time.perf_counter()
            r = client.get("/search", params={"q": q, "size": 5})
            ht.append(time.perf_counter() - t)
            assert r.status_code == 200, r.text
        hms = np.array(ht) * 1000
        print(f"GET /search (in-process client) over {len(hms)} queries: p50 {np.percentile(hms, 50):.2f} ms, "
              f"p95 {np.percentile(hms, 95):.2f} ms, {len(hms) / sum(ht):.0f} requests/s")


if __name__ == "__main__":
    main()
