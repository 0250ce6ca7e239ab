"""Tile cache clears across worker processes (geoengine/tiles/shared.py) on the real Andorra tiles, with
two real processes sharing one state file: a second clear right after a first reports 0 whichever
worker answers it (issue 27: it reported the answering worker's entries from before the first clear)."""

from __future__ import annotations

import multiprocessing as mp

import pytest

from geoengine.tiles.service import TileService
from geoengine.tiles.shared import SharedCacheState, create_state_file
from geoengine.tiles.sources import discover

TILES = [(14, 8261, 6050), (13, 4130, 3025), (13, 4130, 3024)]  # Andorra la Vella and around


def _worker(bundle, state_file, conn):
    """A second worker: its own TileService and slot; answers 'warm' and 'clear' commands."""
    svc = TileService(discover([bundle / "tiles"]), 64 << 20)
    svc.share_with_workers(SharedCacheState(state_file))
    while True:
        cmd = conn.recv()
        if cmd == "warm":
            conn.send(sum(svc.get("andorra", *t) is not None for t in TILES))
        elif cmd == "clear":
            conn.send(svc.clear("andorra"))
        else:
            conn.send(None)
            return


@pytest.fixture()
def two_workers(build_region, tmp_path):
    bundle = build_region("andorra")
    state_file = create_state_file(tmp_path / "serve.workers")
    ctx = mp.get_context("fork")
    ours, theirs = ctx.Pipe()
    proc = ctx.Process(target=_worker, args=(bundle, state_file, theirs), daemon=True)
    proc.start()
    svc = TileService(discover([bundle / "tiles"]), 64 << 20)
    svc.share_with_workers(SharedCacheState(state_file))

    def ask(cmd):
        ours.send(cmd)
        assert ours.poll(120), "the second worker did not answer"
        return ours.recv()

    yield svc, ask
    ask("stop")
    proc.join(30)


def _warm(svc) -> int:
    return sum(svc.get("andorra", *t) is not None for t in TILES)


@pytest.mark.parametrize("second_by", ["other", "same"])
def test_second_clear_right_after_a_first_reports_zero(two_workers, second_by):
    svc, ask = two_workers
    held = _warm(svc)
    assert held == len(TILES) and ask("warm") == len(TILES)  # real tiles, cached in both workers
    assert svc.clear("andorra") == 2 * len(TILES)  # the first clear counts both workers' entries
    # the second, right after (the other worker has served nothing since): nothing is left anywhere
    assert (ask("clear") if second_by == "other" else svc.clear("andorra")) == 0
    assert (svc.clear("andorra") if second_by == "other" else ask("clear")) == 0


def test_entries_cached_after_a_clear_count_in_the_next(two_workers):
    svc, ask = two_workers
    _warm(svc)
    ask("warm")
    assert ask("clear") == 2 * len(TILES)
    assert _warm(svc) == len(TILES)  # this worker syncs (drops its old entries) and caches anew
    assert ask("clear") == len(TILES)  # counted once: the new entries, not the ones from before
