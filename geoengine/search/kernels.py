"""Compiled loops of the search query path.

`osa_scan`: the typo matching of a query token against a sorted run of vocabulary words (one length
bucket, or the distinct prefixes of one length), as rapidfuzz's `process.extract(tok, words,
scorer=OSA.distance, score_cutoff=k)` computes it, without handing thousands of Python strings to
rapidfuzz per query word. The words are read from one array of code points (`vocab_chars`).

`gather_postings`: the documents of a list of vocabulary tokens with one quality per token, in one pass.
"""

from __future__ import annotations

import numba
import numpy as np


def code_points(text: str) -> np.ndarray:
    """int32 code points of `text`."""
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.uint32).view(np.int32)


def vocab_chars(vocab: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(code points of every vocabulary word concatenated, int64 start offsets with one more at the end)."""
    chars = code_points("".join(vocab))
    offs = np.zeros(len(vocab) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, vocab), np.int64, len(vocab)), out=offs[1:])
    return chars, offs


@numba.njit(cache=True, nogil=True)
def osa_scan(tok, k, chars, offs, starts, lo, hi, plen):
    """Entries j in [lo, hi) whose word, the first `plen` code points from `chars[offs[starts[j]]]`, is
    within optimal string alignment distance `k` of `tok` (an adjacent swap is one edit); returns (j, d).

    The entries are sorted, so consecutive words share prefixes: the rows of the dynamic programme
    (row i: the word's first i letters against every prefix of `tok`) are reused for the common prefix,
    and a prefix that no alignment path can leave within k ends every word that starts with it: a path
    crosses every row except where a swap steps over one, its cost never decreases along it, and what is
    left costs at least the difference of the lengths left. Only the cells within k of the diagonal are
    computed. Needs |plen - len(tok)| <= k."""
    m = len(tok)
    d = np.empty((plen + 1, m + 1), np.int32)
    for c in range(m + 1):
        d[0, c] = c
    out_j = np.empty(max(hi - lo, 0), np.int64)
    out_d = np.empty(max(hi - lo, 0), np.int32)
    n_out = 0
    valid = 0  # rows 0..valid hold the previous word's first `valid` letters
    dead = plen + 1  # the previous word's first `dead` letters cannot come within k
    prev = -1
    j = lo
    while j < hi:
        s = offs[starts[j]]
        common = 0
        if prev >= 0:
            while common < valid and chars[s + common] == chars[prev + common]:
                common += 1
        prev = s
        if common >= dead:  # starts like the previous word where that could not come within k
            j += 1
            continue
        dead = plen + 1
        valid = plen
        for i in range(common + 1, plen + 1):
            # only the band |i - c| <= k: a cell outside it is above k (D[i, c] >= |i - c|), read as k + 1
            a = chars[s + i - 1]
            d[i, 0] = i if i <= k else k + 1
            c_lo = max(1, i - k)
            c_hi = min(m, i + k)
            if c_lo > 1:
                d[i, c_lo - 1] = k + 1
            # lower bounds of the distance of any word starting with these i letters: through a cell of
            # this row (its value plus the difference of the lengths left), or skipping this row by a swap
            # from the row above (which needs this row's letter to be the query's next one)
            low = d[i, 0] + abs(plen - i - m)
            swap = k + 1
            for c in range(c_lo, c_hi + 1):
                b = tok[c - 1]
                v = d[i - 1, c - 1] + (0 if a == b else 1)
                t = d[i - 1, c] + 1
                if t < v:
                    v = t
                t = d[i, c - 1] + 1
                if t < v:
                    v = t
                if i > 1 and c > 1 and a == tok[c - 2] and chars[s + i - 2] == b:
                    t = d[i - 2, c - 2] + 1
                    if t < v:
                        v = t
                d[i, c] = v
                t = v + abs(plen - i - m + c)
                if t < low:
                    low = t
                if c < m and a == tok[c]:
                    t = d[i - 1, c - 1] + 1 + abs(plen - i - m + c)
                    if t < swap:
                        swap = t
            if c_hi < m:
                d[i, c_hi + 1] = k + 1
            if low > k and swap > k:
                dead = i
                valid = i
                break
        if dead <= plen:
            j += 1
            continue
        dist = d[plen, m]
        if dist <= k:
            out_j[n_out] = j
            out_d[n_out] = dist
            n_out += 1
        j += 1
    return out_j[:n_out], out_d[:n_out]



@numba.njit(cache=True, nogil=True)
def gather_postings(ptr, post_doc, toks, quals):
    """(documents, float32 qualities) of the vocabulary tokens `toks`, token by token in the order given,
    each document with its token's quality."""
    total = 0
    for t in toks:
        total += ptr[t + 1] - ptr[t]
    docs = np.empty(total, post_doc.dtype)
    out_q = np.empty(total, np.float32)
    n = 0
    for i in range(len(toks)):
        t = toks[i]
        q = np.float32(quals[i])
        for p in range(ptr[t], ptr[t + 1]):
            docs[n] = post_doc[p]
            out_q[n] = q
            n += 1
    return docs, out_q



@numba.njit(cache=True, nogil=True)
def match_matrix(cols, docs, quals, bounds, slot):
    """The compact token match matrix of a query (see `index.Matches`): postings `docs`/`quals` of query
    token t at [bounds[t], bounds[t + 1]), `cols` their sorted distinct documents -> (tokens, len(cols))
    float32 best quality of each token in each document (0 where it has none). `slot`: scratch of one
    int32 per document of the index (a document's column; only the entries of `cols` are written and read)."""
    for j in range(len(cols)):
        slot[cols[j]] = j
    mat = np.zeros((len(bounds) - 1, len(cols)), np.float32)
    for t in range(len(bounds) - 1):
        for p in range(bounds[t], bounds[t + 1]):
            j = slot[docs[p]]
            if quals[p] > mat[t, j]:
                mat[t, j] = quals[p]
    return mat


def warm_kernels(folder) -> None:
    """Run each kernel once with the argument types the query path of the index in `folder` gives it (the
    postings as mapped from there, read-only views; the rest as `SearchIndex` makes them), on tiny data,
    so that they are compiled into Numba's cache (`geoengine warm`: the index's vocabulary is not read)
    or loaded from it (`SearchIndex.warm` at a server's start-up)."""
    from pathlib import Path

    from geoengine.arrays import readonly, unique

    folder = Path(folder)
    ptr = np.load(folder / "post_ptr.npy", mmap_mode="r").view(np.ndarray)
    post_doc = np.load(folder / "post_doc.npy", mmap_mode="r").view(np.ndarray)
    chars, offs = vocab_chars(["ab", "ac"])
    osa_scan(code_points("ab"), 1, chars, offs, np.flatnonzero(np.ones(2, bool)), 0, 2, 2)
    docs, quals = gather_postings(ptr, post_doc, np.zeros(0, np.int64), np.zeros(0, np.float64))
    docs, quals = readonly(docs), readonly(quals)
    match_matrix(unique(docs), docs, quals, np.zeros(2, np.int64), np.zeros(1, np.int32))

