"""Time-of-day speed profiles: historical speeds per quarter hour of the week (docs/traffic.md).

A week has 672 buckets of 15 minutes, bucket 0 starting Monday 00:00 (local wall-clock time, as
`date_time` gives it): bucket = weekday * 96 + hour * 4 + minute // 15.

The file (comma separated, one row a line; empty lines and lines starting with `#` are skipped):

    profile,<name>,<672 speeds>                  a named profile (name: a letter, then letters, digits, _ or -)
    <way_id>,<profile name>[,<direction>]        a way (both directions, or forward / backward) gets a profile
    <from_node>,<to_node>,<profile name>         one direction of one OSM segment gets a profile
    <way_id>[,<direction>],<672 speeds>          a way's own 672 speeds
    <from_node>,<to_node>,<672 speeds>           a segment's own 672 speeds

A file assigns either ways or node pairs, not both. Speeds are km/h, finite and above 0.

Storage: named profiles exactly (float32, 672 speeds each); a row's own 672 speeds (identical rows
once) as Valhalla stores its predicted speeds: the orthonormal DCT-II of the week's buckets, the first
200 coefficients rounded to int16 (400 bytes instead of 2,688), decoded with the DCT-III; a decoded speed
below 1 km/h counts as 1 km/h. Per covered directed edge: the metres each profile covers.
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass, field
from datetime import datetime

import numba
import numpy as np

from geoengine.errors import InvalidRequest
from geoengine.traffic.speeds import (
    DIRECTIONS,
    SEGMENT,
    WAY,
    SpeedFileError,
    SpeedOverlay,
    SpeedStore,
    SpeedTable,
    line_error,
    map_pieces,
    read_source,
)

log = logging.getLogger("geoengine.traffic")

BUCKET_MINUTES = 15
BUCKETS = 7 * 24 * 60 // BUCKET_MINUTES  # 672
BUCKET_SECONDS = BUCKET_MINUTES * 60
WEEK_SECONDS = BUCKETS * BUCKET_SECONDS
COEFFICIENTS = 200
MIN_DECODED_KMH = 1.0
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")


def bucket_of(when: datetime) -> int:
    """The quarter hour of the week of a local time (Monday 00:00-00:15 is 0, Sunday 23:45 is 671)."""
    return when.weekday() * 96 + when.hour * 4 + when.minute // BUCKET_MINUTES


def week_seconds(when: datetime) -> float:
    """Seconds since Monday 00:00 of the week of `when`."""
    return when.weekday() * 86400.0 + when.hour * 3600.0 + when.minute * 60.0 + when.second


# ------------------------------------------------------------------------------------------ DCT
def _cos_table() -> np.ndarray:
    """float64[COEFFICIENTS, BUCKETS]: the orthonormal DCT basis (row 0 scaled by 1/sqrt 2)."""
    k = np.arange(COEFFICIENTS)[:, None]
    n = np.arange(BUCKETS)[None, :]
    t = np.sqrt(2.0 / BUCKETS) * np.cos(np.pi / BUCKETS * (n + 0.5) * k)
    t[0] *= 1.0 / np.sqrt(2.0)
    return t


COS = _cos_table()


def encode(speeds: np.ndarray) -> np.ndarray:
    """int16[..., 200]: the first 200 orthonormal DCT-II coefficients of [..., 672] speeds, rounded."""
    c = np.rint(np.asarray(speeds, dtype=np.float64) @ COS.T)
    return c.astype(np.int16)


def decode(coef: np.ndarray, bucket=None) -> np.ndarray:
    """Speeds (km/h, at least 1) of [..., 200] coefficients: all 672 buckets, or the one `bucket`."""
    c = np.asarray(coef, dtype=np.float64)
    v = c @ (COS if bucket is None else COS[:, int(bucket)])
    return np.maximum(v, MIN_DECODED_KMH)


def encodable(speeds: np.ndarray) -> np.ndarray:
    """bool[...]: rows whose coefficients fit in int16."""
    c = np.asarray(speeds, dtype=np.float64) @ COS.T
    return (np.abs(c) < 32767).all(axis=-1)


# ------------------------------------------------------------------------------------------ reading
@dataclass
class ProfileTable:
    """A checked profile file: named profiles (`names`, `exact` float32[Pn, 672]), the rows' own profiles
    (`coef` int16[Pc, 200]; profile index Pn + i), and the assignments as a SpeedTable (`rows`: form,
    lines, a, b) with the profile index of each row (`profile`)."""

    names: list[str]
    exact: np.ndarray
    coef: np.ndarray
    rows: SpeedTable
    profile: np.ndarray
    source: str = ""
    sha256: str = ""


def _speeds(fields: list[str], line: int, first_col: int) -> np.ndarray:
    if len(fields) != BUCKETS:
        raise line_error(line, f"{len(fields)} speeds; a profile has {BUCKETS} (7 days x 96 quarter hours, "
                   "Monday 00:00 first)")
    try:
        v = np.array([float(x) for x in fields], dtype=np.float64)
    except ValueError:
        v = None
    if v is None or not (np.isfinite(v) & (v > 0)).all():
        for i, x in enumerate(fields):
            try:
                f = float(x)
            except ValueError:
                f = math.nan
            if not (math.isfinite(f) and f > 0):
                raise line_error(line, f"speed {i} (column {first_col + i + 1}) must be a finite number above 0 "
                           f"(km/h), got {x.strip()!r}")
    return v


def _own_speeds(rows: list[str], lines: list[int], cols: list[int]) -> np.ndarray:
    """float64[n, 672] of the rows' own speeds in one parse by pandas' C reader; a row it cannot read
    as 672 finite speeds above 0 is checked alone, which names its line and column."""
    import io

    import pandas as pd

    arr = None
    try:
        arr = pd.read_csv(io.StringIO("\n".join(rows)), header=None, dtype=np.float64, engine="c",
                          skip_blank_lines=False).to_numpy()
    except (ValueError, pd.errors.ParserError):
        arr = None
    if arr is not None and arr.shape == (len(rows), BUCKETS) and (np.isfinite(arr) & (arr > 0)).all():
        return arr
    # the slow path, only for a file the C reader refuses: each row alone, naming a bad one's line
    return np.stack([_speeds([x.strip() for x in r.split(",")], ln, c)
                     for r, ln, c in zip(rows, lines, cols, strict=True)])


def _int(x: str, line: int, what: str) -> int:
    s = x.strip()
    if not (s.isdigit() and 0 < len(s) <= 18) or int(s) == 0:
        raise line_error(line, f"{what} must be a positive integer, got {s!r}")
    return int(s)


def read_profile_table(source) -> ProfileTable:
    """The checked rows of a profile file (`source` a path, bytes or text). Raises SpeedFileError naming
    the first bad line: an empty file, wrong columns, an id that is not a positive integer, a speed
    that is not a finite number above 0, an unknown or twice-defined profile name, an unknown
    direction, ways and node pairs mixed."""
    data, name, sha = read_source(source, "profile file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpeedFileError(f"the profile file is not UTF-8 text: {exc}") from None
    names: dict[str, int] = {}
    defined_at: dict[str, int] = {}
    exact: list[np.ndarray] = []
    own: list[str] = []  # a row's own speeds, as text: read in one C parse below
    own_line: list[int] = []
    own_col: list[int] = []
    # assignments: (line, form, a, b, kind, ref) kind 0: named profile (ref name), 1: own speeds (ref index)
    assign: list[tuple] = []
    for ln, raw in enumerate(text.splitlines(), start=1):
        s = raw.strip()
        if not s or s.startswith("#"):
            continue
        n = s.count(",") + 1
        f = [x.strip() for x in s.split(",", 3)]  # the ids and names; a row's own speeds are read below
        if f[0].lower() == "profile":
            f = [x.strip() for x in s.split(",")]
            if n != BUCKETS + 2:
                raise line_error(ln, f"{n - 2} speeds; a profile row is profile,<name>,<{BUCKETS} speeds>")
            if not _NAME.match(f[1]):
                raise line_error(ln, f"profile name {f[1]!r} must start with a letter and hold letters, digits, _ or -")
            if f[1] in names:
                raise line_error(ln, f"profile {f[1]!r} is defined twice (first on line {defined_at[f[1]]})")
            exact.append(_speeds(f[2:], ln, 2))
            names[f[1]] = len(exact) - 1
            defined_at[f[1]] = ln
            continue
        if n in (2, 3):
            if n == 3 and f[1].isdigit():  # from,to,name
                a = _int(f[0], ln, "from_osm_node_id")
                b = _int(f[1], ln, "to_osm_node_id")
                if a == b:
                    raise line_error(ln, f"from_osm_node_id and to_osm_node_id are the same node ({a})")
                form, ref = SEGMENT, f[2]
            else:  # way,name[,direction]
                a = _int(f[0], ln, "way_id")
                d = f[2].lower() if n == 3 else "both"
                if d not in DIRECTIONS:
                    raise line_error(ln, f"direction must be one of {', '.join(DIRECTIONS)}, got {f[2]!r}")
                form, b, ref = WAY, DIRECTIONS.index(d), f[1]
            if not _NAME.match(ref):
                raise line_error(ln, f"{ref!r} is not a profile name (a letter, then letters, digits, _ or -)")
            assign.append((ln, form, a, b, 0, ref))
            continue
        if n == BUCKETS + 1:  # way,<speeds>
            a = _int(f[0], ln, "way_id")
            own.append(s.split(",", 1)[1])
            own_line.append(ln)
            own_col.append(1)
            assign.append((ln, WAY, a, 0, 1, len(own) - 1))
            continue
        if n == BUCKETS + 2:  # way,direction,<speeds> or from,to,<speeds>
            a = _int(f[0], ln, "way_id" if not f[1].isdigit() else "from_osm_node_id")
            if f[1].isdigit():
                b = _int(f[1], ln, "to_osm_node_id")
                if a == b:
                    raise line_error(ln, f"from_osm_node_id and to_osm_node_id are the same node ({a})")
                form = SEGMENT
            elif f[1].lower() in DIRECTIONS:
                b, form = DIRECTIONS.index(f[1].lower()), WAY
            else:
                raise line_error(ln, f"direction must be one of {', '.join(DIRECTIONS)}, got {f[1]!r}")
            own.append(s.split(",", 2)[2])
            own_line.append(ln)
            own_col.append(2)
            assign.append((ln, form, a, b, 1, len(own) - 1))
            continue
        raise line_error(ln, f"{n} column(s); a row is profile,<name>,<{BUCKETS} speeds>, <way_id>,<profile>"
                   f"[,<direction>], <from_node>,<to_node>,<profile>, <way_id>[,<direction>],<{BUCKETS} speeds> "
                   f"or <from_node>,<to_node>,<{BUCKETS} speeds>")
    if not assign:
        if not names:
            raise SpeedFileError("line 1: the profile file is empty (no rows)", line=1)
        raise SpeedFileError("the profile file defines profiles but gives no way or node pair a profile", line=None)
    forms = {x[1] for x in assign}
    if len(forms) > 1:
        first = assign[0][1]
        ln = next(x[0] for x in assign if x[1] != first)
        raise line_error(ln, f"this row gives a {'node pair' if first == WAY else 'way'} a profile, the file's first "
                   f"row a {'way' if first == WAY else 'node pair'}: give ways or node pairs, not both")
    missing = [x for x in assign if x[4] == 0 and x[5] not in names]
    if missing:
        lines = [x[0] for x in missing]
        msgs = [f"unknown profile {x[5]!r} (define it with profile,{x[5]},<{BUCKETS} speeds>)" for x in missing]
        raise line_error(lines[0], msgs[0], lines, msgs)
    # the rows' own speeds: identical rows once, DCT-II coefficients
    pn = len(exact)
    coef = np.zeros((0, COEFFICIENTS), np.int16)
    own_index = np.zeros(0, np.int64)
    if own:
        arr = _own_speeds(own, own_line, own_col)
        ok = encodable(arr)
        if not ok.all():
            i = int(np.flatnonzero(~ok)[0])
            raise line_error(own_line[i], "speeds too high to store (a mean above about 1,000 km/h)")
        uniq, own_index = np.unique(arr, axis=0, return_inverse=True)
        coef = encode(uniq)
        own_index = own_index.ravel()
    prof = np.array([names[x[5]] if x[4] == 0 else pn + int(own_index[x[5]]) for x in assign], np.int64)
    rows = SpeedTable(assign[0][1], np.array([x[0] for x in assign], np.int64), np.array([x[2] for x in assign], np.int64),
                      np.array([x[3] for x in assign], np.int64), np.ones(len(assign)), name, sha)
    ex = np.stack(exact).astype(np.float32) if exact else np.zeros((0, BUCKETS), np.float32)
    return ProfileTable(list(names), ex, coef, rows, prof, name, sha)


# ------------------------------------------------------------------------------------------ mapping
@dataclass
class ProfileSet:
    """Profiles mapped onto a graph: per (covered directed edge, profile) the metres that profile covers
    (`edges` sorted, `length`, `profile`); the named profiles' exact speeds and the rows' own DCT
    coefficients. `overlay(bucket)` is the bucket's SpeedOverlay (the costings read it as measured
    speeds)."""

    edges: np.ndarray
    length: np.ndarray
    profile: np.ndarray
    exact: np.ndarray
    coef: np.ndarray
    names: list[str] = field(default_factory=list)
    info: dict = field(default_factory=dict)

    def __post_init__(self):
        self.covered, self.inverse = np.unique(self.edges, return_inverse=True)
        self.cov_len = np.bincount(self.inverse, weights=self.length, minlength=len(self.covered))
        self.ptr = np.searchsorted(self.edges, self.covered, side="left").astype(np.int64)
        self.ptr = np.append(self.ptr, len(self.edges)).astype(np.int64)
        self.all_speeds = self.table()  # float64[P, 672]: the exact speeds and the decoded ones

    @property
    def generation(self) -> int:
        return int(self.info.get("generation", 0))

    def table(self) -> np.ndarray:
        parts = [np.asarray(self.exact, np.float64)]
        if len(self.coef):
            parts.append(decode(self.coef))
        return np.ascontiguousarray(np.concatenate(parts, axis=0)) if parts else np.zeros((0, BUCKETS))

    def speeds_at(self, bucket: int) -> np.ndarray:
        """float64[P]: every profile's speed (km/h) in `bucket`."""
        return self.all_speeds[:, int(bucket) % BUCKETS]

    def overlay(self, bucket: int) -> SpeedOverlay:
        v = self.speeds_at(bucket)[self.profile]
        cov_time = np.bincount(self.inverse, weights=self.length / (v / 3.6), minlength=len(self.covered))
        return SpeedOverlay(self.covered, self.cov_len, cov_time, {"bucket": int(bucket), **self.info})


