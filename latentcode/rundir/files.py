"""`RunFiles`: where every file of a run directory lives, in one place.

A run directory holds the run's config (`config.json`), its training log (`metrics.jsonl`), its weights
(`model.safetensors`, "the checkpoint"), the resume state (`train_state.safetensors` + `train_state.json`), the
weights kept at each evaluation (`snapshots/step-NNNNNN/`, each a run directory of its own), the manifest of
what latentcode wrote (`manifest.json`), a shipped checkpoint's provenance (`shipped.json`), and the analyses'
outputs (`codes/`, `figures/`, `emergence/`, `interventions/`, `report.html`, `summary.json`). Readers and
writers (`checkpoint.py`, `weights.py`, `directory.py`, training's `RunDirectory`) take their paths from here.
Nothing here reads or writes a file, and nothing imports torch.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from latentcode.constants import (
    CODES_DIR,
    CONFIG_FILE,
    EMERGENCE_DIR,
    FIGURES_DIR,
    INTERVENTIONS_DIR,
    MANIFEST_FILE,
    METRICS_FILE,
    MODEL_FILE,
    REPORT_FILE,
    SHIPPED_FILE,
    SNAPSHOTS_DIR,
    SUMMARY_FILE,
    TRAIN_STATE_FILE,
    TRAIN_STATE_META_FILE,
)

__all__ = ["RunFiles"]


@dataclass(frozen=True)
class RunFiles:
    """The paths of one run directory's files (none of them need exist).

    >>> RunFiles("runs/x").model.as_posix(), RunFiles("runs/x").snapshot(500).as_posix()
    ('runs/x/model.safetensors', 'runs/x/snapshots/step-000500')
    """

    root: Path

    def __init__(self, root: str | os.PathLike) -> None:
        object.__setattr__(self, "root", Path(root))

    @property
    def config(self) -> Path:
        """config.json: model, task (with its splits) and training config."""
        return self.root / CONFIG_FILE

    @property
    def metrics(self) -> Path:
        """metrics.jsonl: one JSON record per train line and evaluation."""
        return self.root / METRICS_FILE

    @property
    def model(self) -> Path:
        """model.safetensors: the run's weights, the checkpoint analyses load."""
        return self.root / MODEL_FILE

    @property
    def train_state(self) -> Path:
        """train_state.safetensors: optimizer tensors of the resumable state."""
        return self.root / TRAIN_STATE_FILE

    @property
    def train_state_meta(self) -> Path:
        """train_state.json: loop scalars and RNG states of the resumable state."""
        return self.root / TRAIN_STATE_META_FILE

    @property
    def resume_state(self) -> tuple[Path, ...]:
        """The files `--resume` continues from: config, weights, optimizer state and its scalars, the training log
        (what a copy of an unfinished run must hold)."""
        return (self.config, self.model, self.train_state, self.train_state_meta, self.metrics)

    @property
    def manifest(self) -> Path:
        """manifest.json: the files latentcode wrote besides the fixed ones (what `--force` may remove)."""
        return self.root / MANIFEST_FILE

    @property
    def shipped(self) -> Path:
        """shipped.json: provenance and recorded metric of a shipped checkpoint."""
        return self.root / SHIPPED_FILE

    @property
    def snapshots(self) -> Path:
        """snapshots/: the weights kept at each evaluation (`TrainConfig.snapshots`)."""
        return self.root / SNAPSHOTS_DIR

    def snapshot(self, step: int) -> Path:
        """snapshots/step-NNNNNN/: the snapshot of `step`, itself a loadable run directory."""
        return self.snapshots / f"step-{step:06d}"

    @property
    def codes_dir(self) -> Path:
        """codes/: extracted latent codes and their decodings."""
        return self.root / CODES_DIR

    def codes(self, name: str) -> Path:
        """codes/<name>.npz: the codes of one reading (`<positions>` or `<positions>-<inputs>`)."""
        return self.codes_dir / f"{name}.npz"

    @property
    def figures(self) -> Path:
        return self.root / FIGURES_DIR

    @property
    def emergence(self) -> Path:
        return self.root / EMERGENCE_DIR

    @property
    def interventions(self) -> Path:
        return self.root / INTERVENTIONS_DIR

    @property
    def report(self) -> Path:
        return self.root / REPORT_FILE

    @property
    def summary(self) -> Path:
        return self.root / SUMMARY_FILE
