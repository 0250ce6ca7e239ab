"""Writing the search index into a bundle (the files `index.SearchIndex` reads).

Files under `<bundle>/search/` (all memory-mapped or read in one go on open):

- string columns (see `store.py`): `id`, `index`, `doc_type`, `name`, `name_en`, `display_name`,
  `place_class`, `category`, `source`, and `names` (every normalised name variant of a document,
  joined by U+001F, the primary name first) used for the final text score;
- `lat.npy`, `lon.npy` (float64), `importance.npy` (float32), `canon.npy` (int32 row of each
  document's canonical document), `kind.npy` (int8: 0 place, 1 poi), `id_order.npy` (rows sorted by id);
- `vocab.txt`, `vocab_len.npy` (the sorted normalised tokens, one a line), `post_ptr.npy` / `post_doc.npy` (CSR
  postings: documents of token t are `post_doc[post_ptr[t]:post_ptr[t+1]]`). Tokens of one prefix
  are contiguous in the sorted vocabulary, so a prefix is one slice of postings;
- `items.npy` ((m, 4) float64 segments lon1, lat1, lon2, lat2; a point is a zero-length segment),
  `item_doc.npy` (int32); the R-tree (rtree) over the items' boxes is bulk-loaded from them in memory.
"""

from __future__ import annotations

import bisect
import hashlib
import json
from array import array
from itertools import repeat
from pathlib import Path

import numpy as np

from geoengine.bundler import heap
from geoengine.search.store import write_strings
from geoengine.search.text import normalise

SEP = "\x1f"
TYPES = {"place": 0, "poi": 1}
STRING_COLUMNS = ("id", "index", "doc_type", "name", "name_en", "display_name", "place_class", "category", "source")
PREFIX_LENGTHS = range(4, 17)

