"""Batch work beyond one process: matrices and accessibility split into blocks over a `dask.distributed`
Client, or over local worker processes (docs/analysis.md).

    from dask.distributed import Client, LocalCluster
    from geoengine import batch
    with LocalCluster(n_workers=2, threads_per_worker=1) as cluster, Client(cluster) as client:
        m = batch.matrix(".geoengine/bundles/liechtenstein", sources, targets, client=client, block=1000)

Each worker opens the bundle once (memory-mapped; an Engine unpickles by reopening its bundle and is
reused by every later block in that process). Blocks are computed by the same functions as the
in-process calls and put together in a fixed order, so results are bit-identical to `engine.matrix` and
`engine.accessibility`. Without a client, `processes=N` runs N local worker processes (spawned, so Numba's
threads are never forked); `processes=0` runs the blocks in this process (useful for checking).
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import numpy as np

from geoengine.errors import InvalidRequest


def _engine_ref(engine_or_path):
    """(path str, settings) of an Engine or a bundle path; the engine itself (for local work)."""
    from geoengine.engine import Engine, reopen

    if isinstance(engine_or_path, Engine):
        return str(engine_or_path.bundle.path), engine_or_path.settings, engine_or_path
    if isinstance(engine_or_path, str | Path):
        from geoengine.config import Settings

        settings = Settings.from_env()
        return str(Path(engine_or_path)), settings, reopen(str(Path(engine_or_path)), settings)
    raise InvalidRequest.field("engine_or_path", "must be an Engine or the path of a bundle folder")


def _block_size(block, name: str = "block") -> int:
    if isinstance(block, bool) or not isinstance(block, int | np.integer) or block < 1:
        raise InvalidRequest.field(name, "must be an integer >= 1")
    return int(block)


# -- worker-side functions (module level so they pickle by reference) -----------------------------------
def _matrix_block(path, settings, src, targets, costing, costing_options, unsnappable="raise"):
    from geoengine.engine import reopen

    res = reopen(path, settings).matrix(src, targets, costing, costing_options, unsnappable=unsnappable)
    return res.time_s, res.distance_m, res.sources, res.targets, res.snapped, res.snap_distance_m


def _matrix_block_to(path, settings, src, targets, costing, costing_options, unsnappable, out_dir, row0):
    """Like _matrix_block, but writes the block's rows into the memory-mapped time_s.npy / distance_m.npy
    of `out_dir` (created by the caller) and returns only the per-row and per-target metadata."""
    t, d, s_, t_, ok, sd = _matrix_block(path, settings, src, targets, costing, costing_options, unsnappable)
    for name, rows in (("time_s", t), ("distance_m", d)):
        m = np.load(Path(out_dir) / f"{name}.npy", mmap_mode="r+")
        m[row0:row0 + len(rows)] = rows
        m.flush()
        del m
    return None, None, s_, t_, ok, sd


def _access_block(path, settings, costing, costing_options, parts, pj, metric, limit, out_nodes):
    from geoengine.engine import reopen
    from geoengine.routing.access import chunk_partials

    net = reopen(path, settings).network(costing, costing_options)
    return chunk_partials(net, pj, list(parts), metric, limit, out_nodes)


def _run(tasks, fn, client, processes, progress, desc):
    """Results of fn(*args) for every args in `tasks`, in task order."""
    from geoengine.progress import bar

    out = [None] * len(tasks)
    with bar(len(tasks), desc, progress) as tick:
        if client is not None:
            from distributed import as_completed as dask_completed

            futures = [client.submit(fn, *args, pure=False) for args in tasks]
            index = {f.key: i for i, f in enumerate(futures)}
            for fut in dask_completed(futures):
                out[index[fut.key]] = fut.result()
                tick(1)
            return out
        n = (os.cpu_count() or 1) if processes is None else int(processes)
        if n <= 0 or len(tasks) <= 1:
            for i, args in enumerate(tasks):
                out[i] = fn(*args)
                tick(1)
            return out
        import multiprocessing as mp

        with ProcessPoolExecutor(max_workers=min(n, len(tasks)), mp_context=mp.get_context("spawn")) as ex:
            futures = {ex.submit(fn, *args): i for i, args in enumerate(tasks)}
            for fut in as_completed(futures):
                out[futures[fut]] = fut.result()
                tick(1)
        return out


def _workers(client, processes) -> int:
    if client is not None:
        return max(1, len(client.scheduler_info().get("workers", {})))
    return max(1, (os.cpu_count() or 1) if processes is None else int(processes))


def matrix(engine_or_path, sources, targets, costing: str = "auto", costing_options=None, *, client=None,
           block: int | None = None, processes: int | None = None, progress=None, unsnappable: str = "raise",
           out: str | Path | None = None):
    """`engine.matrix(sources, targets, costing, costing_options)` computed in blocks of `block` source
    rows on `client` (a dask.distributed Client) or on `processes` local worker processes (default: one
    per core; 0 = in this process). Returns the same MatrixResult, bit for bit.

    Every block searches backwards from ALL targets once (the bucket table's cost that does not shrink
    with the block), so the default block is one per worker (sources / workers, rounded up); smaller
    blocks only pay off for progress reporting or for spreading over uneven workers.

    `out`: a folder on a disk this process shares with the workers (local processes, a LocalCluster, a
    shared filesystem). The result's `time_s` and `distance_m` are then the memory-mapped files
    `out/time_s.npy` and `out/distance_m.npy` (float64 [N, M], read-only; `np.load(..., mmap_mode="r")`
    reopens them later), which every block writes its rows into: the matrix never travels through the
    scheduler or a pipe (8 bytes x 2 per cell: 1.6 GB for 10,000 x 10,000), and it need not fit in this
    process's memory. Existing files of those names are replaced."""
    from geoengine.routing.access import points_array
    from geoengine.routing.router import MatrixResult

    path, settings, engine = _engine_ref(engine_or_path)
    src = points_array(sources, "sources")
    dst = points_array(targets, "targets")
    b = -(-len(src) // _workers(client, processes)) if block is None else _block_size(block)
    engine.router.parse_options(costing, costing_options)  # bad costing/options fail here, once
    from geoengine.services.unsnappable import MatrixSnap, check_mode

    check_mode(unsnappable)
    if client is not None:
        dst_arg = client.scatter(dst, broadcast=True, hash=False)
    else:
        dst_arg = dst
    if out is None:
        tasks = [(path, settings, src[a:a + b], dst_arg, costing, costing_options, unsnappable)
                 for a in range(0, len(src), b)]
        parts = _run(tasks, _matrix_block, client, processes, progress, "matrix blocks")
        time_s = np.concatenate([p[0] for p in parts], axis=0)
        dist_m = np.concatenate([p[1] for p in parts], axis=0)
    else:
        folder = Path(out).resolve()
        try:
            folder.mkdir(parents=True, exist_ok=True)
            for name in ("time_s", "distance_m"):
                np.lib.format.open_memmap(folder / f"{name}.npy", mode="w+", dtype=np.float64,
                                          shape=(len(src), len(dst)))
        except OSError as exc:
            raise InvalidRequest.field("out", f"cannot write the matrix files in {folder}: {exc}") from None
        tasks = [(path, settings, src[a:a + b], dst_arg, costing, costing_options, unsnappable, str(folder), a)
                 for a in range(0, len(src), b)]
        parts = _run(tasks, _matrix_block_to, client, processes, progress, "matrix blocks")
        time_s = np.load(folder / "time_s.npy", mmap_mode="r")
        dist_m = np.load(folder / "distance_m.npy", mmap_mode="r")
    snapped_s = np.concatenate([p[2] for p in parts], axis=0)
    ok = MatrixSnap(np.concatenate([p[4].sources for p in parts]), parts[0][4].targets)
    sd = MatrixSnap(np.concatenate([p[5].sources for p in parts]), parts[0][5].targets)
    return MatrixResult(time_s, dist_m, snapped_s, parts[0][3], ok, sd)


def accessibility(engine_or_path, pois, costing: str = "auto", *, max_time_s=None, max_distance_m=None,
                  aggregation: str = "count", weights=None, at="nodes", costing_options=None, client=None,
                  block: int = 4, processes: int | None = None, progress=None):
    """`engine.accessibility(...)` with its POI chunks (see geoengine.routing.access) spread over
    `client` or local processes, `block` chunks per task; partials are combined in chunk order, so the
    result is bit-identical to the in-process call."""
    from geoengine.routing import access

    path, settings, engine = _engine_ref(engine_or_path)
    b = _block_size(block)
    metric, limit = access.impedance(max_time_s, max_distance_m)
    net = engine.network(costing, costing_options)
    pj, out, snap_d, lon, lat = access.prepare(net, pois, weights, aggregation, at)
    chunks = pj.chunks(net.n_nodes)
    if client is not None:
        pj_arg, out_arg = (client.scatter(pj, broadcast=True, hash=False),
                            client.scatter(out, broadcast=True, hash=False))
    else:
        pj_arg, out_arg = pj, out
    tasks = [(path, settings, costing, costing_options, chunks[a:a + b], pj_arg, metric, limit, out_arg)
             for a in range(0, len(chunks), b)]
    results = _run(tasks, _access_block, client, processes, progress, "accessibility blocks")
    parts = [p for r in results for p in r]
    cnt, sm, mn, mx = access.combine(parts, len(out))
    return access.AccessibilityResult(access.finish(aggregation, cnt, sm, mn, mx), cnt, out, snap_d, lon, lat,
                                      aggregation, metric, limit)
