"""MBTiles 1.3 archives (SQLite): writing at build time, reading at serve time.

Rows are stored in the TMS scheme (`tile_row = 2^z - 1 - y`), as the MBTiles spec requires; the
reader takes XYZ coordinates. Vector tiles are stored gzip-compressed (`format` = pbf).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path

SCHEMA = """
CREATE TABLE metadata (name TEXT NOT NULL, value TEXT);
CREATE UNIQUE INDEX metadata_name ON metadata (name);
CREATE TABLE tiles (zoom_level INTEGER NOT NULL, tile_column INTEGER NOT NULL, tile_row INTEGER NOT NULL,
                    tile_data BLOB NOT NULL);
"""


class MBTilesWriter:
    def __init__(self, path: Path):
        self.path = Path(path)
        if self.path.exists():
            self.path.unlink()
        self.db = sqlite3.connect(str(self.path))
        self.db.execute("PRAGMA journal_mode = OFF")
        self.db.execute("PRAGMA synchronous = OFF")
        self.db.executescript(SCHEMA)
        self.count = 0
        self.bytes = 0

    def add(self, z: int, x: int, y: int, data: bytes) -> None:
        self.db.execute("INSERT INTO tiles VALUES (?, ?, ?, ?)", (z, x, (1 << z) - 1 - y, sqlite3.Binary(data)))
        self.count += 1
        self.bytes += len(data)

    def copy_from(self, old_path: Path, skip) -> tuple[int, int]:
        """Copy, in SQLite, every tile of the archive at `old_path` but those of `skip` (rows of zoom,
        column, TMS row) into this one; returns the tiles and bytes copied."""
        db = self.db
        db.commit()  # (ATTACH cannot run inside the writer's open transaction)
        db.execute("CREATE TEMP TABLE skip (z INTEGER, c INTEGER, r INTEGER, PRIMARY KEY (z, c, r)) WITHOUT ROWID")
        db.executemany("INSERT INTO skip VALUES (?, ?, ?)", skip)
        db.execute("ATTACH DATABASE ? AS old", (str(old_path),))
        before = db.execute("SELECT COUNT(*), COALESCE(SUM(LENGTH(tile_data)), 0) FROM tiles").fetchone()
        db.execute("INSERT INTO main.tiles SELECT t.zoom_level, t.tile_column, t.tile_row, t.tile_data FROM old.tiles t "
                   "WHERE NOT EXISTS (SELECT 1 FROM temp.skip s WHERE s.z = t.zoom_level AND s.c = t.tile_column "
                   "AND s.r = t.tile_row)")
        after = db.execute("SELECT COUNT(*), COALESCE(SUM(LENGTH(tile_data)), 0) FROM tiles").fetchone()
        db.commit()
        db.execute("DETACH DATABASE old")
        db.execute("DROP TABLE temp.skip")
        copied, nbytes = after[0] - before[0], after[1] - before[1]
        self.count += copied
        self.bytes += nbytes
        return copied, nbytes

    def close(self, metadata: dict[str, str]) -> None:
        self.db.execute("CREATE UNIQUE INDEX tile_index ON tiles (zoom_level, tile_column, tile_row)")
        self.db.executemany("INSERT INTO metadata VALUES (?, ?)", [(k, str(v)) for k, v in metadata.items()])
        self.db.commit()
        self.db.execute("VACUUM")
        self.db.close()


class MBTilesReader:
    """Thread-safe reader: one read-only SQLite connection per thread."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._local = threading.local()
        self._uri = f"file:{self.path.resolve()}?mode=ro&immutable=1"
        db = self._db()
        self.metadata = dict(db.execute("SELECT name, value FROM metadata").fetchall())
        if "minzoom" not in self.metadata or "maxzoom" not in self.metadata:
            row = db.execute("SELECT MIN(zoom_level), MAX(zoom_level) FROM tiles").fetchone()
            self.metadata.setdefault("minzoom", str(row[0] if row[0] is not None else 0))
            self.metadata.setdefault("maxzoom", str(row[1] if row[1] is not None else 0))

    def _db(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self._uri, uri=True, check_same_thread=False)
            self._local.db = db
        return db

    def get(self, z: int, x: int, y: int) -> bytes | None:
        row = self._db().execute(
            "SELECT tile_data FROM tiles WHERE zoom_level = ? AND tile_column = ? AND tile_row = ?",
            (z, x, (1 << z) - 1 - y),
        ).fetchone()
        return None if row is None else bytes(row[0])

    def vector_layers(self) -> list:
        raw = self.metadata.get("json")
        if not raw:
            return []
        try:
            return list(json.loads(raw).get("vector_layers", []))
        except (ValueError, AttributeError):
            return []
