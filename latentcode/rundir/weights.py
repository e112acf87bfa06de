"""Model weights on disk: `model.safetensors` written atomically and read back checked against the model (keys,
shapes, dtypes), and the snapshots a run keeps (`snapshots/step-NNNNNN/`, each a loadable run directory).

Nothing here knows about optimizers or resuming (`train_state.py`) or about configs and `Run` (`checkpoint.py`).
Nothing is pickled and nothing is read with `torch.load`.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load as load_safetensors
from safetensors.torch import save as save_safetensors
from torch import Tensor

from latentcode.constants import CONFIG_FILE, MODEL_FILE
from latentcode.rundir.directory import CheckpointError, _require_file, atomic_write_bytes
from latentcode.rundir.files import RunFiles


def tensors_for_save(tensors: dict[str, Tensor]) -> dict[str, Tensor]:
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
    data = save_safetensors(tensors_for_save(model.state_dict()), metadata={"step": str(step)})
    atomic_write_bytes(RunFiles(run_dir).model, data)
    return _sha16(data)


def snapshot_dir(run_dir: str | os.PathLike, step: int) -> Path:
    """Where the snapshot of `step` lives: `RUN/snapshots/step-NNNNNN/`, itself a loadable run directory."""
    return RunFiles(run_dir).snapshot(step)


def save_snapshot(model: torch.nn.Module, run_dir: str | os.PathLike, *, step: int) -> Path:
    """Keep the weights of `step` as a run directory of their own (the run's config.json and model.safetensors),
    which `Run.load` and every analysis read like any run."""
    folder = snapshot_dir(run_dir, step)
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(RunFiles(folder).config, RunFiles(run_dir).config.read_bytes())
    save_model(model, folder, step=step)
    return folder


def list_snapshots(run_dir: str | os.PathLike) -> list[tuple[int, Path]]:
    """(step, folder) of every snapshot a run kept, by step."""
    root = RunFiles(run_dir).snapshots
    found = []
    for folder in root.glob("step-*") if root.is_dir() else ():
        if (folder / MODEL_FILE).is_file() and folder.name[5:].isdigit():
            found.append((int(folder.name[5:]), folder))
    return sorted(found)


def read_safetensors(path: Path) -> tuple[dict[str, Tensor], dict[str, str], str]:
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
    path = RunFiles(run_dir).model
    tensors, metadata, digest = read_safetensors(path)
    _check_state_dict(path, tensors, model.state_dict())
    model.load_state_dict(tensors, strict=True)
    return int(metadata.get("step", -1)), digest
