"""Geocoding quality: addresses as people type them, with truth taken from the extracts themselves.

For each extract (Liechtenstein's Geofabrik extract, Nominatim's own test extract, Andorra) every object
with `addr:housenumber` and `addr:street` (or `addr:place`) is a truth address at its location (a way's
vertex mean); its town is the smallest administrative boundary (admin_level 4-8) that contains it. Kinds
of queries:

- `street_num_city`  "Rheinstrasse 46 Balzers"
- `city_street_num`  "Balzers, Rheinstrasse 46"
- `num_street_city`  "46 Rheinstrasse, Balzers"
- `street_num`       "Rheinstrasse 46" (the town left out)
- `missing_number`   a number the street does not have (its highest plus 7): the top result must be the
                     street itself (the object of that name without a house number: the street, or the
                     place of addr:place addresses), never another numbered object;
- `structured`       street="Rheinstrasse 46", city="Balzers" (+ postalcode when the object has one).

The `ceiling` column is the most hits any geocoder's top-1 can reach (see `ceiling()`): without the town,
one street and number can be in several municipalities, and the same query text gets one answer.

A query with a number is a hit when the top-1 result has that house number and lies within 50 m of the
object (or of another object of the extract with the same street, number and town: an address node and
its building, a school and its house, a building numbered "56;58" are all that address). Targets (issue 26): existing addresses >= 98 %, missing numbers >= 99 %, and at least Nominatim's
rate for every kind when a Nominatim 5 peer serves the same extract (`--nominatim NAME=URL`, e.g. the
servers of benchmarks/peers/nominatim.sh: liechtenstein :8088, apidb :8089, andorra :8090). geoengine runs
in process (`engine.geocode`'s geocoder over the extract's search index, built here once into
benchmarks/.cache/geocode/<name>); Nominatim over HTTP (format=jsonv2, addressdetails=1).

    PYTHONPATH=. .venv/bin/python benchmarks/geocode_quality.py [--sample 0] [--nominatim apidb=http://127.0.0.1:8089 ...]

Results: a table per extract and kind, and JSON in benchmarks/results/geocode_quality.json.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import numpy as np
from rapidfuzz import fuzz

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from geoengine.geo import haversine_m  # noqa: E402
from geoengine.search.text import normalise  # noqa: E402

EXTRACTS = {
    "liechtenstein": "liechtenstein/valhalla-liechtenstein-latest.osm.pbf",
    "apidb": "liechtenstein/nominatim-apidb-test-data.osm.pbf",
    "andorra": "andorra/andorra.osm.pbf",
}
KINDS = ("street_num_city", "city_street_num", "num_street_city", "street_num", "missing_number", "structured")
#: the kinds whose address exists (the issue's ">= 98 % of queries" counts them together)
EXISTING = ("street_num_city", "city_street_num", "num_street_city", "street_num", "structured")
ALL_EXISTING = "existing_all"
HIT_M = 50.0
SAME_STREET = 80.0


def data_dir() -> Path:
    import os

    m = os.environ.get("GEOENGINE_DATA_MIRROR")
    return Path(m) if m and Path(m).is_dir() else (ROOT.parent / "shared" / "data")


def build_index(name: str, pbf: Path, cache: Path) -> Path:
    """The search index of an extract (documents + index, as the bundle's search stage writes them)."""
    from geoengine.search.documents import build_documents
    from geoengine.search.write import write_index

    out = cache / name
    if (out / "canon.npy").exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    d = data_dir()
    ds, _ = build_documents(pbf, d / "world/geonames-cities500.txt.gz", d / "world/geonames_admin1.json")
    write_index(out, ds)
    return out


def truth(pbf: Path) -> list[dict]:
    """The extract's addresses: {street, number, lat, lon, town, postcode} (town: the smallest admin
    boundary of level 4..8 around it)."""
    import osmium
    import shapely

    # the boundaries, read here with osmium's area assembler (not through geoengine's reader: the truth
    # must not share the code it judges)
    boundaries = []  # (name, admin_level, geometry)
    wkb = osmium.geom.WKBFactory()
    for area in osmium.FileProcessor(str(pbf)).with_areas().with_filter(osmium.filter.KeyFilter("boundary")):
        if not area.is_area() or area.from_way():
            continue
        t = area.tags
        if t.get("boundary") != "administrative" or not t.get("admin_level", "").isdigit() or "name" not in t:
            continue
        try:
            geom = shapely.from_wkb(wkb.create_multipolygon(area))
        except Exception:  # an incomplete boundary of a clipped extract
            continue
        boundaries.append((t["name"], int(t["admin_level"]), geom))
    out = []
    fp = osmium.FileProcessor(str(pbf)).with_locations().with_filter(osmium.filter.KeyFilter("addr:housenumber"))
    for o in fp:
        if o.is_relation():
            continue
        t = dict(o.tags)
        street = t.get("addr:street") or t.get("addr:place")
        hn = t.get("addr:housenumber", "").strip()
        if not street or not hn:
            continue
        if o.is_node():
            lat, lon = o.location.lat, o.location.lon
        else:
            pts = [(n.lat, n.lon) for n in o.nodes if n.location.valid()]
            if not pts:
                continue
            arr = np.asarray(pts[:-1] if len(pts) > 2 and pts[0] == pts[-1] else pts)
            lat, lon = (float(v) for v in arr.mean(axis=0))
        # an object of several numbers ("56;58") is a twin of each of them, never a query of its own
        parts = [p.strip() for p in hn.replace(",", ";").split(";") if p.strip()]
        for part in parts:
            out.append({"id": f"{o.type_str()}{o.id}", "street": street, "number": part, "lat": lat, "lon": lon,
                        "postcode": t.get("addr:postcode"), "by_place": "addr:street" not in t, "town": None,
                        "multi": len(parts) > 1})
    if out and boundaries:
        lat = np.array([a["lat"] for a in out])
        lon = np.array([a["lon"] for a in out])
        level = np.full(len(out), -1)
        for name, admin_level, geom in boundaries:
            if not 4 <= admin_level <= 8:
                continue
            inside = shapely.contains_xy(geom, lon, lat) & (level < admin_level)
            for i in np.flatnonzero(inside).tolist():
                out[i]["town"] = name
                level[i] = admin_level
    return out


def queries(addrs: list[dict], rng: random.Random, sample: int) -> list[dict]:
    """The queries of every kind (`sample` > 0: that many addresses at random)."""
    same: dict[tuple, list[tuple[float, float]]] = {}
    for a in addrs:
        same.setdefault((normalise(a["street"]), normalise(a["number"]), a["town"]), []).append((a["lat"], a["lon"]))
    for a in addrs:
        a["twins"] = same[(normalise(a["street"]), normalise(a["number"]), a["town"])]
    pool = [a for a in addrs if a["town"] and not a["multi"]]
    if sample and len(pool) > sample:
        pool = rng.sample(pool, sample)
    out = []
    for a in pool:
        s, n, c = a["street"], a["number"], a["town"]
        out += [
            {"kind": "street_num_city", "q": f"{s} {n} {c}", "a": a},
            {"kind": "city_street_num", "q": f"{c}, {s} {n}", "a": a},
            {"kind": "num_street_city", "q": f"{n} {s}, {c}", "a": a},
            {"kind": "street_num", "q": f"{s} {n}", "a": a},
        ]
    # structured: every address when sampling, else at least 200 (all of them)
    for a in pool:
        f = {"street": f"{a['street']} {a['number']}", "city": a["town"]}
        if a.get("postcode"):
            f["postalcode"] = a["postcode"]
        out.append({"kind": "structured", "fields": f, "a": a})
    # missing numbers: per street (addr:street) and town, one number above its highest
    streets: dict[tuple[str, str], list[dict]] = {}
    for a in addrs:
        if a["town"] and not a["by_place"]:
            streets.setdefault((a["street"], a["town"]), []).append(a)
    keys = sorted(streets)
    if sample and len(keys) > sample:
        keys = rng.sample(keys, sample)
    for key in keys:
        nums = [int("".join(ch for ch in a["number"] if ch.isdigit()) or 0) for a in streets[key]]
        missing = max(nums) + 7
        if str(missing) in {a["number"] for a in streets[key]}:
            continue
        out.append({"kind": "missing_number", "q": f"{key[0]} {missing} {key[1]}", "a": streets[key][0],
                    "street": key[0], "number": str(missing)})
    return out


def _same_number(got: str | None, want: str) -> bool:
    """The result's house number is the wanted one, or one of its numbers ("56;58")."""
    if got is None:
        return False
    w = normalise(want).replace(" ", "")
    return any(normalise(g).replace(" ", "") == w for g in [got, *got.replace(",", ";").split(";")])


def judge(query: dict, top: dict | None) -> bool:
    """top: {housenumber, lat, lon, street_name, is_street} of the first result (None: no result)."""
    if top is None:
        return False
    if query["kind"] == "missing_number":
        # the street's name as the street object spells it may differ from addr:street by an abbreviation or a
        # letter ("St. Martins-Ring" / "Sankt Martins-Ring", "Kappeliweg" / "Kappileweg"): 80 % similar,
        got, want = normalise(top["street_name"] or "").replace(" ", ""), normalise(query["street"]).replace(" ", "")
        # or one the other's abbreviation ("Zollstr." / "Zollstrasse")
        return not top["housenumber"] and bool(got) and (fuzz.ratio(got, want) >= SAME_STREET
                                                         or got.startswith(want) or want.startswith(got))
    if not _same_number(top["housenumber"], query["a"]["number"]):
        return False
    # one address is often mapped twice (an address node and a building, a school and its house): any object
    # of the extract with this street, number and town is the address
    twins = query["a"]["twins"]
    d = haversine_m(top["lat"], top["lon"], np.array([t[0] for t in twins]), np.array([t[1] for t in twins]))
    return bool((d <= HIT_M).any())


def ceiling(qs: list[dict], addrs: list[dict]) -> dict[str, float]:
    """Per kind, the most hits any geocoder's top-1 can be expected to reach: one query text gets one answer,
    and every address of the extract that the same text describes (the same street and number, and town
    where the query names it; "Landstrasse 92" without the town is in five municipalities) is equally what
    the query may mean. An answer at one place hits the addresses whose twins lie within HIT_M of it: a
    query counts (the largest such group) / (the addresses its text describes). On a sample this is the
    expected value over the addresses sampled. Missing numbers: every query (one street answers its text)."""
    def key(kind: str, a: dict) -> tuple:
        k = (normalise(a["street"]), normalise(a["number"]))
        return k if kind == "street_num" else (*k, a["town"])

    pool = [a for a in addrs if a["town"] and not a["multi"]]
    out = {k: 0.0 for k in KINDS}
    memo: dict[tuple, float] = {}
    for q in qs:
        kind = q["kind"]
        if kind == "missing_number":
            out[kind] += 1.0
            continue
        k = (kind == "street_num", *key(kind, q["a"]))
        if k not in memo:
            members = [a for a in pool if key(kind, a) == key(kind, q["a"])] or [q["a"]]
            best = 0
            for lat, lon in {t for m in members for t in m["twins"]}:
                best = max(best, sum(1 for m in members if (haversine_m(
                    lat, lon, np.array([t[0] for t in m["twins"]]), np.array([t[1] for t in m["twins"]])) <= HIT_M).any()))
            memo[k] = best / len(members)
        out[kind] += memo[k]
    return out


HIERARCHY_KEYS = ("settlement", "county", "postcode", "country")


def _hierarchy_keys(address: dict) -> dict[str, str | None]:
    """The compared parts of an address object: the settlement (city, else town, else village: the same order on
    both sides), county, postcode and country, normalised."""
    settlement = address.get("city") or address.get("town") or address.get("village")
    vals = {"settlement": settlement, "county": address.get("county"), "postcode": address.get("postcode"),
            "country": address.get("country")}
    return {k: normalise(v) if v else None for k, v in vals.items()}


def hierarchy(geo, client, url: str, n: int, rng: random.Random) -> dict:
    """Agreement of geoengine's `address` object with Nominatim's addressdetails on `n` random address and POI
    documents of OSM objects (asked by their OSM ids through Nominatim's /lookup, 50 a request): per key and
    for all four keys together (a key one side has and the other lacks disagrees)."""
    ix = geo.ix
    cls = geo.doc_class()
    rows = [r for r in np.flatnonzero((cls == 1) | (cls == 3)).tolist() if ix.osm_type(r) in ("N", "W", "R")]
    rows = rng.sample(rows, min(n, len(rows)))
    ids = {f"{ix.osm_type(r)}{ix.osm_id(r)}": r for r in rows}
    theirs: dict[str, dict] = {}
    keys = list(ids)
    for i in range(0, len(keys), 50):
        r = client.get(url.rstrip("/") + "/lookup", params={"osm_ids": ",".join(keys[i:i + 50]), "format": "jsonv2",
                                                              "addressdetails": 1})
        if r.status_code == 200:
            for t in r.json():
                theirs[f"{t['osm_type'][0].upper()}{t['osm_id']}"] = t.get("address") or {}
    agree = {k: 0 for k in (*HIERARCHY_KEYS, "all")}
    asked = 0
    fails = []
    for key, row in ids.items():
        if key not in theirs:  # an object Nominatim does not hold as a place of its own (merged into another)
            continue
        asked += 1
        mine, other = _hierarchy_keys(ix.address(row)), _hierarchy_keys(theirs[key])
        same = {k: mine[k] == other[k] for k in HIERARCHY_KEYS}
        for k in HIERARCHY_KEYS:
            agree[k] += same[k]
        agree["all"] += all(same.values())
        if not all(same.values()):
            fails.append((key, {k: (mine[k], other[k]) for k in HIERARCHY_KEYS if not same[k]}))
    return {"objects": len(ids), "compared": asked, "agree": agree,
            "rate": {k: round(v / asked, 4) if asked else None for k, v in agree.items()}, "examples": fails}


def geoengine_top(geo, query: dict) -> dict | None:
    if "fields" in query:
        found = geo.geocode(None, limit=1, **query["fields"])
    else:
        found = geo.geocode(query["q"], limit=1)
    if not found:
        return None
    row, _, hn, _ = found[0]
    cls = int(geo.doc_class()[row])
    return {"housenumber": hn, "lat": float(geo.ix._lat[row]), "lon": float(geo.ix._lon[row]),
            "street_name": geo.ix.cols["name"][row], "is_street": cls == 2}


def nominatim_top(client, url: str, query: dict) -> dict | None:
    params = {"format": "jsonv2", "addressdetails": 1, "limit": 1}
    if "fields" in query:
        params.update(query["fields"])
    else:
        params["q"] = query["q"]
    r = client.get(url.rstrip("/") + "/search", params=params)
    if r.status_code != 200:
        return None
    res = r.json()
    if not res:
        return None
    t = res[0]
    addr = t.get("address") or {}
    is_street = t.get("category") == "highway" or t.get("addresstype") == "road"
    return {"housenumber": addr.get("house_number"), "lat": float(t["lat"]), "lon": float(t["lon"]),
            "street_name": t.get("name") or addr.get("road"), "is_street": is_street and not addr.get("house_number")}


def main() -> int:
    ap = argparse.ArgumentParser(description="Geocoding quality on the extracts' own addresses (issue 26).")
    ap.add_argument("--extracts", nargs="+", default=list(EXTRACTS), choices=list(EXTRACTS))
    ap.add_argument("--sample", type=int, default=0, help="addresses (and streets) per extract at random; 0 = all")
    ap.add_argument("--seed", type=int, default=26)
    ap.add_argument("--nominatim", nargs="*", default=[], metavar="NAME=URL",
                    help="a Nominatim 5 peer serving that extract (benchmarks/peers/nominatim.sh)")
    ap.add_argument("--cache", type=Path, default=ROOT / "benchmarks" / ".cache" / "geocode")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "geocode_quality.json")
    ap.add_argument("--failures", type=int, default=0, help="print this many failed queries per kind (and differing "
                                                           "objects of --hierarchy)")
    ap.add_argument("--hierarchy-only", action="store_true",
                    help="with --hierarchy: only the hierarchy comparison, not the address queries")
    ap.add_argument("--hierarchy", type=int, default=0, metavar="N",
                    help="with a Nominatim peer: compare the address objects (settlement, county, postcode, country) "
                         "of N random address/POI objects with Nominatim's addressdetails (/lookup)")
    a = ap.parse_args()
    peers = dict(p.split("=", 1) for p in a.nominatim)
    from geoengine.search.geocode import geocoder_for
    from geoengine.search.index import SearchIndex

    report: dict = {}
    for name in a.extracts:
        pbf = data_dir() / EXTRACTS[name]
        t0 = time.perf_counter()
        ix = SearchIndex(build_index(name, pbf, a.cache))
        ix.warm()
        geo = geocoder_for(ix)
        addrs = [] if a.hierarchy_only else truth(pbf)
        qs = queries(addrs, random.Random(a.seed), a.sample)
        print(f"\n{name}: {len(addrs)} addresses, {len(qs)} queries (index ready in {time.perf_counter() - t0:.1f} s)")
        engines = {"geoengine": lambda q, g=geo: geoengine_top(g, q)}
        client = None
        if name in peers:
            import httpx

            client = httpx.Client(timeout=30.0)
            url = peers[name]
            engines["nominatim"] = lambda q, c=client, u=url: nominatim_top(c, u, q)
        res: dict = {}
        for eng, fn in engines.items():
            hits: dict[str, list[int]] = {k: [0, 0] for k in KINDS}
            fails: dict[str, list[str]] = {k: [] for k in KINDS}
            t1 = time.perf_counter()
            for q in qs:
                ok = judge(q, fn(q))
                hits[q["kind"]][0] += ok
                hits[q["kind"]][1] += 1
                if not ok and len(fails[q["kind"]]) < a.failures:
                    fails[q["kind"]].append(q.get("q") or json.dumps(q["fields"], ensure_ascii=False))
            secs = time.perf_counter() - t1
            res[eng] = {k: {"hits": h, "queries": n, "rate": round(h / n, 4) if n else None} for k, (h, n) in hits.items()}
            # the first target counts every query whose address exists, whatever its form
            h_ex, n_ex = (sum(hits[k][i] for k in EXISTING) for i in (0, 1))
            res[eng][ALL_EXISTING] = {"hits": h_ex, "queries": n_ex, "rate": round(h_ex / n_ex, 4) if n_ex else None}
            res[eng]["_ms_per_query"] = round(1000 * secs / max(len(qs), 1), 2)
            if a.failures:
                for k, f in fails.items():
                    for s in f:
                        print(f"   {eng} miss [{k}] {s}")
        if client is not None and a.hierarchy:
            h = hierarchy(geo, client, peers[name], a.hierarchy, random.Random(a.seed))
            res["_hierarchy"] = h
            print(f"hierarchy vs Nominatim's addressdetails ({h['compared']} of {h['objects']} random address/POI "
                  "objects that Nominatim holds): " + ", ".join(f"{k} {h['agree'][k]} ({100 * h['rate'][k]:.1f}%)"
                                                               for k in (*HIERARCHY_KEYS, "all") if h["rate"][k] is not None))
            for key, diff in h["examples"][:a.failures]:
                print(f"   differs {key}: {diff}")
        if client is not None:
            client.close()
        top = ceiling(qs, addrs)
        top[ALL_EXISTING] = sum(top[k] for k in EXISTING)
        res["_ceiling"] = top
        report[name] = res
        engines_done = [e for e in res if not e.startswith("_")]
        head = f"{'kind':18s}" + "".join(f"{e:>22s}" for e in engines_done) + f"{'ceiling':>22s}"
        print(head)
        for k in (*KINDS, ALL_EXISTING):
            line = f"{k:18s}"
            for e in engines_done:
                r = res[e][k]
                rate = f"{100 * r['rate']:.1f}%" if r["rate"] is not None else "-"
                line += f"{r['hits']}/{r['queries']} {rate}".rjust(22)
            n = res[engines_done[0]][k]["queries"]
            line += (f"{top[k]:.0f}/{n} {100 * top[k] / n:.1f}%" if n else "-").rjust(22)
            print(line)
        print(f"{'ms/query':18s}" + "".join(f"{res[e]['_ms_per_query']:>22.2f}" for e in engines_done))
        if "nominatim" not in res:
            print("   (no Nominatim peer for this extract: geoengine alone)")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(report, indent=1), encoding="utf-8")
    print(f"\nwrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
