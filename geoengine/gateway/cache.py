"""An in-process cache of authenticated API keys in front of the gateway's key store.

Each serving process keeps, for a short lifetime (`GEOENGINE_GATEWAY_KEY_TTL`, default 5 s), the record
of every key that authenticated recently, indexed by the SHA-256 of the key: never the key itself.
A request whose key is in the cache and not expired skips the database entirely; after the lifetime
the next request reads the store again, so a revoked key (`geoengine keys revoke`, from any process)
or a key whose plan changed takes effect everywhere within the lifetime. A revocation made through
this process's own store (`revoke`) takes effect at once. Unknown, malformed and revoked keys are never
cached: each one goes to the store (whose comparison is constant-time).

The cache is bounded (`max_entries`); when full it drops the entries that expired and, if still full,
the oldest ones. Lookups are a dict read under the GIL: no lock, no thread hop.
"""

from __future__ import annotations

import hashlib
import time

from geoengine.gateway.keys import KeyRecord, KeyStore

DEFAULT_TTL_S = 5.0


def key_hash(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).digest()


class CachedKeyStore:
    """`authenticate` with an in-process cache; every other call goes to the wrapped KeyStore.

    `ttl_s <= 0` turns the cache off (every request reads the store).
    """

    def __init__(self, store: KeyStore, ttl_s: float = DEFAULT_TTL_S, max_entries: int = 10_000,
                 clock=time.monotonic):
        self.store = store
        self.ttl_s = float(ttl_s)
        self.max_entries = max(1, int(max_entries))
        self._clock = clock
        self._hits: dict[bytes, tuple[KeyRecord, float]] = {}
        self.lookups = 0  # store reads (cache misses), for tests and benchmarks
        self.epoch = 0  # bumped whenever a record is dropped before its expiry (revoke, forget)

    # the wrapped store's interface -------------------------------------------------------------
    def __getattr__(self, name):
        return getattr(self.store, name)

    @property
    def plans(self):
        return self.store.plans

    def authenticate(self, key: str | None) -> KeyRecord | None:
        if not key or self.ttl_s <= 0:
            self.lookups += 1
            return self.store.authenticate(key)
        h = key_hash(key)
        now = self._clock()
        hit = self._hits.get(h)
        if hit is not None:
            if hit[1] > now:
                return hit[0]
            self._hits.pop(h, None)
        self.lookups += 1
        record = self.store.authenticate(key)
        if record is not None:
            if len(self._hits) >= self.max_entries:
                self._evict(now)
            self._hits[h] = (record, now + self.ttl_s)
        return record

    def peek(self, key: str) -> KeyRecord | None:
        """The cached, unexpired record of `key`, or None: never reads the store (the front door's
        check; a miss goes through `authenticate`)."""
        hit = self.peek_entry(key)
        return None if hit is None else hit[0]

    def peek_entry(self, key: str) -> tuple[KeyRecord, float] | None:
        """`peek` with the entry's expiry (on `clock()`'s scale): what was decided with the record holds
        until then, unless `epoch` changes first (a revocation or a forgotten record in this process)."""
        if not key or self.ttl_s <= 0:
            return None
        hit = self._hits.get(key_hash(key))
        if hit is None or hit[1] <= self._clock():
            return None
        return hit

    def clock(self) -> float:
        return self._clock()

    def revoke(self, key_or_id: str) -> KeyRecord:
        record = self.store.revoke(key_or_id)
        self.forget(record.id)
        return record

    def forget(self, key_id: str | None = None) -> None:
        """Drop the cached record of one key id (or all of them)."""
        self.epoch += 1
        if key_id is None:
            self._hits.clear()
            return
        for h, (rec, _) in list(self._hits.items()):
            if rec.id == key_id:
                self._hits.pop(h, None)

    def _evict(self, now: float) -> None:
        for h, (_, expires) in list(self._hits.items()):
            if expires <= now:
                self._hits.pop(h, None)
        while len(self._hits) >= self.max_entries:
            self._hits.pop(next(iter(self._hits)), None)  # dicts keep insertion order: oldest first

    def __len__(self) -> int:
        return len(self._hits)
