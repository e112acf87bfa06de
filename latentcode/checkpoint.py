"""The run directory: save and load a trained model with its configs, optimizer state and metrics.

A run directory holds `config.json`, `model.safetensors`, `train_state.safetensors` + `train_state.json` and
`metrics.jsonl` (names in `latentcode.constants`). Every write goes through `rundir.py`'s atomic writes, which also
keep the manifest `--force` reads. Nothing is pickled and nothing is read with `torch.load`. The training loop is
in `train.py`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load as load_safetensors
from safetensors.torch import save as save_safetensors
from torch import Tensor

from latentcode._version import __version__
from latentcode.config import ModelConfig, TrainConfig
from latentcode.constants import (
    CONFIG_FILE,
    METRICS_FILE,
    MODEL_FILE,
    RUN_KIND,
    SNAPSHOTS_DIR,
    TRAIN_STATE_FILE,
    TRAIN_STATE_META_FILE,
)
from latentcode.model import Transformer
from latentcode.rundir import (  # noqa: F401 (the file helpers moved to rundir.py; importable here as before)
    RUN_FILES,
    TRAIN_HINT,
    CheckpointError,
    _read_json,
    _require_file,
    atomic_write_bytes,
    atomic_write_json,
    check_force_target,
    is_run_dir,
    is_shipped,
    read_manifest,
    record_outputs,
    remove_run_files,
    remove_stale_temp_files,
)
from latentcode.tasks.base import Task, task_from_dict

logger = logging.getLogger(__name__)

TRAIN_STATE_KIND = "latentcode.train_state"
"""Discriminator of `train_state.json`."""


def _jsonable(data: Any) -> Any:
    """Tuples become lists, as a JSON round trip does, so configs compare equal before and after saving."""
    return json.loads(json.dumps(data))


# ------------------------------------------------------------------------------------------------------- configs
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
        if data.get("version") != __version__:
            logger.warning("%s was written by latentcode %s; this is %s", source, data.get("version"), __version__)
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
        mine, theirs = _jsonable(self.to_dict()), _jsonable(other.to_dict())
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
        atomic_write_json(Path(run_dir) / CONFIG_FILE, self.to_dict())

    @classmethod
    def load(cls, run_dir: str | os.PathLike) -> RunConfig:
        """Read `config.json` of a run directory.

        Raises:
            FileNotFoundError: no directory or no config.json.
            CheckpointError: the file is corrupt or foreign.
        """
        path = Path(run_dir) / CONFIG_FILE
        return cls.from_dict(_read_json(path), source=str(path))


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


# --------------------------------------------------------------------------------------------------------- model
def _tensors_for_save(tensors: dict[str, Tensor]) -> dict[str, Tensor]:
    """Detached, contiguous CPU copies; tensors sharing storage (tied weights) are cloned apart for safetensors."""
    out, seen = {}, set()
    for name, t in tensors.items():
        t = t.detach().to("cpu").contiguous()
        ptr = t.untyped_storage().data_ptr() if t.numel() else None
        if ptr is not None and ptr in seen:
            t = t.clone()
        elif ptr is not None:
            seen.add(ptr)
        out[name] = t
    return out


def _sha16(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def file_hash(path: str | os.PathLike) -> str:
    """First 16 hex characters of the sha256 of a file (a run's `checkpoint_hash` is this of model.safetensors)."""
    return _sha16(Path(path).read_bytes())


def save_model(model: torch.nn.Module, run_dir: str | os.PathLike, *, step: int) -> str:
    """Write the model's weights to `model.safetensors` atomically.

    Returns:
        The checkpoint hash (sha256 of the file, first 16 hex characters).
    """
    data = save_safetensors(_tensors_for_save(model.state_dict()), metadata={"step": str(step)})
    atomic_write_bytes(Path(run_dir) / MODEL_FILE, data)
    return _sha16(data)


def snapshot_dir(run_dir: str | os.PathLike, step: int) -> Path:
    """Where the snapshot of `step` lives: `RUN/snapshots/step-NNNNNN/`, itself a loadable run directory."""
    return Path(run_dir) / SNAPSHOTS_DIR / f"step-{step:06d}"


def save_snapshot(model: torch.nn.Module, run_dir: str | os.PathLike, *, step: int) -> Path:
    """Keep the weights of `step` as a run directory of their own (the run's config.json and model.safetensors),
    which `Run.load` and every analysis read like any run."""
    folder = snapshot_dir(run_dir, step)
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(folder / CONFIG_FILE, (Path(run_dir) / CONFIG_FILE).read_bytes())
    save_model(model, folder, step=step)
    return folder


def list_snapshots(run_dir: str | os.PathLike) -> list[tuple[int, Path]]:
    """(step, folder) of every snapshot a run kept, by step."""
    root = Path(run_dir) / SNAPSHOTS_DIR
    found = []
    for folder in root.glob("step-*") if root.is_dir() else ():
        if (folder / MODEL_FILE).is_file() and folder.name[5:].isdigit():
            found.append((int(folder.name[5:]), folder))
    return sorted(found)


def _read_safetensors(path: Path) -> tuple[dict[str, Tensor], dict[str, str], str]:
    """Tensors (on CPU), metadata and hash of one safetensors file, with errors naming the file."""
    _require_file(path)
    data = path.read_bytes()
    try:
        tensors = load_safetensors(data)
        header_len = int.from_bytes(data[:8], "little")
        metadata = json.loads(data[8 : 8 + header_len]).get("__metadata__", {})
    except (SafetensorError, ValueError) as e:
        raise CheckpointError(f"{path} cannot be read ({e}); the file is truncated or corrupt") from e
    return tensors, metadata, _sha16(data)


def _check_state_dict(path: Path, tensors: dict[str, Tensor], expected: dict[str, Tensor]) -> None:
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(expected))
    shapes = [
        f"{k}: file {tuple(tensors[k].shape)} vs config {tuple(expected[k].shape)}"
        for k in sorted(set(tensors) & set(expected))
        if tensors[k].shape != expected[k].shape
    ]
    dtypes = [
        f"{k}: file {tensors[k].dtype} vs model {expected[k].dtype}"
        for k in sorted(set(tensors) & set(expected))
        if tensors[k].shape == expected[k].shape and tensors[k].dtype != expected[k].dtype
    ]
    problems = []
    if missing:
        problems.append(f"missing keys {missing[:8]}{' ...' if len(missing) > 8 else ''}")
    if unexpected:
        problems.append(f"unexpected keys {unexpected[:8]}{' ...' if len(unexpected) > 8 else ''}")
    if shapes:
        problems.append("shape mismatch " + "; ".join(shapes[:8]))
    if dtypes:
        problems.append("dtype mismatch " + "; ".join(dtypes[:8]))
    if problems:
        raise CheckpointError(
            f"{path} does not match the model described by {path.parent / CONFIG_FILE}: " + ", ".join(problems)
        )


