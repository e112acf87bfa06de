"""The run directory as a whole: `RunConfig` (config.json), metrics.jsonl, and `Run`, which `train()` returns and
`load_run` reads back.

A run directory holds `config.json`, `model.safetensors`, `train_state.safetensors` + `train_state.json` and
`metrics.jsonl` (names in `latentcode.constants`). The weights are read and written by `weights.py`, the resume
state (optimizer, RNG, loop scalars) by `train_state.py`; every write goes through `directory.py`'s atomic writes,
which also keep the manifest `--force` reads. The training loop is in `train.py`.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import os
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from latentcode._version import __version__
from latentcode.config import ModelConfig, TrainConfig
from latentcode.constants import CONFIG_FILE, RUN_KIND
from latentcode.model.transformer import Transformer
from latentcode.rundir.directory import (
    CheckpointError,
    _read_json,
    atomic_write_bytes,
    atomic_write_json,
)
from latentcode.rundir.files import RunFiles
from latentcode.rundir.weights import load_model_weights, save_model
from latentcode.tasks.base import Task
from latentcode.tasks.registry import task_from_dict

logger = logging.getLogger(__name__)


# ------------------------------------------------------------------------------------------------------- configs


def _version_key(version: Any) -> tuple[int, ...]:
    """"0.2.0" -> (0, 2, 0); anything unparsable sorts first (treated as old)."""
    try:
        return tuple(int(part) for part in str(version).split("+")[0].split("."))
    except ValueError:
        return ()


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    """Everything that defines a run: the model, the task (with its exact splits) and the training config."""

    model: ModelConfig
    """Architecture of the trained model."""
    task: Task
    """The task, holding its exact split index lists."""
    train: TrainConfig
    """Optimizer, schedule, seeds and evaluation cadence."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": RUN_KIND,
            "version": __version__,
            "model": self.model.to_dict(),
            "task": self.task.to_dict(),
            "train": self.train.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str = CONFIG_FILE) -> RunConfig:
        """Rebuild a run config; `source` names the file in error messages.

        Raises:
            CheckpointError: the dict is not a latentcode run config or a section is invalid.
        """
        if not isinstance(data, dict) or data.get("kind") != RUN_KIND:
            kind = data.get("kind") if isinstance(data, dict) else type(data).__name__
            raise CheckpointError(f"{source} is not a latentcode run config: kind={kind!r}, expected {RUN_KIND!r}")
        missing = [k for k in ("model", "task", "train") if k not in data]
        if missing:
            raise CheckpointError(f"{source} lacks section(s) {missing}; it was not written by latentcode")
        written = data.get("version")
        if written != __version__:
            # older files load through the documented migrations (fields they lack take their old behaviour);
            # only a newer writer may have used settings this version cannot know
            newer = _version_key(written) > _version_key(__version__)
            (logger.warning if newer else logger.debug)(
                "%s was written by latentcode %s; this is %s%s", source, written, __version__,
                " (upgrade latentcode to read every setting it may use)" if newer else "")
        try:
            return cls(
                model=ModelConfig.from_dict(data["model"]),
                task=task_from_dict(data["task"]),
                train=TrainConfig.from_dict(data["train"]),
            )
        except (TypeError, ValueError, KeyError) as e:
            raise CheckpointError(f"{source}: invalid config ({e})") from e

    def differences(self, other: RunConfig, *, ignore_train: tuple[str, ...] = (),
                    ignore_model: tuple[str, ...] = ()) -> list[str]:
        """Human-readable differences between two run configs (`section.key: a != b`), leaving out the train
        fields in `ignore_train` and the model fields in `ignore_model`."""
        # tuples become lists, as a JSON round trip does, so configs compare equal before and after saving
        mine, theirs = (json.loads(json.dumps(d)) for d in (self.to_dict(), other.to_dict()))
        diffs = []
        for section in ("model", "task", "train"):
            a, b = mine[section], theirs[section]
            for key in sorted(set(a) | set(b)):
                if key in {"train": ignore_train, "model": ignore_model}.get(section, ()):
                    continue
                if a.get(key) != b.get(key):
                    diffs.append(f"{section}.{key}: {_short(a.get(key))} != {_short(b.get(key))}")
        return diffs

    def save(self, run_dir: str | os.PathLike) -> None:
        atomic_write_json(RunFiles(run_dir).config, self.to_dict())

    @classmethod
    def load(cls, run_dir: str | os.PathLike) -> RunConfig:
        """Read `config.json` of a run directory.

        Raises:
            FileNotFoundError: no directory or no config.json.
            CheckpointError: the file is corrupt or foreign.
        """
        path = RunFiles(run_dir).config
        return cls.from_dict(_read_json(path), source=str(path))


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


# --------------------------------------------------------------------------------------------------------- model
# ------------------------------------------------------------------------------------------------------- metrics
def read_metrics(run_dir: str | os.PathLike) -> list[dict[str, Any]]:
    """Every record of metrics.jsonl (a half-written last line from a killed process is skipped)."""
    path = RunFiles(run_dir).metrics
    if not path.exists():
        return []
    records = []
    lines = path.read_text().splitlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as e:
            if i == len(lines) - 1:
                logger.warning("%s: skipping a half-written last line", path)
            else:
                raise CheckpointError(f"{path}: line {i + 1} is not valid JSON ({e})") from e
    return records