def write_index(folder: Path, ds, *, release: bool = False) -> tuple[list[str], dict]:
    """Write the index of DocSet `ds` under `folder`; returns (file names, counts). `release`: drop each of
    ds's columns once written and no longer read (the build stage's last use of them: its peak comes while the
    postings are sorted, and the display names and name variants are tens of MB at 64 copies)."""
    n = len(ds)
    files: list[str] = []
    for col in STRING_COLUMNS:
        files += write_strings(folder, col, getattr(ds, col))
    kind = np.asarray([TYPES.get(t, 0) for t in ds.doc_type], np.int8)
    unnamed_pois = int(sum(1 for i in range(n) if not ds.name[i] and ds.index[i] == "pois"))
    if len(ds.region) != n:
        ds.region = [s == "osm" for s in ds.source]
    if release:
        for col in ("doc_type", "display_name", "place_class", "category", "source", "index"):
            setattr(ds, col, None)
        heap.release()
    norm_names = []
    tok_of: dict[str, int] = {}
    # (token, document) pairs in typed arrays (4 bytes a pair each; lists of Python ints took 8 a pair and more
    # at the stage's peak)
    pair_tok = array("i")
    pair_doc = array("i")
    for i, variants in enumerate(ds.names):
        seen_v: list[str] = []
        for v in [ds.name[i]] + variants + ([ds.name_en[i]] if ds.name_en[i] else []):  # the name first
            nv = normalise(v)
            if nv and nv not in seen_v:
                seen_v.append(nv)
        norm_names.append(SEP.join(seen_v))
        toks = {t for v in seen_v for t in v.split()}
        pair_tok.extend(tok_of.setdefault(t, len(tok_of)) for t in toks)
        pair_doc.extend(repeat(i, len(toks)))
    if release:
        ds.names = None
        heap.release()
    files += write_strings(folder, "names", norm_names)
    # exact-name lookup: stable 64-bit hashes of each document's normalised name and English name, sorted
    keys, key_doc = array("q"), array("i")
    for i in range(n):
        for v in {normalise(ds.name[i] or ""), normalise(ds.name_en[i] or "")} - {""}:
            keys.append(name_hash(v))
            key_doc.append(i)
    keys_a = np.frombuffer(keys, np.int64) if len(keys) else np.zeros(0, np.int64)
    order = np.argsort(keys_a, kind="stable")
    np.save(folder / "name_key.npy", keys_a[order])
    np.save(folder / "name_key_doc.npy", (np.frombuffer(key_doc, np.int32) if len(key_doc) else np.zeros(0, np.int32))[order])
    del keys_a, keys, key_doc, order
    files += ["name_key.npy", "name_key_doc.npy"]
    vocab = sorted(tok_of)
    rank = np.empty(len(vocab), np.int32)
    for r, t in enumerate(vocab):
        rank[tok_of[t]] = r
    del tok_of
    pt = rank[np.frombuffer(pair_tok, np.int32)] if len(pair_tok) else np.zeros(0, np.int32)
    del pair_tok, rank
    # the postings: the pairs come in document order, so a stable sort by token gives each token's documents
    # in order, as sorting by (token, document) would
    ptr = np.zeros(len(vocab) + 1, np.int64)
    np.cumsum(np.bincount(pt, minlength=len(vocab)), out=ptr[1:])
    order = np.argsort(pt, kind="stable")
    del pt
    pd = np.frombuffer(pair_doc, np.int32)[order] if len(order) else np.zeros(0, np.int32)
    del order, pair_doc
    (folder / "vocab.txt").write_text("".join(t + "\n" for t in vocab), encoding="utf-8")
    files += write_prefix_tables(folder, vocab)
    # first word of each document's name and English name (vocabulary rows, -1 for none): lets the coarse
    # score of a query tell the names that start with its first word
    rank_of = {t: r for r, t in enumerate(vocab)}
    first_tok = np.full((n, 2), -1, np.int32)
    for i in range(n):
        v = norm_names[i].split(SEP, 1)[0].split()
        if v:
            first_tok[i, 0] = rank_of.get(v[0], -1)
        e = normalise(ds.name_en[i] or "").split()
        if e:
            first_tok[i, 1] = rank_of.get(e[0], -1)
    del rank_of, norm_names
    np.save(folder / "first_tok.npy", first_tok)
    files.append("first_tok.npy")
    np.save(folder / "vocab_len.npy", np.fromiter((len(t) for t in vocab), np.int32, len(vocab)))
    files.append("vocab_len.npy")
    np.save(folder / "post_ptr.npy", ptr)
    np.save(folder / "post_doc.npy", pd)
    np.save(folder / "lat.npy", np.asarray(ds.lat, np.float64))
    np.save(folder / "lon.npy", np.asarray(ds.lon, np.float64))
    np.save(folder / "importance.npy", np.asarray(ds.importance, np.float32))
    np.save(folder / "canon.npy", np.asarray(ds.canonical, np.int32))
    np.save(folder / "kind.npy", kind)
    np.save(folder / "id_order.npy", np.asarray(sorted(range(n), key=ds.id.__getitem__), np.int32))
    files += ["vocab.txt", "post_ptr.npy", "post_doc.npy", "lat.npy", "lon.npy", "importance.npy", "canon.npy",
              "kind.npy", "id_order.npy"]

    # reverse-geocoding items: every document that is not a street is a point; streets are segments
    seg, seg_doc = ds.segments()
    is_street = np.zeros(n, bool)
    is_street[seg_doc] = True
    is_street |= np.fromiter((d.startswith("osm:addrstreet:") for d in ds.id), bool, n)  # no line: no reverse item
    pts = np.flatnonzero(~is_street)
    lat = np.asarray(ds.lat)
    lon = np.asarray(ds.lon)
    n_items = len(pts) + len(seg) if n else 0
    # written piece by piece: the points, then the street segments (one array of both would be a copy of them)
    with open(folder / "items.npy", "wb") as fh:
        np.lib.format.write_array_header_1_0(fh, {"descr": "<f8", "fortran_order": False, "shape": (n_items, 4)})
        if n:
            fh.write(np.column_stack([lon[pts], lat[pts], lon[pts], lat[pts]]).tobytes())
            fh.write(seg.tobytes())
    with open(folder / "item_doc.npy", "wb") as fh:
        np.lib.format.write_array_header_1_0(fh, {"descr": "<i4", "fortran_order": False, "shape": (n_items,)})
        if n:
            fh.write(pts.astype(np.int32).tobytes())
            fh.write(seg_doc.tobytes())
    files += ["items.npy", "item_doc.npy"]
    files += write_extras(folder, ds)
    counts = {"documents": n, "tokens": len(vocab), "postings": int(len(pd)), "reverse_items": n_items,
              "categorised_documents": int(sum(1 for c in ds.categories if c)) if ds.categories else 0,
              "unnamed_pois": unnamed_pois}
    return files, counts


