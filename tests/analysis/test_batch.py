"""Pickling the Engine and geoengine.batch: blocks over local processes and a Dask LocalCluster give the
in-process answers bit for bit."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from geoengine import batch
from geoengine.errors import InvalidRequest


def _same(a, b):
    assert a.time_s.tobytes() == b.time_s.tobytes()
    assert a.distance_m.tobytes() == b.distance_m.tobytes()
    assert a.sources.tobytes() == b.sources.tobytes() and a.targets.tobytes() == b.targets.tobytes()


def test_engine_pickles_by_reopening_its_bundle(andorra, town_points):
    blob = pickle.dumps(andorra)
    assert len(blob) < 2000  # the path and settings, never the arrays
    other = pickle.loads(blob)
    assert other.bundle.path == andorra.bundle.path and other.settings == andorra.settings
    _same(other.matrix(town_points[:5], town_points[5:9]), andorra.matrix(town_points[:5], town_points[5:9]))


def test_matrix_blocks_in_process_are_bit_identical(andorra, town_points):
    ref = andorra.matrix(town_points, town_points[:25])
    got = batch.matrix(andorra, town_points, town_points[:25], block=7, processes=0)
    _same(got, ref)


def test_matrix_blocks_with_unsnappable_points(andorra, town_points):
    rng = np.random.default_rng(0)
    mixed = np.column_stack([rng.uniform(1.50, 1.56, 30), rng.uniform(42.49, 42.53, 30)])
    ref = andorra.matrix(mixed, town_points[:5], unsnappable="nan")
    got = batch.matrix(andorra, mixed, town_points[:5], block=8, processes=0, unsnappable="nan")
    assert not ref.snapped.sources.all()
    assert got.time_s.tobytes() == ref.time_s.tobytes() and got.distance_m.tobytes() == ref.distance_m.tobytes()
    assert np.array_equal(got.snapped.sources, ref.snapped.sources)
    assert got.snap_distance_m.sources.tobytes() == ref.snap_distance_m.sources.tobytes()


def test_matrix_and_accessibility_on_local_processes(andorra, town_points, real_pois):
    got = batch.matrix(str(andorra.bundle.path), town_points, town_points[:10], costing="pedestrian", block=15,
                       processes=2)
    _same(got, andorra.matrix(town_points, town_points[:10], "pedestrian"))


def test_dask_local_cluster_is_bit_identical(andorra, town_points, real_pois, monkeypatch, tmp_path):
    distributed = pytest.importorskip("distributed")
    from geoengine.routing import access

    # small chunks so the accessibility work really spreads over several tasks
    monkeypatch.setattr(access, "CHUNK_MAX", 40)
    w = np.random.default_rng(4).uniform(0, 10, len(real_pois))
    ref_a = andorra.accessibility(real_pois, "auto", max_time_s=600, aggregation="mean", weights=w)
    ref_m = andorra.matrix(town_points, town_points)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=40) as cluster, distributed.Client(cluster) as client:
        # monkeypatch does not reach worker processes: the chunking is decided here and shipped with the task
        got_a = batch.accessibility(andorra, real_pois, "auto", max_time_s=600, aggregation="mean", weights=w,
                                    client=client, block=2)
        got_m = batch.matrix(andorra, town_points, town_points, client=client, block=9)
        # the workers write their rows into memory-mapped files: nothing of the matrix through the scheduler
        got_o = batch.matrix(andorra, town_points, town_points, client=client, block=9, out=tmp_path / "m")
        assert len(client.scheduler_info()["workers"]) == 2
    assert len(access.PoiJunctions.chunks(access.prepare(andorra.network("auto"), real_pois, w, "mean",
                                                          "nodes")[0], andorra.graph.n_nodes)) > 2
    assert got_a.value.tobytes() == ref_a.value.tobytes()
    assert np.array_equal(got_a.count, ref_a.count)
    _same(got_m, ref_m)
    _same(got_o, ref_m)
    assert isinstance(got_o.time_s, np.memmap)
    assert np.load(tmp_path / "m" / "distance_m.npy").tobytes() == ref_m.distance_m.tobytes()


def test_matrix_into_memory_mapped_files(andorra, town_points, tmp_path):
    ref = andorra.matrix(town_points, town_points[:12], "pedestrian")
    for processes in (0, 2):
        folder = tmp_path / f"p{processes}"
        got = batch.matrix(andorra, town_points, town_points[:12], costing="pedestrian", block=7,
                           processes=processes, out=folder)
        _same(got, ref)
        assert isinstance(got.time_s, np.memmap) and not got.time_s.flags.writeable
        assert sorted(p.name for p in folder.iterdir()) == ["distance_m.npy", "time_s.npy"]
        assert np.load(folder / "time_s.npy", mmap_mode="r").tobytes() == ref.time_s.tobytes()
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(InvalidRequest) as exc:
        batch.matrix(andorra, town_points, town_points, out=blocker / "sub")
    assert exc.value.errors[0].field == "out"


def test_bad_input(andorra, town_points):
    with pytest.raises(InvalidRequest) as exc:
        batch.matrix(andorra, town_points, town_points, block=0)
    assert exc.value.errors[0].field == "block"
    with pytest.raises(InvalidRequest) as exc:
        batch.matrix(andorra, np.empty((0, 2)), town_points)
    assert exc.value.errors[0].field == "sources"
    with pytest.raises(InvalidRequest) as exc:
        batch.matrix(andorra, town_points, [[1.5, float("nan")]])
    assert exc.value.errors[0].field == "targets[0]"
    with pytest.raises(InvalidRequest) as exc:
        batch.matrix(12, town_points, town_points)
    assert exc.value.errors[0].field == "engine_or_path"
    with pytest.raises(InvalidRequest) as exc:
        batch.accessibility(andorra, town_points, max_time_s=60, aggregation="avg")
    assert exc.value.errors[0].field == "aggregation"
