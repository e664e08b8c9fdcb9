"""Colour lookup tables: 256-entry uint8 arrays interpolated linearly from a few anchor colours.

No plotting library: each colormap is a list of anchor colours (evenly spaced unless positions are
given), close to the matplotlib / ColorBrewer map of the same name. A name ending in `_r` reverses it.
"""

from __future__ import annotations

import numpy as np

from gdal_mcp.errors import GdalMcpError

# name -> (anchors as "#rrggbb" or (position, "#rrggbb"), how the colours run, for the legend)
_ANCHORS: dict[str, tuple[list, str]] = {
    "gray": (["#000000", "#ffffff"], "black → white"),
    "viridis": (
        ["#440154", "#482878", "#3e4989", "#31688e", "#26828e", "#1f9e89", "#35b779", "#6ece58", "#b5de2b", "#fde725"],
        "dark purple → blue → green → yellow",
    ),
    "magma": (
        ["#000004", "#180f3d", "#440f76", "#721f81", "#9e2f7f", "#cd4071", "#f1605d", "#fd9668", "#feca8d", "#fcfdbf"],
        "black → purple → orange → pale yellow",
    ),
    "inferno": (
        ["#000004", "#1b0c41", "#4a0c6b", "#781c6d", "#a52c60", "#cf4446", "#ed6925", "#fb9b06", "#f7d13d", "#fcffa4"],
        "black → purple → red → orange → pale yellow",
    ),
    "plasma": (
        ["#0d0887", "#46039f", "#7201a8", "#9c179e", "#bd3786", "#d8576b", "#ed7953", "#fb9f3a", "#fdca26", "#f0f921"],
        "dark blue → purple → orange → yellow",
    ),
    "cividis": (
        ["#00224e", "#123570", "#3b496c", "#575d6d", "#707173", "#8a8779", "#a69d75", "#c4b56c", "#e4cf5b", "#fee838"],
        "dark blue → grey → yellow",
    ),
    # matplotlib's terrain: deep blue (water) → cyan → green → pale yellow → brown → white (peaks).
    "terrain": (
        [(0.0, "#333399"), (0.15, "#0099ff"), (0.25, "#00cc66"), (0.5, "#ffff99"), (0.75, "#805c54"), (1.0, "#ffffff")],
        "deep blue → cyan → green → pale yellow → brown → white",
    ),
    # close to matplotlib's gist_earth: black → blue → green → tan → white.
    "gist_earth": (
        [
            (0.0, "#000000"),
            (0.1, "#1a3c78"),
            (0.25, "#2f7d80"),
            (0.4, "#4a9a4f"),
            (0.55, "#8aa852"),
            (0.7, "#b8a65f"),
            (0.85, "#d6b89b"),
            (1.0, "#fdfbfb"),
        ],
        "black → blue → green → tan → white",
    ),
    "rdylgn": (
        ["#a50026", "#d73027", "#f46d43", "#fdae61", "#fee08b", "#ffffbf", "#d9ef8b", "#a6d96a", "#66bd63", "#1a9850", "#006837"],
        "red → yellow → green (diverging)",
    ),
    "spectral": (
        ["#9e0142", "#d53e4f", "#f46d43", "#fdae61", "#fee08b", "#ffffbf", "#e6f598", "#abdda4", "#66c2a5", "#3288bd", "#5e4fa2"],
        "red → orange → yellow → green → blue (diverging)",
    ),
    "rdbu": (
        ["#67001f", "#b2182b", "#d6604d", "#f4a582", "#fddbc7", "#f7f7f7", "#d1e5f0", "#92c5de", "#4393c3", "#2166ac", "#053061"],
        "red → white → blue (diverging)",
    ),
    "blues": (
        ["#f7fbff", "#deebf7", "#c6dbef", "#9ecae1", "#6baed6", "#4292c6", "#2171b5", "#08519c", "#08306b"],
        "white → dark blue",
    ),
    "greens": (
        ["#f7fcf5", "#e5f5e0", "#c7e9c0", "#a1d99b", "#74c476", "#41ab5d", "#238b45", "#006d2c", "#00441b"],
        "white → dark green",
    ),
    "reds": (
        ["#fff5f0", "#fee0d2", "#fcbba1", "#fc9272", "#fb6a4a", "#ef3b2c", "#cb181d", "#a50f15", "#67000d"],
        "white → dark red",
    ),
}
_ALIASES = {"grey": "gray", "greys": "gray", "grays": "gray", "earth": "gist_earth", "red_yellow_green": "rdylgn"}

COLORMAPS: tuple[str, ...] = tuple(_ANCHORS)

# Qualitative colours for categories (tab10 without its grey, plus three light tab20 colours); grey is
# kept for "other" values and light grey for null.
QUALITATIVE = [
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#bcbd22",
    "#17becf",
    "#aec7e8",
    "#ffbb78",
    "#98df8a",
]
OTHER = "#7f7f7f"
NULL = "#c7c7c7"


def hex_to_rgb(text: str) -> tuple[int, int, int]:
    text = text.lstrip("#")
    return int(text[0:2], 16), int(text[2:4], 16), int(text[4:6], 16)


def rgb_to_hex(rgb) -> str:
    r, g, b = (int(v) for v in rgb[:3])
    return f"#{r:02x}{g:02x}{b:02x}"


def _build(anchors: list) -> np.ndarray:
    if isinstance(anchors[0], str):
        positions = np.linspace(0.0, 1.0, len(anchors))
        colours = [hex_to_rgb(a) for a in anchors]
    else:
        positions = np.array([p for p, _ in anchors], dtype=np.float64)
        colours = [hex_to_rgb(c) for _, c in anchors]
    rgb = np.array(colours, dtype=np.float64)
    x = np.linspace(0.0, 1.0, 256)
    lut = np.stack([np.interp(x, positions, rgb[:, i]) for i in range(3)], axis=1)
    return np.rint(lut).astype(np.uint8)


def canonical_name(name: str) -> tuple[str, bool]:
    """(base colormap name, reversed) for a user's name; invalid-argument listing the choices when unknown."""
    if not isinstance(name, str) or not name.strip():
        raise GdalMcpError("invalid-argument", f"colormap must be a name; one of: {', '.join(COLORMAPS)}")
    key = name.strip().lower().replace("-", "_")
    reverse = key.endswith("_r")
    if reverse:
        key = key[:-2]
    key = _ALIASES.get(key, key)
    if key not in _ANCHORS:
        raise GdalMcpError(
            "invalid-argument",
            f"unknown colormap {name!r}; use one of: {', '.join(COLORMAPS)} (add _r to reverse, e.g. viridis_r)",
        )
    return key, reverse


def lut(name: str) -> np.ndarray:
    """The (256, 3) uint8 table of a colormap (index 0 = low end)."""
    key, reverse = canonical_name(name)
    table = _build(_ANCHORS[key][0])
    return table[::-1].copy() if reverse else table


def describe(name: str) -> str:
    """The colormap's name as used and how its colours run, low → high."""
    key, reverse = canonical_name(name)
    text = _ANCHORS[key][1]
    if reverse:
        text = " → ".join(reversed(text.split(" (")[0].split(" → "))) + (" (" + text.split(" (")[1] if " (" in text else "")
    return f"{key}{'_r' if reverse else ''} ({text})"
