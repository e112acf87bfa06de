"""`explore`: latent codes in 2-D, linked to the instances they came from and to the attention patterns they sit in.

One call gathers, per row of codes, what the linked views need: the 2-D embedding (`probes.embed.embed_codes`),
the instance as a picture (the task's own `instance_html`; a task without one gets a plain table), the per-head
code at the site (one layer of the codes) and, when a model is at hand, that row's full attention rows at the
site's query positions (head x query x key) with the model's answer at every readout position. The result, an
`Explorer`, shows itself in a notebook as one self-contained HTML page (`page.py`) and draws a static matplotlib
view for outputs that run no script.
"""

from __future__ import annotations

import html
import logging
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from latentcode.explore.colours import label_values, row_views, unknown_label
from probes.codes import LatentCodes

__all__ = ["Explorer", "NoRendererWarning", "explore", "has_renderer", "instance_picture"]

logger = logging.getLogger(__name__)

class NoRendererWarning(UserWarning):
    """A picture was asked of a task that draws none: it shows a plain table of the instance instead."""


def has_renderer(task: Any) -> bool:
    """Whether the task draws its instances itself (overrides `CompositionalTask.instance_html`)."""
    from latentcode.tasks.base import CompositionalTask

    method = getattr(type(task), "instance_html", None)
    return method is not None and method is not CompositionalTask.instance_html


def instance_picture(
    codes: LatentCodes, row: int, *, task: Any = None, fmt: Literal["html", "axes"] = "html", ax: Any = None
) -> Any:
    """Row `row`'s instance drawn by its task: HTML/SVG (`fmt="html"`) or a matplotlib axes (`fmt="axes"`).

    A task without a renderer of its own gives a plain table, with a `NoRendererWarning` saying so.

    Raises:
        ValueError: the codes carry no instances, or name no task (and none is given), or `row` is out of range.
    """
    task = _task_of(codes) if task is None else task
    _check_inputs(codes)
    if not 0 <= row < codes.n_samples:
        raise ValueError(f"row={row} is out of range: these codes have {codes.n_samples} rows")
    if not has_renderer(task):
        warnings.warn(f"task {task.name!r} draws no instance picture (no instance_html/plot_instance of its own); "
                      "showing a plain table of its labels and tokens", NoRendererWarning, stacklevel=2)
    labels = _row_labels(codes, row, {})
    if fmt == "html":
        return task.instance_html(codes.inputs[row], labels)
    if fmt == "axes":
        return task.plot_instance(codes.inputs[row], labels, ax=ax)
    raise ValueError(f"fmt={fmt!r}; choose 'html' or 'axes'")


