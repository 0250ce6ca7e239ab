"""The node-location index every stage's osmium reader gives ways their coordinates with.

A sorted array of (id, location), 16 bytes per node of the extract, in an anonymous mapping that grows
in place (`sparse_mmap_array`, mremap). osmium's default (`flex_mem`) starts in the same sparse mode
but in a std::vector that doubles, so it peaked at 270 MB at 9.14 M nodes against 185 MB (the search
stage, 64 copies of Liechtenstein); its dense mode, 8 bytes per id up to the largest, would not fit a
country whose node ids spread over the planet's.
"""

from __future__ import annotations

import osmium

LOCATION_INDEX = "sparse_mmap_array" if "sparse_mmap_array" in osmium.index.map_types() else "sparse_mem_array"
