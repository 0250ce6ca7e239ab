"""Reading pyosmium objects' tags, shared by the stages that read the extract (graph, search, tiles)."""

from __future__ import annotations


def tag_dict(tags) -> dict[str, str]:
    """dict(tags) of a pyosmium TagList, about 4x cheaper: pyosmium ends a tag iteration by raising
    StopIteration from C++ (pybind11 throws and unwinds a C++ exception, about 15 us a list), so the
    iterator is read exactly len(tags) times instead of to its end."""
    it = iter(tags)
    out = {}
    for _ in range(len(tags)):
        k, v = next(it)
        out[k] = v
    return out
