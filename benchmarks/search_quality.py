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
The Nominatim comparison is not part of this script yet (see docs/search.md).
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--region", default="andorra")
    ap.add_argument("--bundle")
    ap.add_argument("--places", default="important", choices=["important", "region", "all"])
    ap.add_argument("--per-kind", type=int, default=200)
    ap.add_argument("--http", action="store_true", help="also time GET /search through the in-process client")
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
        engine.reverse(float(ix.lat[row]) + 0.001, float(ix.lon[row]), radius="2km")
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
