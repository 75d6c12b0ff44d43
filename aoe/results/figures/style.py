"""One matplotlib style for every figure: grayscale-readable, fixed sizes, PDF + PNG.

Series differ by line style, marker and hatch as well as by gray level, so a figure
printed in black and white stays readable. Figures are built on
:class:`matplotlib.figure.Figure` (no pyplot, no global backend state) inside
:func:`style_context`, and written by :func:`save_figure`. PDF and PNG carry no
creation date, so the same numbers give the same PNG bytes.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Iterator

__all__ = [
    "WIDTH",
    "HEIGHT",
    "GRAYS",
    "LINESTYLES",
    "MARKERS",
    "HATCHES",
    "series_style",
    "style_context",
    "new_figure",
    "save_figure",
    "literal",
    "bounded_kde",
    "kde_grid",
    "plain_log_ticks",
    "spread_labels",
]

WIDTH = 3.4  # inches: one column of an ACL paper
HEIGHT = 2.6
DPI = 200

GRAYS = ("0.0", "0.45", "0.25", "0.6", "0.15", "0.7")
LINESTYLES = ("-", "--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 3)))
MARKERS = ("o", "s", "^", "D", "v", "x")
HATCHES = ("", "///", "...", "\\\\\\", "xx", "--")

RC: dict[str, Any] = {
    "font.size": 8,
    "axes.titlesize": 8,
    "axes.labelsize": 8,
    "legend.fontsize": 6.5,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.linewidth": 0.6,
    "lines.linewidth": 1.2,
    "lines.markersize": 3.5,
    "legend.frameon": False,
    "savefig.bbox": "tight",
    "pdf.fonttype": 42,  # TrueType in the PDF: editable text
    "image.cmap": "gray",
    "text.usetex": False,
}


def series_style(i: int) -> dict[str, Any]:
    """Colour, line style, marker and hatch of the i-th series (cycled)."""
    return {
        "color": GRAYS[i % len(GRAYS)],
        "linestyle": LINESTYLES[i % len(LINESTYLES)],
        "marker": MARKERS[i % len(MARKERS)],
        "hatch": HATCHES[i % len(HATCHES)],
    }


@contextlib.contextmanager
def style_context() -> Iterator[None]:
    import matplotlib

    with matplotlib.rc_context(RC):
        yield


def new_figure(ncols: int = 1, nrows: int = 1, width: float | None = None, height: float | None = None, **subplot_kw):
    """A Figure of ``ncols`` x ``nrows`` panels of the fixed panel size (call inside :func:`style_context`)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width or WIDTH * ncols, height or HEIGHT * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False, **subplot_kw)
    return fig, axes


def save_figure(fig: Any, pdf: str | Path, png: str | Path | None = None) -> list[Path]:
    """Write ``fig`` as PDF and PNG (PNG path: the PDF's with .png when not given)."""
    pdf = Path(pdf)
    png = Path(png) if png is not None else pdf.with_suffix(".png")
    out = []
    for path, meta in ((pdf, {"CreationDate": None, "ModDate": None}), (png, {"Software": None})):
        path.parent.mkdir(parents=True, exist_ok=True)
        with style_context():
            fig.savefig(path, dpi=DPI, metadata=meta)
        out.append(path)
    return out


def literal(text: str) -> str:
    """``text`` escaped so mathtext draws it as written: a sentence with two "$" ("$5 ... $25") is
    not typeset as math. For text drawn with ``parse_math=True`` (titles, legends); free text is
    drawn with ``parse_math=False`` instead."""
    return str(text).replace("$", r"\$")


def kde_grid(values, lo: float | None = None, hi: float | None = None, n: int = 256, bw_method="scott"):
    """Evaluation grid of a KDE: the values' range widened by 3 kernel bandwidths (the curve reaches ~0
    at both ends), clipped to the domain [lo, hi]."""
    import numpy as np
    from scipy.stats import gaussian_kde

    values = np.asarray(values, dtype=np.float64)
    a, b = float(values.min()), float(values.max())
    w = 1e-3
    if values.size >= 2 and b > a:
        w = max(3 * float(np.sqrt(gaussian_kde(values, bw_method=bw_method).covariance[0, 0])), w)
    a, b = a - w, b + w
    if lo is not None:
        a = max(a, lo)
    if hi is not None:
        b = min(b, hi)
    return np.linspace(a, b, n)


def bounded_kde(values, grid, bw_method="scott", lo: float | None = None, hi: float | None = None):
    """Gaussian KDE of ``values`` at ``grid`` on the domain [lo, hi] (None: unbounded on that side).

    Reflection at each bound (the mass a Gaussian kernel puts beyond an edge is folded back inside), so
    the density integrates to 1 over the domain, is not drawn past it (a cosine above 1, a distance below
    0) and does not sag at an edge where the data pile up. The bandwidth is scipy's for the raw values.
    Grid points outside the domain get density 0.
    """
    import numpy as np
    from scipy.stats import gaussian_kde

    values = np.asarray(values, dtype=np.float64)
    grid = np.asarray(grid, dtype=np.float64)
    kde = gaussian_kde(values, bw_method=bw_method)
    dens = kde(grid)
    if lo is not None:
        dens = dens + kde(2 * lo - grid)
    if hi is not None:
        dens = dens + kde(2 * hi - grid)
    outside = np.zeros(grid.shape, dtype=bool)
    if lo is not None:
        outside |= grid < lo
    if hi is not None:
        outside |= grid > hi
    return np.where(outside, 0.0, dens)


def plain_log_ticks(axis) -> None:
    """Tick labels of a log axis as plain numbers (0.1, 0.2, 0.3, 0.5, 1), never "4 × 10⁰" or "10⁻¹"."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    def fmt(y, _pos):
        return f"{y:g}" if y > 0 else ""

    axis.set_major_locator(LogLocator(base=10))
    axis.set_minor_locator(LogLocator(base=10, subs=(2.0, 3.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(fmt))
    axis.set_minor_formatter(FuncFormatter(fmt))


def spread_labels(points, min_sep: float):
    """Positions for labels anchored at ``points`` (N, 2, in points units, i.e. display coordinates),
    moved apart so that no two are closer than ``min_sep`` along both axes; returns the offsets (N, 2)
    in points. Greedy, in order: a label that collides with an earlier one steps up, then down, by
    ``min_sep`` until it is free."""
    import numpy as np

    points = np.asarray(points, dtype=np.float64)
    placed: list[np.ndarray] = []
    offsets = np.zeros_like(points)
    for i, p in enumerate(points):
        for k in range(0, 4 * len(points) + 1):
            step = (k + 1) // 2 * (1 if k % 2 else -1)
            cand = p + np.array([0.0, step * min_sep])
            if all(np.any(np.abs(cand - q) >= min_sep) for q in placed):
                break
        placed.append(cand)
        offsets[i] = cand - p
    return offsets