@dataclass(frozen=True, eq=False)
class Explorer:
    """What `explore` gathered; shows itself in Jupyter (an iframe holding `to_html()`), saves one HTML file, and
    draws a static view (`figure`).

    Attributes:
        codes: the latent codes, one row per point.
        task: the task the codes were read on (its renderer draws the instances).
        layer: the model layer of the site whose codes and patterns the click view shows.
        label: the label the points are coloured by at first (the page lets the user switch).
        xy: float [n, 2], the 2-D embedding of the codes at `layer`.
        method: "umap" or "pca".
        patterns: float32 [n, head, query, key_pos], each row's attention rows at the site's query positions over
            every key position (None: codes without their model, so no pattern to show).
        extra: per-row extras the pictures use (`answer`, `truth`: the model's and the true outputs at every
            readout position), empty without a model.
        title: the page's heading.
    """

    codes: LatentCodes
    task: Any
    layer: int
    label: str
    xy: np.ndarray
    method: str
    patterns: np.ndarray | None = None
    extra: dict[str, np.ndarray] = field(default_factory=dict)
    title: str = "latent-code explorer"

    @property
    def layer_index(self) -> int:
        """Position of `layer` on the codes' layer axis."""
        return list(self.codes.meta.get("layers", range(self.codes.n_layers))).index(self.layer)

    def picture(self, row: int) -> str:
        """Row `row`'s instance as HTML/SVG, drawn by the task (with the model's full answer when known)."""
        return self.task.instance_html(self.codes.inputs[row], _row_labels(self.codes, row, self.extra))

    def site(self, row: int) -> tuple[list[int], list[int]]:
        """(query positions, key positions) of row `row`'s site."""
        query, key = self.codes.meta["query"], self.codes.meta["key"]
        view = row_views(self.codes)[row]
        return [int(q) for q in query[view]], [int(k) for k in key[view]]

    def to_html(self, *, full: bool = True, height: int = 820) -> str:
        """The explorer as HTML: a whole self-contained page (`full=True`: save it, open it anywhere offline), or
        an `<iframe srcdoc>` holding that page (`full=False`: the fragment a notebook or a report embeds; its
        scripts and styles stay inside the frame)."""
        from latentcode.explore.page import page_html

        page = page_html(self)
        if full:
            return page
        return (f'<iframe class="lc-explorer" srcdoc="{html.escape(page, quote=True)}" style="width:100%;'
                f'height:{height}px;border:1px solid #ddd" title="{html.escape(self.title)}"></iframe>')

    def save(self, path: str | os.PathLike) -> Path:
        """Write the self-contained page to `path` (.html) and return the path."""
        path = Path(path)
        if path.suffix.lower() not in (".html", ".htm"):
            raise ValueError(f"{path} is not an .html path; the explorer saves one self-contained HTML page")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.to_html(), encoding="utf-8")
        return path

    def _repr_html_(self) -> str:
        return self.to_html(full=False)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        """HTML for front ends that run scripts (JupyterLab, VS Code), a PNG of `figure()` for those that do not."""
        import io

        import matplotlib.pyplot as plt

        fig = self.figure()
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=80, bbox_inches="tight")
        plt.close(fig)
        return {"text/html": self._repr_html_(), "image/png": buffer.getvalue(), "text/plain": repr(self)}

    def __repr__(self) -> str:
        return (f"Explorer({self.codes.n_samples} codes of {self.task.name}, layer {self.layer}, "
                f"{self.method}, coloured by {self.label!r}, patterns {'kept' if self.patterns is not None else 'none'})")

    def figure(self, row: int | None = None) -> Any:
        """The static view (for outputs that run no script, and for papers): the embedding coloured by `label`,
        row `row`'s instance (default: the first row) and its attention pattern with the site's keys outlined
        (its per-head code when there is no pattern). Returns the matplotlib figure."""
        import matplotlib.pyplot as plt
        from matplotlib.patches import Rectangle

        row = 0 if row is None else row
        fig, axes = plt.subplots(1, 3, figsize=(13, 4.2), gridspec_kw={"width_ratios": [1.2, 1, 1.2]})
        values, names = label_values(self.codes, self.label)
        if names is None:
            points = axes[0].scatter(*self.xy.T, c=values, s=6, cmap="viridis")
            fig.colorbar(points, ax=axes[0], label=self.label)
        else:
            cmap = plt.get_cmap("tab10" if len(names) <= 10 else "hsv")
            for index, name in enumerate(names):
                shown = values == index
                color = cmap(index if len(names) <= 10 else index / len(names))
                axes[0].scatter(*self.xy[shown].T, s=6, color=color, label=name if len(names) <= 12 else None)
            if len(names) <= 12:
                axes[0].legend(fontsize=6, markerscale=2, loc="best", title=self.label, title_fontsize=7)
        axes[0].scatter(*self.xy[row], s=80, facecolor="none", edgecolor="black")
        axes[0].set_title(f"{self.method.upper()} of layer {self.layer}'s codes", fontsize=9)
        axes[0].set_xticks([])
        axes[0].set_yticks([])
        self.task.plot_instance(self.codes.inputs[row], _row_labels(self.codes, row, self.extra), ax=axes[1])
        query, key = self.site(row)
        if self.patterns is not None:
            pattern = self.patterns[row]  # [head, query, key_pos]
            n_heads, n_query, n_keys = pattern.shape
            axes[2].imshow(pattern.reshape(n_heads * n_query, n_keys), aspect="auto", cmap="Blues",
                           interpolation="nearest")
            for band in range(n_heads * n_query):
                for k in key:
                    axes[2].add_patch(Rectangle((k - 0.5, band - 0.5), 1, 1, fill=False, ec="#c62828", lw=0.8))
            axes[2].set_yticks(np.arange(n_heads) * n_query, [f"h{h}" for h in range(n_heads)], fontsize=6)
            axes[2].set_xlabel("key position (site keys outlined)", fontsize=8)
            axes[2].set_title(f"attention at layer {self.layer}, query {query}", fontsize=9)
        else:
            code = self.codes.codes[row, self.layer_index]
            axes[2].imshow(code.reshape(code.shape[0], -1), aspect="auto", cmap="RdBu_r")
            axes[2].set_ylabel("head")
            axes[2].set_title(f"per-head code at layer {self.layer}, query {query}, keys {key}", fontsize=9)
        fig.tight_layout()
        return fig