def map_profiles(graph, table: ProfileTable) -> ProfileSet:
    """The ProfileSet of `table` on `graph`; SpeedFileError naming the first row the graph has no road for."""
    e, length, rows = map_pieces(graph, table.rows)
    p = table.profile[rows]
    key = e * np.int64(max(len(table.exact) + len(table.coef), 1)) + p
    uk, inv = np.unique(key, return_inverse=True)
    L = np.bincount(inv.ravel(), weights=length, minlength=len(uk))
    P = np.int64(max(len(table.exact) + len(table.coef), 1))
    ok = L > 0
    return ProfileSet((uk // P)[ok].astype(np.int64), L[ok], (uk % P)[ok].astype(np.int64), table.exact, table.coef,
                      table.names, {"form": table.rows.form, "rows": len(table.rows)})


# ------------------------------------------------------------------------------------------ storage
class ProfileStore(SpeedStore):
    """The time-of-day profiles of one bundle, beside its measured speeds (`speeds_dir`):

        profiles.json          {"generation", "file" (null after a reset), "source", "sha256", "form", "rows",
                                "edges", "profiles" (named), "own_profiles", "applied_at", "bundle_created"}
        profiles-<gen>.npz     edges, length, profile, exact, coef, names

    Written as the speeds are: the arrays, then profiles.json replaced in one rename."""

    def __init__(self, bundle_path, bundle_created=None, root=None):
        super().__init__(bundle_path, bundle_created, root)
        self.current = self.dir / "profiles.json"

    WHAT = "profiles"
    TMP_PREFIX = ".profiles"

    def load(self, graph) -> ProfileSet | None:
        got = self.load_current(graph, ("edges", "length", "profile", "exact", "coef", "names"))
        if got is None:
            return None
        arrays, info = got
        return ProfileSet(arrays["edges"], arrays["length"], arrays["profile"], arrays["exact"], arrays["coef"],
                          [str(x) for x in arrays["names"]], info)

    def apply(self, graph, source, form=None, label: str | None = None) -> dict:
        """Read, check and map a profile file, then store it as the next generation; nothing is written
        when the file is refused."""
        if form is not None:
            raise InvalidRequest.field("form", "a profile file's form is read from its rows")
        table = read_profile_table(source)
        if label:
            table.source = label
        ps = map_profiles(graph, table)
        ps.info = self._publish(
            lambda tmp: np.savez_compressed(tmp, edges=ps.edges, length=ps.length, profile=ps.profile,
                                            exact=ps.exact, coef=ps.coef, names=np.array(table.names, dtype=str)),
            {"source": table.source, "sha256": table.sha256, "form": table.rows.form, "rows": len(table.rows),
             "edges": int(len(ps.covered)), "profiles": table.names, "own_profiles": int(len(table.coef))})
        return ps.info


# ------------------------------------------------------------------------------------------ ETA kernel
@numba.njit(cache=True, nogil=True)
def _tcov(ptr, length, profile, speeds, cov_len, top_ms, i, b):
    """Seconds of the covered metres of covered edge i in bucket b (capped at the top speed)."""
    t = 0.0
    for j in range(ptr[i], ptr[i + 1]):
        t += length[j] / (speeds[profile[j], b] / 3.6)
    cap = cov_len[i] / top_ms
    return t if t > cap else cap


@numba.njit(cache=True, nogil=True)
def eta_kernel(edges, covered, seconds, delays, cov_index, ptr, length, profile, speeds, cov_len, top_ms,
               start_s, dep_bucket, backward):
    """Per edge of a path, its seconds when evaluated at the bucket it is entered in (forward, from
    `start_s` seconds after Monday 00:00) or left in (backward, from the arrival `start_s`):
    `seconds[k]` (the edge's covered share at the search's bucket `dep_bucket`) plus covered[k] times
    the change of its profiled part's seconds. `delays[k]`: the turn delay before edge k (counted on
    the clock, unchanged). `cov_index[k]`: the edge's row in the covered edges, -1 when none."""
    n = edges.shape[0]
    out = seconds.copy()
    B = speeds.shape[1]
    t = start_s
    for step in range(n):
        k = n - 1 - step if backward else step
        if not backward:
            t += delays[k]
            b = int(math.floor(t / 900.0)) % B
        else:
            b = int(math.floor((t - 1e-6) / 900.0)) % B
        i = cov_index[k]
        if i >= 0 and b != dep_bucket:
            d = _tcov(ptr, length, profile, speeds, cov_len, top_ms, i, b) - \
                _tcov(ptr, length, profile, speeds, cov_len, top_ms, i, dep_bucket)
            out[k] = seconds[k] + covered[k] * d
        if backward:
            t -= out[k] + delays[k]
        else:
            t += out[k]
    return out

