"""One run's probe suite for the report: `RunInput` (what a run offers) in, `RunAnalysis` (decoding, clustering,
rule and topographic similarity, an embedding, the constant-codes check) out, and the rows of the report's
side-by-side summary table (`summary_rows`).

Numbers only: the page that shows them is `probes.report`; finding runs on disk is
`latentcode.pipelines.run_report`'s job.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from probes.cluster import ClusteringResult, cluster_codes
from probes.codes import LatentCodes
from probes.codes_io import jsonable
from probes.decoding.decode import decode_rules
from probes.decoding.headline import HEADLINE, Headline
from probes.decoding.results import DecodingResult
from probes.degenerate import CONSTANT_RTOL, CodeSpread, ConstantCodesWarning, code_spread, warn_constant
from probes.embed import Embedding, embed_codes
from probes.similarity import RuleSimilarity, TopographicResult, rule_similarity, topographic_similarity
from probes.tables import format_cell

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunInput:
    """What the report needs from one run.

    Attributes:
        name: run name (column header).
        codes: the run's latent codes, or None (the code sections then say how to extract them).
        metrics: rows of the run's metrics.jsonl ({"step", "split", "loss", "acc" | "r2", "lr", ...}).
        summary: final metrics, e.g. {"test_acc": 0.97, "ood_acc": 0.61}.
        variant: model variant (softmax, linear, hyla, ...), used to group runs in the comparison.
        emergence: rows of the run's rule-emergence table (`latentcode emergence`: `EmergenceRow`s or mappings
            with its columns); when given, the report shows rule decoding over training.
        merge: groups of label values that the task says share one code (e.g. SRAVEN's addition and
            subtraction); the decoding then reports a merged score beside the plain one (`decode_rules(merge=)`).
        explorer_html: an interactive view of the run's codes as one self-contained HTML element (latentcode's
            explorer: `Explorer.to_html(full=False)`, an `<iframe srcdoc>`), embedded in the report as given.
        causal: plain causal results of the run: `{"alignment": {...}, "erasure": {...}, "source": "..."}`, each
            result as its `alignment.json` / `erasure.json` holds it (`rows`, `params`); the report shows them in
            its section "Does the model use the code?".
        analyses: further results of this run computed by the caller, by section title (latentcode's registered
            analyses, `latentcode.pipelines.run_analyses`): each has `table()`, shown in a report section of that
            title, and `to_dict()`, kept in summary.json under the run's `analyses`.
    """

    name: str
    codes: LatentCodes | None = None
    metrics: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    variant: str | None = None
    emergence: list[Any] = field(default_factory=list)
    merge: tuple[tuple[Any, ...], ...] | None = None
    explorer_html: str | None = None
    causal: Mapping[str, Any] | None = None
    analyses: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RunAnalysis:
    """Everything computed for one run (None where the run has no codes).

    `spread` holds the constant-codes check of each layer group (`probes.degenerate.code_spread`), made before
    any analysis; `errors` the analyses that could not run, with why; `input_only` the input-only control of
    clustering and topographic similarity (`input_only_controls`): `"ami"` and `"topographic_rho"`, the same
    metric on the raw input tokens instead of the codes, as decoding's input-only control (absent without
    inputs).
    """

    run: RunInput
    decoding: DecodingResult | None = None
    clustering: ClusteringResult | None = None
    similarity: RuleSimilarity | None = None
    topographic: TopographicResult | None = None
    embedding: Embedding | None = None
    errors: dict[str, str] = field(default_factory=dict)
    spread: CodeSpread | None = None
    input_only: dict[str, float] = field(default_factory=dict)

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
        out["input_only"] = self.input_only
        out["constant_layers"] = self.constant_layers
        out["code_spread"] = self.spread.to_dict() if self.spread is not None else None
        out["errors"] = self.errors
        if run.causal:
            out["causal"] = dict(run.causal)
        if run.analyses:
            out["analyses"] = {title: result.to_dict() for title, result in run.analyses.items()}
        return jsonable(out)


def analyse_run(
    run: RunInput,
    *,
    embed_method: Literal["umap", "pca"] = "umap",
    max_points: int = 3000,
    random_state: int = 0,
    progress: bool | None = None,
    rtol: float = CONSTANT_RTOL,
    on_step: Callable[[str], None] | None = None,
) -> RunAnalysis:
    """Run decoding, clustering, rule similarity, topographic similarity and an embedding on one run's codes.

    First each layer's codes are checked: constant layers (spread / RMS <= `rtol`, `probes.degenerate`) get
    one `ConstantCodesWarning` naming the run, are recorded in `spread`, and are skipped by k-means and the
    embedding. An analysis that cannot run on these codes (e.g. a single class in the train split) is
    recorded in `errors` and left out, so one odd run does not sink the whole report. `on_step(name)` is called
    before each analysis (a progress bar's hook).
    """
    codes = run.codes
    if codes is None:
        return RunAnalysis(run)
    spread = code_spread(codes, "each+all", rtol=rtol)
    warn_constant(spread, f"run {run.name}")
    results: dict[str, Any] = {}
    errors: dict[str, str] = {}
    steps = {
        "decoding": lambda: decode_rules(codes, random_state=random_state, progress=progress, rtol=rtol,
                                          merge=run.merge),
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
        if on_step is not None:
            on_step(name)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConstantCodesWarning)  # said once above, for the whole run
                results[name] = step()
        except ValueError as err:
            logger.warning("run %s: %s skipped: %s", run.name, name, err)
            errors[name] = str(err)
    if on_step is not None:
        on_step("input-only controls")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConstantCodesWarning)
            control = input_only_controls(codes, random_state=random_state, rtol=rtol)
    except ValueError as err:  # no raw inputs, or inputs the metric cannot use
        logger.info("run %s: no input-only control for clustering: %s", run.name, err)
        control = {}
    return RunAnalysis(run, errors=errors, spread=spread, input_only=control, **results)


def input_only_controls(codes: LatentCodes, *, random_state: int = 0, rtol: float = CONSTANT_RTOL) -> dict[str, float]:
    """The input-only control of clustering and topographic similarity: k-means AMI and topographic ρ computed on
    the raw input tokens the decoding control reads (`probes.decoding.controls.input_features`) instead of the
    codes, one layer group of every input feature. A code score near or below its control says the codes add
    nothing to what the inputs already show.

    Returns:
        {"ami": ..., "topographic_rho": ...} (NaN where the inputs are constant).

    Raises:
        ValueError: the codes carry no raw inputs.
    """
    from probes.decoding.controls import input_features

    features = input_features(codes).astype(np.float32)
    raw = LatentCodes(features[:, None, :, None, None], codes.labels, codes.split,
                      {**codes.meta, "layers": [0]})
    clustering = cluster_codes(raw, layers="all", random_state=random_state, rtol=rtol)
    topographic = topographic_similarity(raw, layers="all", random_state=random_state, rtol=rtol)
    return {"ami": float(clustering.scores("ami")[-1]), "topographic_rho": float(topographic.rho[-1])}


ANALYSIS_STEPS = ("decoding", "clustering", "similarity", "topographic", "embedding", "input-only controls")
"""The analyses `analyse_run` runs, in order: the names it passes to `on_step`."""

HEADLINE_ROWS = {"accuracy": "decoding accuracy", "term_f1": "term F1"}
"""The `DecodingResult.headlines()` metrics the summary shows, with their row titles."""
SUMMARY_SPEC = ".3f"
"""Every real number of the summary table: three decimals (0.008, not 0.008333; 0.202, not 0.2021)."""
FLOOR_TITLES = {"chance": "chance (uniform)", "majority": "majority class", "always_present": "always present"}
"""Row titles of the floors (`Headline.floors`)."""


CONSTANT_CELL = "constant codes"
"""A summary cell whose score would read constant codes (`probes.degenerate`): masked, not shown as a score."""


def _layer_name(headline: Headline, layer: str) -> str:
    """The probe name `_at` reads: the last single layer (`layer="last"`) or "all"."""
    return "all" if layer == "all" else [n for n in headline.layers if n != "all"][-1]


def _at(headline: Headline, layer: str, values: np.ndarray | None = None) -> float:
    """`values` (default: the codes' scores) of the last single layer (`layer="last"`) or of every layer ("all")."""
    names = headline.layers
    index = names.index("all") if layer == "all" else max(i for i, n in enumerate(names) if n != "all")
    return float((headline.codes if values is None else values)[index])


def summary_rows(analyses: Mapping[str, RunAnalysis]) -> list[tuple[str, list[str]]]:
    """Rows of the side-by-side table: given final metrics, then each decoding score (last layer, all layers)
    beside its floors, the input-only control and `codes − best` (`DecodingResult.headlines()`), then the headline
    number of the other analyses."""
    runs = list(analyses.values())
    headlines = [a.decoding.headlines() if a.decoding is not None else {} for a in runs]

    def row(name: str, value: Any) -> tuple[str, list[str]]:
        cells = []
        for analysis in runs:
            try:
                cells.append(format_cell(value(analysis), SUMMARY_SPEC))
            except (AttributeError, KeyError, IndexError, ValueError):  # the run lacks this analysis or split
                cells.append(format_cell(None))
        return name, cells

    def headline_row(name: str, metric: str, split: str, value: Any, layer: str | None = None) -> tuple[str, list[str]]:
        """A row of one headline number per run; with `layer` ("last" or "all"), the score of that probe, which
        reads "constant codes" (not a score of 0) where the run's codes there were constant."""
        cells = []
        for analysis, found in zip(runs, headlines, strict=True):
            try:
                headline = found[metric][split]
                if layer is not None and _layer_name(headline, layer) in analysis.constant_layers:
                    cells.append(CONSTANT_CELL)
                    continue
                cells.append(format_cell(value(headline), SUMMARY_SPEC))
            except (KeyError, ValueError):  # no such metric, split or layer for this run
                cells.append(format_cell(None))
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
            rows.append(headline_row(f"{title}, {split}, last layer", metric, split, lambda h: _at(h, "last"), "last"))
            rows.append(headline_row(f"{title}, {split}, all layers", metric, split, lambda h: _at(h, "all"), "all"))
            rows += [headline_row(f"{FLOOR_TITLES.get(f, f)} ({title}), {split}", metric, split,
                                  lambda h, f=f: h.floors.get(f)) for f in floors]
            rows.append(headline_row(f"input-only control ({title}), {split}", metric, split, lambda h: h.control))
            for layer, where in (("last", "last layer"), ("all", "all layers")):
                rows.append(headline_row(f"{HEADLINE} ({title}), {split}, {where}", metric, split,
                                         lambda h, layer=layer: _at(h, layer, h.over_best), layer))
    rows.append(row("ridge R² of latent bits, ood, all layers",
                    lambda a: a.decoding.headlines()["bit_r2"]["ood"].codes[-1]))
    rows.append(row("k-means AMI, all layers", lambda a: CONSTANT_CELL if "all" in a.constant_layers
                    else a.clustering.scores("ami")[-1]))
    rows.append(row("input-only control (k-means AMI)", lambda a: a.input_only["ami"]))
    rows.append(row("topographic ρ, all layers", lambda a: CONSTANT_CELL if "all" in a.constant_layers
                    else a.topographic.rho[-1]))
    rows.append(row("input-only control (topographic ρ)", lambda a: a.input_only["topographic_rho"]))
    return rows
