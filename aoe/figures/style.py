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

__all__ = ["WIDTH", "HEIGHT", "GRAYS", "LINESTYLES", "MARKERS", "HATCHES", "series_style", "style_context", "new_figure", "save_figure"]

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