def write_extras(folder: Path, ds) -> list[str]:
    """The files of categories, region, countries and full details (absent in bundles built before them):

    - `categories.json`: the categories present in the bundle (iD preset ids), their tags and names per
      language, and the normalised category phrases of the bundle ({phrase: [by name, by term]});
    - `cat_ptr.npy` / `cat_doc.npy`: CSR rows of each category's documents (category c:
      `cat_doc[cat_ptr[c]:cat_ptr[c+1]]`), in the order of `categories.json` "ids";
    - `region.npy` (int8): 1 for a document of the bundle's own region (OSM, GeoNames near its data);
    - `country.npy` (uint16): ISO 3166-1 alpha-2 code as two bytes (0: unknown);
    - string column `detail`: JSON of each document's names, address parts, tags, categories, OSM ways.
    """
    from geoengine.search.categories import build_terms, vocabulary

    n = len(ds)
    cats = ds.categories or [[] for _ in range(n)]
    ids = sorted({p for c in cats for p in c})
    cid = {p: k for k, p in enumerate(ids)}
    pair_c = [cid[p] for c in cats for p in c]
    pair_d = [i for i, c in enumerate(cats) for _ in c]
    pc, pdoc = np.asarray(pair_c, np.int64), np.asarray(pair_d, np.int32)
    order = np.lexsort((pdoc, pc))
    ptr = np.zeros(len(ids) + 1, np.int64)
    np.cumsum(np.bincount(pc, minlength=len(ids)), out=ptr[1:])
    np.save(folder / "cat_ptr.npy", ptr)
    np.save(folder / "cat_doc.npy", pdoc[order])
    vocab = vocabulary()
    named = np.zeros(len(ids))
    np.add.at(named, pc, np.asarray([1.0 if ds.name[d] else 0.0 for d in pair_d]).reshape(-1))
    share = named / np.maximum(np.bincount(pc, minlength=len(ids)), 1)
    meta = {"ids": ids, "source": vocab["meta"], "named_share": [round(float(x), 3) for x in share],
            "tags": {p: vocab["categories"][p]["tags"] for p in ids},
            "names": {p: vocab["categories"][p]["names"] for p in ids},
            "terms": build_terms(ids, vocab)}
    (folder / "categories.json").write_text(json.dumps(meta, ensure_ascii=False, separators=(",", ":")), encoding="utf-8")
    region = ds.region if len(ds.region) == n else [s == "osm" for s in ds.source]  # (write_index sets it)
    np.save(folder / "region.npy", np.asarray(region, np.int8).reshape(n))
    country = ds.country if len(ds.country) == n else [None] * n
    np.save(folder / "country.npy", np.asarray([country_code_int(c) for c in country], np.uint16).reshape(n))
    details = ds.detail if len(ds.detail) == n else [None] * n

    def detail(i: int) -> str | None:
        """The document's detail JSON with its categories (the last key)."""
        d = details[i]
        if not cats[i]:
            return None if d in (None, "{}") else d
        c = json.dumps(cats[i], ensure_ascii=False, separators=(",", ":"))
        return f'{{"categories":{c}}}' if d in (None, "{}") else f'{d[:-1]},"categories":{c}}}'

    files = write_strings(folder, "detail", (detail(i) for i in range(n)))
    files += write_address_files(folder, ds)
    return files + ["categories.json", "cat_ptr.npy", "cat_doc.npy", "region.npy", "country.npy"]