def load_model_weights(model: torch.nn.Module, run_dir: str | os.PathLike) -> tuple[int, str]:
    """Load `model.safetensors` into `model` after checking keys, shapes and dtypes against it.

    Returns:
        (step the weights were saved at, checkpoint hash).

    Raises:
        FileNotFoundError: the file is missing.
        CheckpointError: the file is truncated/corrupt or does not match the model.
    """
    path = Path(run_dir) / MODEL_FILE
    tensors, metadata, digest = _read_safetensors(path)
    _check_state_dict(path, tensors, model.state_dict())
    model.load_state_dict(tensors, strict=True)
    return int(metadata.get("step", -1)), digest


# --------------------------------------------------------------------------------------------------- train state
@dataclass(kw_only=True)
class TrainState:
    """The scalars of a resumable checkpoint (`train_state.json`); tensors go to `train_state.safetensors`."""

    step: int
    """Optimizer steps completed."""
    finished: bool
    """True for the final checkpoint (step == TrainConfig.steps)."""
    metrics_lines: int
    """Lines of metrics.jsonl written up to this checkpoint; later lines are dropped on resume."""
    pending_losses: list[float]
    """Training losses since the last train line of metrics.jsonl (they belong to the next one)."""
    elapsed_s: float
    """Wall-clock seconds spent in training so far."""
    world_size: int = 1
    """Processes that trained the run (the global batch is split across them)."""
    model_hash: str = ""
    """Hash of model.safetensors written with this state (checks the files belong together)."""
    rng: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Python, numpy and torch RNG states as JSON lists."""


def capture_rng() -> dict[str, Any]:
    """The python, numpy, torch (and CUDA) global RNG states as JSON-safe lists."""
    version, mt, gauss = random.getstate()
    name, keys, pos, has_gauss, cached = np.random.get_state()
    state = {
        "python": [version, list(mt), gauss],
        "numpy": [name, keys.tolist(), int(pos), int(has_gauss), float(cached)],
        "torch": torch.get_rng_state().tolist(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = [s.tolist() for s in torch.cuda.get_rng_state_all()]
    return state


def restore_rng(state: dict[str, Any]) -> None:
    """Inverse of `capture_rng`; missing entries are left as they are."""
    if "python" in state:
        version, mt, gauss = state["python"]
        random.setstate((version, tuple(mt), gauss))
    if "numpy" in state:
        name, keys, pos, has_gauss, cached = state["numpy"]
        np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
    if "torch" in state:
        torch.set_rng_state(torch.tensor(state["torch"], dtype=torch.uint8))
    if "cuda" in state and torch.cuda.is_available():
        states = [torch.tensor(s, dtype=torch.uint8) for s in state["cuda"]]
        if len(states) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(states)


def _optimizer_param_names(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> list[str]:
    """Parameter names in the optimizer's own order (the order its state_dict indexes them by)."""
    name_of = {id(p): name for name, p in model.named_parameters()}
    return [name_of[id(p)] for group in optimizer.param_groups for p in group["params"]]


