"""The tile service of an Engine: sources, an LRU cache of tile bytes with a byte budget, TileJSON.

    engine.tiles.sources()                -> list of TileSource
    engine.tiles.get(source, z, x, y)     -> stored bytes (gzip for our own archives) or None
    engine.tiles.tile(source, z, x, y)    -> Tile(data, etag, gzip) or None (used by the HTTP façade)
    engine.tiles.tilejson(source, base)   -> TileJSON 3.0.0 document
    engine.tiles.clear(source)            -> number of cache entries dropped
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass

from geoengine.errors import FieldError, InvalidRequest, NotFound
from geoengine.tiles.sources import TileSource

MAX_Z = 22
_ENTRY_OVERHEAD = 160  # approximate bytes of bookkeeping per cache entry (key, tuple, dict slot)


@dataclass(frozen=True, slots=True)
class Tile:
    data: bytes
    etag: str  # quoted, e.g. "\"3f2a...\""
    gzip: bool
    format: str = "pbf"  # the source's tile format: pbf, png, jpg, webp, ...


_EMPTY = Tile(b"", "", False)  # cached "no tile at this coordinate"


def make_tile(data: bytes, fmt: str = "pbf") -> Tile:
    etag = '"' + hashlib.blake2b(data, digest_size=10).hexdigest() + '"'
    return Tile(data, etag, data[:2] == b"\x1f\x8b", fmt)


class TileCache:
    """Least-recently-used map (source, z, x, y) -> Tile within a byte budget. Thread-safe."""

    def __init__(self, budget: int):
        self.budget = max(0, int(budget))
        self._d: OrderedDict[tuple, Tile] = OrderedDict()
        self._lock = threading.Lock()
        self._per_source: dict[str, int] = {}  # entries per source (for the workers' shared counts)
        self.bytes = 0
        self.hits = 0
        self.misses = 0

    def get(self, key):
        with self._lock:
            t = self._d.get(key)
            if t is None:
                self.misses += 1
                return None
            self._d.move_to_end(key)
            self.hits += 1
            return t

    def put(self, key, tile: Tile) -> bool:
        """Cache `tile`; True when entries of other sources may have been evicted to make room."""
        cost = len(tile.data) + _ENTRY_OVERHEAD
        if cost > self.budget:
            return False
        evicted = False
        counts = self._per_source
        with self._lock:
            old = self._d.pop(key, None)
            if old is not None:
                self.bytes -= len(old.data) + _ENTRY_OVERHEAD
            else:
                counts[key[0]] = counts.get(key[0], 0) + 1
            self._d[key] = tile
            self.bytes += cost
            while self.bytes > self.budget:
                k, t = self._d.popitem(last=False)
                self.bytes -= len(t.data) + _ENTRY_OVERHEAD
                counts[k[0]] -= 1
                evicted = True
        return evicted

    def count(self, source: str) -> int:
        """Number of entries of `source`."""
        return self._per_source.get(source, 0)

    def clear(self, source: str | None = None) -> int:
        with self._lock:
            if source is None:
                n = len(self._d)
                self._d.clear()
                self._per_source.clear()
                self.bytes = 0
                return n
            keys = [k for k in self._d if k[0] == source]
            for k in keys:
                self.bytes -= len(self._d.pop(k).data) + _ENTRY_OVERHEAD
            self._per_source.pop(source, None)
            return len(keys)

    def __len__(self) -> int:
        return len(self._d)

    def stats(self) -> dict:
        return {"entries": len(self._d), "bytes": self.bytes, "budget": self.budget, "hits": self.hits,
                "misses": self.misses}


def check_zxy(z: int, x: int, y: int) -> None:
    errors = []
    if not 0 <= z <= MAX_Z:
        errors.append(FieldError("z", f"zoom must be between 0 and {MAX_Z}, got {z}"))
    else:
        n = (1 << z) - 1
        if not 0 <= x <= n:
            errors.append(FieldError("x", f"x must be between 0 and {n} at zoom {z}, got {x}"))
        if not 0 <= y <= n:
            errors.append(FieldError("y", f"y must be between 0 and {n} at zoom {z}, got {y}"))
    if errors:
        raise InvalidRequest(errors=errors)


class TileService:
    def __init__(self, sources: dict[str, TileSource], cache_bytes: int):
        self._sources = dict(sources)
        self.cache = TileCache(cache_bytes)
        self._shared = None  # SharedCacheState when several worker processes serve (see shared.py)
        self._shared_index: dict[str, int] = {}
        self._seen: dict[str, int] = {}
        self._clears = 0  # clears made in this process (any source): part of `token`

    def share_with_workers(self, state) -> None:
        """Keep this service's cache coherent with the other workers' through `state`
        (a geoengine.tiles.shared.SharedCacheState): clears reach every worker and count them all."""
        self._shared_index = {sid: state.index(i) for i, sid in enumerate(sorted(self._sources))}
        self._seen = {sid: state.generation(i) for sid, i in self._shared_index.items()}
        for sid, i in self._shared_index.items():
            state.publish(i, self._seen[sid], self.cache.count(sid))
        self._shared = state

    def _sync(self, source: str) -> None:
        """Drop this worker's entries of `source` when another worker cleared it since we last looked."""
        i = self._shared_index.get(source)
        if i is None:
            return
        g = self._shared.generation(i)
        if g != self._seen[source]:
            self.cache.clear(source)
            self._seen[source] = g
            self._shared.publish(i, g, 0)

    def _publish_counts(self, source: str, all_sources: bool) -> None:
        for sid in (self._shared_index if all_sources else (source,)):
            i = self._shared_index.get(sid)
            if i is not None:
                self._shared.publish(i, self._seen[sid], self.cache.count(sid))

    # -- sources ----------------------------------------------------------------------------------
    def sources(self) -> list[TileSource]:
        return list(self._sources.values())

    def source(self, source: str) -> TileSource:
        src = self._sources.get(source)
        if src is None:
            known = ", ".join(sorted(self._sources)) or "none"
            raise NotFound(f"unknown tile source '{source}' (known: {known})")
        return src

    # -- tiles ------------------------------------------------------------------------------------
    def tile(self, source: str, z: int, x: int, y: int) -> Tile | None:
        """The tile with its ETag, from the cache or the archive; None when no tile is stored there."""
        key = (source, z, x, y)
        if self._shared is not None:
            self._sync(source)
        t = self.cache.get(key)
        if t is not None:
            return t if t.data else None
        src = self.source(source)
        check_zxy(z, x, y)
        data = src.get(z, x, y) if src.info.minzoom <= z <= src.info.maxzoom else None
        t = make_tile(data, src.info.format) if data else _EMPTY
        evicted = self.cache.put(key, t)
        if self._shared is not None:
            self._publish_counts(source, evicted)
        return t if t.data else None

    def get(self, source: str, z: int, x: int, y: int) -> bytes | None:
        """The stored tile bytes (gzip-compressed when the archive stores them so) or None."""
        t = self.tile(source, z, x, y)
        return None if t is None else t.data

    def token(self, source: str) -> int:
        """A number that changes whenever `source`'s tiles as served may change: a clear in this process
        or, with several workers, in any of them (what an answer remembered from `tile` depends on)."""
        i = self._shared_index.get(source)
        return self._clears if i is None else (self._shared.generation(i) << 32) + self._clears

    def clear(self, source: str) -> int:
        """Drop the cached tiles of `source` (which must exist); returns the number of entries dropped.

        With several worker processes (`share_with_workers`), every worker drops its entries before it
        serves again, and the number counts the entries of every worker."""
        self.source(source)
        self._clears += 1
        if self._shared is None:
            return self.cache.clear(source)
        i = self._shared_index[source]
        cleared, gen = self._shared.clear(i, lambda: self.cache.clear(source))
        self._seen[source] = gen
        return cleared

    # -- documents --------------------------------------------------------------------------------
    @staticmethod
    def tile_url(base_url: str, source: str) -> str:
        return f"{base_url.rstrip('/')}/tiles/{source}/{{z}}/{{x}}/{{y}}"

    def entry(self, source: str, base_url: str) -> dict:
        """A /sources entry (bounds and center as comma-separated strings, as the spec shows them)."""
        src = self.source(source)
        i = src.info
        return {
            "id": src.id,
            "name": i.name,
            "format": i.format,
            "minzoom": i.minzoom,
            "maxzoom": i.maxzoom,
            "bounds": ",".join(_num(v) for v in i.bounds),
            "center": ",".join(_num(v) for v in i.center),
            "tiles": self.tile_url(base_url, src.id),
            "tilejson": f"{base_url.rstrip('/')}/tiles/{src.id}",
        }

    def tilejson(self, source: str, base_url: str) -> dict:
        src = self.source(source)
        i = src.info
        doc = {
            "tilejson": "3.0.0",
            "name": i.name,
            "description": i.description,
            "attribution": i.attribution,
            "scheme": "xyz",
            "format": i.format,
            "tiles": [self.tile_url(base_url, src.id)],
            "minzoom": i.minzoom,
            "maxzoom": i.maxzoom,
            "bounds": [float(v) for v in i.bounds],
            "center": [float(i.center[0]), float(i.center[1]), int(i.center[2])],
            "vector_layers": i.vector_layers,
        }
        return doc


def _num(v) -> str:
    if isinstance(v, int):
        return str(v)
    text = f"{float(v):.7f}".rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text
