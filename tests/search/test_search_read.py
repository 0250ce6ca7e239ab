"""The OSM read's shortcuts against the plain computations they replace, on real extracts: one scan of the
tags for names, address and detail tags; TagMatcher's kept answers; the centre vertex of a short street
found without numpy."""

from __future__ import annotations

import os
import signal
import time

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


def _columns(obj, names):
    from geoengine.search.docset import TextColumn

    out = {}
    for name in names:
        col = getattr(obj, name)
        out[name] = [col[i] for i in range(len(col))] if isinstance(col, TextColumn) else list(col)
    return out


def _read_both(path):
    from geoengine.search.osm import read_osm

    return read_osm(path, processes=1), read_osm(path, processes=2)


def test_two_process_read_gives_the_one_process_documents_in_the_same_order():
    from geoengine.search.docset import row_columns
    from geoengine.search.osm import STREET_COLUMNS

    for path in (data_file("liechtenstein/nominatim-apidb-test-data.osm.pbf"), data_file("andorra/andorra.osm.pbf")):
        one, two = _read_both(path)
        assert len(one[0]) > 500 and len(one[1]) > 500
        assert _columns(two[0], row_columns()) == _columns(one[0], row_columns())
        assert [type(c) for c in two[0].categories] == [type(c) for c in one[0].categories]
        assert _columns(two[1], STREET_COLUMNS) == _columns(one[1], STREET_COLUMNS)
        assert [(b.name, b.admin_level, b.row, b.osm_id, b.osm_type, b.postcode, b.geom.wkb) for b in two[2]] == \
            [(b.name, b.admin_level, b.row, b.osm_id, b.osm_type, b.postcode, b.geom.wkb) for b in one[2]]
        assert any(b.row >= 0 for b in one[2])
        reader = ["addr_node_id", "addr_node_row", "pc_xy", "pc_code", "box_row", "box", "shape_row", "shape_box",
                  "shape_len", "shape_closed"]
        assert _columns(two[3], reader) == _columns(one[3], reader)
        assert two[3].labels == one[3].labels and two[3].unassembled == one[3].unassembled
        ways = ["id", "kind", "street", "addr_place", "postcode", "ends", "node_id", "xy"]
        assert _columns(two[3].interpolations, ways) == _columns(one[3].interpolations, ways)
    assert one[3].unassembled >= 0 and len(one[3].addr_node_id) > 0


def test_a_failing_reader_child_is_a_clear_error_and_leaves_no_process(monkeypatch):
    import re

    import pytest

    from geoengine.procs import alive
    from geoengine.search import osm

    plain = osm._main_pass

    def broken(path, h, area, pool):
        if h.part == "nodes":
            raise ValueError("a broken block in the child")
        plain(path, h, area, pool)

    monkeypatch.setattr(osm, "_main_pass", broken)
    path = data_file("andorra/andorra.osm.pbf")
    with pytest.raises(RuntimeError, match="forked reader .*exit code 1.*ValueError: a broken block in the child") as info:
        osm.read_osm(path, processes=2)
    assert not alive(int(re.search(r"pid (\d+)", str(info.value)).group(1)))

    def killed(path, h, area, pool):  # a child killed (out of memory) writes nothing: its exit code says it
        if h.part == "nodes":
            os.kill(os.getpid(), signal.SIGKILL)
        plain(path, h, area, pool)

    monkeypatch.setattr(osm, "_main_pass", killed)
    with pytest.raises(RuntimeError, match=f"exit code -{int(signal.SIGKILL)}\\)$"):
        osm.read_osm(path, processes=2)


def test_a_failing_parent_stops_its_reader_child(monkeypatch, tmp_path):
    import pytest

    from geoengine.procs import alive
    from geoengine.search import osm

    mark = tmp_path / "child.pid"

    def slow_child_broken_parent(path, h, area, pool):
        if h.part == "nodes":
            mark.write_text(str(os.getpid()))
            time.sleep(120)
            return
        for _ in range(200):  # the child runs
            if mark.exists() and mark.read_text():
                break
            time.sleep(0.05)
        raise OSError("the parent's read failed")

    monkeypatch.setattr(osm, "_main_pass", slow_child_broken_parent)
    t0 = time.perf_counter()
    with pytest.raises(OSError, match="the parent's read failed"):
        osm.read_osm(data_file("andorra/andorra.osm.pbf"), processes=2)
    assert time.perf_counter() - t0 < 60
    assert not alive(int(mark.read_text()))


def test_read_processes_setting(monkeypatch):
    import pytest

    from geoengine.search.osm import read_processes

    monkeypatch.setenv("GEOENGINE_SEARCH_READ_PROCESSES", "1")
    assert read_processes() == 1
    monkeypatch.setenv("GEOENGINE_SEARCH_READ_PROCESSES", "two")
    with pytest.raises(ValueError, match="use 1 or 2"):
        read_processes()
    monkeypatch.delenv("GEOENGINE_SEARCH_READ_PROCESSES")
    assert read_processes() == (2 if (os.cpu_count() or 1) > 1 else 1)
