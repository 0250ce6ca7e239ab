"""The bundle's customisable contraction hierarchy over the road graph, and the cache of metrics.

- `full_turn_csr(graph)`: every turn the road graph could ever allow (each directed edge into a node
  followed by each directed edge out of it, U-turns included, no restriction, every edge usable).
  Any costing's, option set's or avoid area's turn graph (`Profile.turn_csr`) is a subset of it, so
  one topology serves them all.
- `build_topology(graph)`: nested dissection on the middles of the directed edges, then the chordal
  supergraph (`geoengine.routing.cch.CCHTopology`), written once per bundle by the routing stage.
- `MetricCache`: customised hierarchies keyed by (costing, option fingerprint, blocked edges),
  least recently used first out, bounded by bytes (`GEOENGINE_CCH_CACHE_BYTES`). One customisation
  per key even when many threads ask for it at once.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import OrderedDict

import numba
import numpy as np

from geoengine.graph.turns import turn_base
from geoengine.routing.cch import CCHTopology, supergraph
from geoengine.routing.order import nested_dissection, undirected

DEFAULT_CACHE_BYTES = 1 << 30
log = logging.getLogger("geoengine.routing")


def full_turn_csr(graph):
    """(offsets int64[E+1], targets int32[m]) of every possible turn (the graph's `TurnBase`)."""
    base = turn_base(graph)
    return base.offsets, base.e2


def possible_turns(graph):
    """`full_turn_csr` without making the graph's `TurnBase` (the TurnBase's own arrays when the graph
    has one): the topology needs only these two of its arrays, and its e1, U-turn and angle arrays and
    their temporaries (about 110 MB at 2.8 M turns) would be held through the topology's construction."""
    base = getattr(graph, "_turn_base", None)
    if base is not None and base.graph is graph:
        return base.offsets, base.e2
    return _turns(np.asarray(graph.edge_dst), np.asarray(graph.node_out_offsets, dtype=np.int64),
                  np.asarray(graph.node_out_edges))


@numba.njit(cache=True, nogil=True)
def _turns(dst, noff, nout):
    """The TurnBase's rows: each directed edge followed by each edge out of its end node, in that order."""
    n = dst.shape[0]
    offsets = np.zeros(n + 1, np.int64)
    for e in range(n):
        offsets[e + 1] = offsets[e] + noff[dst[e] + 1] - noff[dst[e]]
    e2 = np.empty(offsets[n], np.int32)
    for e in range(n):
        k = offsets[e]
        for j in range(noff[dst[e]], noff[dst[e] + 1]):
            e2[k] = nout[j]
            k += 1
    return offsets, e2


def edge_middles(graph):
    """(lon, lat) of the middle of each directed edge (between its end nodes)."""
    lon = np.asarray(graph.node_lon)
    lat = np.asarray(graph.node_lat)
    s = np.asarray(graph.edge_src)
    d = np.asarray(graph.edge_dst)
    return (lon[s] + lon[d]) / 2, (lat[s] + lat[d]) / 2


def build_topology(graph, directory=None) -> CCHTopology:
    """The topology of every possible turn (`CCHTopology.build`; with `directory`, written there as it is
    made and returned memory-mapped). Each input is dropped once used: the turns once their symmetric
    CSR is made, the positions once ordered, the symmetric CSR once the supergraph is built."""
    from geoengine.bundler import heap

    n = int(graph.n_edges)
    t0 = time.perf_counter()
    off, tgt = possible_turns(graph)
    arcs = int(tgt.shape[0])
    uoff, uadj = undirected(n, off, tgt)
    del off, tgt
    lon, lat = edge_middles(graph)
    rank = nested_dissection(n, uoff, uadj, lon, lat, symmetric=True)
    del lon, lat
    heap.release()
    t1 = time.perf_counter()
    chordal = supergraph(n, uoff, uadj, rank)
    del uoff, uadj
    heap.release()
    return CCHTopology.assemble(n, rank, chordal, {"arcs": arcs, "order_seconds": round(t1 - t0, 3)}, t1,
                                directory)


class MetricCache:
    """Bounded LRU of customised hierarchies. `get(key, make)` returns the cached hierarchy or runs
    `make()` once (other threads asking for the same key wait for it) and keeps the result while the
    total of `nbytes()` stays within `max_bytes`; a result larger than the whole budget is returned
    without being kept."""

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES, sizeof=None):
        self.max_bytes = int(max_bytes)
        self._sizeof = sizeof or (lambda v: v.nbytes())
        self._items: OrderedDict = OrderedDict()
        self._sizes: dict = {}
        self._pending: dict = {}
        self._lock = threading.Lock()
        self.bytes = 0
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._items)

    def clear(self) -> None:
        """Drop every kept value (new measured speeds: each was customised for the old ones)."""
        with self._lock:
            self._items.clear()
            self._sizes.clear()
            self.bytes = 0

    def refresh(self, key) -> None:
        """Count a kept value's bytes again (its hierarchy was replaced) and evict down to the budget."""
        with self._lock:
            if key not in self._items:
                return
            size = int(self._sizeof(self._items[key]))
            was = self._sizes[key]
            # evict first, then count: `bytes` (read without the lock) never shows more than the budget
            while self.bytes - was + size > self.max_bytes:
                old, _ = self._items.popitem(last=False)
                self.bytes -= self._sizes.pop(old)
                if old == key:  # the value itself was the oldest: gone, its bytes with it
                    return
            self.bytes += size - was
            self._sizes[key] = size

    def get(self, key, make):
        while True:
            with self._lock:
                hit = self._items.get(key)
                if hit is not None:
                    self._items.move_to_end(key)
                    self.hits += 1
                    return hit
                ev = self._pending.get(key)
                if ev is None:
                    ev = self._pending[key] = threading.Event()
                    self.misses += 1
                    break
            ev.wait()
            with self._lock:  # the maker failed or its result was too big to keep: make it here
                if key not in self._items and key not in self._pending:
                    ev = self._pending[key] = threading.Event()
                    self.misses += 1
                    break
        try:
            value = make()
            size = int(self._sizeof(value))
            with self._lock:
                if size <= self.max_bytes:
                    # evict first, then count: `bytes` (read without the lock) never shows more than the budget
                    while self.bytes + size > self.max_bytes:
                        old, _ = self._items.popitem(last=False)
                        self.bytes -= self._sizes.pop(old)
                    self._items[key] = value
                    self._sizes[key] = size
                    self.bytes += size
            return value
        finally:
            with self._lock:
                self._pending.pop(key, None)
            ev.set()


