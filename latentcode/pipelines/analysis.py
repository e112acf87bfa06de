"""Run-directory analyses behind the CLI: extract codes, decode them and draw figures (`extract_run`, `decode_run`,
`figures_run`); the report is `run_report.py`, and `demo`, which chains them on the shipped checkpoints, `demo.py`.

Each public function takes a run opened once (`open_run`: a run directory or a shipped checkpoint's name; a path
or name given here is opened once) and writes into the run (`codes/`, `figures/`) or under `out_dir` (a shipped
checkpoint is never copied nor written into); the numbers come from `latentcode.codes.extract` and the torch-free
`probes` package. Every function reads codes at one reading, positions plus inputs, by default the task's own
(the paper's, spec §4.1), checks every argument before it extracts or writes anything, and extracts missing codes
itself (`run_codes.codes_for`), keeping them in the run object. Constant codes (`probes.degenerate`) get one `ConstantCodesWarning` per run and reading,
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
from latentcode.constants import FIGURES_DIR
from latentcode.pipelines.opened_run import (
    EXTRACT_DEFAULTS,
    OpenRun,
    check_reading,
    default_n_samples,
    open_run,
)
from latentcode.pipelines.run_codes import check_out_dir, codes_for, find_codes
from latentcode.rundir.directory import atomic_write_json, record_outputs
from probes.decoding.decode import decode_rules
from probes.decoding.results import DecodingResult
from probes.degenerate import ConstantCodesWarning, check_constant_codes

__all__ = ["FIGURE_FORMATS", "collect_probe_warnings", "decode_run", "extract_run", "figures_run"]

logger = logging.getLogger(__name__)

FIGURE_FORMATS = ("png", "html")


def _run_and_target(run: OpenRun | str | os.PathLike, out_dir: str | os.PathLike | None, device: str
                    ) -> tuple[OpenRun, Path]:
    """The open run (a path or shipped name is opened once, on `device`) and where its outputs go."""
    run = run if isinstance(run, OpenRun) else open_run(run, device=device)
    return run, check_out_dir(run, out_dir)


def _check_n_samples(n_samples: int | None) -> None:
    if n_samples is not None and (isinstance(n_samples, bool) or not isinstance(n_samples, int) or n_samples <= 0):
        raise ValueError(f"n_samples={n_samples!r} (CLI: --n-samples) must be a positive integer")


def extract_run(
    run_dir: OpenRun | str | os.PathLike,
    *,
    splits: Sequence[str] = EXTRACT_DEFAULTS["splits"],
    n_samples: int | None = None,
    positions: str = "paper",
    batch_size: int = EXTRACT_DEFAULTS["batch_size"],
    device: str = "cpu",
    seed: int = EXTRACT_DEFAULTS["seed"],
    progress: bool | None = None,
    out_dir: str | os.PathLike | None = None,
    inputs: str | None = None,
) -> Path:
    """Extract a run's latent codes and save them to `<out>/codes/<positions>[-<inputs>].npz` (+ `.json`), where
    `<out>` is the run itself or `out_dir` (required for a shipped checkpoint, which is read in place and never
    copied). Every argument is checked before anything is extracted or written.

    Args:
        run_dir: an `OpenRun` (`open_run`), a run directory or a shipped checkpoint's name.
        splits: splits to draw instances from (decoding needs `train` and at least one other).
        n_samples: instances per split (None: the task's default, `latentcode.pipelines.opened_run.N_SAMPLES`).
        positions: a named position of the run's task: 'paper' (every task), 'all_features' (SRAVEN), or one the
            task declares (`code_reading.positions`); see `latentcode.codes.extract.resolve_positions`.
        batch_size: instances per forward pass.
        device: where the model runs (when `run_dir` is not open yet).
        seed: batch seed.
        progress: progress bar (None: only on a terminal).
        out_dir: write under this folder instead of the run (see `check_out_dir`).
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
    _check_n_samples(n_samples)
    run, target = _run_and_target(run_dir, out_dir, device)
    inputs = check_reading(run.config, positions, inputs)
    n = default_n_samples(run.task) if n_samples is None else n_samples
    check_extraction(run.task, tuple(splits), n, positions=positions, inputs=inputs, batch_size=batch_size)
    codes = run.codes(positions, inputs, n_samples=n, splits=tuple(splits), seed=seed, batch_size=batch_size,
                      progress=progress)
    path = codes.save(find_codes(run, positions, inputs, target)[0])
    record_outputs(target, [path, path.with_suffix(".json")])
    check_constant_codes(codes, what=str(run.name or run.path))
    return path


def _check_label(task: Any, label: str | None, codes_file: Path | None) -> None:
    """Refuse a label the codes will not have, before anything is extracted (existing codes decide for themselves)."""
    decodable = code_reading(task).labels
    if label is None or not decodable or label in decodable or (codes_file is not None and codes_file.is_file()):
        return
    raise ValueError(
        f"label={label!r} cannot be decoded from {task.name} codes; available labels: {', '.join(decodable)} "
        f"(default: {decodable[0]})"
    )


def decoding_record(result: DecodingResult, codes: Any) -> dict[str, Any]:
    """What a `.decode.json` holds: `DecodingResult.to_dict()` plus the instances per split it was computed on
    (`n_per_split`) and the checkpoint the codes came from."""
    return {**result.to_dict(), "n_per_split": codes.meta.get("n_per_split"),
            "checkpoint": codes.meta.get("checkpoint")}


def decode_run(
    run_dir: OpenRun | str | os.PathLike,
    *,
    positions: str = "paper",
    inputs: str | None = None,
    label: str | None = None,
    n_samples: int | None = None,
    device: str = "cpu",
    progress: bool | None = None,
    out_dir: str | os.PathLike | None = None,
) -> tuple[DecodingResult, Path]:
    """Fit linear decoders on a run's train-split codes and score them on its other splits, per layer, beside
    their floors and the input-only control.

    Writes the result as JSON next to the codes: `<out>/codes/<positions>[-<inputs>].decode.json`, with the
    instances per split it was computed on (`n_per_split`). A run without codes at this reading gets them extracted
    first (the task's default sample count unless `n_samples` says otherwise; said once at INFO level) and saved
    beside it. Every argument is checked before anything is extracted.

    Args:
        run_dir: an `OpenRun` (`open_run`), a run directory or a shipped checkpoint's name.
        positions: which extraction to decode.
        inputs: the input choice of the reading (None: the task's default, the paper's).
        label: the label to decode (default: the codes' own, `rule` or `terms`).
        n_samples: instances per split (None: the codes already there, else the task's default, `N_SAMPLES`).
        device: where the model runs if the codes must be extracted first.
        progress: progress bar (None: only on a terminal).
        out_dir: write under this folder instead of the run (see `check_out_dir`; required for a shipped
            checkpoint).

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
    _check_n_samples(n_samples)
    run, target = _run_and_target(run_dir, out_dir, device)
    inputs = check_reading(run.config, positions, inputs)
    _check_label(run.task, label, find_codes(run, positions, inputs, target)[0])
    codes, path = codes_for(run, target, positions=positions, inputs=inputs, n_samples=n_samples,
                            progress=progress)
    check_constant_codes(codes, what=str(run.name or run.path))
    shared = getattr(run.task, "shared_codes", {}).get(label or codes.label)  # classes the task says share a code
    result = decode_rules(codes, label=label, progress=progress, merge=shared)
    out = path.with_suffix(".decode.json")
    atomic_write_json(out, decoding_record(result, codes))
    record_outputs(target, [out])
    return result, out


def figures_run(
    run_dir: OpenRun | str | os.PathLike,
    *,
    positions: str = "paper",
    inputs: str | None = None,
    formats: Sequence[str] = FIGURE_FORMATS,
    embed_method: str = "umap",
    n_samples: int | None = None,
    device: str = "cpu",
    progress: bool | None = None,
    out_dir: str | os.PathLike | None = None,
) -> list[Path]:
    """Draw a run's figures into `<out>/figures/`: training curves, decoding per layer, rule similarity, mean
    code heatmaps and a 2-D embedding of the last layer (plus per-term F1 for fuzzy logic). Codes missing at this
    reading are extracted first, as `decode_run` does.

    Args:
        run_dir: an `OpenRun` (`open_run`), a run directory or a shipped checkpoint's name.
        positions: which extraction to draw.
        inputs: the input choice of the reading (None: the task's default, the paper's).
        formats: any of png, svg, pdf (matplotlib) and html (plotly; the figures share one `plotly.min.js` in
            `figures/`, so they work offline).
        embed_method: 'umap' or 'pca'.
        n_samples: instances per split (None: the codes already there, else the task's default, `N_SAMPLES`).
        device: where the model runs if the codes must be extracted first.
        progress: progress bar (None: only on a terminal).
        out_dir: write under this folder instead of the run (see `check_out_dir`; required for a shipped
            checkpoint).

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
    from probes.decoding.extras import TermDecodingResult
    from probes.embed import embed_codes
    from probes.figures import (
        PLOTLY_JS,
        STATIC_FORMATS,
        code_heatmap_figure,
        confusion_figure,
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
    _check_n_samples(n_samples)
    run, target = _run_and_target(run_dir, out_dir, device)
    inputs = check_reading(run.config, positions, inputs)
    default_inputs = code_reading(run.task).default_inputs
    codes, _ = codes_for(run, target, positions=positions, inputs=inputs, n_samples=n_samples, progress=progress)
    check_constant_codes(codes, what=str(run.name or run.path))
    out = target / FIGURES_DIR
    suffix = ("" if positions == "paper" else f"_{positions}") + ("" if inputs == default_inputs else f"_{inputs}")
    with collect_probe_warnings() as notes, warnings.catch_warnings():
        warnings.simplefilter("ignore", ConstantCodesWarning)  # said once above; each figure says it again
        shared = getattr(run.task, "shared_codes", {}).get(codes.label)  # classes the task says share a code
        decoding = decode_rules(codes, progress=progress, merge=shared)
        figures: dict[str, Any] = {
            "decoding": decoding_figure(decoding, constant_layers=decoding.constant_layers),
            "similarity": similarity_figure(rule_similarity(codes, layer="last")),
            "code_heatmap": code_heatmap_figure(codes),
            embed_method: embedding_figure(embed_codes(codes, embed_method, "last", max_points=2000)),
        }
        if decoding.kind == "multiclass":
            figures["confusion"] = confusion_figure(decoding)
        per_class = [e for e in decoding.extras.values() if isinstance(e, TermDecodingResult)]
        if per_class:
            figures["term_f1"] = term_f1_figure(per_class[0])
    for note in notes:
        logger.warning("figures: %s", note)
    if run.metrics:
        figures["training_curves"] = training_curves_figure(run.metrics)
    written: list[Path] = []
    for name, figure in figures.items():
        written += save_figure(figure, out / f"{name}{suffix}", formats=tuple(formats))
        record_outputs(target, written)
    if "html" in formats:  # the plotly.js every html figure of the folder loads (written once)
        record_outputs(target, [out / PLOTLY_JS])
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
