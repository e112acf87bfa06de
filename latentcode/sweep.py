"""Sweeps: expand a YAML grid into one run directory per point, then train the points K at a time locally or
through submitit. Each point is an ordinary `latentcode train ... --resume` process, so finished runs are
skipped and interrupted ones continue when a sweep is run again. Nothing here trains in-process.

Grid format (YAML; only `task` and `variants` are required)::

    task: sraven                  # a registered task
    preset: small                 # tiny | small | paper (default: paper)
    out: runs/sraven-ablation     # parent folder of the run directories (default: runs/<grid file stem>)
    variants: [softmax, linear, hyla]
    seeds: [0, 1, 2]              # default [0]; a seed sets the task's split seed and the training seed
    frac_ood: [0.25, 0.5]         # optional: values of the task parameter frac_ood
    sizes:                        # optional: model overrides, one run per entry; `name` labels the run
      - {name: w1, width: 1}
      - {name: w2, width: 2, n_layers: 8}
    grid:                         # optional: further axes, keyed section.field
      train.lr: [1.0e-3, 3.0e-4]
      train.weight_decay: [0.1, 0.3]
    model: {attn_dropout: 0.0}    # optional fixed overrides of ModelConfig fields,
    task_params: {n_values: 8}    # ... of the task's parameters,
    train: {steps: 2000}          # ... and of TrainConfig fields
    submitit: {timeout_min: 240, slurm_partition: gpu, gpus_per_node: 1}   # optional executor parameters

The points are the product variants x seeds x frac_ood x sizes x grid axes. Run directories are named
`<out>/<task>-<variant>-s<seed>[-frac<f>][-<size name>][-<field><value>...]`, e.g. `runs/x/sraven-hyla-s0-frac0.25`;
logs go to `<out>/logs/<name>.log`. Write floats with a dot (`1.0e-3`): YAML reads `1e-3` as a string, which
this module converts back to a number anyway.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from latentcode.checkpoint import is_finished

logger = logging.getLogger(__name__)

GRID_KEYS = ("task", "preset", "out", "variants", "seeds", "frac_ood", "sizes", "grid", "model", "task_params",
             "train", "submitit")
_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


@dataclass(frozen=True, kw_only=True)
class SweepPoint:
    """One run of a sweep."""

    name: str
    """Readable unique name, also the run directory's name."""
    out_dir: Path
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
                "--out", str(self.out_dir), "--resume", "--no-progress"]
        for section, values in (("model", self.model), ("task", self.task_params), ("train", self.train)):
            args += [f"--{section}.{k}={json.dumps(v)}" for k, v in values.items()]
        return args


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
        ValueError: invalid grid; yaml.YAMLError: invalid YAML.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no grid file at {path}")
    return Grid.from_dict(yaml.safe_load(path.read_text()), source=str(path),
                          default_out=Path("runs") / path.stem)


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
        points.append(SweepPoint(name=name, out_dir=grid.out / name, task=grid.task, variant=variant,
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
    from latentcode.cli import build_model_config, build_task, build_train_config

    try:
        task = build_task(point.task, {"seed": point.seed, **point.task_params})
        build_model_config(task, point.variant, point.preset, point.model)
        build_train_config(point.task, point.preset, {"seed": point.seed}, point.train)
    except ValueError as e:
        raise ValueError(f"sweep point {point.name}: {e}") from e


@dataclass(frozen=True)
class PointResult:
    """What happened to one point."""

    point: SweepPoint
    status: str
    """'finished' (skipped: already done), 'done', 'failed' or 'planned' (dry run)."""
    returncode: int | None = None
    log: Path | None = None


def _command(point: SweepPoint) -> list[str]:
    return [sys.executable, "-m", "latentcode", *point.argv()]


def _child_env(jobs: int) -> dict[str, str]:
    env = dict(os.environ)
    if jobs > 1 and "OMP_NUM_THREADS" not in env:  # K processes share the cores instead of oversubscribing
        env["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // jobs))
    return env


def run_sweep(
    grid: Grid,
    *,
    jobs: int = 1,
    launcher: str = "local",
    dry_run: bool = False,
    cluster: str | None = None,
) -> list[PointResult]:
    """Train every unfinished point of a grid.

    Args:
        grid: the parsed grid (`load_grid`).
        jobs: points trained at a time (local launcher), or the Slurm array parallelism (submitit).
        launcher: 'local' (subprocesses of this machine) or 'submitit' (`submitit.AutoExecutor`).
        dry_run: report each point's status without training.
        cluster: submitit cluster ('slurm', 'local', 'debug'; None auto-detects).

    Returns:
        One result per point, in grid order.

    Raises:
        ValueError: an invalid grid, `jobs` < 1 or an unknown launcher.
    """
    if jobs < 1:
        raise ValueError(f"jobs={jobs} must be a positive integer")
    if launcher not in ("local", "submitit"):
        raise ValueError(f"launcher={launcher!r} is not one of local, submitit")
    points = expand_grid(grid)
    results: dict[str, PointResult] = {}
    todo = []
    for point in points:
        if is_finished(point.out_dir):
            results[point.name] = PointResult(point, "finished")
        elif dry_run:
            results[point.name] = PointResult(point, "planned")
        else:
            todo.append(point)
    n_finished = sum(r.status == "finished" for r in results.values())
    logger.info("sweep: %d points, %d finished, %d to run", len(points), n_finished, len(points) - n_finished)
    if todo:
        (grid.out / "logs").mkdir(parents=True, exist_ok=True)
        run = _run_local if launcher == "local" else _run_submitit
        for result in run(todo, grid, jobs=jobs, cluster=cluster):
            results[result.point.name] = result
    return [results[p.name] for p in points]


def _run_local(points: list[SweepPoint], grid: Grid, *, jobs: int, cluster: str | None) -> list[PointResult]:
    env = _child_env(jobs)

    def one(point: SweepPoint) -> PointResult:
        log = grid.out / "logs" / f"{point.name}.log"
        logger.info("sweep: training %s", point.name)
        with open(log, "w") as f:
            rc = subprocess.run(_command(point), stdout=f, stderr=subprocess.STDOUT, env=env).returncode
        status = "done" if rc == 0 and is_finished(point.out_dir) else "failed"
        return PointResult(point, status, rc, log)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(one, points))


def _run_submitit(points: list[SweepPoint], grid: Grid, *, jobs: int, cluster: str | None) -> list[PointResult]:
    import submitit
    from submitit.helpers import CommandFunction

    executor = submitit.AutoExecutor(folder=grid.out / "submitit", cluster=cluster)
    params = {"timeout_min": 24 * 60, "name": f"latentcode-{grid.task}", **grid.submitit}
    if executor.cluster == "slurm":
        params.setdefault("slurm_array_parallelism", jobs)
    executor.update_parameters(**params)
    submitted = [(p, executor.submit(CommandFunction(_command(p), verbose=False))) for p in points]
    results = []
    for point, job in submitted:
        try:
            output = job.result()
            rc = 0
        except Exception as e:  # submitit raises its own errors for failed jobs; record and go on
            output, rc = f"{type(e).__name__}: {e}", 1
        log = grid.out / "logs" / f"{point.name}.log"
        log.write_text(str(output) + "\n")
        status = "done" if rc == 0 and is_finished(point.out_dir) else "failed"
        results.append(PointResult(point, status, rc, log))
    return results


def grid_to_dict(grid: Grid) -> dict[str, Any]:
    """A grid as a plain dict (for printing or writing back to YAML)."""
    data = dataclasses.asdict(grid)
    data["out"] = str(grid.out)
    return data
