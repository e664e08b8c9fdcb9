"""A line chart of time series as a PNG (Pillow): one line per point or zone, dates along x, values along y."""

from __future__ import annotations

import io
import math

import numpy as np

COLOURS = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189), (140, 86, 75), (227, 119, 194)]
MAX_LINES = len(COLOURS)


def _nice(lo: float, hi: float) -> list[float]:
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo] if math.isfinite(lo) else []
    step = 10 ** math.floor(math.log10((hi - lo) / 4))
    for m in (1, 2, 5, 10):
        if (hi - lo) / (step * m) <= 6:
            step *= m
            break
    first = math.ceil(lo / step) * step
    return [first + k * step for k in range(int((hi - first) / step) + 1)]


def line_chart(
    times: list[str], values: np.ndarray, names: list[str], title: str = "", size: tuple[int, int] = (900, 420)
) -> bytes:
    """`values` (steps, lines) against the step index, labelled with the first and last dates; NaN breaks a line."""
    from PIL import Image, ImageDraw, ImageFont

    width, height = size
    left, right, top, bottom = 70, 20, 36, 60
    image = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=12)
    draw.text(
        (left, 10),
        title + (f" — first {MAX_LINES} of {len(names)} series" if len(names) > MAX_LINES else ""),
        fill="black",
        font=font,
    )
    shown = values[:, :MAX_LINES]
    finite = shown[np.isfinite(shown)]
    n = len(times)
    x0, x1, y0, y1 = left, width - right, height - bottom, top
    draw.rectangle((x0, y1, x1, y0), outline=(120, 120, 120))
    if finite.size and n:
        lo, hi = float(finite.min()), float(finite.max())
        if hi == lo:
            lo, hi = lo - 1, hi + 1
        pad = (hi - lo) * 0.05
        lo, hi = lo - pad, hi + pad

        def px(i: int, v: float) -> tuple[float, float]:
            x = x0 + (x1 - x0) * (i / max(1, n - 1))
            return x, y0 - (y0 - y1) * (v - lo) / (hi - lo)

        for tick in _nice(lo, hi):
            _, y = px(0, tick)
            draw.line((x0 - 4, y, x0, y), fill="black")
            draw.text((4, y - 7), f"{tick:.4g}", fill="black", font=font)
        for k in range(shown.shape[1]):
            colour = COLOURS[k]
            segment: list[tuple[float, float]] = []
            for i in range(n):
                v = shown[i, k]
                if math.isfinite(v):
                    segment.append(px(i, float(v)))
                    continue
                if len(segment) > 1:
                    draw.line(segment, fill=colour, width=2)
                segment = []
            if len(segment) > 1:
                draw.line(segment, fill=colour, width=2)
            elif len(segment) == 1:
                x, y = segment[0]
                draw.ellipse((x - 2, y - 2, x + 2, y + 2), fill=colour)
            draw.text((x0 + 8 + 130 * k, height - 22), names[k][:18], fill=colour, font=font)
    for i in sorted({0, n // 2, n - 1}) if n else []:
        x = x0 + (x1 - x0) * (i / max(1, n - 1))
        draw.line((x, y0, x, y0 + 4), fill="black")
        label = times[i][:16]
        draw.text((min(max(x - 40, 2), width - 110), y0 + 6), label, fill="black", font=font)
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()
