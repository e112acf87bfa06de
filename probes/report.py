"""The whole probe suite over one or more runs, written as `report.html` plus `summary.json`.

`build_report` analyses each run (`probes.run_analysis`: decoding, clustering, rule similarity, an embedding), draws
the figures of `probes.figures` with plotly (plotly.js once, in `plotly.min.js` beside the page or inside it, so the
page works offline) and returns a
`Report`. The summary puts the runs side by side: each run's reading, and every decoding score beside its floors,
the input-only control and `codes − best` (`DecodingResult.headlines()`). Constant layers (`probes.degenerate`) are
named in a warning box and the summary, and their figures say "constant codes". It reads only what it is given
(`RunInput`, and the caller's own `ReportSection`s); finding runs is the CLI's job. The page and summary.json are
written once each, from the results objects: nothing written is read back. The page's pieces are
`probes.report_page`'s, its sentences that depend on the results (the constant-codes warning, the decoding caption,
the OOD caveat) `probes.report_text`'s, and the section "Does the model use the code?" is `probes.report_causal`'s.
"""

from __future__ import annotations

import html
import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tqdm.auto import tqdm

from probes.codes_io import atomic_write as _atomic_write
from probes.codes_io import jsonable
from probes.decoding.extras import TermDecodingResult
from probes.decoding.results import DecodingResult
from probes.degenerate import CONSTANT_RTOL
from probes.figures import (
    CONSTANT_TEXT,
    PLOTLY_JS,
    code_heatmap_figure,
    confusion_figure,
    decoding_figure,
    embedding_figure,
    emergence_figure,
    similarity_figure,
    term_f1_figure,
    training_curves_figure,
    variant_figure,
)
from probes.report_causal import CAUSAL_SECTION, alignment_table, causal_section, erasure_table
from probes.report_page import STYLE, Page, ReportSection, SectionsArg, check_sections
from probes.report_text import constant_layers, constant_title, decoding_caption, ood_caveat
from probes.run_analysis import ANALYSIS_STEPS, RunAnalysis, RunInput, analyse_run, summary_rows
from probes.tables import format_score

__all__ = ["CAUSAL_SECTION", "EMERGENCE_SECTION", "EXPLORER_SECTION", "REPORT_FILE", "SECTIONS", "SUMMARY_FILE", "Report",
           "ReportSection", "RunAnalysis", "RunInput", "alignment_table", "analyse_run", "build_report",
           "erasure_table"]

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
"""Section titles of the report, in order ("UMAP" reads "PCA" when the report embeds with PCA). When a run comes with
a rule-emergence table, `EMERGENCE_SECTION` follows "Training curves"."""
EMERGENCE_SECTION = "Rule codes over training"
EXPLORER_SECTION = "Explorer"
"""Follows the embedding section when a run comes with an explorer (`RunInput.explorer_html`)."""

@dataclass(frozen=True)
class Report:
    """What `build_report` wrote, and what it holds: read `summary` here instead of summary.json.

    Attributes:
        path: report.html.
        summary_path: summary.json beside it.
        summary: what summary.json holds: `{"title": ..., "runs": {name: RunAnalysis.to_dict()}}`, and each
            caller's section's `key` -> its `summary`.
        analyses: run name -> the `RunAnalysis` behind the page (with the fitted results, not only their JSON).
        n_figures: figures on the page.
        sections: the caller's sections on the page (`build_report(sections=)`).

    A `Report` is also an `os.PathLike` of report.html (`open(report)`, `Path(report)`); its `Path` methods are
    `report.path`'s.
    """

    path: Path
    summary_path: Path
    summary: dict[str, Any]
    analyses: dict[str, RunAnalysis]
    n_figures: int
    sections: tuple[ReportSection, ...] = field(default=())

    def __fspath__(self) -> str:
        return os.fspath(self.path)


