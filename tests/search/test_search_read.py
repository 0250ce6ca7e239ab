"""The OSM read's shortcuts against the plain computations they replace, on real extracts: one scan of the
tags for names, address and detail tags; TagMatcher's kept answers; the centre vertex of a short street
found without numpy."""

from __future__ import annotations

import numpy as np
import osmium

from tests.conftest import data_file


def _tag_sets(path, limit=20_000) -> list[dict]:
    from geoengine.osmtags import tag_dict

    out: list[dict] = []
    for obj in osmium.FileProcessor(str(path), osmium.osm.NODE | osmium.osm.WAY):
        if len(obj.tags) > 1:
            out.append(tag_dict(obj.tags))
            if len(out) >= limit:
                break
    return out


def test_one_scan_of_the_tags_gives_the_detail_and_the_name_variants():
    from geoengine.search.osm import DETAIL_TAGS, _scan, _variants, is_name_key

    sets = _tag_sets(data_file("liechtenstein/nominatim-apidb-test-data.osm.pbf"))
    assert len(sets) > 5_000
    with_names = 0
    for tags in sets:
        names, address, keep = _scan(tags)
        assert names == {k: v for k, v in tags.items() if is_name_key(k)}
        assert list(address.items()) == [(k[5:], v) for k, v in tags.items() if k.startswith("addr:")]
        assert list(keep.items()) == [(k, tags[k]) for k in DETAIL_TAGS if k in tags]  # in DETAIL_TAGS' order
        plain = []
        for k, v in tags.items():
            if is_name_key(k):
                for part in v.split(";"):
                    if part.strip() and part.strip() not in plain:
                        plain.append(part.strip())
        assert _variants(names) == plain
        with_names += bool(names)
    assert with_names > 500


def test_tag_matcher_answers_as_it_computes():
    from geoengine.search.categories import TagMatcher
    from geoengine.search.osm import POI_KEYS

    match = TagMatcher(POI_KEYS)
    sets = _tag_sets(data_file("andorra/andorra.osm.pbf"))
    found = 0
    for _ in range(2):  # the second time from what it kept
        for tags in sets:
            got = match(tags)
            assert got == match._match(tags)
            found += bool(got)
    assert found > 1_000 and 0 < len(match._known) < len(sets)


def test_centre_vertex_of_a_short_street_as_numpy_finds_it():
    from geoengine.search.documents import SHORT_WAY, _vertex_near_mean
    from geoengine.search.osm import mean_xy, read_osm

    _, streets, _, _ = read_osm(data_file("liechtenstein/nominatim-apidb-test-data.osm.pbf"))
    xy = streets.vertices()
    checked = 0
    for w in range(len(streets)):
        v = xy[streets.ends[w]:streets.ends[w + 1]]
        if len(v) > SHORT_WAY:
            continue
        k = int(np.argmin(((v - mean_xy(v)) ** 2).sum(axis=1)))
        assert _vertex_near_mean(v.tolist()) == (float(v[k, 0]), float(v[k, 1]))
        checked += 1
    assert checked > 1_000
