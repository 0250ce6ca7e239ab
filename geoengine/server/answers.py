"""A serving process's cache of search answers.

Autocomplete traffic repeats: every user who looks for Vaduz sends "Va", "Vad", "Vadu" on the way, and
a map's search box sends the same few hundred prefixes all day. A search answer depends on nothing but
the bundle and the query string, and a bundle never changes, so the JSON body of a plainly valid
`GET /search` or `GET /search/reverse` (the ones the front door and the hot path answer themselves) is
kept here by its path and query string, for the engine that computed it, and written again when the
same query comes back.

- Only the body is kept, after the request was admitted: every request still passes the gateway (key,
  host, revocation within the key cache's lifetime, quotas counted exactly) before this cache is read.
- The engine is held weakly. A bundle reload puts a new engine on the app; the first request to find
  it empties the cache, so no answer of an old bundle is served.
- Bounded by `GEOENGINE_SEARCH_CACHE_BYTES` per worker process (default 16 MiB; 0 turns it off), least
  recently used first out. An answer larger than a sixteenth of the budget is not kept.
- `took_ms` in a cached answer is the time the answer took when it was computed.
- The library's `engine.search` and `engine.reverse` do not use it: a notebook's calls rarely repeat,
  and a caller may change the documents it gets.
"""

from __future__ import annotations

import threading
import weakref

from geoengine.lru import ByteLRU

_ENTRY_OVERHEAD = 200  # bytes of an entry besides its key and body (tuple, dict slot, bytes headers)


class AnswerCache:
    """JSON bodies by (path, query string), for one engine at a time; thread-safe."""

    def __init__(self, budget_bytes: int):
        self._lru = ByteLRU(budget_bytes)
        self.budget = self._lru.budget
        self._engine = None  # a weak reference to the engine the answers are of
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._lru)

    @property
    def nbytes(self) -> int:
        return self._lru.nbytes

    def _owner(self, engine) -> bool:
        """Whether the kept answers are `engine`'s; else they are dropped and the cache is `engine`'s now."""
        ref = self._engine
        if ref is not None and ref() is engine:
            return True
        self._lru.clear()
        self._engine = weakref.ref(engine)
        return False

    def get(self, engine, path: str, query: bytes) -> bytes | None:
        if not self.budget:
            return None
        with self._lock:
            body = self._lru.get((path, query)) if self._owner(engine) else None
            if body is None:
                self.misses += 1
                return None
            self.hits += 1
            return body

    def put(self, engine, path: str, query: bytes, body: bytes) -> None:
        if not self.budget:
            return
        with self._lock:
            self._owner(engine)
            self._lru.put((path, query), body, len(body) + len(path) + len(query) + _ENTRY_OVERHEAD)
