import sys
from pathlib import Path

# osm_graph.py (a simple OSM road graph for oracle tests) is imported by the tests and the benchmark
sys.path.insert(0, str(Path(__file__).parent))