def train_rows(run_dir: str | os.PathLike) -> list[dict[str, Any]]:
    """The train rows of metrics.jsonl that carry `elapsed_s` (training time, counted across resumes), in order."""
    return [r for r in read_metrics(run_dir) if r.get("split") == "train" and "elapsed_s" in r]


def step_rates(rows: list[dict[str, Any]]) -> list[float]:
    """Steps per second between each pair of consecutive `rows` (from `train_rows`); a pair whose step or
    `elapsed_s` does not advance (a row repeated by a resume) gives none."""
    return [(b["step"] - a["step"]) / (b["elapsed_s"] - a["elapsed_s"]) for a, b in itertools.pairwise(rows)
            if b["step"] > a["step"] and b["elapsed_s"] > a["elapsed_s"]]


def recent_speed(rows: list[dict[str, Any]], window_s: float = 1800.0) -> tuple[int, float] | None:
    """(last step, training speed now) of these `train_rows`: the median of `step_rates` over the rows of the last
    `window_s` seconds of training (the last two rows where the window holds fewer); None with fewer than two rows
    or no advancing pair. The median, not the mean, so that one interval stretched by a paused process (CI stops the
    campaign's lanes with SIGSTOP) does not lower it."""
    if len(rows) < 2:
        return None
    recent = [r for r in rows if r["elapsed_s"] >= rows[-1]["elapsed_s"] - window_s]
    rates = step_rates(rows[-2:] if len(recent) < 2 else recent)
    return (rows[-1]["step"], statistics.median(rates)) if rates else None


def append_metrics(run_dir: str | os.PathLike, records: list[dict[str, Any]]) -> None:
    """Append records to metrics.jsonl, one JSON object per line."""
    with open(RunFiles(run_dir).metrics, "a") as f:
        f.write("".join(json.dumps(r) + "\n" for r in records))


def truncate_metrics(run_dir: str | os.PathLike, n_lines: int) -> None:
    """Keep the first `n_lines` lines of metrics.jsonl (those written before the checkpoint resumed from)."""
    path = RunFiles(run_dir).metrics
    lines = path.read_text().splitlines(keepends=True) if path.exists() else []
    if len(lines) < n_lines:
        raise CheckpointError(f"{path} has {len(lines)} lines but the checkpoint recorded {n_lines}")
    if len(lines) != n_lines or (lines and not lines[-1].endswith("\n")):
        atomic_write_bytes(path, "".join(lines[:n_lines]).encode())


# ----------------------------------------------------------------------------------------------------------- run
@dataclass(kw_only=True)
class Run:
    """A trained (or training) run, as `train()` returns it and `load_run()` reads it back."""

    path: Path
    """The run directory."""
    config: RunConfig
    """Model, task and training configs (`config.model`, `config.task`, `config.train`)."""
    model: Transformer
    """The model with the checkpoint's weights, in eval mode."""
    metrics: list[dict[str, Any]]
    """Records of metrics.jsonl."""
    step: int
    """Optimizer steps behind the weights."""
    checkpoint_hash: str
    """sha256 of model.safetensors, first 16 hex characters."""

    @property
    def task(self) -> Task:
        """The task with the exact splits the model was trained on."""
        return self.config.task

    @property
    def finished(self) -> bool:
        return self.step >= self.config.train.steps

    def eval_metrics(self, split: str) -> dict[str, Any] | None:
        """The last evaluation record for `split` ("test", "ood"), or None if there is none."""
        found = [m for m in self.metrics if m.get("split") == split]
        return found[-1] if found else None

    def save(self, run_dir: str | os.PathLike) -> Run:
        """Write this run's config, weights and metrics to `run_dir` (no optimizer state: the copy can be loaded
        and analysed, not resumed).

        Returns:
            The run as it lives at `run_dir`.
        """
        path = Path(run_dir)
        path.mkdir(parents=True, exist_ok=True)
        self.config.save(path)
        digest = save_model(self.model, path, step=self.step)
        atomic_write_bytes(RunFiles(path).metrics, "".join(json.dumps(r) + "\n" for r in self.metrics).encode())
        return dataclasses.replace(self, path=path, checkpoint_hash=digest)

    @classmethod
    def load(cls, run_dir: str | os.PathLike, device: str | torch.device = "cpu") -> Run:
        """Load a run directory: config, model weights (checked against the config) and metrics.

        Args:
            run_dir: the run directory.
            device: where to put the model.

        Raises:
            FileNotFoundError: no run there (missing directory, config.json or model.safetensors).
            CheckpointError: a file is corrupt, foreign, or does not match the config.
        """
        path = Path(run_dir)
        config = RunConfig.load(path)
        model = Transformer(config.model)
        step, digest = load_model_weights(model, path)
        model.to(device).eval()
        return cls(path=path, config=config, model=model, metrics=read_metrics(path), step=step,
                   checkpoint_hash=digest)


def load_run(run_dir: str | os.PathLike, device: str | torch.device = "cpu") -> Run:
    """Load a run directory (see `Run.load`)."""
    return Run.load(run_dir, device=device)
