"""Build the map page's glyphs and sprites at setup time (`python -m geoengine.services.map_assets`).

Glyphs: MapLibre fetches signed-distance-field glyph PBFs per font stack and range of 256 code points.
They are made here from Debian's Noto fonts (package fonts-noto-core, SIL OFL 1.1) with FreeType
(freetype-py): each glyph rendered at 24 px, its signed distance computed with an exact Euclidean
distance transform (scipy), encoded as MapLibre expects (buffer 3, radius 8, cutoff 0.25: the edge is
the value 191). The three stacks the `@protomaps/basemaps` style asks for are made: "Noto Sans
Regular", "Noto Sans Medium" (from NotoSans-Bold: Debian ships no Medium) and "Noto Sans Italic". Every
range 0-65535 gets a file (empty where the font has no glyph), so no glyph request fails.

Sprites: the style's icons (`townspot`, `capital`, `arrow` and the POI kinds) are drawn here as simple
pictograms (a disc in the kind's group colour with the kind's initial), at pixel ratios 1 and 2:
`light.json`/`light.png` and `light@2x.json`/`light@2x.png`. They are not Protomaps' own icon set.
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
import time
import zlib
from pathlib import Path

import numpy as np

FONT_DIRS = [Path("/usr/share/fonts/truetype/noto"), Path("/usr/share/fonts/opentype/noto")]
FONTSTACKS = {
    "Noto Sans Regular": "NotoSans-Regular.ttf",
    "Noto Sans Medium": "NotoSans-Bold.ttf",
    "Noto Sans Italic": "NotoSans-Italic.ttf",
}
SIZE = 24
BUFFER = 3
RADIUS = 8.0
CUTOFF = 0.25
TOP_OFFSET = 26  # MapLibre places a glyph's `top` relative to a line box; its own local glyphs use ascent - 27


# -- protobuf (the glyphs.proto of MapLibre, written by hand: a handful of fields) ---------------------
def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(num: int, wire: int) -> bytes:
    return _varint((num << 3) | wire)


def _bytes(num: int, data: bytes) -> bytes:
    return _field(num, 2) + _varint(len(data)) + data


def _uint(num: int, v: int) -> bytes:
    return _field(num, 0) + _varint(v)


def _sint(num: int, v: int) -> bytes:
    return _field(num, 0) + _varint((v << 1) ^ (v >> 63))


def encode_glyph(cp: int, bitmap: bytes, width: int, height: int, left: int, top: int, advance: int) -> bytes:
    body = _uint(1, cp)
    if bitmap:
        body += _bytes(2, bitmap)
    body += _uint(3, width) + _uint(4, height) + _sint(5, left) + _sint(6, top) + _uint(7, advance)
    return body


def encode_range(name: str, start: int, glyphs: list[bytes]) -> bytes:
    stack = _bytes(1, name.encode()) + _bytes(2, f"{start}-{start + 255}".encode())
    for g in glyphs:
        stack += _bytes(3, g)
    return _bytes(1, stack)


# -- signed distance fields ----------------------------------------------------------------------------
def sdf(alpha: np.ndarray) -> np.ndarray:
    """uint8 SDF of a coverage bitmap (0..1 floats), with BUFFER pixels of margin on every side."""
    from scipy.ndimage import distance_transform_edt

    h, w = alpha.shape
    a = np.zeros((h + 2 * BUFFER, w + 2 * BUFFER), dtype=np.float64)
    a[BUFFER:BUFFER + h, BUFFER:BUFFER + w] = alpha
    inside = a >= 0.5
    d_out = distance_transform_edt(~inside)  # distance to the nearest inside pixel, for outside pixels
    d_in = distance_transform_edt(inside)
    d = np.where(inside, -(d_in - 0.5), d_out - 0.5)
    edge = (a > 0) & (a < 1)
    d = np.where(edge, 0.5 - a, d)  # antialiased pixels: coverage gives the sub-pixel distance
    return np.clip(np.round(255 - 255 * (d / RADIUS + CUTOFF)), 0, 255).astype(np.uint8)


def build_fontstack(font: Path, name: str, out: Path) -> int:
    import freetype

    face = freetype.Face(str(font))
    face.set_pixel_sizes(0, SIZE)
    by_range: dict[int, list[bytes]] = {}
    charcode, gindex = face.get_first_char()
    n = 0
    while gindex:
        if charcode <= 0xFFFF:
            face.load_char(charcode, freetype.FT_LOAD_RENDER | freetype.FT_LOAD_NO_HINTING)
            g = face.glyph
            bm = g.bitmap
            w, h = bm.width, bm.rows
            advance = int(round(g.advance.x / 64))
            if w and h:
                alpha = np.array(bm.buffer, dtype=np.float64).reshape(h, bm.pitch)[:, :w] / 255.0
                data = sdf(alpha).tobytes()
            else:
                data, w, h = b"", 0, 0
            glyph = encode_glyph(charcode, data, w, h, g.bitmap_left, g.bitmap_top - TOP_OFFSET, advance)
            by_range.setdefault(charcode // 256 * 256, []).append(glyph)
            n += 1
        charcode, gindex = face.get_next_char(charcode, gindex)
    folder = out / name
    folder.mkdir(parents=True, exist_ok=True)
    for start in range(0, 65536, 256):
        (folder / f"{start}-{start + 255}.pbf").write_bytes(encode_range(name, start, by_range.get(start, [])))
    return n


# -- sprites ---------------------------------------------------------------------------------------------
GROUPS = {
    "#e2833b": ["restaurant", "fast_food", "cafe", "bar"],
    "#6f5bb5": ["museum", "theatre", "artwork", "attraction", "library", "townhall", "post_office", "university",
                "school", "books", "building"],
    "#3d7ec4": ["train_station", "bus_stop", "ferry_terminal", "aerodrome", "marina", "toilets", "drinking_water"],
    "#3f9a50": ["park", "forest", "garden", "zoo", "animal", "beach", "peak", "bench", "stadium"],
    "#c0477a": ["supermarket", "convenience", "beauty", "electronics", "clothes"],
}


def _disc(size: int, color: str, ring: str | None = None) -> np.ndarray:
    yy, xx = np.mgrid[0:size, 0:size] + 0.5
    r = np.hypot(xx - size / 2, yy - size / 2)
    rgba = np.zeros((size, size, 4), dtype=np.float64)
    c = np.array([int(color[i:i + 2], 16) for i in (1, 3, 5)], dtype=np.float64)
    cover = np.clip(size / 2 - r, 0, 1)
    rgba[..., :3] = c
    rgba[..., 3] = cover * 255
    if ring:
        rc = np.array([int(ring[i:i + 2], 16) for i in (1, 3, 5)], dtype=np.float64)
        band = np.clip(size / 2 - r, 0, 1) * np.clip(r - (size / 2 - max(1.5, size / 7)), 0, 1)
        rgba[..., :3] = rgba[..., :3] * (1 - band[..., None]) + rc * band[..., None]
    return rgba


def _letter(rgba: np.ndarray, ch: str, font: Path) -> np.ndarray:
    import freetype

    size = rgba.shape[0]
    face = freetype.Face(str(font))
    face.set_pixel_sizes(0, int(size * 0.62))
    face.load_char(ch, freetype.FT_LOAD_RENDER)
    bm = face.glyph.bitmap
    if not bm.width or not bm.rows:
        return rgba
    a = np.array(bm.buffer, dtype=np.float64).reshape(bm.rows, bm.pitch)[:, :bm.width] / 255.0
    y0, x0 = max(0, (size - bm.rows) // 2), max(0, (size - bm.width) // 2)
    h, w = min(bm.rows, size - y0), min(bm.width, size - x0)
    sub = rgba[y0:y0 + h, x0:x0 + w]
    sub[..., :3] = sub[..., :3] * (1 - a[:h, :w, None]) + 255 * a[:h, :w, None]
    return rgba


def _arrow(size: int) -> np.ndarray:
    """A chevron pointing up (the style rotates it 90 degrees along one-way roads)."""
    yy, xx = np.mgrid[0:size, 0:size] + 0.5
    cx = size / 2
    d = np.abs(np.abs(xx - cx) - (yy - size * 0.3) * 0.8)
    cover = np.clip(1.2 - d, 0, 1) * ((yy > size * 0.25) & (yy < size * 0.75))
    rgba = np.zeros((size, size, 4))
    rgba[..., :3] = 90
    rgba[..., 3] = cover * 200
    return rgba


def sprite_images(ratio: int, font: Path) -> dict[str, np.ndarray]:
    s = 17 * ratio
    images = {
        "townspot": _disc(10 * ratio, "#ffffff", "#555555"),
        "capital": _disc(12 * ratio, "#ffffff", "#333333"),
        "arrow": _arrow(12 * ratio),
    }
    images["capital"][4 * ratio:8 * ratio, 4 * ratio:8 * ratio, :3] = 51  # a dot in the ring
    for color, kinds in GROUPS.items():
        for kind in kinds:
            images[kind] = _letter(_disc(s, color), kind[0].upper(), font)
    return images


def png(rgba: np.ndarray) -> bytes:
    h, w, _ = rgba.shape
    raw = np.clip(np.round(rgba), 0, 255).astype(np.uint8)
    rows = b"".join(b"\x00" + raw[y].tobytes() for y in range(h))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 6, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows, 9)) + chunk(b"IEND", b""))


def build_sprites(out: Path, font: Path, name: str = "light") -> int:
    out.mkdir(parents=True, exist_ok=True)
    for ratio in (1, 2):
        images = sprite_images(ratio, font)
        width = 256 * ratio
        x = y = row_h = 0
        index, placed = {}, []
        for key, img in images.items():
            h, w = img.shape[:2]
            if x + w > width:
                x, y, row_h = 0, y + row_h, 0
            index[key] = {"x": x, "y": y, "width": w, "height": h, "pixelRatio": ratio}
            placed.append((x, y, img))
            x += w
            row_h = max(row_h, h)
        sheet = np.zeros((y + row_h, width, 4))
        for px, py, img in placed:
            sheet[py:py + img.shape[0], px:px + img.shape[1]] = img
        suffix = "" if ratio == 1 else "@2x"
        (out / f"{name}{suffix}.json").write_text(json.dumps(index, indent=1))
        (out / f"{name}{suffix}.png").write_bytes(png(sheet))
    return len(images)


def find_font(filename: str) -> Path:
    for d in FONT_DIRS:
        if (d / filename).is_file():
            return d / filename
    raise FileNotFoundError(f"{filename} not found in {', '.join(map(str, FONT_DIRS))}: install fonts-noto-core")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m geoengine.services.map_assets",
                                description="Build the map page's glyph PBFs (from Debian's Noto fonts) and "
                                            "sprite sheets into a folder (./dev setup runs it into web/build).")
    p.add_argument("--out", type=Path, required=True, help="output folder (fonts/ and sprites/ are made in it)")
    args = p.parse_args(argv)
    t0 = time.time()
    for name, filename in FONTSTACKS.items():
        n = build_fontstack(find_font(filename), name, args.out / "fonts")
        print(f"glyphs: {name}: {n} code points from {filename}", file=sys.stderr)
    n = build_sprites(args.out / "sprites", find_font("NotoSans-Bold.ttf"))
    print(f"sprites: {n} icons at 1x and 2x; {time.time() - t0:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
