"""Saving a figure: png/svg/pdf from matplotlib, html from plotly (sharing one plotly.min.js per folder)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt

from probes.figures._base import INTERACTIVE_FORMATS, STATIC_FORMATS

# ----------------------------------------------------------------------------------------------------------------
# Saving


PLOTLY_JS = "plotly.min.js"
"""The plotly.js bundle an html figure loads, written once into the folder of the figures that share it."""


def save_figure(
    fig: Any,
    path: str | os.PathLike,
    formats: Sequence[str] = ("png", "html"),
    dpi: int = 150,
    *,
    include_plotlyjs: bool | str = "directory",
) -> list[Path]:
    """Write a figure to `<path>.<format>` for each format.

    Args:
        fig: a figure object from this module (drawn with matplotlib for png/svg/pdf and with plotly for
            html), a matplotlib `Figure` (static formats only) or a plotly `Figure` (html only).
        path: output path without extension (parents are created).
        formats: any of png, svg, pdf, html. html files work offline: by default they load `plotly.min.js` from
            their own folder, written there with the first figure (4.6 MB once, instead of inside every file).
        dpi: resolution of png output.
        include_plotlyjs: plotly's option of that name: "directory" (default, the shared bundle above), True
            (embed plotly.js in the file: one self-contained file), "cdn" (load it from the web).

    Returns:
        The written paths, in `formats` order.

    Raises:
        ValueError: an unknown format, or a format the given figure type cannot produce.
    """
    unknown = sorted(set(formats) - set(STATIC_FORMATS + INTERACTIVE_FORMATS))
    if unknown:
        raise ValueError(
            f"formats holds {unknown}; valid formats: {list(STATIC_FORMATS + INTERACTIVE_FORMATS)}"
        )
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    is_display = hasattr(fig, "plot") and hasattr(fig, "plotly")
    is_plotly = type(fig).__module__.startswith("plotly")
    written = []
    static = None
    for fmt in formats:
        out = path.with_name(f"{path.name}.{fmt}")
        if fmt in STATIC_FORMATS:
            if is_plotly:
                raise ValueError(
                    f"formats={list(formats)}: {fmt} from a plotly figure needs kaleido and Chrome; pass the "
                    "figure object from probes.figures (drawn with matplotlib) or formats=('html',)"
                )
            if static is None:
                static = fig.plot() if is_display else fig
            static.savefig(out, dpi=dpi, bbox_inches="tight")
        else:
            if not (is_display or is_plotly):
                raise ValueError(
                    f"formats={list(formats)}: html needs a plotly figure or a probes.figures object, not a "
                    f"{type(fig).__name__}; use formats=('png',)"
                )
            (fig.plotly() if is_display else fig).write_html(out, include_plotlyjs=include_plotlyjs)
        written.append(out)
    if is_display and static is not None:
        plt.close(static)
    return written