def explore(
    source: Any,
    label: str | None = None,
    *,
    layer: int | Literal["last"] = "last",
    method: Literal["umap", "pca"] = "umap",
    n_samples: int = 256,
    splits: Sequence[str] = ("train", "ood"),
    positions: Any = "paper",
    inputs: str | None = None,
    seed: int = 0,
    device: str = "cpu",
    title: str | None = None,
) -> Explorer:
    """Explore latent codes: an embedding of the codes linked to their instances and attention patterns.

    Hovering a point shows its instance as a picture; clicking it shows its per-head code at the site and its
    attention pattern (head x query x key) with the site's keys marked; a box or lasso selection lists the
    labels in the selection with its purity. In a notebook the result displays itself; `.save("x.html")` writes one
    self-contained page; `.figure()` is the static view.

    Args:
        source: a run (`lc.load_run`, `lc.load_pretrained`), a shipped model's name ("sraven-hyla"), a run
            directory, or `LatentCodes` (then with no attention patterns: only the site's codes are at hand).
        label: the label to colour by at first (default: the codes' default label, "rule" or "terms"); any 1-D
            label of the codes, a label tuple (e.g. "rules") or "split".
        layer: the model layer of the site shown ("last": the codes' last layer).
        method: "umap" or "pca" (`probes.embed.embed_codes`).
        n_samples: instances per split, when `source` is a run.
        splits: the splits to draw, when `source` is a run.
        positions: the site, when `source` is a run ('paper', 'all_features', or explicit positions).
        inputs: the task's input choice, when `source` is a run (None: the paper's reading).
        seed: batch seed, when `source` is a run.
        device: where the model runs, when `source` is a run.
        title: the page's heading (default: task, variant and layer).

    Raises:
        ValueError: an unknown source, a label the codes lack, codes that carry no instances or name no task, a
            layer the codes lack.
    """
    if method not in ("umap", "pca"):
        raise ValueError(f"method={method!r}; choose 'umap' or 'pca'")
    run = _as_run(source, device)
    if run is None:
        codes = source
        task = _task_of(codes)
        _check_inputs(codes)
        _check_label(codes, label)
        patterns, extra = None, {}
    else:
        from latentcode.codes.extract import extract_latent_codes

        task = run.task
        probe = extract_latent_codes(run.model, task, splits[:1], 1, positions=positions, inputs=inputs,
                                     progress=False)
        _check_label(probe, label)  # before the real work
        codes = extract_latent_codes(run.model, task, splits, n_samples, positions=positions, inputs=inputs,
                                     seed=seed, progress=False, checkpoint=getattr(run, "checkpoint_hash", None))
    layers = [int(x) for x in codes.meta.get("layers", range(codes.n_layers))]
    chosen = layers[-1] if layer == "last" else int(layer)
    if chosen not in layers:
        raise ValueError(f"layer={layer!r} is not among the codes' layers {layers}")
    if run is not None:
        patterns, extra = _site_patterns(run.model, task, codes, chosen, splits, n_samples, positions, inputs,
                                         seed, device)
    from probes.degenerate import ConstantCodesWarning
    from probes.embed import embed_codes

    with warnings.catch_warnings(record=True) as caught:  # umap's notes on n_jobs and spectral fall-backs
        warnings.simplefilter("always")
        embedding = embed_codes(codes, method, layer=chosen, max_points=None, random_state=0)
    for warning in caught:  # but constant codes the user must hear of: every point sits at one place
        if issubclass(warning.category, ConstantCodesWarning):
            warnings.warn(str(warning.message), ConstantCodesWarning, stacklevel=2)
    order = np.argsort(embedding.rows)
    xy = np.asarray(embedding.coords, dtype=np.float64)[order]
    default = label or codes.label or "split"
    variant = codes.meta.get("variant", "")
    heading = title or f"{task.name} · {variant} · layer {chosen} · {codes.n_samples} codes" + (
        " · constant codes at this layer: every point at one place" if embedding.constant else "")
    return Explorer(codes=codes, task=task, layer=chosen, label=default, xy=xy, method=method,
                    patterns=patterns, extra=extra, title=heading)


