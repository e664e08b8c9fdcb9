"""Hydrology on a DEM: conditioning, D8 flow directions, accumulation, watersheds and stream networks.

The rules, in one place (every tool's description repeats the part it needs):

- Flow directions are D8 steepest descent, computed here (d8.py), not pyflwdir's `from_dem` (which routes by its own
  rules, not the steepest drop on a plain tilted plane): each cell flows to the neighbour with the largest drop divided
  by the ground distance to it, among its strictly lower valid neighbours. Distances come from the geotransform on a
  projected grid, and on a lon/lat grid from the CRS's ellipsoid per row (the geodesic between the cell centres, so
  east-west steps shrink with cos(latitude)).
- Exact ties go to the first direction in the order E, SE, S, SW, W, NW, N, NE.
- A cell with no strictly lower neighbour on the grid edge or next to a nodata cell is an outlet (code 0): water leaves
  the grid there. Nothing flows into nodata or off the grid otherwise.
- Flats (no strictly lower neighbour, not an outlet) drain towards the nearest cell of the same flat (equal elevation,
  8-connected) that drains (has a lower neighbour or is an outlet): each flat cell points to a neighbour of the flat one
  step (8-connected, breadth-first) nearer to such a cell, ties in the order above.
- A cell that cannot drain that way (the bottom of a closed depression) stays a pit (code 0); dem_condition removes them.
- Encoding (ESRI / pyflwdir D8): 1 E, 2 SE, 4 S, 8 SW, 16 W, 32 NW, 64 N, 128 NE, 0 outlet or pit, 247 nodata.

Accumulation, basins, snapping, Strahler order and stream vectors are pyflwdir's (MIT, numba) on those directions.
Every algorithm here needs the whole grid in memory: grids over MAX_CELLS are refused (grid.py).
"""
