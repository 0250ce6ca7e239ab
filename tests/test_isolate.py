"""Build stages in forked children (geoengine.bundler.isolate): the value or the exception comes back,
the child's memory is measured and goes with it, a killed child is an error, and the real build runs
its stages that way (in a fresh process, as `geoengine build` does)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from dataclasses import replace

import numpy as np
import pytest

from geoengine.bundler.isolate import ChildDied, run_forked
from geoengine.bundler.measure import rss_mb
from geoengine.bundler.pipeline import Stage, build, resolve_inputs
from geoengine.bundler.source import STAGE as SOURCE
from geoengine.config import Settings
from geoengine.errors import BuildError, InvalidRequest

from .conftest import SHARED_DATA
from .orphans import assert_child_dies_with_parent

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _touch(mb: int) -> int:
    a = np.ones(mb << 17)  # mb MiB of float64, every page written
    return int(a.sum())


def test_value_and_usage_come_back_and_the_memory_goes_with_the_child():
    before = rss_mb()
    value, used = run_forked(_touch, 300)
    assert value == 300 << 17
    assert used.peak_rss_mb >= 300  # the child's own peak, not the parent's
    assert used.cpu_seconds > 0
    assert rss_mb() < before + 50  # nothing of it stayed here


class Odd(Exception):
    def __init__(self, a, b):
        super().__init__(f"{a}/{b}")
        self.lock = threading.Lock()  # cannot be pickled


def _raise(kind: str):
    if kind == "invalid":
        raise InvalidRequest.field("bbox", "bad bbox")
    if kind == "odd":
        raise Odd(1, 2)
    raise OSError(28, "No space left on device")


def test_the_childs_exception_is_raised_here_with_its_traceback():
    with pytest.raises(OSError, match="No space left") as info:
        run_forked(_raise, "disk")
    assert info.value.errno == 28
    assert any("in the forked child process" in n and "_raise" in n for n in info.value.__notes__)
    with pytest.raises(InvalidRequest, match="bad bbox") as invalid:
        run_forked(_raise, "invalid")
    assert invalid.value.errors[0].field == "bbox"  # the exception's state crosses, not only its text
    # an exception that cannot cross comes back as its text
    with pytest.raises(RuntimeError, match=r"Odd: 1/2"):
        run_forked(_raise, "odd")


def _kill_self():
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_killed_child_is_an_error():
    with pytest.raises(ChildDied, match="signal 9"):
        run_forked(_kill_self)


@pytest.fixture
def tmp_settings(tmp_path):
    return Settings(home=tmp_path / "home", data_mirror=str(SHARED_DATA))


def _full_disk(ctx):
    (ctx.stage_dir("extra") / "half").write_text("x")
    raise OSError(28, "No space left on device")


def test_an_isolated_stage_that_fails_leaves_the_published_bundle(tmp_path, tmp_settings, monkeypatch):
    from geoengine.bundle import STAGE_VERSIONS

    monkeypatch.setitem(STAGE_VERSIONS, "extra", 1)
    monkeypatch.setattr("geoengine.bundler.pipeline.fork_safe", lambda: True)
    out = tmp_path / "b"
    inputs = resolve_inputs("andorra", tmp_settings)
    build(inputs, out, tmp_settings, stages=[SOURCE])
    published = out.resolve()
    with pytest.raises(BuildError, match="stage 'extra' failed: OSError: .*No space left"):
        build(inputs, out, tmp_settings, stages=[SOURCE, Stage("extra", _full_disk, isolated=True)])
    assert out.resolve() == published and (published / "manifest.json").exists()


def test_the_build_runs_its_stages_in_children(tmp_path):
    """A fresh process, as `geoengine build`: each built-in stage is forked and its peak is the child's."""
    code = f"""
import json, sys
from geoengine.bundler.pipeline import build, resolve_inputs
from geoengine.bundler.source import STAGE as SOURCE
from geoengine.graph.stage import STAGE as GRAPH
from geoengine.config import Settings
s = Settings(home={str(tmp_path / 'home')!r}, data_mirror={str(SHARED_DATA)!r})
report = {{}}
build(resolve_inputs('monaco', s), {str(tmp_path / 'b')!r}, s, stages=[SOURCE, GRAPH], report=report)
json.dump(report, sys.stdout)
"""
    env = dict(os.environ, PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    steps = json.loads(r.stdout)["steps"]
    for name in ("source", "graph"):
        assert steps[name].get("forked") is True
        assert 0 < steps[name]["process_rss_start_mb"] <= steps[name]["process_peak_rss_mb"] <= steps[name]["peak_rss_mb"]
        assert steps[name]["build_process_peak_rss_mb"] > 0  # the parent, waiting meanwhile
    # the parent did not grow by the graph stage's work
    assert steps["graph"]["rss_end_mb"] < steps["graph"]["rss_start_mb"] + 20
    assert any((tmp_path / "b" / "graph").iterdir())


def test_stages_run_in_process_where_forking_is_unsafe(tmp_path, tmp_settings, monkeypatch):
    monkeypatch.setattr("geoengine.bundler.pipeline.fork_safe", lambda: False)
    seen = []
    source = replace(SOURCE, run=lambda ctx: (seen.append(os.getpid()), SOURCE.run(ctx))[1])
    report: dict = {}
    build(resolve_inputs("andorra", tmp_settings), tmp_path / "b", tmp_settings, stages=[source], report=report)
    assert seen == [os.getpid()] and "forked" not in report["steps"]["source"]


def test_the_child_dies_with_a_killed_parent(tmp_path):
    """A build killed (SIGKILL) while a stage runs in its child leaves no child writing into the work
    folder that `--continue` starts again."""
    pidfile = tmp_path / "child.pid"
    script = f"""
import os, time
from pathlib import Path
from geoengine.bundler.isolate import run_forked

def slow():
    Path({str(pidfile)!r}).write_text(str(os.getpid()))
    time.sleep(60)

run_forked(slow)
"""
    assert_child_dies_with_parent(script, pidfile, env=dict(os.environ, PYTHONPATH=ROOT), what="the stage's child")


_SHARED_CONTEXT = """
import json
import numba, numpy as np
from geoengine.bundler.isolate import fork_safe, run_forked, share_kernel_context
share_kernel_context()

@numba.njit(parallel=True, cache=False)
def total(a):
    s = 0.0
    for i in numba.prange(len(a)):
        s += a[i]
    return s

def child():
    return {"sum": total(np.ones(1000)), "layer": numba.threading_layer()}

print(json.dumps({"fork_safe": fork_safe(), "child": run_forked(child)[0], "after": fork_safe()}))
"""


def test_the_kernel_context_made_before_forking_leaves_the_process_fork_safe():
    """share_kernel_context (pipeline.build calls it before forking its stages) starts no thread: the
    process may still fork, and its child runs a parallel kernel."""
    run = subprocess.run([sys.executable, "-c", _SHARED_CONTEXT], cwd=ROOT, capture_output=True, text=True,
                         timeout=300, env={**os.environ, "PYTHONPATH": ROOT})
    assert run.returncode == 0, run.stderr[-3000:]
    r = json.loads(run.stdout.strip().splitlines()[-1])
    assert r["fork_safe"] and r["child"]["sum"] == 1000.0 and r["child"]["layer"] in ("omp", "tbb", "workqueue")
