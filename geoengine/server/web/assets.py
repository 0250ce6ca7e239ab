"""Static files of the map page: the page itself, its script and style (in this package), and the
installed browser libraries, glyphs and sprites (in the web assets folder, filled by `./dev setup`).

URL layout (all open without a key, GET and HEAD only):

| URL | file |
|---|---|
| `/` | `static/index.html` |
| `/web/<file>` | `static/<file>` (app.js, app.css) |
| `/web/lib/maplibre-gl/<file>` | `<assets>/node_modules/maplibre-gl/dist/<file>` |
| `/web/lib/basemaps/<file>` | `<assets>/node_modules/@protomaps/basemaps/dist/<file>` |
| `/web/fonts/<fontstack>/<range>.pbf` | `<assets>/build/fonts/...` (glyph PBFs built at setup) |
| `/web/sprites/<file>` | `<assets>/build/sprites/...` (sprite sheets built at setup) |
"""

from __future__ import annotations

import mimetypes
from pathlib import Path
from urllib.parse import unquote

STATIC = Path(__file__).resolve().parent / "static"
DEFAULT_ASSETS = Path(__file__).resolve().parents[3] / "web"

_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
    ".map": "application/json",
    ".pbf": "application/x-protobuf",
    ".png": "image/png",
    ".svg": "image/svg+xml",
}


def assets_root(configured: Path | None) -> Path:
    return Path(configured) if configured else DEFAULT_ASSETS


class Assets:
    def __init__(self, root: Path):
        self.root = Path(root)
        self.mounts: list[tuple[str, Path]] = [
            ("/web/lib/maplibre-gl/", self.root / "node_modules" / "maplibre-gl" / "dist"),
            ("/web/lib/basemaps/", self.root / "node_modules" / "@protomaps" / "basemaps" / "dist"),
            ("/web/fonts/", self.root / "build" / "fonts"),
            ("/web/sprites/", self.root / "build" / "sprites"),
            ("/web/", STATIC),
        ]

    def missing(self) -> list[str]:
        """Asset folders that are not installed (the page cannot work without them)."""
        return [str(d) for _, d in self.mounts if not d.is_dir()]

    def resolve(self, path: str) -> Path | None:
        """The file a URL path names, or None (unknown, missing, or escaping its folder)."""
        if path == "/":
            return STATIC / "index.html"
        for prefix, base in self.mounts:
            if path.startswith(prefix):
                rel = unquote(path[len(prefix):])
                if not rel or "\x00" in rel:
                    return None
                base = base.resolve()
                target = (base / rel).resolve()
                if not target.is_relative_to(base) or not target.is_file():
                    return None
                return target
        return None

    @staticmethod
    def content_type(path: Path) -> str:
        return _TYPES.get(path.suffix) or mimetypes.guess_type(path.name)[0] or "application/octet-stream"

    @staticmethod
    def cache_control(path: Path) -> str:
        if path.parent == STATIC:
            return "no-cache"  # the page and its script change with the engine
        return "public, max-age=86400"
