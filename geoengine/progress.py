"""Progress reporting for long work (fetch, build): one line per step on a pipe, an updating line on a tty."""

from __future__ import annotations

import sys
import time


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
