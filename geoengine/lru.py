"""One least-recently-used map within a byte budget, for the caches that keep computed answers by key
(the server's search answers, the search index's token matches): each value's size is given when it
is put; a value larger than a sixteenth of the budget is not kept (one answer must not empty the
cache); the least recently used go first when the budget is exceeded. Not locked: its owner holds
its own lock (the tile cache, which also counts entries per source for the worker processes, keeps
its own map)."""

from __future__ import annotations

from collections import OrderedDict


class ByteLRU:
    def __init__(self, budget_bytes: int):
        self.budget = max(0, int(budget_bytes))
        self._items: OrderedDict = OrderedDict()  # key -> (value, size)
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key):
        """The value kept under `key` (now the most recently used), or None."""
        hit = self._items.get(key)
        if hit is None:
            return None
        self._items.move_to_end(key)
        return hit[0]

    def put(self, key, value, size: int) -> bool:
        """Keep `value` (of `size` bytes) under `key`; False when it is too large to be kept."""
        if size * 16 > self.budget:
            return False
        old = self._items.pop(key, None)
        if old is not None:
            self.nbytes -= old[1]
        self._items[key] = (value, size)
        self.nbytes += size
        while self.nbytes > self.budget:
            _, (_, s) = self._items.popitem(last=False)
            self.nbytes -= s
        return True

    def clear(self) -> None:
        self._items.clear()
        self.nbytes = 0
