"""The whole probe suite over one or more runs, written as one self-contained `report.html` plus `summary.json`.

`build_report` decodes, clusters, compares rules and embeds the codes of each run and draws the figures of
`probes.figures` with plotly (plotly.js embedded once, so the page works offline). The summary puts the runs side
by side: each run's reading, and every decoding score beside its floors, the input-only control and `codes − best`
(`DecodingResult.headlines()`). Constant layers (`probes.degenerate`) are named in a warning box and the summary,
and their figures say "constant codes". It reads only what it is given (`RunInput`); finding runs is the CLI's job.
"""

from __future__ import annotations

import html
import json
import logging
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from tqdm.auto import tqdm

from probes.cluster import ClusteringResult, cluster_codes
from probes.codes import LatentCodes, _atomic_write, _jsonable
from probes.decoding.decode import decode_rules
from probes.decoding.results import HEADLINE, NA, UNDEFINED, DecodingResult, Headline
from probes.degenerate import CONSTANT_RTOL, CodeSpread, ConstantCodesWarning, code_spread, warn_constant
from probes.embed import Embedding, embed_codes
from probes.figures import (
    code_heatmap_figure,
    decoding_figure,
    embedding_figure,
    similarity_figure,
    term_f1_figure,
    training_curves_figure,
    variant_figure,
)
from probes.similarity import RuleSimilarity, TopographicResult, rule_similarity, topographic_similarity

logger = logging.getLogger(__name__)

REPORT_FILE = "report.html"
SUMMARY_FILE = "summary.json"
SECTIONS = (
    "Summary",
    "Training curves",
    "Decoding per layer",
    "Clustering",
    "Rule similarity",
    "UMAP",
    "Code heatmaps",
)
"""Section titles of the report, in order ("UMAP" reads "PCA" when the report embeds with PCA)."""


@dataclass(frozen=True)
class RunInput:
    """What the report needs from one run.

    Attributes:
        name: run name (column header).
        codes: the run's latent codes, or None (the code sections then say how to extract them).
        metrics: rows of the run's metrics.jsonl ({"step", "split", "loss", "acc" | "r2", "lr", ...}).
        summary: final metrics, e.g. {"test_acc": 0.97, "ood_acc": 0.61}.
        variant: model variant (softmax, linear, hyla, ...), used to group runs in the comparison.
    """

    name: str
    codes: LatentCodes | None = None
    metrics: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    variant: str | None = None