def _flatten_optimizer(optimizer: torch.optim.Optimizer, names: list[str]) -> tuple[dict[str, Tensor], dict]:
    sd = optimizer.state_dict()
    tensors, scalars = {}, {}
    for index, state in sd["state"].items():
        for key, value in state.items():
            if isinstance(value, Tensor):
                tensors[f"state.{names[index]}.{key}"] = value
            else:
                scalars.setdefault(str(index), {})[key] = value
    groups = []
    for group in sd["param_groups"]:
        for key, value in group.items():
            if isinstance(value, Tensor):
                raise TypeError(f"optimizer hyperparameter {key!r} is a tensor; only Python scalars are saved")
        groups.append(_jsonable(group))
    return tensors, {"param_names": names, "param_groups": groups, "scalars": scalars}


def _unflatten_optimizer(tensors: dict[str, Tensor], meta: dict, names: list[str], source: Path) -> dict:
    if meta["param_names"] != names:
        raise CheckpointError(f"{source}: the optimizer was saved for other parameters than this model has")
    index = {name: i for i, name in enumerate(names)}
    state: dict[int, dict[str, Any]] = {}
    for key, value in tensors.items():
        if not key.startswith("state."):
            continue
        name, slot = key[len("state.") :].rsplit(".", 1)
        if name not in index:
            raise CheckpointError(f"{source}: optimizer state for unknown parameter {name!r}")
        state.setdefault(index[name], {})[slot] = value
    for i, extra in meta.get("scalars", {}).items():
        state.setdefault(int(i), {}).update(extra)
    groups = [{k: tuple(v) if k == "betas" else v for k, v in g.items()} for g in meta["param_groups"]]
    return {"state": state, "param_groups": groups}


def save_checkpoint(
    run_dir: str | os.PathLike,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    state: TrainState,
) -> str:
    """Write a resumable checkpoint: model.safetensors, train_state.safetensors, then train_state.json.

    train_state.json goes last: it is the record that the checkpoint is complete.

    Returns:
        The checkpoint hash of model.safetensors.
    """
    run_dir = Path(run_dir)
    names = _optimizer_param_names(model, optimizer)
    tensors, opt_meta = _flatten_optimizer(optimizer, names)
    state.model_hash = save_model(model, run_dir, step=state.step)
    data = save_safetensors(_tensors_for_save(tensors), metadata={"step": str(state.step)})
    atomic_write_bytes(run_dir / TRAIN_STATE_FILE, data)
    meta = {"kind": TRAIN_STATE_KIND, "version": __version__, **dataclasses.asdict(state), "optimizer": opt_meta}
    atomic_write_json(run_dir / TRAIN_STATE_META_FILE, meta, indent=None)
    return state.model_hash


