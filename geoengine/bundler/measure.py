"""Per-step cost of a build: wall, CPU (this process and its workers), peak RSS, output size.

`StepMeter` measures one named step. Peak RSS is the process's high-water mark (VmHWM), reset at the
start of each step through /proc/self/clear_refs (Linux >= 4.0), so each step reports its own peak
rather than the build's; worker processes (the tiles pool) report their largest peak through
getrusage(RUSAGE_CHILDREN), which only grows, so a step's `children_peak_rss_mb` is reported only when
it grew during that step. Without /proc (other systems) the peaks are the process's running maximum.
"""

from __future__ import annotations

import os
import resource
import sys
import time
from pathlib import Path

_HAVE_PROC = Path("/proc/self/status").exists()


def _rusage_cpu(who) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def cpu_s() -> float:
    """CPU seconds (user + system) of this process and of its children that were waited for."""
    return _rusage_cpu(resource.RUSAGE_SELF) + _rusage_cpu(resource.RUSAGE_CHILDREN)


def _maxrss_mb(who) -> float:
    kb = resource.getrusage(who).ru_maxrss
    return kb / (1 << 20) if sys.platform == "darwin" else kb / 1024  # bytes on macOS, KiB on Linux


def _status_mb(field: str) -> float | None:
    if not _HAVE_PROC:
        return None
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def rss_mb() -> float:
    """Current resident set size of this process in MiB."""
    v = _status_mb("VmRSS")
    return v if v is not None else _maxrss_mb(resource.RUSAGE_SELF)


def reset_peak() -> bool:
    """Reset this process's peak RSS to its current RSS; False when the system cannot."""
    if not _HAVE_PROC:
        return False
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def peak_mb() -> float:
    """This process's peak RSS since the last `reset_peak` (MiB). Linux updates the high-water mark
    lazily (at unmaps and exit), so it can trail the current RSS: the larger of the two."""
    v = _status_mb("VmHWM")
    if v is None:
        return _maxrss_mb(resource.RUSAGE_SELF)
    return max(v, rss_mb())


def dir_bytes(path: Path) -> int:
    total = 0
    if not path.exists():
        return 0
    if path.is_file():
        return path.stat().st_size
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return total


class StepMeter:
    """`with StepMeter() as m: ...` then `m.record()` -> {"seconds", "cpu_seconds", "peak_rss_mb", ...}."""

    def __enter__(self) -> StepMeter:
        reset_peak()
        self.rss0 = rss_mb()
        self.child_peak0 = _maxrss_mb(resource.RUSAGE_CHILDREN)
        self.cpu0 = _rusage_cpu(resource.RUSAGE_SELF)
        self.ccpu0 = _rusage_cpu(resource.RUSAGE_CHILDREN)
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.seconds = time.perf_counter() - self.t0
        self.cpu = _rusage_cpu(resource.RUSAGE_SELF) - self.cpu0
        self.children_cpu = _rusage_cpu(resource.RUSAGE_CHILDREN) - self.ccpu0
        self.peak = peak_mb()
        self.rss1 = rss_mb()
        child_peak = _maxrss_mb(resource.RUSAGE_CHILDREN)
        self.child_peak = child_peak if child_peak > self.child_peak0 else None

    def record(self) -> dict:
        out = {
            "seconds": round(self.seconds, 3),
            "cpu_seconds": round(self.cpu + self.children_cpu, 3),
            "peak_rss_mb": round(self.peak, 1),
            "rss_start_mb": round(self.rss0, 1),
            "rss_end_mb": round(self.rss1, 1),
        }
        if self.children_cpu > 0.05:
            out["workers_cpu_seconds"] = round(self.children_cpu, 3)
        if self.child_peak is not None:
            out["workers_peak_rss_mb"] = round(self.child_peak, 1)
        return out


def process_age_s() -> float:
    """Seconds since this process started (from /proc; 0 where unavailable)."""
    try:
        with open("/proc/self/stat") as fh:
            start_ticks = int(fh.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as fh:
            uptime = float(fh.read().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0
