"""Other processes of the same machine, as the server's workers and the tile cache's users see them."""

from __future__ import annotations

import os


def alive(pid: int) -> bool:
    """Whether process `pid` runs. A zombie (dead, not yet reaped by its parent) does not; neither does
    a pid <= 0."""
    if pid <= 0:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b") ", 1)[1][:1] != b"Z"
    except FileNotFoundError:
        return False
    except OSError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