def read_train_state(run_dir: str | os.PathLike) -> TrainState | None:
    """The scalars of the last checkpoint, or None when the run has none yet."""
    path = Path(run_dir) / TRAIN_STATE_META_FILE
    if not path.exists():
        return None
    data = _read_json(path)
    if not isinstance(data, dict) or data.get("kind") != TRAIN_STATE_KIND:
        raise CheckpointError(f"{path} is not a latentcode train state (kind={data.get('kind')!r})")
    fields = {f.name for f in dataclasses.fields(TrainState)}
    return TrainState(**{k: v for k, v in data.items() if k in fields})


def load_checkpoint(
    run_dir: str | os.PathLike,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
) -> TrainState:
    """Restore model weights and optimizer state from the last checkpoint (RNG states are returned, not set).

    Raises:
        FileNotFoundError: a checkpoint file is missing.
        CheckpointError: a file is corrupt, or the files belong to different checkpoints.
    """
    run_dir = Path(run_dir)
    state = read_train_state(run_dir)
    if state is None:
        raise FileNotFoundError(f"no checkpoint in {run_dir} (missing {TRAIN_STATE_META_FILE})")
    meta = _read_json(run_dir / TRAIN_STATE_META_FILE)
    step, digest = load_model_weights(model, run_dir)
    path = run_dir / TRAIN_STATE_FILE
    tensors, metadata, _ = _read_safetensors(path)
    opt_step = int(metadata.get("step", -1))
    if not (step == opt_step == state.step) or digest != state.model_hash:
        raise CheckpointError(
            f"checkpoint files in {run_dir} disagree ({MODEL_FILE} at step {step}, {TRAIN_STATE_FILE} at step "
            f"{opt_step}, {TRAIN_STATE_META_FILE} at step {state.step}): the process was killed while writing "
            "them; start over with --force"
        )
    names = _optimizer_param_names(model, optimizer)
    # load_state_dict moves state tensors to their parameters' device (and keeps `step` where torch wants it)
    optimizer.load_state_dict(_unflatten_optimizer(tensors, meta["optimizer"], names, path))
    return state


def is_finished(run_dir: str | os.PathLike) -> bool:
    """True when the run directory holds its final checkpoint."""
    try:
        state = read_train_state(run_dir)
    except (CheckpointError, FileNotFoundError):
        return False
    return state is not None and state.finished


# ------------------------------------------------------------------------------------------------------- metrics
def read_metrics(run_dir: str | os.PathLike) -> list[dict[str, Any]]:
    """Every record of metrics.jsonl (a half-written last line from a killed process is skipped)."""
    path = Path(run_dir) / METRICS_FILE
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


def append_metrics(run_dir: str | os.PathLike, records: list[dict[str, Any]]) -> None:
    """Append records to metrics.jsonl, one JSON object per line."""
    with open(Path(run_dir) / METRICS_FILE, "a") as f:
        f.write("".join(json.dumps(r) + "\n" for r in records))


def truncate_metrics(run_dir: str | os.PathLike, n_lines: int) -> None:
    """Keep the first `n_lines` lines of metrics.jsonl (those written before the checkpoint resumed from)."""
    path = Path(run_dir) / METRICS_FILE
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

    def save(self, path: str | os.PathLike) -> Run:
        """Write this run's config, weights and metrics to `path` (no optimizer state: the copy can be loaded
        and analysed, not resumed).

        Returns:
            The run as it lives at `path`.
        """
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        self.config.save(path)
        digest = save_model(self.model, path, step=self.step)
        atomic_write_bytes(path / METRICS_FILE, "".join(json.dumps(r) + "\n" for r in self.metrics).encode())
        return dataclasses.replace(self, path=path, checkpoint_hash=digest)

    @classmethod
    def load(cls, path: str | os.PathLike, device: str | torch.device = "cpu") -> Run:
        """Load a run directory: config, model weights (checked against the config) and metrics.

        Args:
            path: the run directory.
            device: where to put the model.

        Raises:
            FileNotFoundError: no run there (missing directory, config.json or model.safetensors).
            CheckpointError: a file is corrupt, foreign, or does not match the config.
        """
        path = Path(path)
        config = RunConfig.load(path)
        model = Transformer(config.model)
        step, digest = load_model_weights(model, path)
        model.to(device).eval()
        return cls(path=path, config=config, model=model, metrics=read_metrics(path), step=step,
                   checkpoint_hash=digest)


def load_run(path: str | os.PathLike, device: str | torch.device = "cpu") -> Run:
    """Load a run directory (see `Run.load`)."""
    return Run.load(path, device=device)