def _check_label(codes: LatentCodes, label: str | None) -> None:
    if label is not None and label != "split" and label not in codes.labels:
        raise ValueError(unknown_label(codes, label))


def _check_inputs(codes: LatentCodes) -> None:
    if codes.inputs is None:
        raise ValueError("these codes carry no instances (LatentCodes.inputs is None: codes_from_patterns or an "
                         "older file); extract them again with lc.extract_latent_codes, or pass the run: "
                         "lc.explore(run)")


def _task_of(codes: Any) -> Any:
    if not isinstance(codes, LatentCodes):
        raise ValueError(f"cannot explore a {type(codes).__name__}; pass a run (lc.load_pretrained, lc.load_run), "
                         "a shipped model's name, a run directory or LatentCodes")
    from latentcode.tasks import get_task

    name, params = codes.meta.get("task"), codes.meta.get("task_params")
    if name is None or params is None:
        raise ValueError("these codes name no task (meta['task'] / meta['task_params'] missing), so their "
                         "instances cannot be drawn; extract them with lc.extract_latent_codes, or pass the run")
    return get_task(name, **params)


def _as_run(source: Any, device: str) -> Any:
    """The run `source` names or is, or None for `LatentCodes`."""
    if isinstance(source, LatentCodes):
        return None
    if isinstance(source, (str, os.PathLike)):
        from latentcode.rundir.checkpoint import load_run
        from latentcode.rundir.pretrained import list_pretrained, load_pretrained

        if str(source) in list_pretrained():
            return load_pretrained(str(source), device)
        if Path(source).is_dir():
            return load_run(source, device)
        raise ValueError(f"{source!r} is neither a shipped model ({', '.join(list_pretrained())}) nor a run "
                         "directory")
    if hasattr(source, "model") and hasattr(source, "task"):
        return source
    raise ValueError(f"cannot explore a {type(source).__name__}; pass a run (lc.load_pretrained, lc.load_run), a "
                     "shipped model's name, a run directory or LatentCodes")


def _row_labels(codes: LatentCodes, row: int, extra: Mapping[str, np.ndarray]) -> dict[str, Any]:
    labels: dict[str, Any] = {name: value[row] for name, value in codes.labels.items()}
    labels.update({name: value[row] for name, value in extra.items()})
    labels["split"] = str(codes.split[row])
    if codes.meta.get("inputs") == "permuted":
        labels["permuted"] = True
    return labels


def _site_patterns(
    model: Any, task: Any, codes: LatentCodes, layer: int, splits: Sequence[str], n_samples: int, positions: Any,
    inputs: str | None, seed: int, device: str,
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Each row's attention rows at its site's query positions over every key, and the model's answer and the truth
    at every readout position: the instances `extract_latent_codes` drew (same task, split, seed), run again."""
    import torch

    from latentcode.codes.extract import pattern_hook_name
    from latentcode.codes.readings import code_reading, resolve_positions

    spec = resolve_positions(task, positions)
    choice = code_reading(task).choice(inputs, task.name)
    name = pattern_hook_name(layer)
    query = torch.as_tensor(spec.query)  # [view, query]
    rows, answers, truths, tokens = [], [], [], []
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for split in splits:
                batch = task.sample(n_samples, split, seed=seed, device=device, **choice.sample_options)
                for start in range(0, n_samples, 512):
                    x = batch.x[start : start + 512]
                    out, cache = model.run_with_cache(x, names_filter=[name])
                    pattern = cache[name][:, :, query, :]  # [batch, head, view, query, key_pos]
                    rows.append(pattern.permute(0, 2, 1, 3, 4).flatten(0, 1).float().cpu().numpy())
                    answers.append(np.repeat(task.predict(out).cpu().numpy(), spec.n_views, axis=0))
                    truths.append(np.repeat(batch.y[start : start + 512].cpu().numpy(), spec.n_views, axis=0))
                    tokens.append(np.repeat(x.float().cpu().numpy(), spec.n_views, axis=0))
    finally:
        model.train(was_training)
    patterns = np.concatenate(rows)
    if patterns.shape[0] != codes.n_samples or not np.array_equal(np.concatenate(tokens), codes.inputs):
        raise RuntimeError("the instances drawn again differ from the extracted ones; the task's sampler is not "
                           "deterministic for this seed")
    answer, truth = np.concatenate(answers), np.concatenate(truths)
    extra = {"answer": answer, "truth": truth} if answer.ndim > 1 else {}
    return patterns, extra
