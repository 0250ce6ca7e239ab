"""Progress bars (tqdm) for batch work: on for work of at least THRESHOLD steps when stderr is a terminal
(interactive use), off otherwise (CI, logs, pipes); `progress=True` / `False` forces it either way."""

from __future__ import annotations

import sys
from contextlib import contextmanager

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
