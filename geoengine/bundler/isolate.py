"""Run a build step in a forked child process, so that what it leaves behind dies with it.

A stage frees its arrays when it returns, but not everything it touched goes back to the system:
glibc's heap keeps fragments, Numba keeps the machine code of every kernel it loaded, modules keep
their caches. At 64 copies of Liechtenstein the build process held 274 MB when the search stage
started and 467 MB when the tiles stage started, and each stage's peak sat on top of that. A stage
run by `run_forked` starts from the parent's footprint (copy-on-write pages: the parent only
orchestrates) and returns everything when it exits.

The child hands back its return value, or its exception, pickled through a pipe; the parent raises
the same exception (with the child's traceback as a note). A child killed by a signal (the kernel's
out-of-memory killer, say) raises `ChildDied`. The child asks Linux to kill it when the parent dies
(`die_with`), so a killed build leaves no child writing into its work folder.

Numba's OpenMP threading layer cannot run parallel kernels in a child forked after the parent has run
one (GNU OpenMP terminates the child), so `fork_safe()` says whether this process may fork: the
`geoengine build` process never runs a kernel before its stages, a test process that has routed may
have, and runs its stages in process instead.
"""

from __future__ import annotations

import gc
import os
import pickle
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass


class ChildDied(RuntimeError):
    """The child process ended without handing back a result (killed by a signal, or it could not write)."""


@dataclass(frozen=True)
class ChildUsage:
    """What the child used: peak RSS (MiB, which counts the pages it shared with the parent at the
    fork) and CPU seconds (its own and its waited-for children's)."""

    peak_rss_mb: float
    cpu_seconds: float


def die_with(parent: int) -> None:
    """Linux: this process gets SIGKILL when `parent` dies (a killed build leaves no child writing
    into the work folder that `--continue` starts again)."""
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before the call
        os._exit(1)


def fork_safe() -> bool:
    """Whether a forked child of this process may run Numba's parallel kernels (see the module's doc)."""
    if not hasattr(os, "fork"):
        return False
    parallel = sys.modules.get("numba.np.ufunc.parallel")
    return not getattr(parallel, "_is_initialized", False)


def share_kernel_context() -> None:
    """Make Numba's CPU target context (its registries and builtins: about 0.13 s) in this process, so
    that the children it forks inherit it: a forked stage then loads its first cached kernel in about
    15 ms instead of 0.16 s (measured on this machine). It starts no thread: the process may still fork
    (`fork_safe`)."""
    from numba.core.registry import cpu_target

    cpu_target.target_context.refresh()


def run_forked(fn: Callable, *args):
    """`fn(*args)` in a forked child; returns (its value, ChildUsage). Raises what it raised."""
    return start_forked(fn, *args).wait()


class Forked:
    """A forked child running `fn(*args)` (start_forked); `wait` returns (its value, ChildUsage) or
    raises what it raised; `kill` stops it."""

    def __init__(self, pid: int, fd: int):
        self.pid, self.fd = pid, fd

    def kill(self) -> None:
        try:
            os.kill(self.pid, 9)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        try:
            os.close(self.fd)
        except OSError:
            pass

    def wait(self):
        try:
            with os.fdopen(self.fd, "rb") as fh:
                data = fh.read()  # before waiting: a payload larger than the pipe's buffer would block the child
            _, status, usage = os.wait4(self.pid, 0)
        except BaseException:  # e.g. KeyboardInterrupt: the child goes too
            try:
                os.kill(self.pid, 9)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
            raise
        used = ChildUsage(peak_rss_mb=usage.ru_maxrss / 1024, cpu_seconds=usage.ru_utime + usage.ru_stime)
        if not data:
            if os.WIFSIGNALED(status):
                raise ChildDied(f"the process was killed by signal {os.WTERMSIG(status)}"
                                + (" (out of memory?)" if os.WTERMSIG(status) == 9 else ""))
            raise ChildDied(f"the process exited with code {os.waitstatus_to_exitcode(status)} and no result")
        payload = pickle.loads(data)
        if payload[0] == "ok":
            return payload[1], used
        exc, text = payload[1], payload[2]
        if text:
            exc.add_note("in the forked child process:\n" + text.rstrip())
        raise exc


def start_forked(fn: Callable, *args) -> Forked:
    """Start `fn(*args)` in a forked child and return at once (`Forked.wait` for its value)."""
    parent = os.getpid()
    r, w = os.pipe()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child (its behaviour is tested through the parent)
        # the parent's objects are the child's only to read: a collection (heap.release) walks what the
        # child made, not them (in a forked stage child it walked every inherited object: about 0.1 s a
        # call in the routing patch)
        gc.freeze()
        os.close(r)
        code = 0
        try:
            die_with(parent)
            payload = ("ok", fn(*args))
        except BaseException as exc:  # noqa: BLE001 - handed to the parent
            code = 1
            payload = ("error", exc, traceback.format_exc())
        try:
            try:
                data = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
                pickle.loads(data)  # an exception whose constructor takes other arguments fails here
            except Exception:  # noqa: BLE001 - an unpicklable value or exception: its text
                exc = payload[1] if payload[0] == "error" else None
                text = f"{type(exc).__name__}: {exc}" if exc is not None else "its result could not be pickled"
                data = pickle.dumps(("error", RuntimeError(text), payload[-1] if exc is not None else ""))
                code = 1
            with os.fdopen(w, "wb") as fh:
                fh.write(data)
            for stream in (sys.stdout, sys.stderr):
                stream.flush()
        except BaseException:  # noqa: BLE001 - e.g. the parent is gone; the exit code tells
            code = 2
        os._exit(code)
    os.close(w)
    return Forked(pid, r)
