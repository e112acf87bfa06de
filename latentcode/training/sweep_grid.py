"""A sweep grid: parsed from YAML (`load_grid` -> `Grid`) and expanded into one `SweepPoint` per run (`expand_grid`).

The format is in `latentcode.training.sweep`'s docstring (`latentcode sweep --help` points there). Nothing here
trains or starts a process; grouping points into ensembles and running them is `sweep.py`.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

GRID_KEYS = ("task", "preset", "out", "variants", "seeds", "frac_ood", "sizes", "grid", "model", "task_params",
             "train", "submitit")
_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


@dataclass(frozen=True, kw_only=True)
class SweepPoint:
    """One run of a sweep."""

    name: str
    """Readable unique name, also the run directory's name."""
    run_dir: Path
    """The run directory."""
    task: str
    variant: str
    preset: str
    seed: int
    model: dict[str, Any] = field(default_factory=dict)
    """ModelConfig overrides."""
    task_params: dict[str, Any] = field(default_factory=dict)
    """Task parameter overrides."""
    train: dict[str, Any] = field(default_factory=dict)
    """TrainConfig overrides."""

    def argv(self) -> list[str]:
        """Arguments of `latentcode` that train (or resume) this point."""
        args = ["train", self.task, "--model", self.variant, "--preset", self.preset, "--seed", str(self.seed),
                "--out", str(self.run_dir), "--resume", "--no-progress"]
        for section, values in (("model", self.model), ("task", self.task_params), ("train", self.train)):
            args += [f"--{section}.{k}={json.dumps(v)}" for k, v in values.items()]
        return args

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "run_dir": str(self.run_dir)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SweepPoint:
        """The point `to_dict()` wrote."""
        return cls(**{**data, "run_dir": Path(data["run_dir"])})

    def build(self) -> tuple[Any, Any, Any]:
        """(task, ModelConfig, TrainConfig) of this point: what `latentcode train` builds from `argv()`."""
        from latentcode.training.build import build_model_config, build_task, build_train_config

        task = build_task(self.task, {"seed": self.seed, **self.task_params})
        return (task, build_model_config(task, self.variant, self.preset, self.model),
                build_train_config(self.task, self.preset, {"seed": self.seed}, self.train))


@dataclass(frozen=True, kw_only=True)
class Grid:
    """A parsed grid file (see the module docstring for the format)."""

    task: str
    variants: list[str]
    preset: str = "paper"
    out: Path = Path("runs/sweep")
    seeds: list[int] = field(default_factory=lambda: [0])
    frac_ood: list[float] = field(default_factory=list)
    sizes: list[dict[str, Any]] = field(default_factory=list)
    grid: dict[str, list[Any]] = field(default_factory=dict)
    model: dict[str, Any] = field(default_factory=dict)
    task_params: dict[str, Any] = field(default_factory=dict)
    train: dict[str, Any] = field(default_factory=dict)
    submitit: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str = "grid", default_out: Path | None = None) -> Grid:
        """Validate a grid dict (as read from YAML).

        Raises:
            ValueError: unknown keys, missing `task`/`variants`, or values of the wrong type.
        """
        if not isinstance(data, dict):
            raise ValueError(f"{source}: a grid is a YAML mapping, got {type(data).__name__}")
        unknown = sorted(set(data) - set(GRID_KEYS))
        if unknown:
            raise ValueError(f"{source}: unknown key(s) {unknown}; valid keys: {', '.join(GRID_KEYS)}")
        for key in ("task", "variants"):
            if key not in data:
                raise ValueError(f"{source}: `{key}` is required")
        data = _numbers(data)
        lists = ("variants", "seeds", "frac_ood", "sizes")
        for key in lists:
            if key in data and (not isinstance(data[key], list) or not data[key]):
                raise ValueError(f"{source}: `{key}` must be a non-empty list, got {data[key]!r}")
        for key in ("grid", "model", "task_params", "train", "submitit"):
            if key in data and not isinstance(data[key], dict):
                raise ValueError(f"{source}: `{key}` must be a mapping, got {data[key]!r}")
        if not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in data.get("seeds", [0])):
            raise ValueError(f"{source}: `seeds` must be non-negative integers, got {data['seeds']!r}")
        if not all(isinstance(s, dict) for s in data.get("sizes", [])):
            raise ValueError(f"{source}: each entry of `sizes` must be a mapping of model overrides")
        for key, values in data.get("grid", {}).items():
            if not re.fullmatch(r"(model|task|train)\.\w+", str(key)):
                raise ValueError(f"{source}: grid axis {key!r} must be model.FIELD, task.FIELD or train.FIELD")
            if not isinstance(values, list) or not values:
                raise ValueError(f"{source}: grid axis {key!r} must be a non-empty list")
        out = Path(data["out"]) if "out" in data else (default_out or Path("runs/sweep"))
        return cls(**{**{k: v for k, v in data.items() if k != "out"}, "out": out})


