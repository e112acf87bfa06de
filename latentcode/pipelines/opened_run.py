"""`open_run`: a run opened once, from a run directory or a shipped checkpoint's name.

An `OpenRun` parses the run's `config.json` when it is opened, builds the model and loads its weights the first
time they are needed (and never again), reads `metrics.jsonl` once, and keeps the latent codes of every reading it
extracted (positions, inputs, sample count, splits, seed) in memory. A shipped checkpoint is read where it lies:
nothing is copied and nothing is written into it. Every analysis (`extract_run`, `decode_run`, `figures_run`,
`report_runs`, `rule_emergence`, `demo`) and the command line take one.

>>> import latentcode as lc
>>> run = lc.open_run("sraven-hyla")                     # doctest: +SKIP
>>> codes = run.codes(n_samples=512)                      # doctest: +SKIP
>>> lc.decode_run(run, out_dir="runs/analysis/sraven-hyla")  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from latentcode.codes.extract import LatentCodes, check_extraction, code_reading, extract_latent_codes
from latentcode.model.transformer import Transformer
from latentcode.rundir.checkpoint import Run, RunConfig, read_metrics
from latentcode.rundir.directory import is_shipped
from latentcode.rundir.files import RunFiles
from latentcode.rundir.pretrained import resolve_run
from latentcode.rundir.weights import file_hash, load_model_weights
from latentcode.tasks.base import Task

__all__ = ["EXTRACT_DEFAULTS", "N_SAMPLES", "OpenRun", "check_positions", "check_reading", "default_n_samples",
           "open_run"]

logger = logging.getLogger(__name__)

N_SAMPLES: dict[str, int] = {"sraven": 2048, "fuzzy_logic": 2048}
"""Instances per split whose codes every command reads unless told otherwise (`--n-samples`), per task: the same
number in `extract`, `decode`, `figures`, `report` and `demo`, so that one checkpoint gives one score. A task not
listed reads `EXTRACT_DEFAULTS["n_samples"]`. Every result file records the count it was computed on."""

EXTRACT_DEFAULTS: dict[str, Any] = {"splits": ("train", "test", "ood"), "n_samples": 2048, "batch_size": 512,
                                    "seed": 0}
"""What codes are extracted with unless told otherwise (`n_samples`: see `N_SAMPLES` for the per-task default)."""


def default_n_samples(task: Task | str) -> int:
    """The task's default instances per split (`N_SAMPLES`).

    >>> default_n_samples("sraven")
    2048
    """
    name = task if isinstance(task, str) else task.name
    return N_SAMPLES.get(name, EXTRACT_DEFAULTS["n_samples"])


def check_positions(positions: str, task: Any = None) -> None:
    """Raise a ValueError unless `positions` names positions: a plain name (it names the codes' files), and, given
    the run's task, one the task declares (`code_reading.positions`; the message lists them)."""
    if not isinstance(positions, str) or not positions or positions.startswith(".") \
            or any(c in positions for c in "/\\"):
        raise ValueError(f"positions={positions!r} is not a name of positions; the analyses read codes at named "
                         "positions (e.g. 'paper'); pass explicit positions to `extract_latent_codes` instead")
    if task is not None:
        names = code_reading(task).positions
        if positions not in names:
            raise ValueError(f"positions={positions!r} is not defined for task {task.name!r}; valid: "
                             f"{', '.join(names)} (the task's named positions, `code_reading.positions`)")


def check_reading(config: RunConfig | Any, positions: str, inputs: str | None) -> str:
    """Check positions and inputs against the run's task; return the input choice's name (None: the default)."""
    task = config.task
    check_positions(positions, task)
    _, choice = check_extraction(task, positions=positions, inputs=inputs)
    return choice.name


class OpenRun:
    """A run directory opened once: its config parsed, its model and metrics loaded on first use, its codes kept
    per reading. Use `open_run` to make one.

    Attributes:
        files: where each file of the run lives (`latentcode.rundir.files.RunFiles`).
        config: the run's config (`config.model`, `config.task`, `config.train`), parsed once when opened.
        name: the shipped checkpoint's name it was opened by (e.g. `sraven-hyla`), or None for a path.
        shipped: whether the run is a shipped checkpoint (read in place, never written into).
        device: where the model is put.
    """

    def __init__(self, path: str | os.PathLike, *, name: str | None = None, device: str | torch.device = "cpu"):
        self.files = RunFiles(path)
        self.config = RunConfig.load(self.files.root)
        self.name = name
        self.shipped = is_shipped(self.files.root)
        self.device = device
        self._model: Transformer | None = None
        self._step = -1
        self._hash = ""
        self._metrics: list[dict[str, Any]] | None = None
        self._codes: dict[tuple[Any, ...], LatentCodes] = {}

    def __repr__(self) -> str:
        return f"OpenRun({self.label!r}, path={str(self.path)!r}, task={self.task.name!r})"

    # ------------------------------------------------------------------------------------------- what it is
    @property
    def path(self) -> Path:
        """The run directory."""
        return self.files.root

    @property
    def task(self) -> Task:
        """The task with the exact splits the model was trained on."""
        return self.config.task

    @property
    def seed(self) -> int:
        """The run's training seed."""
        return self.config.train.seed

    @property
    def label(self) -> str:
        """How outputs name the run: `<name>` or `<name>-s<seed>` for a shipped checkpoint, else the folder's name.

        The default output folder of an analysis of a shipped checkpoint is `runs/analysis/<label>`."""
        if self.name is None:
            return self.path.name
        return self.name if self.path.name == self.name else f"{self.name}-s{self.seed}"

    # --------------------------------------------------------------------------------- model and metrics
    def _load_model(self) -> Transformer:
        if self._model is None:
            model = Transformer(self.config.model)
            self._step, self._hash = load_model_weights(model, self.path)
            self._model = model.to(self.device).eval()
        return self._model

    @property
    def model(self) -> Transformer:
        """The model with the run's weights, in eval mode (built and loaded on first use, once)."""
        return self._load_model()

    @property
    def step(self) -> int:
        """Optimizer steps behind the weights (loads the model)."""
        self._load_model()
        return self._step

    @property
    def checkpoint_hash(self) -> str:
        """sha256 of model.safetensors, first 16 hex characters (loads the model)."""
        self._load_model()
        return self._hash

    def weights_hash(self) -> str:
        """The checkpoint hash of model.safetensors: the loaded model's, else the file's (read without building
        the model, for checking codes files against it; the hash is kept)."""
        if not self._hash:
            self._hash = file_hash(self.files.model)
        return self._hash

    @property
    def metrics(self) -> list[dict[str, Any]]:
        """Records of metrics.jsonl, read once."""
        if self._metrics is None:
            self._metrics = read_metrics(self.path)
        return self._metrics

    def eval_metrics(self, split: str) -> dict[str, Any] | None:
        """The last evaluation record for `split` ("test", "ood"), or None if there is none."""
        found = [m for m in self.metrics if m.get("split") == split]
        return found[-1] if found else None

    @property
    def finished(self) -> bool:
        return self.step >= self.config.train.steps

    def to_run(self) -> Run:
        """The same run as a `Run` (what `load_run` returns), sharing this object's model."""
        return Run(path=self.path, config=self.config, model=self.model, metrics=self.metrics, step=self.step,
                   checkpoint_hash=self.checkpoint_hash)

    # ---------------------------------------------------------------------------------------------- codes
    def _key(self, positions: str, inputs: str | None, n_samples: int | None, splits: Sequence[str],
             seed: int) -> tuple[Any, ...]:
        inputs = check_reading(self.config, positions, inputs)
        n = default_n_samples(self.task) if n_samples is None else n_samples
        check_extraction(self.task, tuple(splits), n, positions=positions, inputs=inputs)
        return positions, inputs, n, tuple(splits), seed

    def cached_codes(self, positions: str = "paper", inputs: str | None = None, *, n_samples: int | None = None,
                     splits: Sequence[str] = EXTRACT_DEFAULTS["splits"], seed: int = EXTRACT_DEFAULTS["seed"]
                     ) -> LatentCodes | None:
        """The codes of this reading if this object already holds them, else None (nothing is extracted)."""
        return self._codes.get(self._key(positions, inputs, n_samples, splits, seed))

    def keep_codes(self, codes: LatentCodes) -> None:
        """Hold codes read elsewhere (a codes file of this run) under their reading, for `codes` to return."""
        meta = codes.meta
        key = (meta.get("positions"), meta.get("inputs"), meta.get("n_per_split"), tuple(meta.get("splits") or ()),
               meta.get("seed"))
        self._codes[key] = codes

    def codes(
        self,
        positions: str = "paper",
        inputs: str | None = None,
        *,
        n_samples: int | None = None,
        splits: Sequence[str] = EXTRACT_DEFAULTS["splits"],
        seed: int = EXTRACT_DEFAULTS["seed"],
        batch_size: int = EXTRACT_DEFAULTS["batch_size"],
        progress: bool | None = None,
    ) -> LatentCodes:
        """The run's latent codes at one reading, extracted on first use and kept in memory.

        Args:
            positions: a named position of the run's task ('paper', 'all_features', ...).
            inputs: an input choice of the run's task (None: its default, the paper's reading).
            n_samples: instances per split (None: the task's default, `N_SAMPLES`).
            splits: splits to draw instances from.
            seed: batch seed.
            batch_size: instances per forward pass (does not change the codes).
            progress: progress bar (None: only on a terminal).

        Raises:
            ValueError: unknown positions, inputs or splits, or a sample count that is not positive.
        """
        key = self._key(positions, inputs, n_samples, splits, seed)
        if key not in self._codes:
            _, inputs_name, n, splits_tuple, _ = key
            codes = extract_latent_codes(self.model, self.task, splits_tuple, n, positions=positions,
                                         inputs=inputs_name, batch_size=batch_size, seed=seed,
                                         checkpoint=self.checkpoint_hash, progress=progress)
            self._codes[key] = dataclasses.replace(codes, meta={**codes.meta, "run": str(self.path),
                                                                "step": self.step})
        return self._codes[key]


def open_run(run: str | os.PathLike | OpenRun, seed: int | None = None, *, device: str | torch.device = "cpu"
             ) -> OpenRun:
    """Open a run once: a run directory, or a shipped checkpoint by name (`list_pretrained()`), with `seed` one of
    its shipped seeds (`pretrained_seeds(name)`; None: the checkpoint `name` itself).

    The config is parsed here; the model is built and loaded on first use; codes are kept per reading. A shipped
    checkpoint is read in place and never copied or written into: analyses of it write under their `out_dir`.

    Args:
        run: a run directory, a shipped name such as `sraven-hyla`, or an `OpenRun` (returned as it is).
        seed: with a name, the shipped seed to open.
        device: where the model is put when it is loaded.

    Raises:
        FileNotFoundError: neither a run directory nor a shipped name (the closest names are suggested).
        ValueError: a seed that is not shipped, or `seed` with a path.
        CheckpointError: the config is corrupt or not latentcode's.

    >>> run = open_run("fuzzy_logic-hyla", seed=1)  # doctest: +SKIP
    >>> run.label, run.config.model.variant           # doctest: +SKIP
    ('fuzzy_logic-hyla-s1', 'hyla')
    """
    if isinstance(run, OpenRun):
        if seed is not None and seed != run.seed:
            raise ValueError(f"seed={seed} differs from the open run's seed {run.seed}")
        return run
    path, name = resolve_run(run, seed)
    return OpenRun(path, name=name, device=device)
