"""Cubes: variables of netCDF, HDF5 and Zarr files with a time (and level) dimension."""
