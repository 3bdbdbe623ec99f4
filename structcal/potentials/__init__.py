"""Containers for batches of structured problems as flat arrays (potentials are the interface).

Anything that produces unary and pairwise log-scores -- structcal's CRFs, a CRFsuite
model, a neural network -- plugs into inference and everything after it through these.
"""

from .chain import ChainPotentials
from .graph import GraphAdjacency, GraphPotentials, GridLayout
from .grid import GRID_DIRECTIONS, grid_coordinates, grid_edges

__all__ = [
    "ChainPotentials",
    "GRID_DIRECTIONS",
    "GraphAdjacency",
    "GraphPotentials",
    "GridLayout",
    "grid_coordinates",
    "grid_edges",
]
