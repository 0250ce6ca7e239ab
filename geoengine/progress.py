"""Progress reporting for long work: fetch and build (`Progress`: one line per step on a pipe, an updating line
on a tty), and the tqdm bars of batch work (`bar`: on for work of at least THRESHOLD steps when stderr is a
terminal, off otherwise (CI, logs, pipes); `progress=True` / `False` forces it either way)."""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager


class Progress:
    """Reports progress of named tasks to a stream (stderr by default).

    `task(name, total)` starts a task; `update(done)` reports; `done(message)` ends it.
    Updates are rate-limited so tight loops can call `update` freely.
    """

    def __init__(self, stream=None, quiet: bool = False, interval: float = 0.5):
        self.stream = stream if stream is not None else sys.stderr
        self.quiet = quiet
        self.interval = interval
        self._name = ""
        self._total: float | None = None
        self._last = 0.0
        self._start = time.monotonic()
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def _write(self, text: str, end: str = "\n") -> None:
        if self.quiet:
            return
        self.stream.write(text + end)
        self.stream.flush()

    def log(self, message: str) -> None:
        self._write(message)

    def task(self, name: str, total: float | None = None) -> Progress:
        self._name, self._total = name, total
        self._start = time.monotonic()
        self._last = 0.0
        self._write(f"[{name}] started")
        return self

    def update(self, done: float, message: str = "") -> None:
        now = time.monotonic()
        if now - self._last < self.interval:
            return
        self._last = now
        if self._total:
            pct = 100.0 * done / self._total
            text = f"[{self._name}] {pct:5.1f}% {message}".rstrip()
        else:
            text = f"[{self._name}] {done:,.0f} {message}".rstrip()
        if self._tty:
            self._write("\r" + text, end="")
        else:
            self._write(text)

    def shown(self) -> dict:
        """What this reporter has shown (the task's name and total, whether an update line is open), for
        `restore` in another process (a build stage that ran in a forked child)."""
        return {"name": self._name, "total": self._total, "last": self._last}

    def restore(self, shown: dict) -> None:
        self._name, self._total, self._last = shown["name"], shown["total"], shown["last"]

    def done(self, message: str = "", seconds: float | None = None) -> None:
        """End the task; `seconds` (when given) is the task's own measured time, else since `task()`."""
        secs = seconds if seconds is not None else time.monotonic() - self._start
        prefix = "\n" if self._tty and self._last else ""
        self._write(f"{prefix}[{self._name}] done in {secs:.1f}s {message}".rstrip())


class NullProgress(Progress):
    def __init__(self):
        super().__init__(quiet=True)


# -- tqdm bars of batch work (engine.isochrones, geoengine.batch) ---------------------------------------
THRESHOLD = 8  # steps (blocks, origins) below which no bar is shown unless asked for


def wanted(total: int, progress) -> bool:
    if progress is not None:
        return bool(progress)
    return total >= THRESHOLD and bool(getattr(sys.stderr, "isatty", lambda: False)())


@contextmanager
def bar(total: int, desc: str, progress=None):
    """Yields tick(n): advance the bar by n steps (a no-op when no bar is shown or tqdm is missing)."""
    if not wanted(total, progress):
        yield lambda n=1: None
        return
    try:
        from tqdm.auto import tqdm
    except ImportError:
        yield lambda n=1: None
        return
    with tqdm(total=total, desc=desc, file=sys.stderr) as t:
        yield t.update
