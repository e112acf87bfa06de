"""Resume state on disk: the optimizer, the RNG states and the loop's scalars a run continues from, bit for bit.

A resumable checkpoint is `model.safetensors` (`weights.py`), `train_state.safetensors` (AdamW moments, keyed by
parameter name) and `train_state.json` (`TrainState`, the RNG states and the optimizer's scalars), written in that
order so that `train_state.json` records a complete checkpoint. Configs, metrics and `Run` are in `checkpoint.py`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import save as save_safetensors
from torch import Tensor

from latentcode._version import __version__
from latentcode.constants import MODEL_FILE, TRAIN_STATE_FILE, TRAIN_STATE_META_FILE
from latentcode.rundir.directory import CheckpointError, _read_json, atomic_write_bytes, atomic_write_json
from latentcode.rundir.files import RunFiles
from latentcode.rundir.weights import load_model_weights, read_safetensors, save_model, tensors_for_save

TRAIN_STATE_KIND = "latentcode.train_state"
"""Discriminator of `train_state.json`."""


def _jsonable(data: Any) -> Any:
    """Tuples become lists, as a JSON round trip does, so configs compare equal before and after saving."""
    return json.loads(json.dumps(data))



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
    data = save_safetensors(tensors_for_save(tensors), metadata={"step": str(state.step)})
    atomic_write_bytes(RunFiles(run_dir).train_state, data)
    meta = {"kind": TRAIN_STATE_KIND, "version": __version__, **dataclasses.asdict(state), "optimizer": opt_meta}
    atomic_write_json(RunFiles(run_dir).train_state_meta, meta, indent=None)
    return state.model_hash


def read_train_state(run_dir: str | os.PathLike) -> TrainState | None:
    """The scalars of the last checkpoint, or None when the run has none yet."""
    path = RunFiles(run_dir).train_state_meta
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
    meta = _read_json(RunFiles(run_dir).train_state_meta)
    step, digest = load_model_weights(model, run_dir)
    path = RunFiles(run_dir).train_state
    tensors, metadata, _ = read_safetensors(path)
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
