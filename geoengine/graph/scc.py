"""Strongly connected components of a CSR graph, compiled (no scipy import on the route path).

`scc_labels(offsets, targets)` is Tarjan's algorithm made iterative: roots are taken in node order and
arcs in CSR order, and components are numbered in the order they complete, which is the numbering of
`scipy.sparse.csgraph.connected_components(..., connection="strong")` (Pearce's variant of the same
depth-first search); tests/analysis/test_startup.py checks the labels against scipy on real bundles.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def scc_labels(offsets, targets):  # pragma: no cover - compiled
    """(label int64[n], number of components) of the graph with arcs targets[offsets[v]:offsets[v+1]]."""
    n = len(offsets) - 1
    index = np.full(n, -1, np.int64)
    low = np.zeros(n, np.int64)
    onstack = np.zeros(n, np.bool_)
    stack = np.empty(n, np.int64)
    call_node = np.empty(n, np.int64)
    call_arc = np.empty(n, np.int64)
    label = np.full(n, -1, np.int64)
    sp = 0
    seen = 0
    n_labels = 0
    for r in range(n):
        if index[r] != -1:
            continue
        index[r] = seen
        low[r] = seen
        seen += 1
        stack[sp] = r
        sp += 1
        onstack[r] = True
        call_node[0] = r
        call_arc[0] = offsets[r]
        depth = 1
        while depth > 0:
            v = call_node[depth - 1]
            a = call_arc[depth - 1]
            if a < offsets[v + 1]:
                call_arc[depth - 1] = a + 1
                w = targets[a]
                if index[w] == -1:
                    index[w] = seen
                    low[w] = seen
                    seen += 1
                    stack[sp] = w
                    sp += 1
                    onstack[w] = True
                    call_node[depth] = w
                    call_arc[depth] = offsets[w]
                    depth += 1
                elif onstack[w] and index[w] < low[v]:
                    low[v] = index[w]
            else:
                depth -= 1
                if low[v] == index[v]:
                    while True:
                        sp -= 1
                        w = stack[sp]
                        onstack[w] = False
                        label[w] = n_labels
                        if w == v:
                            break
                    n_labels += 1
                if depth > 0:
                    u = call_node[depth - 1]
                    if low[v] < low[u]:
                        low[u] = low[v]
    return label, n_labels
