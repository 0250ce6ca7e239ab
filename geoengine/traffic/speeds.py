"""Measured speeds from a file: reading, mapping onto the graph's directed edges, storing beside the bundle.

Two forms are read (docs/traffic.md), comma separated, one row a line, an optional header line:

- OSRM's segment speed file: `from_osm_node_id,to_osm_node_id,speed_kmh[,rate]`. One row is one
  direction of one OSM segment (two consecutive nodes of a way). `rate` is checked (a positive number)
  and otherwise unused: geoengine's cost is the travel time weighted by the costing's preferences.
- The per-way form: `way_id,speed_kmh[,direction]`, `direction` one of `both` (the default),
  `forward` (along the way's node order) or `backward`.

Every row must name something the graph has, with a finite speed above 0: the first bad line is named
in a `SpeedFileError` (HTTP 400) and nothing is applied. A row given twice counts once (the last wins).

An edge of the graph runs between two junctions and may span many OSM segments: the overlay keeps per
covered directed edge the metres the file covers and the seconds they take at the given speeds; the
costing adds the rest of the edge at its profile speed (geoengine.costing.auto.with_measured_speeds).
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import json
import logging
import os
import re
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numba
import numpy as np

from geoengine.arrays import member, unique
from geoengine.errors import FieldError, InvalidRequest

log = logging.getLogger("geoengine.traffic")

SEGMENT = "segment"
WAY = "way"
FORMS = (SEGMENT, WAY)
HEADERS = {
    SEGMENT: ("from_osm_node_id", "to_osm_node_id", "speed_kmh", "rate"),
    WAY: ("way_id", "speed_kmh", "direction"),
}
DIRECTIONS = ("both", "forward", "backward")
#: the per-piece arrays of a segment-speed overlay (stored when present; older generations lack them)
PIECE_ARRAYS = ("piece_edge", "piece_start", "piece_time")
MAX_LISTED = 10  # bad lines listed in one error (the first is always named in its detail)


class SpeedFileError(InvalidRequest):
    """A speed file that cannot be applied (HTTP 400); `line` is the first bad line (1-based, or None)."""

    def __init__(self, detail: str, line: int | None = None, errors: list[FieldError] | None = None):
        super().__init__(detail, errors=errors or ([FieldError(f"line {line}", detail)] if line else []))
        self.line = line


@dataclass
class SpeedTable:
    """The rows of a speed file, checked: `form` (segment or way), `lines` (1-based line of each row) and
    per row `a` (from node or way id), `b` (to node; way form: 0 both, 1 forward, 2 backward), `speed`."""

    form: str
    lines: np.ndarray
    a: np.ndarray
    b: np.ndarray
    speed: np.ndarray
    source: str = ""
    sha256: str = ""

    def __len__(self) -> int:
        return int(self.a.shape[0])


@dataclass
class SpeedOverlay:
    """Measured speeds mapped onto a graph: per covered directed edge (`edges`, sorted), the metres the
    file covers (`cov_len`) and the seconds they take at the file's speeds (`cov_time`). `info` says
    where they come from (source, form, rows, applied_at, generation).

    Segment speeds also keep each covered piece (one OSM segment of one directed edge): `piece_edge`,
    `piece_start` (the shape index of the piece's first point in the segment's own order: the piece runs
    from shape point piece_start to piece_start + 1) and `piece_time` (its seconds at the file's speed),
    so that a route starting or ending inside an edge is timed over the pieces it covers
    (`piece_timing`); None for way speeds (one speed over a whole edge) and older stored generations."""

    edges: np.ndarray
    cov_len: np.ndarray
    cov_time: np.ndarray
    info: dict = field(default_factory=dict)
    piece_edge: np.ndarray | None = None
    piece_start: np.ndarray | None = None
    piece_time: np.ndarray | None = None

    @property
    def generation(self) -> int:
        return int(self.info.get("generation", 0))


# ------------------------------------------------------------------------------------------ reading
def line_error(first_line: int, message: str, lines=None, messages=None) -> SpeedFileError:
    errors = None
    if lines is not None:
        errors = [FieldError(f"line {int(ln)}", m) for ln, m in zip(lines[:MAX_LISTED], messages[:MAX_LISTED],
                                                                    strict=True)]
    return SpeedFileError(f"line {first_line}: {message}", line=first_line, errors=errors)


def _check_column(values: np.ndarray, ok: np.ndarray, lines: np.ndarray, what: str) -> None:
    """Raise naming the first line whose value fails `ok` (vectorised; the message shows the value)."""
    if ok.all():
        return
    bad = np.flatnonzero(~ok)
    msgs = [f"{what}, got {str(values[i])!r}" for i in bad[:MAX_LISTED].tolist()]
    n = len(bad)
    more = f" ({n} bad lines)" if n > 1 else ""
    raise line_error(int(lines[bad[0]]), f"{msgs[0]}{more}", lines[bad], msgs)


def _ints(col: np.ndarray, lines: np.ndarray, what: str) -> np.ndarray:
    s = np.char.strip(col.astype(str))
    ok = (np.char.str_len(s) > 0) & (np.char.str_len(s) <= 18) & np.char.isdigit(s)
    _check_column(col, ok, lines, f"{what} must be a positive integer")
    return s.astype(np.int64)


def _positive(col: np.ndarray, lines: np.ndarray, what: str) -> np.ndarray:
    s = np.char.strip(col.astype(str))
    import pandas as pd

    v = pd.to_numeric(pd.Series(s), errors="coerce").to_numpy(dtype=np.float64)
    ok = np.isfinite(v) & (v > 0)
    _check_column(col, ok, lines, f"{what} must be a finite number above 0")
    return v


def read_source(source, what: str) -> tuple[bytes, str, str]:
    """(bytes, a name for messages, sha256 hex) of a speed or profile file given as a path, bytes or
    the text itself (a string with a newline, or with a comma that names no file)."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        data, name = bytes(source), "<bytes>"
    elif isinstance(source, str) and ("\n" in source or ("," in source and not is_file_name(source))):
        data, name = source.encode(), "<text>"
    else:
        path = Path(source)
        if not path.is_file():
            raise SpeedFileError(f"{what} {path} does not exist or is not a file")
        data, name = path.read_bytes(), str(path.resolve())
    return data, name, hashlib.sha256(data).hexdigest()


def is_file_name(name: str) -> bool:
    try:
        return Path(name).is_file()
    except (OSError, ValueError):  # a name too long for the file system is text
        return False


def read_speed_table(source, form: str | None = None) -> SpeedTable:
    """The checked rows of a speed file: `source` a path, CSV bytes or text, or a pandas DataFrame (columns
    named as the form's header: from_osm_node_id, to_osm_node_id, speed_kmh[, rate] or way_id,
    speed_kmh[, direction]). `form`: "segment" or "way" (default: from the header or the columns).
    Raises SpeedFileError naming the first bad line (an empty file, wrong columns, an id that is not a
    positive integer, a speed that is not a finite number above 0, an unknown direction)."""
    if form is not None and form not in FORMS:
        raise InvalidRequest.field("form", f"must be one of {', '.join(FORMS)}; got {form!r}")
    pd = sys.modules.get("pandas")  # a DataFrame exists only once pandas is imported: its import (0.25 s)
    if pd is not None and isinstance(source, pd.DataFrame):  # is paid only by the files numpy cannot read
        return _from_frame(source, form)
    data, name, sha = read_source(source, "speed file")
    if not data.strip():
        raise SpeedFileError("line 1: the speed file is empty (no rows)", line=1)
    fast = _numeric_table(data, form)
    if fast is None:
        fast = _fast_table(data, form)
    if fast is not None:
        fast.source, fast.sha256 = name, sha
        return fast
    import pandas as pd

    try:
        df = pd.read_csv(io.BytesIO(data), header=None, dtype=str, names=range(5), keep_default_na=False,
                         skip_blank_lines=False, engine="c")
    except pd.errors.ParserError as exc:
        m = re.search(r"line (\d+), saw (\d+)", str(exc))
        if m:
            raise line_error(int(m.group(1)), f"too many columns ({m.group(2)}); a speed file has 2 to 4") from None
        raise SpeedFileError(f"the speed file cannot be read as CSV: {exc}") from None
    except UnicodeDecodeError as exc:
        raise SpeedFileError(f"the speed file is not UTF-8 text: {exc}") from None
    cols = df.to_numpy(dtype=str)
    lines = np.arange(1, len(cols) + 1)
    width = (np.char.str_len(np.char.strip(cols)) > 0)
    blank = ~width.any(axis=1)
    cols, lines, width = cols[~blank], lines[~blank], width[~blank]
    if len(cols) == 0:
        raise SpeedFileError("line 1: the speed file is empty (no rows)", line=1)
    header = None
    first = cols[0, 0].strip()
    if first and not first.isdigit():  # a header line
        header = tuple(c.strip().lower() for c in cols[0] if c.strip())
        cols, lines, width = cols[1:], lines[1:], width[1:]
        got = None
        for f, names in HEADERS.items():
            if names[: len(header)] == header and len(header) >= (3 if f == SEGMENT else 2):
                got = f
        if got is None:
            raise line_error(1, f"unknown columns {', '.join(header)}; expected "
                       f"{','.join(HEADERS[SEGMENT][:3])}[,rate] or {','.join(HEADERS[WAY][:2])}[,direction]")
        if form is not None and form != got:
            raise line_error(1, f"the header names the {got} form, the call asked for the {form} form")
        form = got
        if len(cols) == 0:
            raise SpeedFileError("line 2: the speed file has a header and no rows", line=2)
    # columns per row: the last non-empty field (a row "1,2,,4" has an empty field, caught below)
    ncol = np.where(width.any(axis=1), width.shape[1] - np.argmax(width[:, ::-1], axis=1), 0)
    n = int(ncol[0]) if header is None else len(header)
    if form is None:
        if n == 2:
            form = WAY
        elif n == 4:
            form = SEGMENT
        elif n == 3:
            # the way form's third column is a direction word; the segment form's a number (any row may be
            # bad: a direction anywhere, or a first row's third field that is not a number, says "way")
            third = np.char.lower(np.char.strip(cols[:, 2]))
            try:
                float(third[0])
                first_is_number = True
            except ValueError:
                first_is_number = False
            form = WAY if (np.isin(third, DIRECTIONS).any() or not first_is_number) else SEGMENT
        else:
            raise line_error(int(lines[0]), f"{n} column(s); a speed file has from_osm_node_id,to_osm_node_id,speed_kmh"
                       "[,rate] (OSRM's segment speed file) or way_id,speed_kmh[,direction]")
    lo, hi = (3, 4) if form == SEGMENT else (2, 3)
    wrong = (ncol < lo) | (ncol > (hi if header is None else len(header)))  # the optional column per row
    if wrong.any():
        i = int(np.flatnonzero(wrong)[0])
        raise line_error(int(lines[i]), f"{int(ncol[i])} column(s); the {form} form has "
                   f"{','.join(HEADERS[form][:lo])}[,{HEADERS[form][lo]}]")
    if form == SEGMENT:
        a = _ints(cols[:, 0], lines, "from_osm_node_id")
        b = _ints(cols[:, 1], lines, "to_osm_node_id")
        speed = _positive(cols[:, 2], lines, "speed_kmh")
        has_rate = ncol >= 4
        if has_rate.any():
            _positive(cols[has_rate, 3], lines[has_rate], "rate")
        same = a == b
        if same.any():
            i = int(np.flatnonzero(same)[0])
            raise line_error(int(lines[i]), f"from_osm_node_id and to_osm_node_id are the same node ({a[i]})")
    else:
        a = _ints(cols[:, 0], lines, "way_id")
        speed = _positive(cols[:, 1], lines, "speed_kmh")
        d = np.char.lower(np.char.strip(cols[:, 2]))
        d = np.where(d == "", "both", d)
        ok = np.isin(d, DIRECTIONS)
        _check_column(cols[:, 2], ok, lines, f"direction must be one of {', '.join(DIRECTIONS)}")
        b = np.select([d == "both", d == "forward"], [0, 1], 2).astype(np.int64)
    return SpeedTable(form, lines.astype(np.int64), a, b, speed.astype(np.float64), name, sha)


_NUMERIC = b"0123456789,. \t\n\r-eE"


def _numeric_table(data: bytes, form: str | None) -> SpeedTable | None:
    """`_fast_table` of an all-numeric file with one column count (the common case, OSRM's own files)
    by numpy's C reader, without importing pandas; None when anything else is in it."""
    head, _, body = data.partition(b"\n")
    skip = 0
    if head.strip() and not head.strip()[:1].isdigit():
        header = tuple(c.strip().lower() for c in head.decode("utf-8", "replace").split(",") if c.strip())
        got = [f for f, names in HEADERS.items()
               if names[: len(header)] == header and len(header) >= (3 if f == SEGMENT else 2)]
        if not got or (form is not None and form != got[0]):
            return None
        skip, first = 1, body.partition(b"\n")[0]
    else:
        body, first = data, head
    if not body.strip() or body.translate(None, _NUMERIC) or not first.strip():
        return None
    text = body.replace(b"\r\n", b"\n")
    if text.startswith(b"\n") or b"\n\n" in text.rstrip(b"\n") or b"\n \n" in text:
        return None  # blank lines: the text path keeps the line numbers
    ncol = first.count(b",") + 1
    f = {2: WAY, 3: SEGMENT, 4: SEGMENT}.get(ncol)
    if f is None or (form is not None and form != f):
        return None
    names = {2: ("a", "s"), 3: ("a", "b", "s"), 4: ("a", "b", "s", "r")}[ncol]
    dt = [(n, "i8" if n in "ab" else "f8") for n in names]
    try:
        arr = np.loadtxt(io.BytesIO(text), delimiter=",", dtype=dt, ndmin=1)
    except ValueError:
        return None
    n = arr.shape[0]
    if n == 0:
        return None
    a, speed = arr["a"], arr["s"].astype(np.float64)
    ok = (a > 0).all() and (a < 10**18).all() and np.isfinite(speed).all() and (speed > 0).all()
    if ncol == 4:
        ok = ok and np.isfinite(arr["r"]).all() and (arr["r"] > 0).all()
    if ncol >= 3:
        b = arr["b"]
        ok = ok and (b > 0).all() and (b < 10**18).all() and not (a == b).any()
    else:
        b = np.zeros(n, np.int64)
    if not ok:
        return None
    lines = np.arange(1 + skip, n + 1 + skip, dtype=np.int64)
    return SpeedTable(f, lines, np.ascontiguousarray(a, np.int64), np.ascontiguousarray(b, np.int64),
                      np.ascontiguousarray(speed))


def _fast_table(data: bytes, form: str | None) -> SpeedTable | None:
    """The table of a plainly valid file from the C parser's numbers (about 20x faster than the checked
    text path); None when anything is unusual (then the text path reads it and names the bad line).
    Accepts exactly what the text path accepts, which tests compare."""
    first_line = data.split(b"\n", 1)[0].strip()
    skip = 0
    if first_line and not first_line[:1].isdigit():  # a header: leave its checks to the text path
        header = tuple(c.strip().lower() for c in first_line.decode("utf-8", "replace").split(",") if c.strip())
        got = [f for f, names in HEADERS.items()
               if names[: len(header)] == header and len(header) >= (3 if f == SEGMENT else 2)]
        if not got or (form is not None and form != got[0]):
            return None
        form, skip = got[0], 1
    import pandas as pd

    try:
        df = pd.read_csv(io.BytesIO(data), header=None, names=range(5), skiprows=skip, engine="c",
                         skip_blank_lines=False)
    except Exception:  # noqa: BLE001 - the text path says what is wrong
        return None
    if len(df) == 0 or df[4].notna().any():
        return None
    lines = np.arange(1 + skip, len(df) + 1 + skip, dtype=np.int64)
    c = [df[i] for i in range(4)]
    ints = lambda col: col.dtype.kind == "i" and bool((col.to_numpy() > 0).all())  # noqa: E731
    pos = lambda v: bool((np.isfinite(v) & (v > 0)).all())  # noqa: E731
    if form is None:
        if c[2].isna().all():
            form = WAY
        elif c[3].notna().all():
            form = SEGMENT
        elif c[2].dtype.kind in "if":
            form = SEGMENT
        else:
            form = WAY
    if form == SEGMENT:
        if not (ints(c[0]) and ints(c[1]) and c[2].dtype.kind in "if" and c[3].dtype.kind in "f" or
                ints(c[0]) and ints(c[1]) and c[2].dtype.kind in "if" and c[3].dtype.kind in "i"):
            return None
        speed = c[2].to_numpy(dtype=np.float64)
        rate = c[3].to_numpy(dtype=np.float64)
        if not pos(speed) or not pos(rate[~np.isnan(rate)]):
            return None
        a, b = c[0].to_numpy(np.int64), c[1].to_numpy(np.int64)
        if (a == b).any():
            return None
        return SpeedTable(SEGMENT, lines, a, b, speed)
    if c[3].notna().any() or not ints(c[0]) or c[1].dtype.kind not in "if":
        return None
    speed = c[1].to_numpy(dtype=np.float64)
    if not pos(speed):
        return None
    if c[2].isna().all():
        b = np.zeros(len(df), np.int64)
    elif not pd.api.types.is_numeric_dtype(c[2]):
        d = c[2].fillna("both").astype(str).str.strip().str.lower().to_numpy()
        d = np.where(d == "", "both", d)
        if not np.isin(d, DIRECTIONS).all():
            return None
        b = np.select([d == "both", d == "forward"], [0, 1], 2).astype(np.int64)
    else:
        return None
    return SpeedTable(WAY, lines, c[0].to_numpy(np.int64), np.asarray(b), speed)


def _from_frame(df, form: str | None) -> SpeedTable:
    names = tuple(str(c).strip().lower() for c in df.columns)
    got = None
    for f, h in HEADERS.items():
        if names == h[: len(names)] and len(names) >= (3 if f == SEGMENT else 2):
            got = f
    if got is None or (form is not None and form != got):
        raise SpeedFileError(f"the DataFrame's columns {', '.join(names) or '(none)'} are not a speed table: "
                             f"expected {','.join(HEADERS[SEGMENT][:3])}[,rate] or "
                             f"{','.join(HEADERS[WAY][:2])}[,direction]")
    if len(df) == 0:
        raise SpeedFileError("the speed table is empty (no rows)")
    buf = io.StringIO()
    df.to_csv(buf, index=False, header=False)  # "line N" of an error: the frame's row N, counted from 1
    t = read_speed_table(buf.getvalue().encode(), got)
    t.source = "<DataFrame>"
    return t


# ------------------------------------------------------------------------------------------ mapping
def _haversine(graph, p: np.ndarray) -> np.ndarray:
    from geoengine.geo import haversine_m

    lon, lat = graph.shape_lon, graph.shape_lat
    return haversine_m(np.asarray(lat[p]), np.asarray(lon[p]), np.asarray(lat[p + 1]), np.asarray(lon[p + 1]))


def _last_wins(keys: np.ndarray) -> np.ndarray:
    """Indices of the last occurrence of each distinct key, in key order."""
    rev = keys[::-1]
    _, first = np.unique(rev, return_index=True)
    return len(keys) - 1 - first


def map_speeds(graph, table: SpeedTable) -> SpeedOverlay:
    """The overlay of `table` on `graph`. Raises SpeedFileError naming the first row whose OSM segment
    (from, to) or way the graph has no road for."""
    if table.form == SEGMENT:
        edges, piece_len, rows, start = _map_segments(graph, table)
    else:
        (edges, piece_len, rows), start = _map_ways(graph, table), None
    piece_time = piece_len / (table.speed[rows] / 3.6)
    ue, inv = np.unique(edges, return_inverse=True)
    cov_len = np.bincount(inv, weights=piece_len, minlength=len(ue))
    cov_time = np.bincount(inv, weights=piece_time, minlength=len(ue))
    ok = cov_len > 0  # zero-length pieces (duplicate positions) carry no time
    pieces = {}
    if start is not None:
        order = np.lexsort((start, edges))
        pieces = {"piece_edge": edges[order].astype(np.int64), "piece_start": start[order].astype(np.int64),
                  "piece_time": piece_time[order].astype(np.float64)}
    return SpeedOverlay(ue[ok].astype(np.int64), cov_len[ok], cov_time[ok],
                        {"form": table.form, "rows": len(table), "edges": int(ok.sum())}, **pieces)


def map_pieces(graph, table: SpeedTable):
    """(directed edge, metres, row of `table`) of every piece of road the table's rows name (the last
    row naming a piece wins); SpeedFileError naming the first row the graph has no road for. Only
    `form`, `a`, `b` and `lines` of the table are read (the time-of-day profiles share it)."""
    return _map_segments(graph, table)[:3] if table.form == SEGMENT else _map_ways(graph, table)


def _map_segments(graph, t: SpeedTable):
    sid = getattr(graph, "shape_osm_id", None)
    if sid is None:
        raise SpeedFileError("this bundle's graph keeps no OSM node ids of its shape points (built before "
                             "segment speeds); rebuild the bundle, or give speeds per way (way_id,speed_kmh)")
    off = np.asarray(graph.shape_offsets)
    P = int(sid.shape[0])
    first = np.zeros(P, dtype=bool)
    first[off[:-1]] = True
    last = np.zeros(P, dtype=bool)
    last[off[1:] - 1] = True
    hit = _ids_in(sid, unique(t.a))  # shape points a row starts at
    fw = np.flatnonzero(hit & ~last)  # piece p -> p+1 along the way: edge 2k
    bw = np.flatnonzero(hit & ~first)  # piece p -> p-1 against it: edge 2k+1
    del hit, first, last
    ka = np.concatenate([sid[fw], sid[bw]]).astype(np.int64)
    kb = np.concatenate([sid[fw + 1], sid[bw - 1]]).astype(np.int64)
    piece = np.concatenate([fw, bw - 1])
    seg = np.searchsorted(off, piece, side="right") - 1
    edge = 2 * seg + np.concatenate([np.zeros(len(fw), np.int64), np.ones(len(bw), np.int64)])
    # compound keys over the ids in play: (rank of a) * M + (rank of b)
    ids = unique(np.concatenate([ka, kb, t.a, t.b]))
    M = np.int64(len(ids))
    ck = np.searchsorted(ids, ka).astype(np.int64) * M + np.searchsorted(ids, kb)
    qk = np.searchsorted(ids, t.a).astype(np.int64) * M + np.searchsorted(ids, t.b)
    order = np.argsort(ck, kind="stable")
    ck = ck[order]
    lo = np.searchsorted(ck, qk, side="left")
    hi = np.searchsorted(ck, qk, side="right")
    missing = hi == lo
    if missing.any():
        bad = np.flatnonzero(missing)
        msgs = [f"no road segment from OSM node {t.a[i]} to OSM node {t.b[i]} in this bundle's graph "
                "(two consecutive nodes of a routable way)" for i in bad[:MAX_LISTED].tolist()]
        more = f" ({len(bad)} rows name unknown segments)" if len(bad) > 1 else ""
        raise line_error(int(t.lines[bad[0]]), msgs[0] + more, t.lines[bad], msgs)
    cnt = hi - lo
    rows = np.repeat(np.arange(len(t)), cnt)
    starts = np.repeat(lo - (np.cumsum(cnt) - cnt), cnt) + np.arange(int(cnt.sum()))
    match = order[starts]  # candidate index per (row, match)
    e = edge[match]
    p = piece[match]
    # the last row naming one piece of one directed edge wins
    keep = _last_wins(e * np.int64(P) + p)
    e, p, rows = e[keep], p[keep], rows[keep]
    return e, _haversine(graph, p), rows, p


#: the bitmap `_ids_in` screens ids with before its binary search (4 Mi bits: a few thousand rows set
#: well under 1 % of it)
_ID_BITS_MASK = (1 << 22) - 1


def _ids_in(ids: np.ndarray, table: np.ndarray) -> np.ndarray:
    """bool[len(ids)]: whether each id is in `table` (sorted, distinct), as `arrays.member`, in one
    Numba pass over the graph's shape points: each id's low 22 bits tested in a bitmap of the table's
    first, the binary search only for the ids that pass (a file's rows touch a small share of the
    points: at 64 copies of Liechtenstein 0.12 -> 0.03 s of CPU for 4 M points)."""
    ids = np.asarray(ids)
    table = np.asarray(table, dtype=np.int64)
    if ids.dtype.kind not in "iu" or not len(table):
        return member(ids, table)
    bits = np.zeros(_ID_BITS_MASK + 1, dtype=np.bool_)
    bits[table & _ID_BITS_MASK] = True
    return _ids_in_kernel(ids, table, bits, np.int64(_ID_BITS_MASK))


@numba.njit(cache=True, nogil=True)
def _ids_in_kernel(ids, table, bits, mask):
    out = np.zeros(ids.shape[0], np.bool_)
    n = table.shape[0]
    for i in range(ids.shape[0]):
        v = np.int64(ids[i])
        if not bits[v & mask]:
            continue
        lo, hi = 0, n
        while lo < hi:
            m = (lo + hi) >> 1
            if table[m] < v:
                lo = m + 1
            else:
                hi = m
        out[i] = lo < n and table[lo] == v
    return out


def _map_ways(graph, t: SpeedTable):
    seg_way = np.asarray(graph.seg_way)
    # rows per (way, direction): both -> forward and backward
    both = t.b == 0
    rw = np.concatenate([t.a, t.a[both]])
    rd = np.concatenate([np.where(t.b == 2, 1, 0), np.ones(int(both.sum()), np.int64)])  # 0 along, 1 against
    rr = np.concatenate([np.arange(len(t)), np.flatnonzero(both)])
    order = np.argsort(rr, kind="stable")  # file order, so that the last row wins
    rw, rd, rr = rw[order], rd[order], rr[order]
    known = member(rw, seg_way)
    if not known.all():
        bad_rows = unique(rr[~known])
        msgs = [f"no routable road of OSM way {t.a[i]} in this bundle's graph" for i in bad_rows[:MAX_LISTED].tolist()]
        more = f" ({len(bad_rows)} rows name unknown ways)" if len(bad_rows) > 1 else ""
        raise line_error(int(t.lines[bad_rows[0]]), msgs[0] + more, t.lines[bad_rows], msgs)
    key = rw * 2 + rd
    keep = _last_wins(key)  # sorted by key
    key, rr = key[keep], rr[keep]
    segs = np.flatnonzero(member(seg_way, unique(rw)))
    sk = np.concatenate([seg_way[segs] * 2, seg_way[segs] * 2 + 1])
    se = np.concatenate([2 * segs, 2 * segs + 1]).astype(np.int64)
    pos = np.minimum(np.searchsorted(key, sk), len(key) - 1)
    hit = key[pos] == sk
    e = se[hit]
    rows = rr[pos[hit]]
    return e, np.asarray(graph.seg_length, dtype=np.float64)[e >> 1], rows


# ------------------------------------------------------------------------------------------ storage
_VERSION_DIR = re.compile(r"^\.(.+)\.\d{8}T\d{6}-[0-9a-f]{6}$")


def speeds_dir(bundle_path: str | Path) -> Path:
    """Where a bundle's measured speeds live: `<bundle>.speeds/` beside the bundle folder (the bundle
    itself is never written after its build). For a published bundle (`<out>` a link to the version
    folder `.<out>.<build id>`, geoengine.bundler.pipeline.publish) that is `<out>.speeds/`, so that a
    new build finds the folder (and ignores speeds applied to an older build, see SpeedStore.load)."""
    p = Path(bundle_path)
    m = _VERSION_DIR.match(p.name)
    name = m.group(1) if m else p.name
    return p.parent / f"{name}.speeds"


class SpeedStore:
    """The measured speeds of one bundle, stored beside it (`speeds_dir`):

        current.json          {"generation", "file" (null after a reset), "source", "sha256", "form",
                               "rows", "edges", "bytes", "applied_at", "bundle_created"}
        speeds-<gen>.npz      edges int64, cov_len float64, cov_time float64

    `apply` writes the arrays, then replaces current.json in one rename: a reader sees the old
    generation or the new one, never a part. `stamp()` is one stat of current.json (what a worker checks
    before each request)."""

    def __init__(self, bundle_path: str | Path, bundle_created: str | None = None, root: str | Path | None = None):
        self.dir = speeds_dir(bundle_path)
        if root is not None:  # Settings.speeds_dir (GEOENGINE_SPEEDS_DIR)
            self.dir = Path(root) / self.dir.name
        self.current = self.dir / "current.json"
        self.bundle_created = bundle_created

    def stamp(self):
        try:
            st = os.stat(self.current)
        except FileNotFoundError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def read_info(self) -> dict | None:
        try:
            return json.loads(self.current.read_text())
        except FileNotFoundError:
            return None

    WHAT = "speeds"  # in log lines
    TMP_PREFIX = ".current"

    def load_current(self, graph, names, optional=()) -> tuple[dict, dict] | None:
        """(the current generation's arrays `names`, its info); None when none is applied, after a reset,
        or when it was applied to another build of the bundle or names edges beyond this graph's."""
        info = self.read_info()
        if not info or not info.get("file"):
            return None
        if self.bundle_created and info.get("bundle_created") not in (None, self.bundle_created):
            log.warning("%s in %s were applied to another build of the bundle (%s); ignored", self.WHAT, self.dir,
                        info.get("bundle_created"))
            return None
        with np.load(self.dir / info["file"]) as z:
            arrays = {k: z[k] for k in names}
            arrays.update({k: z[k] for k in optional if k in z.files})
        if len(arrays["edges"]) and int(arrays["edges"].max()) >= graph.n_edges:
            log.warning("%s in %s name edges beyond this graph's; ignored", self.WHAT, self.dir)
            return None
        return arrays, info

    def load(self, graph) -> SpeedOverlay | None:
        """The current overlay (None: none applied, a reset, or speeds for another build of the bundle)."""
        got = self.load_current(graph, ("edges", "cov_len", "cov_time"), optional=PIECE_ARRAYS)
        if got is None:
            return None
        a, info = got
        return SpeedOverlay(a["edges"], a["cov_len"], a["cov_time"], info,
                            **{k: a[k] for k in PIECE_ARRAYS if k in a})

    def _write_current(self, info: dict) -> None:
        tmp = self.dir / f"{self.TMP_PREFIX}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(info, indent=2))
        os.replace(tmp, self.current)

    def _locked(self):
        self.dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.dir / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        return fd

    def apply(self, graph, source, form: str | None = None, label: str | None = None) -> dict:
        """Read, check and map `source` (see read_speed_table), then store it as the next generation;
        returns its info (`label`: the source to record instead of the path). Nothing is written when the
        file is refused."""
        table = read_speed_table(source, form)
        if label:
            table.source = label
        overlay = map_speeds(graph, table)
        overlay.info = self._publish(
            lambda tmp: np.savez(tmp, edges=overlay.edges, cov_len=overlay.cov_len, cov_time=overlay.cov_time,
                                 **{k: getattr(overlay, k) for k in PIECE_ARRAYS
                                    if getattr(overlay, k) is not None}),
            {"source": table.source, "sha256": table.sha256, "form": table.form, "rows": len(table),
             "edges": int(len(overlay.edges))})
        return overlay.info

    def _publish(self, save, fields: dict) -> dict:
        """Store the next generation under the lock: `save(path)` writes its arrays (`<WHAT>-<gen>.npz`),
        then the info (`fields`, the generation, file, size, time and bundle) replaces the current file in
        one rename, and the files of older generations but the previous one go. Returns the info."""
        fd = self._locked()
        try:
            prev = self.read_info() or {}
            gen = int(prev.get("generation", 0)) + 1
            name = f"{self.WHAT}-{gen}.npz"
            tmp = self.dir / f".{name}.{os.getpid()}.tmp.npz"
            save(tmp)
            os.replace(tmp, self.dir / name)
            info = {"generation": gen, "file": name, **fields, "bytes": int((self.dir / name).stat().st_size),
                    "applied_at": datetime.now(UTC).isoformat(timespec="seconds"),
                    "bundle_created": self.bundle_created}
            self._write_current(info)
            self._prune(keep=(name, prev.get("file")))
        finally:
            os.close(fd)
        return info

    def reset(self) -> dict:
        """Back to the profile speeds (a new generation without a file)."""
        fd = self._locked()
        try:
            prev = self.read_info() or {}
            info = {"generation": int(prev.get("generation", 0)) + 1, "file": None, "source": None,
                    "applied_at": datetime.now(UTC).isoformat(timespec="seconds"),
                    "bundle_created": self.bundle_created}
            self._write_current(info)
            self._prune(keep=(prev.get("file"),))
        finally:
            os.close(fd)
        return info

    def _prune(self, keep) -> None:
        """Drop data files of older generations (the previous one stays for readers that are loading it)."""
        for f in self.dir.glob(f"{self.WHAT}-*.npz"):
            if f.name not in keep:
                try:
                    f.unlink()
                except OSError:
                    pass