def write_address_files(folder: Path, ds) -> list[str]:
    """The address data and the administrative hierarchy (absent in bundles built before them):

    - `admin.npy` ((n, 8) int32): the administrative unit of each document per level of
      `admin.ADMIN_LEVELS` (country, state, county, municipality, city, suburb, neighbourhood, postcode), -1 none;
    - units: `unit_slot.npy` (int8 level), `unit_row.npy` (int32 row of the unit's own document, -1 none),
      string columns `unit_key` (address key: country, state, county, town, village, suburb, postcode, ...)
      and `unit_names` (JSON {"name": ..., "name:xx": ...});
    - string columns `housenumber`, `street` (the street an address or POI belongs to), `addr_place`,
      `osm_tag` (`key=value` of the tag that makes the document); `street_row.npy` (int32, the street's row).
    """
    n = len(ds)
    if ds.admin is None or len(ds.admin) != n or len(ds.housenumber) != n:
        return []
    units = ds.units
    np.save(folder / "admin.npy", np.ascontiguousarray(ds.admin, np.int32))
    np.save(folder / "unit_slot.npy", np.asarray(units.slot, np.int8))
    np.save(folder / "unit_row.npy", np.asarray(units.row, np.int32))
    np.save(folder / "street_row.npy", np.frombuffer(ds.street_row, np.int64).astype(np.int32))
    files = ["admin.npy", "unit_slot.npy", "unit_row.npy", "street_row.npy"]
    files += write_strings(folder, "unit_key", units.key)
    files += write_strings(folder, "unit_names", (json.dumps(x, ensure_ascii=False, separators=(",", ":")) for x in units.names))
    for col in ("housenumber", "street", "addr_place", "osm_tag"):
        files += write_strings(folder, col, getattr(ds, col))
    return files


def country_code_int(code: str | None) -> int:
    """'AD' -> 0x4144; None or anything not two ASCII letters -> 0."""
    if not code or len(code) != 2 or not code.isascii() or not code.isalpha():
        return 0
    code = code.upper()
    return (ord(code[0]) << 8) | ord(code[1])


def name_hash(text: str) -> int:
    """Stable signed 64-bit hash of a normalised name (`name_key.npy`)."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little", signed=True)


def write_prefix_tables(folder: Path, vocab: list[str]) -> list[str]:
    """For each length L in PREFIX_LENGTHS: the distinct L-letter prefixes of the vocabulary tokens
    (`prefix<L>.txt`) and the vocabulary rows [start, end) of each (`prefix<L>.npy`), used for
    typo-tolerant prefix matching of the last query token."""
    files = []
    for length in PREFIX_LENGTHS:
        prefixes: list[str] = []
        starts: list[int] = []
        last = None
        for i, t in enumerate(vocab):
            if len(t) < length:
                continue
            p = t[:length]
            if p != last:
                prefixes.append(p)
                starts.append(i)
                last = p
        ends = [bisect.bisect_left(vocab, p + "\U0010ffff", lo=a) for p, a in zip(prefixes, starts, strict=True)]
        (folder / f"prefix{length}.txt").write_text("".join(p + "\n" for p in prefixes), encoding="utf-8")
        np.save(folder / f"prefix{length}.npy", np.column_stack([np.asarray(starts, np.int64), np.asarray(ends, np.int64)]).reshape(-1, 2))
        files += [f"prefix{length}.txt", f"prefix{length}.npy"]
    return files