def profile_nbytes(profile) -> int:
    """Bytes a cached profile holds: its customised hierarchy plus its per-edge and per-arc arrays."""
    total = profile.ch.nbytes() if hasattr(profile.ch, "nbytes") else 0
    for name in ("cost", "time", "length", "usable", "_component"):
        a = getattr(profile, name, None)
        if isinstance(a, np.ndarray):
            total += a.nbytes
    for a in getattr(profile, "_csr", None) or ():
        total += a.nbytes
    return int(total)


class Customiser:
    """The router's side of the CCH: the bundle's topology (with the full turn graph as its base) and a
    byte-bounded LRU (`cache`) of profiles with their customised hierarchies. `customise(profile)`
    customises the topology for a profile's turn graph (its costing, options and blocked edges)."""

    def __init__(self, graph, topology: CCHTopology, max_bytes: int = DEFAULT_CACHE_BYTES):
        self.graph = graph
        self.topology = topology
        self.cache = MetricCache(max_bytes, sizeof=profile_nbytes)
        self._based = False
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._queued = 0
        self._worker: threading.Thread | None = None
        self.perfected = 0  # perfect customisations swapped in (tests, benchmarks)

    @classmethod
    def open(cls, graph, directory, max_bytes: int = DEFAULT_CACHE_BYTES) -> Customiser:
        topo = CCHTopology.load(directory, mmap=True)
        if topo.n != graph.n_edges:
            raise ValueError(f"{directory}: CCH topology for {topo.n} vertices, the graph has {graph.n_edges} edges")
        return cls(graph, topo, max_bytes)

    def _ensure_base(self) -> None:
        if not self._based:
            with self._lock:
                if not self._based:
                    self.topology.set_base(*full_turn_csr(self.graph))
                    self._based = True

    def customise(self, profile, *, perfect: bool = True, parallel: bool = True):
        """A `CustomisedCH` for the profile's turn graph (not cached here)."""
        self._ensure_base()
        off, tgt, w, packed = profile.turn_csr()
        # the profile's arcs are a subset of the base turns, whose supergraph edges are known
        idx = getattr(profile, "base_index", None)
        return self.topology.customise(off, tgt, w, packed, perfect=perfect, parallel=parallel, base_index=idx)

    def customise_soon(self, profile, on_perfect=None):
        """The basic customisation now (both cores), the perfect one later: a background thread
        customises again with the perfect pass on one core and swaps it into `profile.ch`.

        A request needs the basic customisation only (same distances; its queries run the
        bidirectional search instead of the elimination-tree walk), and the perfect pass costs about
        as much again: doing it later halves the wait of the first request of a new option set. Each
        query reads `profile.ch` once, so a request never mixes the two. `wait()` blocks until every
        queued perfect customisation is in place. `on_perfect()` runs after the swap (the router
        counts the smaller hierarchy's bytes again)."""
        ch = self.customise(profile, perfect=False)
        with self._lock:
            self._queued += 1
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(target=self._perfect_loop, name="cch-perfect", daemon=True)
                self._worker.start()
        self._queue.put((profile, on_perfect))
        return ch

    def _perfect_loop(self) -> None:
        while True:
            profile, on_perfect = self._queue.get()
            try:
                # serial kernels: no parallel lock, one core left to the requests
                profile.ch = self.customise(profile, perfect=True, parallel=False)
                self.perfected += 1
                if on_perfect is not None:
                    on_perfect()
            except Exception:  # the basic customisation keeps answering
                log.exception("perfect customisation failed; the basic one stays in use")
            finally:
                with self._lock:
                    self._queued -= 1
                    if self._queued == 0:
                        self._idle.notify_all()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until every queued perfect customisation is done (tests, benchmarks); False on timeout."""
        with self._lock:
            return self._idle.wait_for(lambda: self._queued == 0, timeout)

    def warmup(self) -> None:
        self._ensure_base()
