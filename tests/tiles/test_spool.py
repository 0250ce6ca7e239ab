"""Spooled tiles (features on disk by partition, cut a partition at a time) are byte-identical to
cutting the whole feature set in memory, on real extracts split into many partitions."""

from __future__ import annotations

import pytest

from geoengine.bundler.source import describe_extract
from geoengine.tiles.features import collect
from geoengine.tiles.spool import SEQ_STRIDE, _load, collect_spooled, cut_spooled
from geoengine.tiles.tiler import cut_tiles

from ..conftest import data_file
from ..orphans import assert_child_dies_with_parent


@pytest.mark.parametrize(("rel", "partition_zoom"), [
    ("monaco/monaco.osm.gz", 13),  # clipped extract with a coastline: land/sea split, partial ways
    ("andorra/andorra.osm.pbf", 12),
])
def test_spooled_tiles_equal_whole_set_tiles(rel, partition_zoom, tmp_path):
    path = data_file(rel)
    bbox = describe_extract(path)["bbox"]
    whole = {(z, x, y): d for z, x, y, d in cut_tiles(collect(path, bbox), bbox)}
    spool, parts = collect_spooled(path, bbox, tmp_path / "spool", partition_zoom=partition_zoom)
    assert len(parts) > 4, "the case must cross partition borders"
    assert spool.n == len(collect(path, bbox))
    spooled = {}
    for z, x, y, d in cut_spooled(spool, parts, bbox):
        assert (z, x, y) not in spooled, "a tile belongs to one partition"
        spooled[(z, x, y)] = d
    assert spooled.keys() == whole.keys()
    assert [k for k in whole if whole[k] != spooled[k]] == []
    # memory holds only what low zooms draw: far fewer features than the extract has
    assert len(spool.low) < spool.n / 4


def test_collection_streams_in_one_or_two_processes_spool_the_same(tmp_path):
    """Points-and-lines and areas are collected in two processes or one: the same records, seqs and
    partitions either way."""
    path = data_file("monaco/monaco.osm.gz")
    bbox = describe_extract(path)["bbox"]
    spools = {}
    for procs in (1, 2):
        spool, parts = collect_spooled(path, bbox, tmp_path / str(procs), partition_zoom=13, processes=procs)
        records = {k: sorted(_load(tmp_path / str(procs), k)) for k in parts}
        spools[procs] = (spool.n, spool.counts(), parts, records, sorted(r[:4] for r in spool.shared))
    assert spools[1] == spools[2]
    n, counts, parts, records, shared = spools[2]
    seqs = sorted(r[0] for recs in records.values() for r in recs)
    assert seqs[0] >= SEQ_STRIDE and any(s >= 2 * SEQ_STRIDE for s in seqs), "both streams spooled"


def test_a_failed_stream_process_raises_its_error_without_a_traceback(tmp_path, monkeypatch, capfd):
    """The points-and-lines stream runs in a forked process: its error reaches the build as one message
    (the stage's one error line), and the child prints no traceback."""
    from geoengine.tiles import features

    def fail(self, osm_path):
        raise OSError(28, "No space left on device (test)")

    monkeypatch.setattr(features._PointsAndLines, "collect", fail)
    path = data_file("monaco/monaco.osm.gz")
    bbox = describe_extract(path)["bbox"]
    with pytest.raises(RuntimeError, match="points and lines failed: OSError: .*No space left on device"):
        collect_spooled(path, bbox, tmp_path / "spool", partition_zoom=13, processes=2)
    assert "Traceback" not in capfd.readouterr().err


def test_the_stream_process_dies_with_a_killed_build(tmp_path):
    """A build killed (SIGKILL) while its forked points-and-lines collector runs leaves no collector
    writing into the work folder, which `--continue` would start again."""
    pidfile = tmp_path / "child.pid"
    script = f"""
import os, time
from pathlib import Path
from geoengine.bundler.source import describe_extract
from geoengine.tiles import features
from geoengine.tiles.spool import collect_spooled

def slow(self, osm_path):
    Path({str(pidfile)!r}).write_text(str(os.getpid()))
    time.sleep(60)

features._PointsAndLines.collect = slow
path = {str(data_file("monaco/monaco.osm.gz"))!r}
collect_spooled(path, describe_extract(path)["bbox"], Path({str(tmp_path / "spool")!r}), processes=2)
"""
    assert_child_dies_with_parent(script, pidfile, what="the collector")


@pytest.mark.parametrize(("rel", "partition_zoom"), [("monaco/monaco.osm.gz", 13), ("andorra/andorra.osm.pbf", 12)])
def test_the_plan_counts_every_step_of_the_cut(rel, partition_zoom, tmp_path):
    """The tiles stage's progress total is the plan's: one step per low-zoom batch and per partition cut,
    including the partitions a full-grid zoom adds to those holding features."""
    from geoengine.tiles.spool import plan_cut

    path = data_file(rel)
    bbox = describe_extract(path)["bbox"]
    spool, parts = collect_spooled(path, bbox, tmp_path / "spool", partition_zoom=partition_zoom)
    plan = plan_cut(spool, parts, bbox)
    steps = []
    tiles = list(cut_spooled(spool, parts, bbox, on_step=steps.append, plan=plan))
    assert tiles and len(steps) == len(plan.low_tasks) + len(plan.partitions)
    assert set(parts) <= set(plan.partitions)
    if rel.startswith("andorra"):  # a full-grid zoom adds a partition without features (19 -> 20)
        assert len(plan.partitions) > len(parts)