def _no_codes(page: Page, analysis: RunAnalysis, what: str) -> bool:
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
    include_plotlyjs: Literal["directory", True] = "directory",
    sections: SectionsArg = (),
) -> Report:
    """Analyse every run and write `out_dir/report.html` (and `plotly.min.js` beside it) and `out_dir/summary.json`.

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
        include_plotlyjs: "directory" (default): the page loads `plotly.min.js` from its own folder, written
            there once (4.6 MB; kept if already there), so the page itself stays small; True: plotly.js inside
            report.html, one self-contained file. Either works offline.
        sections: the caller's own sections (`ReportSection`), or a function of the analyses (run name ->
            `RunAnalysis`) returning them, called once the runs are analysed and before anything is written.

    Returns:
        The `Report`: `path` (report.html), `summary` (what summary.json holds), the analyses and the figure count.

    Raises:
        ValueError: no runs, two runs with the same name, an unknown `include_plotlyjs`, or two sections with
            one title or summary key.
    """
    if include_plotlyjs not in ("directory", True):
        raise ValueError(f"include_plotlyjs={include_plotlyjs!r}; pass 'directory' (plotly.min.js beside "
                         "report.html) or True (plotly.js inside it)")
    if not isinstance(runs, Mapping):
        names = [r.name for r in runs]
        if len(set(names)) != len(names):
            raise ValueError(f"runs have duplicate names {names}; give each RunInput a distinct name")
        runs = {r.name: r for r in runs}
    if not runs:
        raise ValueError("runs is empty; pass at least one RunInput")
    own: tuple[ReportSection, ...] = () if callable(sections) else tuple(sections)
    check_sections(own)  # given sections are checked before any work; a function's once it has run
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    steps = ANALYSIS_STEPS
    bar = tqdm(total=len(runs) * len(steps), desc="report", unit="step",
               disable=None if progress is None else not progress)
    analyses = {}
    with bar:
        for index, (name, run) in enumerate(runs.items(), start=1):
            if bar.disable:  # no bar: one line per run
                logger.info("report: [%d/%d] analysing %s (%s)", index, len(runs), name,
                            ", ".join(s if s != "embedding" else embed_method for s in steps))

            def step(what: str, name: str = name) -> None:
                bar.set_postfix_str(f"{name}: {what}", refresh=False)
                bar.update(1)

            analyses[name] = analyse_run(run, embed_method=embed_method, max_points=max_points,
                                         random_state=random_state, progress=False, rtol=rtol, on_step=step)
    own = tuple(sections(analyses)) if callable(sections) else own
    check_sections(own)
    top, end = [s for s in own if s.place == "top"], [s for s in own if s.place == "end"]
    page = Page()
    shown = {s: s if s != "UMAP" else embed_method.upper() for s in SECTIONS}  # the title each section shows
    nav = list(shown.values())
    with_emergence = {name: run.emergence for name, run in runs.items() if run.emergence}
    if with_emergence:
        nav.insert(nav.index("Training curves") + 1, EMERGENCE_SECTION)
    with_explorer = {name: run.explorer_html for name, run in runs.items() if run.explorer_html}
    if with_explorer:
        nav.insert(nav.index(shown["UMAP"]) + 1, EXPLORER_SECTION)
    by_title: dict[str, dict[str, Any]] = {}  # the runs' further analyses: section title -> run name -> result
    for name, run in runs.items():
        for analysis_title, result in run.analyses.items():
            by_title.setdefault(analysis_title, {})[name] = result
    nav += list(by_title)
    with_causal = {name: run.causal for name, run in runs.items() if run.causal}
    if with_causal:
        nav.append(CAUSAL_SECTION)
    nav = [s.title for s in top] + nav + [s.title for s in end]
    page.add(f"<h1>{html.escape(title)}</h1>")
    page.add(
        "<nav>"
        + "".join(f'<a href="#{s.lower().replace(" ", "-")}">{html.escape(s)}</a>' for s in nav)
        + "</nav>"
    )
    for section in top:
        page.section(section)
    flat = {name: a.spread for name, a in analyses.items() if a.constant_layers}
    if flat:
        page.warning(constant_title(flat), [f"{name}: {constant_layers(spread)}" for name, spread in flat.items()])

    page.heading(shown["Summary"])
    page.table(["", *runs], summary_rows(analyses))
    grouped: dict[str, list[float]] = {}
    for name, a in analyses.items():
        for key in ("ood_acc", "ood_r2"):
            if isinstance(a.run.summary.get(key), int | float):
                grouped.setdefault(f"{a.run.variant or name} ({key})", []).append(float(a.run.summary[key]))
    if len(grouped) > 1:
        page.figure(variant_figure(grouped, metric="final OOD metric", title="Final OOD metric by variant"))

    page.heading(shown["Training curves"])
    with_metrics = {name: run.metrics for name, run in runs.items() if run.metrics}
    if with_metrics:
        try:
            variants = {name: run.variant for name, run in runs.items()}
            page.figure(training_curves_figure(with_metrics, variants=variants))
        except ValueError as err:
            page.note(str(err))
    else:
        page.note("No training metrics given (metrics.jsonl rows).")

    if with_emergence:
        page.heading(EMERGENCE_SECTION)
        page.note(
            "When do rule codes appear? For each snapshot of the run, a linear probe fit on the codes of training "
            "rule combinations decodes the rule of held-out ones (Fig. 5F), beside the input-only control, the "
            "majority and chance floors, control-task selectivity and the model's own held-out accuracy at that "
            "step; for HYLA, a third panel shows each layer's live value-network units (`latentcode emergence RUN`)."
        )
        for name, rows in with_emergence.items():
            page.add(f"<h4>{html.escape(name)}</h4>")
            try:
                figure = emergence_figure(rows, title=f"{name}: rule decoding over training")
            except ValueError as err:
                page.note(f"{name}: {err}")
                continue
            page.figure(figure)
            page.pre(figure.table())

    page.heading(shown["Decoding per layer"])
    with_terms = any(isinstance(extra, TermDecodingResult)
                     for a in analyses.values() if a.decoding is not None for extra in a.decoding.extras.values())
    page.note(decoding_caption(with_terms))
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
            caveat = ood_caveat(result)
            if caveat:
                page.add(f'<p class="caveat">{html.escape(caveat)}</p>')
            if result.kind == "multiclass":  # where the errors go: the ceiling of the score above
                page.figure(confusion_figure(result))
            page.pre(result.table())
            for per_class in result.extras.values():
                if isinstance(per_class, TermDecodingResult) and per_class.f1:
                    page.figure(term_f1_figure(per_class))

    page.heading(shown["Clustering"])
    page.note(
        "k-means with one cluster per class, scored by adjusted mutual information with the label (AMI: 0 = "
        "chance, 1 = the label itself); topographic ρ = Spearman correlation between code distances and label "
        "distances. Beside each, its input-only control: the same metric on the raw input tokens instead of the "
        "codes (as for decoding), so a code score near its control adds nothing the inputs do not already show."
    )
    for name, a in analyses.items():
        if not _no_codes(page, a, "clustering"):
            page.add(f"<h4>{html.escape(name)}</h4>")
            control = a.input_only
            page.pre(a.clustering.table() + "\n" + f"input-only control (k-means on the raw inputs): AMI "
                     f"{format_score(control.get('ami'))}")
            if a.topographic is not None:
                topo = a.topographic
                page.pre(
                    "topographic similarity (Spearman ρ between code distances and "
                    f"{topo.distance} distances of {topo.label!r}, {topo.n_pairs} pairs): "
                    + ", ".join(
                        f"layer {n}: " + (CONSTANT_TEXT if n in topo.constant_layers else format_score(r))
                        for n, r in zip(topo.layers, topo.rho, strict=True)
                    )
                    + f"; input-only control: {format_score(control.get('topographic_rho'))}"
                )

    page.heading(shown["Rule similarity"])
    for name, a in analyses.items():
        if not _no_codes(page, a, "similarity"):
            page.add(f"<h4>{html.escape(name)}</h4>")
            page.figure(
                similarity_figure(
                    a.similarity,
                    title=f"{name}: {'centred ' if a.similarity.centered else ''}cosine similarity of mean codes "
                    f"per {a.similarity.label} (layer {a.similarity.layer})",
                )
            )

    page.heading(shown["UMAP"])
    for name, a in analyses.items():
        if not _no_codes(page, a, "embedding"):
            page.add(f"<h4>{html.escape(name)}</h4>")
            page.figure(embedding_figure(a.embedding))

    if with_explorer:
        page.heading(EXPLORER_SECTION)
        page.note(
            "The codes linked to their instances: hover a point to see its instance, click it for its per-head code "
            "and attention pattern at the site, draw a box or lasso to list the labels in the selection and their "
            "purity. Each explorer is a self-contained page inside a frame (`latentcode.explore`)."
        )
        for name, fragment in with_explorer.items():
            page.add(f"<h4>{html.escape(name)}</h4>")
            page.add(f'<div class="explorer">{fragment}</div>')

    page.heading(shown["Code heatmaps"])
    for name, a in analyses.items():
        if not _no_codes(page, a, "heatmaps"):
            page.add(f"<h4>{html.escape(name)}</h4>")
            try:
                page.figure(code_heatmap_figure(a.run.codes))
            except ValueError as err:
                page.note(str(err))

    for analysis_title, results in by_title.items():
        page.heading(analysis_title)
        for name, result in results.items():
            page.add(f"<h4>{html.escape(name)}</h4>")
            page.pre(result.table())

    if with_causal:
        causal_section(page, with_causal)

    for section in end:
        page.section(section)

    from plotly.offline import get_plotlyjs

    if include_plotlyjs == "directory":
        bundle = out_dir / PLOTLY_JS
        if not bundle.is_file():  # as plotly's own write_html does: one bundle per folder, kept when there
            _atomic_write(bundle, lambda f: f.write(get_plotlyjs().encode("utf-8")))
        script = f'<script type="text/javascript" src="{PLOTLY_JS}"></script>'
    else:
        script = f'<script type="text/javascript">{get_plotlyjs()}</script>'
    document = (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(title)}</title>\n<style>{STYLE}</style>\n"
        f"{script}\n</head>\n<body>\n"
        + "\n".join(page.parts)
        + "\n</body>\n</html>\n"
    )
    report_path = out_dir / REPORT_FILE
    _atomic_write(report_path, lambda f: f.write(document.encode("utf-8")))
    summary = jsonable({"title": title, "runs": {name: a.to_dict() for name, a in analyses.items()},
                        **{s.key: s.summary for s in own if s.key is not None}})
    text = json.dumps(summary, indent=2, allow_nan=False) + "\n"
    summary_path = out_dir / SUMMARY_FILE
    _atomic_write(summary_path, lambda f: f.write(text.encode("utf-8")))
    logger.info("wrote %s (%d figures) and %s", report_path, page.n_figures, SUMMARY_FILE)
    return Report(path=report_path, summary_path=summary_path, summary=summary, analyses=analyses,
                  n_figures=page.n_figures, sections=own)