@dataclass(frozen=True)
class RunAnalysis:
    """Everything computed for one run (None where the run has no codes).

    `spread` holds the constant-codes check of each layer group (`probes.degenerate.code_spread`), made before
    any analysis; `errors` the analyses that could not run, with why.
    """

    run: RunInput
    decoding: DecodingResult | None = None
    clustering: ClusteringResult | None = None
    similarity: RuleSimilarity | None = None
    topographic: TopographicResult | None = None
    embedding: Embedding | None = None
    errors: dict[str, str] = field(default_factory=dict)
    spread: CodeSpread | None = None

    @property
    def constant_layers(self) -> list[str]:
        """Layer groups whose codes are constant ("0", ..., "all"); empty without codes."""
        return self.spread.constant_layers if self.spread is not None else []

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe summary (embedding coordinates left out)."""
        run = self.run
        out: dict[str, Any] = {
            "variant": run.variant,
            "task": run.codes.task if run.codes is not None else None,
            "summary": run.summary,
            "n_samples": run.codes.n_samples if run.codes is not None else 0,
            "meta": run.codes.meta if run.codes is not None else None,
        }
        for key in ("decoding", "clustering", "similarity", "topographic"):
            value = getattr(self, key)
            out[key] = value.to_dict() if value is not None else None
        if self.embedding is not None:
            out["embedding"] = {
                "method": self.embedding.method,
                "layer": self.embedding.layer,
                "n_samples": self.embedding.n_samples,
                "params": self.embedding.params,
                "constant": self.embedding.constant,
            }
        out["constant_layers"] = self.constant_layers
        out["code_spread"] = self.spread.to_dict() if self.spread is not None else None
        out["errors"] = self.errors
        return _jsonable(out)


def analyse_run(
    run: RunInput,
    *,
    embed_method: Literal["umap", "pca"] = "umap",
    max_points: int = 3000,
    random_state: int = 0,
    progress: bool | None = None,
    rtol: float = CONSTANT_RTOL,
) -> RunAnalysis:
    """Run decoding, clustering, rule similarity, topographic similarity and an embedding on one run's codes.

    First each layer's codes are checked: constant layers (spread / RMS <= `rtol`, `probes.degenerate`) get
    one `ConstantCodesWarning` naming the run, are recorded in `spread`, and are skipped by k-means and the
    embedding. An analysis that cannot run on these codes (e.g. a single class in the train split) is
    recorded in `errors` and left out, so one odd run does not sink the whole report.
    """
    codes = run.codes
    if codes is None:
        return RunAnalysis(run)
    spread = code_spread(codes, "each+all", rtol=rtol)
    warn_constant(spread, f"run {run.name}")
    results: dict[str, Any] = {}
    errors: dict[str, str] = {}
    steps = {
        "decoding": lambda: decode_rules(codes, random_state=random_state, progress=progress, rtol=rtol),
        "clustering": lambda: cluster_codes(codes, random_state=random_state, rtol=rtol),
        "similarity": lambda: rule_similarity(codes, layer="last", rtol=rtol),
        "topographic": lambda: topographic_similarity(codes, random_state=random_state, rtol=rtol),
        # 200 epochs (umap's own choice above 10,000 rows) keep a report of several runs to seconds per run
        "embedding": lambda: embed_codes(
            codes, embed_method, "last", max_points=max_points, n_epochs=200, random_state=random_state,
            rtol=rtol,
        ),
    }
    for name, step in steps.items():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConstantCodesWarning)  # said once above, for the whole run
                results[name] = step()
        except ValueError as err:
            logger.warning("run %s: %s skipped: %s", run.name, name, err)
            errors[name] = str(err)
    return RunAnalysis(run, errors=errors, spread=spread, **results)


def _cell(value: Any) -> str:
    """A summary-table cell: `n/a` where the number does not apply or was not computed (None, a run without the
    analysis), `–` where it was computed but is undefined (NaN), as in the decoding tables."""
    if value is None:
        return NA
    if isinstance(value, float | np.floating):
        return UNDEFINED if not np.isfinite(value) else f"{value:.4g}"
    return str(value)


HEADLINE_ROWS = {"accuracy": "decoding accuracy", "term_f1": "term F1"}
"""The `DecodingResult.headlines()` metrics the summary shows, with their row titles."""
FLOOR_TITLES = {"chance": "chance (uniform)", "majority": "majority class", "always_present": "always present"}
"""Row titles of the floors (`Headline.floors`)."""


def _at(headline: Headline, layer: str, values: np.ndarray | None = None) -> float:
    """`values` (default: the codes' scores) of the last single layer (`layer="last"`) or of every layer ("all")."""
    names = headline.layers
    index = names.index("all") if layer == "all" else max(i for i, n in enumerate(names) if n != "all")
    return float((headline.codes if values is None else values)[index])


def _summary_rows(analyses: Mapping[str, RunAnalysis]) -> list[tuple[str, list[str]]]:
    """Rows of the side-by-side table: given final metrics, then each decoding score (last layer, all layers)
    beside its floors, the input-only control and `codes − best` (`DecodingResult.headlines()`), then the headline
    number of the other analyses."""
    runs = list(analyses.values())
    headlines = [a.decoding.headlines() if a.decoding is not None else {} for a in runs]

    def row(name: str, value: Any) -> tuple[str, list[str]]:
        cells = []
        for analysis in runs:
            try:
                cells.append(_cell(value(analysis)))
            except (AttributeError, KeyError, IndexError, ValueError):  # the run lacks this analysis or split
                cells.append(_cell(None))
        return name, cells

    def headline_row(name: str, metric: str, split: str, value: Any) -> tuple[str, list[str]]:
        cells = []
        for found in headlines:
            try:
                cells.append(_cell(value(found[metric][split])))
            except (KeyError, ValueError):  # no such metric, split or layer for this run
                cells.append(_cell(None))
        return name, cells

    rows = [row("variant", lambda a: a.run.variant), row("task", lambda a: a.run.codes.task)]
    rows.append(row("codes read at", lambda a: a.run.codes.reading or "not recorded"))
    rows.append(row("constant codes (layers)", lambda a: ", ".join(a.spread.constant_layers) or "none"))
    rows += [
        row(k, lambda a, k=k: a.run.summary[k]) for k in dict.fromkeys(k for a in runs for k in a.run.summary)
    ]
    for metric, title in HEADLINE_ROWS.items():
        if not any(metric in found for found in headlines):
            continue
        floors = dict.fromkeys(f for found in headlines for h in found.get(metric, {}).values() for f in h.floors)
        for split in ("test", "ood"):
            rows.append(headline_row(f"{title}, {split}, last layer", metric, split, lambda h: _at(h, "last")))
            rows.append(headline_row(f"{title}, {split}, all layers", metric, split, lambda h: _at(h, "all")))
            rows += [headline_row(f"{FLOOR_TITLES.get(f, f)} ({title}), {split}", metric, split,
                                  lambda h, f=f: h.floors.get(f)) for f in floors]
            rows.append(headline_row(f"input-only control ({title}), {split}", metric, split, lambda h: h.control))
            for layer, where in (("last", "last layer"), ("all", "all layers")):
                rows.append(headline_row(f"{HEADLINE} ({title}), {split}, {where}", metric, split,
                                         lambda h, layer=layer: _at(h, layer, h.over_best)))
    rows.append(row("ridge R² of latent bits, ood, all layers", lambda a: a.decoding.bits.mean("ood")[-1]))
    rows.append(row("k-means AMI, all layers", lambda a: a.clustering.scores("ami")[-1]))
    rows.append(row("topographic ρ, all layers", lambda a: a.topographic.rho[-1]))
    return rows


class _Page:
    """Accumulates the HTML body; plotly figures share the one plotly.js script in the head."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.n_figures = 0

    def add(self, text: str) -> None:
        self.parts.append(text)

    def heading(self, title: str, level: int = 2) -> None:
        anchor = title.lower().replace(" ", "-")
        self.add(f'<h{level} id="{html.escape(anchor)}">{html.escape(title)}</h{level}>')

    def note(self, text: str) -> None:
        self.add(f'<p class="note">{html.escape(text)}</p>')

    def warning(self, title: str, items: list[str]) -> None:
        entries = "".join(f"<li>{html.escape(item)}</li>" for item in items)
        head = f"<strong>{html.escape(title)}</strong>"
        self.add(f'<div class="warning" role="alert">{head}<ul>{entries}</ul></div>')

    def pre(self, text: str) -> None:
        self.add(f"<pre>{html.escape(text)}</pre>")

    def figure(self, display: Any) -> None:
        self.n_figures += 1
        div = display.plotly().to_html(
            full_html=False, include_plotlyjs=False, div_id=f"figure-{self.n_figures}"
        )
        self.add(f'<div class="figure">{div}</div>')

    def table(self, header: list[str], rows: list[tuple[str, list[str]]]) -> None:
        head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
        body = "".join(
            "<tr><th>"
            + html.escape(name)
            + "</th>"
            + "".join(f"<td>{html.escape(v)}</td>" for v in values)
            + "</tr>"
            for name, values in rows
        )
        self.add(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1400px; padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: right; }
tbody th { text-align: left; font-weight: normal; }
pre { background: #f6f6f6; padding: 0.8em; overflow-x: auto; font-size: 0.85em; }
.note { color: #666; font-style: italic; }
.warning { background: #fff4d6; border-left: 4px solid #e0a800; padding: 0.5em 1em; margin: 1em 0; }
.warning ul { margin: 0.3em 0 0 0; padding-left: 1.2em; }
nav a { margin-right: 1em; }
"""


def _no_codes(page: _Page, analysis: RunAnalysis, what: str) -> bool:
    run = analysis.run
    if run.codes is None:
        page.note(f"{run.name}: no latent codes; run `latentcode extract RUN` to make them.")
        return True
    if what in analysis.errors:
        page.note(f"{run.name}: {what} skipped: {analysis.errors[what]}")
        return True
    return False


def build_report(
    runs: Mapping[str, RunInput] | Sequence[RunInput],
    out_dir: str | os.PathLike,
    *,
    title: str = "latentcode report",
    embed_method: Literal["umap", "pca"] = "umap",
    max_points: int = 3000,
    random_state: int = 0,
    progress: bool | None = None,
    rtol: float = CONSTANT_RTOL,
) -> Path:
    """Analyse every run and write `out_dir/report.html` (self-contained) and `out_dir/summary.json`.

    Args:
        runs: run name -> `RunInput`, or a list of `RunInput` (named by `RunInput.name`). Runs may mix tasks.
        out_dir: output folder (created).
        title: page title.
        embed_method: "umap" (default) or "pca" for the embedding section.
        max_points: rows embedded per run (a seeded subsample; UMAP on 3,000 rows takes seconds).
        random_state: seed of every analysis.
        progress: progress bar over runs (None: only on a terminal).
        rtol: codes varying by at most this fraction of their RMS are constant (`probes.degenerate`); they are
            named in a warning at the top of the page.

    Returns:
        The path of report.html.

    Raises:
        ValueError: no runs, or two runs with the same name.
    """
    if not isinstance(runs, Mapping):
        names = [r.name for r in runs]
        if len(set(names)) != len(names):
            raise ValueError(f"runs have duplicate names {names}; give each RunInput a distinct name")
        runs = {r.name: r for r in runs}
    if not runs:
        raise ValueError("runs is empty; pass at least one RunInput")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    analyses = {
        name: analyse_run(
            run,
            embed_method=embed_method,
            max_points=max_points,
            random_state=random_state,
            progress=False,
            rtol=rtol,
        )
        for name, run in tqdm(runs.items(), desc="report", disable=None if progress is None else not progress)
    }
    page = _Page()
    sections = [s if s != "UMAP" else embed_method.upper() for s in SECTIONS]
    page.add(f"<h1>{html.escape(title)}</h1>")
    page.add(
        "<nav>"
        + "".join(f'<a href="#{s.lower().replace(" ", "-")}">{html.escape(s)}</a>' for s in sections)
        + "</nav>"
    )
    flat = {name: a.spread for name, a in analyses.items() if a.constant_layers}
    if flat:
        page.warning(
            "Constant codes: the figures and scores of these layers show no structure, only rounding noise.",
            [f"{name}: {spread.message()}" for name, spread in flat.items()],
        )

    page.heading(sections[0])
    page.table(["", *runs], _summary_rows(analyses))
    grouped: dict[str, list[float]] = {}
    for name, a in analyses.items():
        for key in ("ood_acc", "ood_r2"):
            if isinstance(a.run.summary.get(key), int | float):
                grouped.setdefault(f"{a.run.variant or name} ({key})", []).append(float(a.run.summary[key]))
    if len(grouped) > 1:
        page.figure(variant_figure(grouped, metric="final OOD metric", title="Final OOD metric by variant"))

    page.heading(sections[1])
    with_metrics = {name: run.metrics for name, run in runs.items() if run.metrics}
    if with_metrics:
        try:
            variants = {name: run.variant for name, run in runs.items()}
            page.figure(training_curves_figure(with_metrics, variants=variants))
        except ValueError as err:
            page.note(str(err))
    else:
        page.note("No training metrics given (metrics.jsonl rows).")

    page.heading(sections[2])
    page.note(
        "Linear probes (standardize + logistic regression) fit on train-split codes, scored on held-out "
        "splits, each beside the floors a decoder that ignores the codes reaches on the same rows: chance = "
        "uniform guess; majority = rate of the train-majority class; always-present = the F1 of answering "
        "'present' for every term (fuzzy-logic term F1). Input-only = the same probe on the raw input tokens; "
        f"{HEADLINE} = the score minus the best of those. Each table names the reading its codes were taken "
        f"at. {NA} = not computed, {UNDEFINED} = undefined."
    )
    groups: dict[tuple, dict[str, DecodingResult]] = {}
    for name, a in analyses.items():
        if not _no_codes(page, a, "decoding"):
            groups.setdefault((a.decoding.task, a.decoding.label, len(a.decoding.class_names)), {})[name] = (
                a.decoding
            )
    for (task, label, _), results in groups.items():
        page.heading(f"{task or 'codes'}: {label}", level=3)
        page.figure(decoding_figure(results, constant_layers={n: r.constant_layers for n, r in results.items()}))
        for name, result in results.items():
            page.add(f"<h4>{html.escape(name)}</h4>")
            page.pre(result.table())
            if result.terms is not None and result.terms.f1:
                split = "ood" if "ood" in result.terms.f1 else next(iter(result.terms.f1))
                page.figure(term_f1_figure(result.terms, split=split))

    page.heading(sections[3])
    for name, a in analyses.items():
        if not _no_codes(page, a, "clustering"):
            page.add(f"<h4>{html.escape(name)}</h4>")
            page.pre(a.clustering.table())
            if a.topographic is not None:
                topo = a.topographic
                page.pre(
                    "topographic similarity (Spearman ρ between code distances and "
                    f"{topo.distance} distances of {topo.label!r}, {topo.n_pairs} pairs): "
                    + ", ".join(
                        f"layer {n}: " + ("constant codes" if n in topo.constant_layers else f"{r:.3f}")
                        for n, r in zip(topo.layers, topo.rho, strict=True)
                    )
                )

    page.heading(sections[4])
    for name, a in analyses.items():
        if not _no_codes(page, a, "similarity"):
            page.add(f"<h4>{html.escape(name)}</h4>")
            page.figure(
                similarity_figure(
                    a.similarity,
                    title=f"{name}: similarity of mean codes per "
                    f"{a.similarity.label} (layer {a.similarity.layer})",
                )
            )

    page.heading(sections[5])
    for name, a in analyses.items():
        if not _no_codes(page, a, "embedding"):
            page.add(f"<h4>{html.escape(name)}</h4>")
            page.figure(embedding_figure(a.embedding))

    page.heading(sections[6])
    for name, a in analyses.items():
        if not _no_codes(page, a, "heatmaps"):
            page.add(f"<h4>{html.escape(name)}</h4>")
            try:
                page.figure(code_heatmap_figure(a.run.codes))
            except ValueError as err:
                page.note(str(err))

    from plotly.offline import get_plotlyjs

    document = (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(title)}</title>\n<style>{_STYLE}</style>\n"
        f'<script type="text/javascript">{get_plotlyjs()}</script>\n</head>\n<body>\n'
        + "\n".join(page.parts)
        + "\n</body>\n</html>\n"
    )
    report_path = out_dir / REPORT_FILE
    _atomic_write(report_path, lambda f: f.write(document.encode("utf-8")))
    summary = {"title": title, "runs": {name: a.to_dict() for name, a in analyses.items()}}
    text = json.dumps(summary, indent=2, allow_nan=False) + "\n"
    _atomic_write(out_dir / SUMMARY_FILE, lambda f: f.write(text.encode("utf-8")))
    logger.info("wrote %s (%d figures) and %s", report_path, page.n_figures, SUMMARY_FILE)
    return report_path
