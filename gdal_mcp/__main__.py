"""`python -m gdal_mcp` runs the command line."""

from gdal_mcp.cli import main

if __name__ == "__main__":
    main()
