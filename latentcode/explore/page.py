"""The explorer as one self-contained HTML page: the data as inline JSON, its bulk (pictures, codes, patterns)
gzip-compressed and base64-encoded, and `explorer.js` inline. No server, no network, no plotting library: the page
draws on canvases itself, so it stays small (plotly.js alone is about 4.8 MB) and the same file works opened from
disk, in a notebook's output frame and inside the report.
"""

from __future__ import annotations

import base64
import gzip
import html
import json
from importlib.resources import files
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from latentcode.explore.explorer import Explorer

__all__ = ["page_data", "page_html"]


def _pack(data: bytes) -> str:
    """gzip, then base64: what the page's `unpack` reads back (DecompressionStream)."""
    return base64.b64encode(gzip.compress(data, compresslevel=6, mtime=0)).decode("ascii")


def _quantize(patterns: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Patterns as 16 levels between each (row, head)'s low and high value, two levels a byte (the high nibble
    first): a heatmap needs no more. Returns (packed uint8, low, high)."""
    low = patterns.min(axis=(2, 3))
    high = patterns.max(axis=(2, 3))
    span = np.where(high > low, high - low, 1.0)
    scaled = (patterns - low[:, :, None, None]) / span[:, :, None, None]
    levels = np.round(scaled * 15).astype(np.uint8).ravel()
    if levels.size % 2:
        levels = np.append(levels, np.uint8(0))
    return (levels[0::2] << 4) | levels[1::2], low.astype(np.float32), high.astype(np.float32)


def page_data(explorer: Explorer) -> dict[str, Any]:
    """Everything the page shows, JSON-ready (the bulk packed by `_pack`)."""
    from latentcode.explore.colours import colourable_labels, label_values, row_views

    codes = explorer.codes
    labels: dict[str, Any] = {}
    for name in colourable_labels(codes):
        try:
            values, names = label_values(codes, name)
        except ValueError:
            continue  # too many classes to colour by: left out of the menu
        if names is None:
            labels[name] = {"kind": "num", "values": np.round(values, 4).tolist()}
        else:
            labels[name] = {"kind": "cat", "names": names, "index": values.astype(int).tolist()}
    pictures: dict[str, int] = {}
    picture_index = [pictures.setdefault(explorer.picture(row), len(pictures)) for row in range(codes.n_samples)]
    site = np.ascontiguousarray(codes.codes[:, explorer.layer_index], dtype=np.float32)  # [n, head, query, key]
    xy = explorer.xy
    span = np.where(np.ptp(xy, axis=0) > 0, np.ptp(xy, axis=0), 1.0)
    data: dict[str, Any] = {
        "title": explorer.title,
        "reading": codes.meta.get("reading", ""),
        "method": explorer.method,
        "n": codes.n_samples,
        "xy": np.round((xy - xy.min(axis=0)) / span, 4).ravel().tolist(),
        "labels": labels,
        "label": explorer.label if explorer.label in labels else next(iter(labels)),
        "default_label": codes.label if codes.label in labels else None,
        "split": codes.split.tolist(),
        "layer": explorer.layer,
        "query": codes.meta.get("query"),
        "key": codes.meta.get("key"),
        "view": row_views(codes).tolist(),
        "picture_index": picture_index,
        "pictures": _pack(json.dumps(list(pictures), ensure_ascii=False).encode("utf-8")),
        "codes": _pack(site.tobytes()),
        "code_shape": list(site.shape[1:]),
        "pattern": None,
    }
    if explorer.patterns is not None:
        quantized, low, high = _quantize(np.asarray(explorer.patterns, dtype=np.float32))
        data["pattern"] = {"data": _pack(quantized.tobytes()), "low": _pack(low.tobytes()),
                           "high": _pack(high.tobytes()), "shape": list(explorer.patterns.shape[1:])}
    return data


def page_html(explorer: Explorer) -> str:
    """The whole page: one HTML document, every byte it needs inline."""
    script = files("latentcode.explore").joinpath("explorer.js").read_text(encoding="utf-8")
    payload = json.dumps(page_data(explorer), separators=(",", ":")).replace("</", "<\\/")
    title = html.escape(explorer.title)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>{_STYLE}</style></head>
<body><div id="lc-root" data-ready="0">
<header><b id="lc-title">{title}</b> <span id="lc-reading"></span></header>
<div id="lc-controls">colour by <select id="lc-colour"></select>
 select with <button id="lc-box" class="on">box</button><button id="lc-lasso">lasso</button>
 <button id="lc-clear">clear selection</button> <span id="lc-hint">hover a point: its instance; click: its code and
 attention; drag: select</span></div>
<div id="lc-main"><div id="lc-left"><canvas id="lc-scatter"></canvas><div id="lc-legend"></div>
<div id="lc-selection"><i>no selection: drag a box or a lasso over the points</i></div></div>
<div id="lc-right"><div id="lc-instance"><i>hover a point to see its instance</i></div>
<div id="lc-pattern"><i>click a point to see its per-head code and its attention pattern</i></div></div></div>
</div>
<script type="application/json" id="lc-data">{payload}</script>
<script>{script}</script>
</body></html>
"""


_STYLE = """
body{font:12px system-ui,sans-serif;margin:8px;color:#222}
header{margin-bottom:4px}#lc-reading{color:#666}
#lc-controls{margin-bottom:6px}#lc-controls button{font-size:11px;margin-left:2px}
#lc-controls button.on{background:#1565c0;color:#fff;border:1px solid #1565c0}
#lc-hint{color:#888;font-size:11px}
#lc-main{display:flex;gap:12px;align-items:flex-start}
#lc-left{flex:0 0 auto}#lc-right{flex:1 1 auto;min-width:320px}
#lc-scatter{width:480px;height:420px;border:1px solid #ccc;cursor:crosshair;display:block}
#lc-legend{max-width:480px;font-size:11px;margin-top:4px;max-height:90px;overflow:auto}
#lc-legend span.sw{display:inline-block;width:9px;height:9px;margin:0 3px 0 8px;border-radius:2px}
#lc-selection{max-width:480px;margin-top:6px;font-size:11px;max-height:180px;overflow:auto}
#lc-selection table,#lc-pattern table{border-collapse:collapse}
#lc-selection td,#lc-selection th{padding:0 6px;text-align:left}
#lc-instance{min-height:120px;border:1px solid #eee;padding:4px;margin-bottom:8px}
#lc-instance .lc-caption{color:#555;font-size:11px;margin-bottom:3px}
#lc-pattern{border:1px solid #eee;padding:4px}#lc-pattern canvas{display:block;margin-top:4px}
"""
