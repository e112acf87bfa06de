"""Tests of latentcode/training/sweep.py: grid parsing and expansion, local runs K at a time, skipping finished
runs, and submitit's local executor."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import torch
import yaml

from latentcode.cli import main
from latentcode.rundir.checkpoint import load_run
from latentcode.training.sweep import (
    Grid,
    SweepPoint,
    expand_grid,
    group_name,
    group_points,
    load_grid,
    run_sweep,
    train_group,
)
from latentcode.training.train import train
from latentcode.training.train_state import is_finished

TINY_TRAIN = {"steps": 4, "warmup": 1, "eval_every": 4, "log_every": 2, "eval_samples": 64}


@pytest.fixture(autouse=True)
def one_thread_children(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the training subprocesses of a sweep


def write_grid(path: Path, **data) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


def test_grid_expands_to_one_named_run_per_point(tmp_path):
    grid = Grid.from_dict(
        {
            "task": "sraven",
            "preset": "tiny",
            "out": str(tmp_path),
            "variants": ["softmax", "hyla"],
            "seeds": [0, 1],
            "frac_ood": [0.25, 0.5],
            "sizes": [{"name": "w1", "width": 1}, {"name": "w2", "width": 2}],
            "grid": {"train.lr": [1e-3, 3e-4]},
            "train": {"steps": 10, "warmup": 2},
            "model": {"attn_dropout": 0.0},
        }
    )
    points = expand_grid(grid)
    assert len(points) == 2 * 2 * 2 * 2 * 2
    assert len({p.run_dir for p in points}) == len(points)
    point = next(p for p in points if p.name == "sraven-hyla-s1-frac0.5-w2-lr0.0003")
    assert point.run_dir == tmp_path / point.name
    assert point.model == {"attn_dropout": 0.0, "width": 2}
    assert point.task_params == {"frac_ood": 0.5}
    assert point.train == {"steps": 10, "warmup": 2, "lr": 3e-4}
    argv = point.argv()
    assert argv[:4] == ["train", "sraven", "--model", "hyla"] and "--resume" in argv
    assert {"--seed", "1", "--model.width=2", "--task.frac_ood=0.5", "--train.lr=0.0003"} <= set(argv)


def test_the_simplest_grid_uses_the_defaults(tmp_path):
    grid = load_grid(write_grid(tmp_path / "mini.yaml", task="fuzzy_logic", variants=["softmax"]))
    assert grid.preset == "paper" and grid.seeds == [0] and grid.out == Path("runs/mini")
    assert [p.name for p in expand_grid(grid)] == ["fuzzy_logic-softmax-s0"]


def test_yaml_exponent_floats_become_numbers(tmp_path):
    path = tmp_path / "g.yaml"
    path.write_text(
        "task: fuzzy_logic\nvariants: [hyla]\ntrain: {lr: 1e-3}\ngrid: {train.weight_decay: [3e-2]}\n"
    )
    point = expand_grid(load_grid(path))[0]
    assert point.train == {"lr": 1e-3, "weight_decay": 0.03}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        pytest.param(
            {"task": "sraven", "variants": ["hyla"], "seed": [0]}, "unknown key(s) ['seed']", id="unknown-key"
        ),
        pytest.param({"task": "sraven"}, "`variants` is required", id="no-variants"),
        pytest.param(
            {"task": "sraven", "variants": "hyla"}, "`variants` must be a non-empty list", id="not-a-list"
        ),
        pytest.param(
            {"task": "sraven", "variants": ["hyla"], "grid": {"lr": [1]}},
            "must be model.FIELD",
            id="bad-axis",
        ),
        pytest.param(
            {"task": "sraven", "variants": ["hyla"], "seeds": [-1]},
            "non-negative integers",
            id="negative-seed",
        ),
    ],
)
def test_invalid_grids_are_rejected(data, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        Grid.from_dict(data)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        pytest.param({"variants": ["hyper"]}, "sraven-hyper-s0: unknown variant 'hyper'", id="bad-variant"),
        pytest.param(
            {"variants": ["hyla"], "model": {"depth": 2}}, "unknown option.*--model.depth", id="bad-field"
        ),
        pytest.param(
            {"variants": ["hyla"], "sizes": [{"n_layers": 2}, {"n_layers": 2}]},
            "share run names",
            id="duplicate-names",
        ),
    ],
)
def test_points_are_validated_before_anything_runs(data, message):
    with pytest.raises(ValueError, match=message):
        expand_grid(Grid.from_dict({"task": "sraven", "preset": "tiny", **data}))


@pytest.mark.slow
def test_local_sweep_runs_two_points_two_at_a_time_then_skips_them(tmp_path, capsys):
    grid_file = write_grid(
        tmp_path / "grid.yaml",
        task="fuzzy_logic",
        preset="tiny",
        out=str(tmp_path / "runs"),
        variants=["softmax", "hyla"],
        frac_ood=[0.25],
        train=TINY_TRAIN,
    )
    assert main(["-q", "sweep", str(grid_file), "--dry-run"]) == 0
    assert capsys.readouterr().out.count("planned") == 2

    results = run_sweep(load_grid(grid_file), jobs=2)
    assert [r.status for r in results] == ["done", "done"], [r.log.read_text() for r in results]
    run = load_run(tmp_path / "runs" / "fuzzy_logic-hyla-s0-frac0.25")
    assert run.finished and run.task.config.frac_ood == 0.25 and run.config.train.steps == 4
    assert (tmp_path / "runs" / "logs" / "fuzzy_logic-hyla-s0-frac0.25.log").exists()

    before = {r.point.name: os.stat(r.point.run_dir / "model.safetensors").st_mtime_ns for r in results}
    again = run_sweep(load_grid(grid_file), jobs=2)
    assert [r.status for r in again] == ["finished", "finished"]
    assert before == {r.point.name: os.stat(r.point.run_dir / "model.safetensors").st_mtime_ns for r in again}


def test_a_failing_point_is_reported(tmp_path, capsys):
    out = tmp_path / "runs"
    (out / "fuzzy_logic-softmax-s0").mkdir(parents=True)
    (out / "fuzzy_logic-softmax-s0" / "notes.txt").write_text("not a run")  # training refuses this directory
    grid_file = write_grid(
        tmp_path / "grid.yaml",
        task="fuzzy_logic",
        preset="tiny",
        out=str(out),
        variants=["softmax"],
        train=TINY_TRAIN,
    )
    assert main(["-q", "sweep", str(grid_file)]) == 1
    captured = capsys.readouterr()
    assert "failed" in captured.out and "failed: fuzzy_logic-softmax-s0" in captured.err


@pytest.mark.slow
def test_submitit_local_executor_runs_a_point(tmp_path):
    grid = Grid.from_dict(
        {
            "task": "fuzzy_logic",
            "preset": "tiny",
            "out": str(tmp_path / "runs"),
            "variants": ["linear"],
            "train": TINY_TRAIN,
            "submitit": {"timeout_min": 5},
        }
    )
    results = run_sweep(grid, launcher="submitit", cluster="local")
    assert [r.status for r in results] == ["done"], results[0].log.read_text()
    assert is_finished(tmp_path / "runs" / "fuzzy_logic-linear-s0")
    assert (tmp_path / "runs" / "submitit").is_dir()


# ----------------------------------------------------------------------------------------- ensemble groups
def _ensemble_grid(tmp_path: Path, name: str = "runs", **extra) -> Grid:
    return Grid.from_dict({"task": "fuzzy_logic", "preset": "tiny", "out": str(tmp_path / name),
                           "variants": ["hyla"], "seeds": [0, 1], "model": {"attn_dropout": 0.1},
                           "train": TINY_TRAIN, **extra})


def test_points_differing_in_seed_lr_or_weight_decay_form_one_group(tmp_path):
    grid = Grid.from_dict({"task": "sraven", "preset": "tiny", "out": str(tmp_path), "variants": ["softmax", "hyla+moe"],
                           "seeds": [0, 1], "frac_ood": [0.25, 0.5],
                           "grid": {"train.lr": [1e-3, 3e-3], "train.weight_decay": [0.1, 0.3]},
                           "train": {"steps": 10, "warmup": 2}})
    groups = group_points(expand_grid(grid))
    sizes = sorted(len(g) for g in groups)
    assert sizes == [1] * 16 + [8, 8]  # mixture-of-experts points train alone
    big = [g for g in groups if len(g) == 8]
    assert all({p.variant for p in g} == {"softmax"} for g in big)
    assert [{p.task_params["frac_ood"] for p in g} for g in big] == [{0.25}, {0.5}]
    assert group_name(big[0]) == "sraven-softmax-s0-frac0.25-lr0.001-weight_decay0.1-ensemble8"


@pytest.mark.slow
def test_an_ensemble_sweep_gives_the_runs_of_a_plain_sweep(tmp_path):
    plain = run_sweep(_ensemble_grid(tmp_path, "plain"))
    grouped = run_sweep(_ensemble_grid(tmp_path, "grouped"), ensemble=True, threads=1)
    assert [r.status for r in plain] == [r.status for r in grouped] == ["done", "done"]
    assert {r.group for r in grouped} == {"fuzzy_logic-hyla-s0-ensemble2"}
    for a, b in zip(plain, grouped, strict=True):
        run_a, run_b = load_run(a.point.run_dir), load_run(b.point.run_dir)
        assert run_a.config.to_dict() == run_b.config.to_dict()
        for (name, p), (_, q) in zip(run_a.model.named_parameters(), run_b.model.named_parameters(), strict=True):
            torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5, msg=name)


def test_a_group_resumes_together_and_a_split_group_is_refused(tmp_path):
    grid = _ensemble_grid(tmp_path)
    points = expand_grid(grid)
    runs = train_group(points, time_limit=0.0)  # both members stop after step 1
    assert [r.step for r in runs] == [1, 1]
    assert [r.status for r in run_sweep(grid, ensemble=True, time_limit=0.0)] == ["pending", "pending"]
    resumed = run_sweep(grid, ensemble=True, threads=1)  # one process continues both from step 1
    assert [r.status for r in resumed] == ["done", "done"], resumed[0].log.read_text()
    assert [load_run(p.run_dir).step for p in points] == [TINY_TRAIN["steps"]] * 2

    other = _ensemble_grid(tmp_path, "split")
    first = expand_grid(other)[0]
    task, mcfg, tcfg = first.build()
    train(mcfg, task, tcfg, first.run_dir, progress=False, time_limit=0.0)  # one member alone, to step 1
    results = run_sweep(other, ensemble=True)
    assert [r.status for r in results] == ["failed", "failed"]
    message = results[0].log.read_text()
    assert "different steps (fuzzy_logic-hyla-s0: 1, fuzzy_logic-hyla-s1: 0)" in message
    assert "without --ensemble" in message


@pytest.mark.parametrize("path", sorted((Path(__file__).resolve().parents[2] / "sweeps").glob("*.yaml")),
                         ids=lambda p: p.name)
def test_every_committed_sweep_file_builds_what_it_says(path):
    data = yaml.safe_load(path.read_text())
    points = expand_grid(load_grid(path), validate=True)
    assert len(points) == len(data["variants"]) * len(data["seeds"]) * len(data.get("frac_ood") or [None])
    assert len({p.run_dir for p in points}) == len(points)
    for point in points:
        assert point.run_dir.parent == Path(data["out"])
        task, model, train_cfg = point.build()
        assert model.variant == point.variant and train_cfg.seed == point.seed
        for key, value in (data.get("model") or {}).items():
            assert getattr(model, key) == value, (point.name, key)
        for key, value in (data.get("task_params") or {}).items():
            assert getattr(task, key) == value, (point.name, key)
        for key, value in (data.get("train") or {}).items():
            assert getattr(train_cfg, key) == pytest.approx(value), (point.name, key)


def test_a_point_names_its_run_directory_run_dir_and_round_trips_through_its_group_spec(tmp_path):
    grid = Grid.from_dict({"task": "fuzzy_logic", "variants": ["hyla"], "preset": "tiny", "out": str(tmp_path)})
    (point,) = expand_grid(grid)
    data = point.to_dict()
    assert data["run_dir"] == str(tmp_path / "fuzzy_logic-hyla-s0") and "out_dir" not in data
    assert SweepPoint.from_dict(json.loads(json.dumps(data))) == point
    assert not hasattr(point, "out_dir")  # the 0.1 name is gone in 0.3


def test_a_lane_skips_points_another_lane_holds_and_trains_the_rest_with_its_cadence_flags(tmp_path):
    import fcntl

    from latentcode.training.lanes import held_locks, is_locked, lock_file, train_lane
    from latentcode.training.sweep import point_command

    grid = Grid.from_dict({"task": "fuzzy_logic", "variants": ["linear"], "seeds": [0, 1], "preset": "tiny",
                           "out": str(tmp_path / "runs"), "train": TINY_TRAIN})
    held, free = expand_grid(grid)
    command = point_command(free, threads=1, checkpoint_every=2, snapshots=True)
    assert command[3:] == [*free.argv(), "--threads", "1", "--checkpoint-every", "2", "--train.snapshots=true"]
    locks = tmp_path / "locks"
    locks.mkdir()
    with lock_file(held, locks).open("a+") as other:  # another lane trains `held`
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        other.write("4242\n")
        other.flush()
        assert is_locked(held, locks) and not is_locked(free, locks)
        assert held_locks(locks) == {held.name: [4242]}
        results = train_lane([held, free], locks=locks, logs=tmp_path / "logs", checkpoint_every=2, snapshots=True)
    assert [(r.point.name, r.status) for r in results] == [(free.name, "done")]
    assert not (held.run_dir / "config.json").exists() and is_finished(free.run_dir)
    assert sorted(p.name for p in (free.run_dir / "snapshots").iterdir()) == ["step-000004"]  # eval_every 4
    assert not is_locked(free, locks) and held_locks(locks) == {}
    # the lane wrote its own id and its trainer's into the lock while it trained
    lane_pid, trainer_pid = map(int, lock_file(free, locks).read_text().split())
    assert lane_pid == os.getpid() and trainer_pid != lane_pid
    # a finished point is left alone: a lane with nothing else to do returns at once
    assert train_lane([free], locks=locks, logs=tmp_path / "logs") == []


def test_stop_lanes_kills_each_locked_lane_and_lets_its_trainer_checkpoint_but_spares_other_processes(tmp_path):
    """What `cpu_campaign.py stash` relies on: the lane named in a held lock dies at once (so it starts no other
    run), its trainer gets SIGTERM (and so writes its checkpoint), and a process no lock names keeps running."""
    import subprocess
    import sys
    import textwrap

    from latentcode.training.lanes import stop_lanes

    trainer_code = textwrap.dedent(f"""
        import signal, sys, time
        def stop(*_):
            open({str(tmp_path / 'checkpointed')!r}, 'w').write('yes')
            sys.exit(0)
        signal.signal(signal.SIGTERM, stop)
        print('ready', flush=True)
        time.sleep(120)
    """)
    trainer = subprocess.Popen([sys.executable, "-c", trainer_code], stdout=subprocess.PIPE, text=True)
    bystander = subprocess.Popen([sys.executable, "-c", trainer_code.replace("checkpointed", "bystander")],
                                 stdout=subprocess.PIPE, text=True)
    assert trainer.stdout.readline().strip() == "ready" and bystander.stdout.readline().strip() == "ready"
    locks = tmp_path / "locks"
    locks.mkdir()
    lane_code = textwrap.dedent(f"""
        import fcntl, os, time
        lock = open({str(locks / 'run.lock')!r}, 'a+')
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        lock.write(f'{{os.getpid()}}\\n{trainer.pid}\\n')
        lock.flush()
        print('ready', flush=True)
        time.sleep(120)
    """)
    lane = subprocess.Popen([sys.executable, "-c", lane_code], stdout=subprocess.PIPE, text=True)
    try:
        assert lane.stdout.readline().strip() == "ready"
        assert stop_lanes(locks, timeout=30.0)
        assert lane.wait(timeout=10) == -9  # SIGKILL: a lane must not go on to the next run
        assert trainer.wait(timeout=10) == 0 and (tmp_path / "checkpointed").read_text() == "yes"
        assert bystander.poll() is None and not (tmp_path / "bystander").exists()
    finally:
        for process in (lane, trainer, bystander):
            process.kill()
            process.wait()
