"""Run-directory analyses behind the CLI: extract codes, decode them and draw figures (`extract_run`, `decode_run`,
`figures_run`); the report is `run_report.py`, and `demo`, which chains them on the shipped checkpoints, `demo.py`.

Each public function takes a run directory and writes into it (`codes/`, `figures/`) or under `out_dir`; the
numbers come from `latentcode.codes.extract` and the torch-free `probes` package. Every function reads codes at one
reading, positions plus inputs, by default the task's own (the paper's, spec §4.1), checks every argument before
it copies, extracts or writes anything, and extracts missing codes itself (`run_codes.ensure_codes`, where the
codes' files are handled). Constant codes (`probes.degenerate`) get one `ConstantCodesWarning` per run and reading,
where the codes are made or loaded, never again from the analyses that follow. Argument parsing and printing live
in `cli/analysis.py`; training in `train.py`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from latentcode.codes.extract import check_extraction, code_reading
from latentcode.constants import CONFIG_FILE, FIGURES_DIR
from latentcode.pipelines.run_codes import (
    EXTRACT_DEFAULTS,
    analysis_dir,
    check_out_dir,
    check_reading,
    ensure_codes,
    extract_codes,
    find_codes,
    run_config,
)
from latentcode.rundir.checkpoint import RunConfig, read_metrics
from latentcode.rundir.directory import atomic_write_json, record_outputs
from probes._compat import renamed_kwargs
from probes.decoding.decode import decode_rules
from probes.decoding.results import DecodingResult
from probes.degenerate import ConstantCodesWarning, check_constant_codes

__all__ = ["FIGURE_FORMATS", "collect_probe_warnings", "decode_run", "extract_run", "figures_run"]

logger = logging.getLogger(__name__)

FIGURE_FORMATS = ("png", "html")


@renamed_kwargs(n="n_samples")
def extract_run(
    run_dir: str | os.PathLike,
    *,
    splits: Sequence[str] = EXTRACT_DEFAULTS["splits"],
    n_samples: int = EXTRACT_DEFAULTS["n_samples"],
    positions: str = "paper",
    batch_size: int = EXTRACT_DEFAULTS["batch_size"],
    device: str = "cpu",
    seed: int = EXTRACT_DEFAULTS["seed"],
    progress: bool | None = None,
    out_dir: str | os.PathLike | None = None,
    inputs: str | None = None,
) -> Path:
    """Extract a trained run's latent codes and save them to `RUN/codes/<positions>[-<inputs>].npz` (+ `.json`),
    or under `out_dir` (see `analysis_dir`; required for a shipped checkpoint). Every argument is checked before
    anything is copied or extracted.

    Args:
        run_dir: the run directory.
        splits: splits to draw instances from (decoding needs `train` and at least one other).
        n_samples: instances per split.
        positions: a named position of the run's task: 'paper' (every task), 'all_features' (SRAVEN), or one the
            task declares (`code_reading.positions`); see `latentcode.codes.extract.resolve_positions`.
        batch_size: instances per forward pass.
        device: where the model runs.
        seed: batch seed.
        progress: progress bar (None: only on a terminal).
        out_dir: write under this folder instead of the run (see `analysis_dir`).
        inputs: an input choice of the run's task (None: its default, the paper's reading: fuzzy logic
            `fixed_query`, SRAVEN `unpermuted`; see `latentcode.tasks.base.CodeReading`).

    Returns:
        The path of the written `.npz`.

    Raises:
        FileNotFoundError: no run there.
        ValueError: unknown splits, positions or inputs, positions the task does not have, a bad `out_dir`.

    Warns:
        ConstantCodesWarning: some layers' codes barely vary across instances (`probes.degenerate`).
    """
    config = run_config(run_dir)
    inputs = check_reading(config, positions, inputs)
    check_extraction(config.task, tuple(splits), n_samples, positions=positions, inputs=inputs,
                     batch_size=batch_size)
    source, run_dir = run_dir, analysis_dir(run_dir, out_dir)
    path, codes = extract_codes(run_dir, positions, inputs, device, progress, splits=splits, n_samples=n_samples,
                           batch_size=batch_size, seed=seed)
    check_constant_codes(codes, what=str(source))
    return path


def _check_label(config: RunConfig, label: str | None, codes_file: Path | None) -> None:
    """Refuse a label the codes will not have, before anything is extracted (existing codes decide for themselves)."""
    decodable = code_reading(config.task).labels
    if label is None or not decodable or label in decodable or (codes_file is not None and codes_file.is_file()):
        return
    raise ValueError(
        f"label={label!r} cannot be decoded from {config.task.name} codes; available labels: {', '.join(decodable)} "
        f"(default: {decodable[0]})"
    )


def decode_run(
    run_dir: str | os.PathLike,
    *,
    positions: str = "paper",
    inputs: str | None = None,
    label: str | None = None,
    device: str = "cpu",
    progress: bool | None = None,
    out_dir: str | os.PathLike | None = None,
) -> tuple[DecodingResult, Path]:
    """Fit linear decoders on a run's train-split codes and score them on its other splits, per layer, beside
    their floors and the input-only control.

    Writes the result as JSON next to the codes: `RUN/codes/<positions>[-<inputs>].decode.json`. A run without
    codes at this reading gets them extracted first, with `extract_run`'s defaults (said once at INFO level).
    Every argument is checked before anything is copied or extracted.

    Args:
        run_dir: the run directory.
        positions: which extraction to decode.
        inputs: the input choice of the reading (None: the task's default, the paper's).
        label: the label to decode (default: the codes' own, `rule` or `terms`).
        device: where the model runs if the codes must be extracted first.
        progress: progress bar (None: only on a terminal).
        out_dir: write under this folder instead of the run (see `analysis_dir`).

    Returns:
        (the `DecodingResult`, the JSON path).

    Raises:
        FileNotFoundError: no run there.
        ValueError: a label the codes cannot have, unknown positions or inputs, codes of another task or reading,
            NaN codes, no train rows or no evaluation rows, a single class in the train split.

    Warns:
        ConstantCodesWarning: some layers' codes barely vary across instances (once; the result names them in
            `constant_layers`, and the all-layers probe leaves them out).
    """
    config = run_config(run_dir)
    inputs = check_reading(config, positions, inputs)
    target = check_out_dir(run_dir, out_dir)
    _check_label(config, label, find_codes(target, positions, inputs)[0] if (target / CONFIG_FILE).is_file() else None)
    source, run_dir = run_dir, analysis_dir(run_dir, out_dir)
    codes, path = ensure_codes(run_dir, positions=positions, inputs=inputs, device=device, progress=progress)
    check_constant_codes(codes, what=str(source))
    result = decode_rules(codes, label=label, progress=progress)
    out = path.with_suffix(".decode.json")
    atomic_write_json(out, result.to_dict())
    record_outputs(run_dir, [out])
    return result, out


def figures_run(
    run_dir: str | os.PathLike,
    *,
    positions: str = "paper",
    inputs: str | None = None,
    formats: Sequence[str] = FIGURE_FORMATS,
    embed_method: str = "umap",
    device: str = "cpu",
    progress: bool | None = None,
    out_dir: str | os.PathLike | None = None,
) -> list[Path]:
    """Draw a run's figures into `RUN/figures/`: training curves, decoding per layer, rule similarity, mean
    code heatmaps and a 2-D embedding of the last layer (plus per-term F1 for fuzzy logic). Codes missing at this
    reading are extracted first, as `decode_run` does.

    Args:
        run_dir: the run directory.
        positions: which extraction to draw.
        inputs: the input choice of the reading (None: the task's default, the paper's).
        formats: any of png, svg, pdf (matplotlib) and html (plotly; the figures share one `plotly.min.js` in
            `figures/`, so they work offline).
        embed_method: 'umap' or 'pca'.
        device: where the model runs if the codes must be extracted first.
        progress: progress bar (None: only on a terminal).
        out_dir: write under this folder instead of the run (see `analysis_dir`).

    Returns:
        The written files (`figures/<name>[_<positions>][_<inputs>].<format>`, the suffixes for a reading other
        than the default).

    Raises:
        FileNotFoundError: no run there.
        ValueError: unknown formats, positions or inputs, codes of another task or reading, or codes the probes
            cannot use.

    Warns:
        ConstantCodesWarning: some layers' codes barely vary across instances (once, before any figure; the
            figures of those layers say "constant codes").
    """
    from probes.embed import embed_codes
    from probes.figures import (
        PLOTLY_JS,
        STATIC_FORMATS,
        code_heatmap_figure,
        decoding_figure,
        embedding_figure,
        save_figure,
        similarity_figure,
        term_f1_figure,
        training_curves_figure,
    )
    from probes.similarity import rule_similarity

    valid = (*STATIC_FORMATS, "html")
    bad = sorted(set(formats) - set(valid))
    if bad or not formats:
        raise ValueError(f"formats {bad or list(formats)} not understood; valid formats: {', '.join(valid)}")
    if embed_method not in ("umap", "pca"):
        raise ValueError(f"embed_method={embed_method!r} is not one of umap, pca")
    config = run_config(run_dir)
    inputs = check_reading(config, positions, inputs)
    default_inputs = code_reading(config.task).default_inputs
    source, run_dir = run_dir, analysis_dir(run_dir, out_dir)
    codes, _ = ensure_codes(run_dir, positions=positions, inputs=inputs, device=device, progress=progress)
    check_constant_codes(codes, what=str(source))
    out = Path(run_dir) / FIGURES_DIR
    suffix = ("" if positions == "paper" else f"_{positions}") + ("" if inputs == default_inputs else f"_{inputs}")
    with collect_probe_warnings() as notes, warnings.catch_warnings():
        warnings.simplefilter("ignore", ConstantCodesWarning)  # said once above; each figure says it again
        decoding = decode_rules(codes, progress=progress)
        figures: dict[str, Any] = {
            "decoding": decoding_figure(decoding, constant_layers=decoding.constant_layers),
            "similarity": similarity_figure(rule_similarity(codes, layer="last")),
            "code_heatmap": code_heatmap_figure(codes),
            embed_method: embedding_figure(embed_codes(codes, embed_method, "last", max_points=2000)),
        }
        if decoding.terms is not None:
            split = "ood" if "ood" in decoding.terms.f1 else next(iter(decoding.terms.f1))
            figures["term_f1"] = term_f1_figure(decoding.terms, split=split)
    for note in notes:
        logger.warning("figures: %s", note)
    metrics = read_metrics(run_dir)
    if metrics:
        figures["training_curves"] = training_curves_figure(metrics)
    written: list[Path] = []
    for name, figure in figures.items():
        written += save_figure(figure, out / f"{name}{suffix}", formats=tuple(formats))
        record_outputs(run_dir, written)
    if "html" in formats:  # the plotly.js every html figure of the folder loads (written once)
        record_outputs(run_dir, [out / PLOTLY_JS])
    return written


@contextlib.contextmanager
def collect_probe_warnings() -> Iterator[list[str]]:
    """Condense sklearn's ConvergenceWarnings (k-means, a probe at max_iter) and the probes' ConstantCodesWarnings
    (`probes.degenerate`) raised inside into one summary line per class, appended to the yielded list on exit,
    instead of one warning (two lines) each; other warnings pass through.

    >>> import warnings
    >>> from sklearn.exceptions import ConvergenceWarning
    >>> with collect_probe_warnings() as notes:
    ...     for _ in range(3):
    ...         warnings.warn("k-means found 1 distinct cluster: constant codes", ConvergenceWarning)
    >>> notes
    ['ConvergenceWarning ×3: k-means found 1 distinct cluster: constant codes']
    """
    from sklearn.exceptions import ConvergenceWarning

    categories: list[type[Warning]] = [ConvergenceWarning, ConstantCodesWarning]
    notes: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        for category in categories:
            warnings.simplefilter("always", category)
        yield notes
    found: dict[str, dict[str, int]] = {}
    for warning in caught:
        name = warning.category.__name__
        if issubclass(warning.category, tuple(categories)):
            text = " ".join(str(warning.message).split())
            text = text.split(": across ")[0].split(". ")[0][:160]
            found.setdefault(name, {})
            found[name][text] = found[name].get(text, 0) + 1
        else:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    for name, texts in found.items():
        total = sum(texts.values())
        shown = list(texts) if len(texts) == 1 else [f"{t} (×{n})" if n > 1 else t for t, n in texts.items()]
        notes.append(f"{name} ×{total}: " + "; ".join(shown))




_MOVED_TO_DEMO = ("DEMO_PRETRAINED_TASK", "DEMO_SETTINGS", "DEMO_VARIANTS", "DemoResult", "demo")


def __getattr__(name: str) -> Any:
    """`demo` and its settings moved to `latentcode.pipelines.demo`; importing them from here keeps working."""
    if name in _MOVED_TO_DEMO:
        import importlib

        return getattr(importlib.import_module("latentcode.pipelines.demo"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
