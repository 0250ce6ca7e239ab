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

    def put(self, key, tile: Tile) -> None:
        cost = len(tile.data) + _ENTRY_OVERHEAD
        if cost > self.budget:
            return
        with self._lock:
            old = self._d.pop(key, None)
            if old is not None:
                self.bytes -= len(old.data) + _ENTRY_OVERHEAD
            self._d[key] = tile
            self.bytes += cost
            while self.bytes > self.budget:
                _, t = self._d.popitem(last=False)
                self.bytes -= len(t.data) + _ENTRY_OVERHEAD

    def clear(self, source: str | None = None) -> int:
        with self._lock:
            if source is None:
                n = len(self._d)
                self._d.clear()
                self.bytes = 0
                return n
            keys = [k for k in self._d if k[0] == source]
            for k in keys:
                self.bytes -= len(self._d.pop(k).data) + _ENTRY_OVERHEAD
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
        t = self.cache.get(key)
        if t is not None:
            return t if t.data else None
        src = self.source(source)
        check_zxy(z, x, y)
        data = src.get(z, x, y) if src.info.minzoom <= z <= src.info.maxzoom else None
        t = make_tile(data, src.info.format) if data else _EMPTY
        self.cache.put(key, t)
        return t if t.data else None

    def get(self, source: str, z: int, x: int, y: int) -> bytes | None:
        """The stored tile bytes (gzip-compressed when the archive stores them so) or None."""
        t = self.tile(source, z, x, y)
        return None if t is None else t.data

    def clear(self, source: str) -> int:
        """Drop the cached tiles of `source` (which must exist); returns the number of entries dropped."""
        self.source(source)
        return self.cache.clear(source)

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