def _numbers(value: Any) -> Any:
    """YAML 1.1 reads `1e-3` as a string; turn such strings back into floats, recursively."""
    if isinstance(value, dict):
        return {k: _numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_numbers(v) for v in value]
    if isinstance(value, str) and _NUMBER.match(value):
        return float(value)
    return value


def load_grid(path: str | os.PathLike) -> Grid:
    """Read a grid file (see the module docstring for the format).

    Raises:
        FileNotFoundError: no such file.
        ValueError: invalid grid or invalid YAML (the message names the file).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no grid file at {path}")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise ValueError(f"{path} is not valid YAML: {' '.join(str(e).split())}") from e
    return Grid.from_dict(data, source=str(path), default_out=Path("runs") / path.stem)


def _label(value: Any) -> str:
    text = f"{value:g}" if isinstance(value, float) else str(value)
    return re.sub(r"[^\w.+=-]", "_", text)


def expand_grid(grid: Grid, *, validate: bool = True) -> list[SweepPoint]:
    """Every point of the grid, in order variants x seeds x frac_ood x sizes x grid axes.

    Args:
        grid: the parsed grid.
        validate: build every point's task, model and training config now, so a typo fails before any run.

    Raises:
        ValueError: two points would share a run directory, or (with `validate`) a point's config is invalid.
    """
    axes = list(grid.grid.items())
    points = []
    for variant, seed, frac, size, values in itertools.product(
        grid.variants, grid.seeds, grid.frac_ood or [None], grid.sizes or [None],
        itertools.product(*(v for _, v in axes)),
    ):
        sections: dict[str, dict[str, Any]] = {"model": dict(grid.model), "task": dict(grid.task_params),
                                               "train": dict(grid.train)}
        parts = [grid.task, variant, f"s{seed}"]
        if frac is not None:
            sections["task"]["frac_ood"] = frac
            parts.append(f"frac{_label(frac)}")
        if size is not None:
            size = dict(size)
            size_name = size.pop("name", None)
            sections["model"].update(size)
            parts.append(_label(size_name) if size_name else "-".join(f"{k}{_label(v)}" for k, v in size.items()))
        for (key, _), value in zip(axes, values, strict=True):
            section, name = key.split(".", 1)
            sections[section][name] = value
            parts.append(f"{name}{_label(value)}")
        name = "-".join(p for p in parts if p)
        points.append(SweepPoint(name=name, run_dir=grid.out / name, task=grid.task, variant=variant,
                                 preset=grid.preset, seed=seed, model=sections["model"],
                                 task_params=sections["task"], train=sections["train"]))
    names = [p.name for p in points]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"grid points share run names {duplicates[:5]}; give each `sizes` entry a distinct name")
    if validate:
        for point in points:
            _validate(point)
    return points


def _validate(point: SweepPoint) -> None:
    try:
        point.build()
    except ValueError as e:
        raise ValueError(f"sweep point {point.name}: {e}") from e
