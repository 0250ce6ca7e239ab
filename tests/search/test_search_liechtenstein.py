"""Addresses and streets on the Liechtenstein extract (1,006 objects with house numbers)."""

from __future__ import annotations

import numpy as np

from geoengine.search.text import normalise


def test_addresses_are_indexed_and_found(liechtenstein):
    ix = liechtenstein.search_index
    rows = [i for i in range(ix.n) if ix.cols["index"][i] == "addresses"]
    assert len(rows) > 500
    rng = np.random.default_rng(5)
    for row in rng.choice(rows, 20, replace=False).tolist():
        name = ix.cols["name"][row]
        res = liechtenstein.search(name, size=5)["results"]
        assert any(normalise(r["name"]) == normalise(name) and r["index"] == "addresses" for r in res), (name, res)


def test_vaduz_once_and_from_osm(liechtenstein):
    res = liechtenstein.search("Vaduz", types="place")["results"]
    vaduz = [r for r in res if r["name"] == "Vaduz"]
    assert len(vaduz) == 1 and vaduz[0]["source"] == "osm" and res[0]["name"] == "Vaduz"
    assert liechtenstein.place(vaduz[0]["canonical_id"])["id"] == vaduz[0]["id"]


def test_streets_are_merged_per_locality(liechtenstein):
    ix = liechtenstein.search_index
    streets = [i for i in range(ix.n) if ix.cols["index"][i] == "streets"]
    seen = {}
    for i in streets:
        key = (normalise(ix.cols["name"][i]), ix.cols["display_name"][i])
        seen[key] = seen.get(key, 0) + 1
    # one document per street name per locality (display names repeat only across localities)
    assert max(seen.values()) == 1
    merged = liechtenstein.bundle.stages["search"]["counts"]
    assert merged["osm_ways_in_streets"] > len(streets)


def test_short_prefix_ranks_local_names_that_start_with_it(liechtenstein):
    """'Sch' starts 100+ names; with the bias on Vaduz the town Schaan comes first, then other names that
    start with 'Sch', not GeoNames codes ('SCH' is an alternate name of Schenectady) or far places."""
    res = liechtenstein.search("Sch", lat=47.14, lon=9.52, size=5)["results"]
    assert res[0]["name"] == "Schaan" and res[0]["source"] == "osm"
    assert all(normalise(r["name"]).startswith("sch") for r in res), [r["name"] for r in res]


def test_geonames_codes_are_not_names(liechtenstein):
    ix = liechtenstein.search_index
    row = next(i for i in range(ix.n) if ix.cols["name"][i] == "Schenectady")
    assert "sch" not in ix.names[row].split("\x1f")
