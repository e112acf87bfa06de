"""Tests for sweeps/cpu_campaign.py: the CPU training campaign trains the sweep's own points and ships what finishes."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from latentcode.config import model_config, train_config
from latentcode.rundir.checkpoint import Run
from latentcode.tasks import get_task
from latentcode.training import lanes
from latentcode.training.sweep_grid import SweepPoint, expand_grid, load_grid
from latentcode.training.train import train

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def campaign():
    spec = importlib.util.spec_from_file_location("cpu_campaign", ROOT / "sweeps" / "cpu_campaign.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["cpu_campaign"] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("cpu_campaign", None)


def test_each_sraven_run_of_the_queue_is_its_sweep_point_plus_cadence_flags(campaign):
    """The campaign's command is the sweep's (sweeps/table_a1_sraven.yaml) with only flags that leave the numbers
    unchanged: one thread, the checkpoint cadence and the snapshots."""
    points = {p.name: p for p in expand_grid(load_grid(ROOT / "sweeps" / "table_a1_sraven.yaml"))}
    sraven = [name for name in campaign.QUEUE if name.startswith("sraven-")]
    assert len(sraven) == 9 and sraven[:2] == ["sraven-softmax-s0", "sraven-hyla-s0"]
    for name in sraven:
        argv = campaign.command(name)[3:]
        expected = points[name].argv()
        out = expected.index("--out")
        expected[out + 1] = str(ROOT / expected[out + 1])
        threads = argv.index("--threads")
        assert argv[threads:threads + 2] == ["--threads", "1"], name
        del argv[threads:threads + 2]
        assert argv == [*expected, "--checkpoint-every", "2000", "--train.snapshots=true"], name


def test_seed_zero_ships_under_the_variant_name_and_other_seeds_keep_theirs(campaign):
    assert campaign.shipped_name("sraven-hyla-s0") == "sraven-hyla"
    assert campaign.shipped_name("sraven-linear-s2") == "sraven-linear-s2"


def test_ship_exports_a_finished_run_once_and_leaves_unfinished_ones(campaign, tmp_path, monkeypatch):
    monkeypatch.setattr(campaign, "ROOT", tmp_path)
    monkeypatch.setattr(campaign, "RUNS", tmp_path / "runs")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        task = get_task("sraven", seed=0, n_features=2, permute_features=False)
        cfg = train_config("sraven", "tiny", steps=8, warmup=2, batch_size=16, eval_every=8, eval_samples=64,
                           device="cpu")
        finished = campaign.run_dir("sraven-softmax-s0")
        train(model_config(task, "softmax", "tiny"), task, cfg, finished, progress=False)
        unfinished = campaign.run_dir("sraven-hyla-s0")
        unfinished.mkdir(parents=True)
        (unfinished / "train_state.json").write_text(json.dumps({"step": 4, "finished": False}))
    finally:
        torch.set_num_threads(threads)

    assert campaign.ship() == ["checkpoints/sraven-softmax"]
    shipped = tmp_path / "checkpoints" / "sraven-softmax"
    assert sorted(p.name for p in shipped.iterdir()) == ["config.json", "metrics.jsonl", "model.safetensors",
                                                          "shipped.json"]  # no optimizer state
    record = json.loads((shipped / "shipped.json").read_text())
    assert record["command"].startswith("latentcode train sraven --model softmax --preset paper --seed 0 --out "
                                        "runs/table_a1_sraven/sraven-softmax-s0 --resume")
    torch.testing.assert_close(Run.load(shipped).model.state_dict(), Run.load(finished).model.state_dict(),
                               rtol=0, atol=0)
    assert not (tmp_path / "checkpoints" / "sraven-hyla").exists()
    assert campaign.ship() == []  # already shipped: nothing is overwritten


def test_status_speed_is_recent_steps_over_training_time_and_skips_eval_rows_and_a_cut_line(campaign, tmp_path):
    """`status` says how fast a run trains now: steps per second of training time (`elapsed_s`, which excludes the
    time a run was stopped) over the last half hour, from the train rows of metrics.jsonl."""
    rows = [{"step": 100 * i, "split": "train", "loss": 1.0, "elapsed_s": 60.0 * i} for i in range(1, 41)]
    rows.insert(10, {"step": 1000, "split": "ood", "accuracy": 0.5})  # an evaluation row: no elapsed_s
    lines = [json.dumps(r) for r in rows] + ['{"step": 4100, "split": "tra']  # cut short by a stop
    (tmp_path / "metrics.jsonl").write_text("\n".join(lines))
    # the last row is step 4000 at 2400 s; the window starts at the first row at or after 600 s: step 1000
    step, rate = campaign.speed(tmp_path, window_s=1800.0)
    assert step == 4000
    assert rate == pytest.approx((4000 - 1000) / (2400 - 600))
    assert campaign.speed(tmp_path / "absent") is None
    (tmp_path / "metrics.jsonl").write_text(json.dumps(rows[0]))
    assert campaign.speed(tmp_path) is None  # one row: no speed yet


def test_stash_keeps_a_finished_run_until_it_ships_and_drops_it_after(campaign, tmp_path, monkeypatch, capsys):
    """The stash is what a fresh clone resumes from: a finished SRAVEN run whose checkpoint has not shipped yet
    keeps its state there (dropping it would lose the final weights with the machine); a shipped one is dropped."""
    monkeypatch.setattr(campaign, "ROOT", tmp_path)
    monkeypatch.setattr(campaign, "RUNS", tmp_path / "runs")
    monkeypatch.setattr(campaign, "STASH", tmp_path / "checkpoints" / "in-progress")
    states = {"sraven-softmax-s0": {"step": 156250, "finished": True},  # finished, not shipped
              "sraven-hyla-s0": {"step": 100, "finished": False},  # under way
              "sraven-linear-s0": {"step": 156250, "finished": True}}  # finished and shipped
    for name, state in states.items():
        run = campaign.run_dir(name)
        run.mkdir(parents=True)
        for file in campaign.RESUME_FILES:
            (run / file).write_text(f"{name} {file}")
        (run / "train_state.json").write_text(json.dumps(state))
    (tmp_path / "checkpoints" / "sraven-linear").mkdir(parents=True)
    old = campaign.STASH / "sraven-linear-s0"
    old.mkdir(parents=True)
    (old / "train_state.json").write_text(json.dumps({"step": 150000, "finished": False}))

    assert campaign.stash_state() == ["sraven-softmax-s0", "sraven-hyla-s0"]
    for name in ("sraven-softmax-s0", "sraven-hyla-s0"):
        for file in campaign.RESUME_FILES:
            assert (campaign.STASH / name / file).read_bytes() == (campaign.run_dir(name) / file).read_bytes()
    assert not old.exists()
    assert "sraven-softmax-s0 is finished but not shipped" in capsys.readouterr().err

    (tmp_path / "checkpoints" / "sraven-softmax").mkdir()  # `ship` has run
    assert campaign.stash_state() == ["sraven-hyla-s0"]
    assert not (campaign.STASH / "sraven-softmax-s0").exists()


def test_stash_from_a_worktree_sees_the_checkpoint_shipped_into_the_main_checkout(campaign, tmp_path, monkeypatch):
    """The campaign trains from a frozen worktree whose checkpoints/in-progress links to the main checkout's, and
    `ship` writes into the main checkout: a stash run from the worktree must drop the shipped run's state too."""
    main, frozen = tmp_path / "main", tmp_path / "frozen"
    (main / "checkpoints" / "in-progress").mkdir(parents=True)
    (main / "checkpoints" / "sraven-softmax").mkdir()  # shipped into main
    (frozen / "checkpoints").mkdir(parents=True)
    (frozen / "checkpoints" / "in-progress").symlink_to(main / "checkpoints" / "in-progress")
    monkeypatch.setattr(campaign, "ROOT", frozen)
    monkeypatch.setattr(campaign, "RUNS", frozen / "runs")
    monkeypatch.setattr(campaign, "STASH", frozen / "checkpoints" / "in-progress")
    run = campaign.run_dir("sraven-softmax-s0")
    run.mkdir(parents=True)
    for file in campaign.RESUME_FILES:
        (run / file).write_text(file)
    (run / "train_state.json").write_text(json.dumps({"step": 156250, "finished": True}))
    old = main / "checkpoints" / "in-progress" / "sraven-softmax-s0"
    old.mkdir()
    (old / "train_state.json").write_text(json.dumps({"step": 140000, "finished": False}))

    assert campaign.stash_state() == []
    assert not old.exists()


def test_queue_hours_prices_each_unfinished_run_at_its_variants_measured_speed(campaign, tmp_path, monkeypatch):
    """`status` ends with the training the queue still needs: a run under way at its own speed, a run not started at
    the speed of its task and variant (here HYLA seed 0's, which finished), and a variant never trained is named
    instead of guessed."""
    monkeypatch.setattr(campaign, "ROOT", tmp_path)  # no shipped checkpoints here
    monkeypatch.setattr(campaign, "RUNS", tmp_path / "runs")
    monkeypatch.setattr(campaign, "STASH", tmp_path / "stash")

    def make(name, rate, last_step, finished):
        run = campaign.run_dir(name)
        run.mkdir(parents=True)
        (run / "config.json").write_text(json.dumps({"train": {"steps": 1000}}))
        (run / "train_state.json").write_text(json.dumps({"step": last_step, "finished": finished}))
        rows = [{"step": step, "split": "train", "elapsed_s": step / rate} for step in range(100, last_step + 1, 100)]
        (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    for name in campaign.FUZZY:
        make(name, rate=50.0, last_step=1000, finished=True)
    make("sraven-softmax-s0", rate=2.0, last_step=400, finished=False)
    make("sraven-hyla-s0", rate=1.0, last_step=1000, finished=True)
    hours, unmeasured = campaign.queue_hours()
    expected_s = (1000 - 400) / 2.0 + 2 * 1000 / 2.0 + 2 * 1000 / 1.0  # softmax s0, s1, s2; HYLA s1, s2
    assert hours == pytest.approx(expected_s / 3600)
    assert unmeasured == ["sraven-linear-s0", "sraven-linear-s1", "sraven-linear-s2"]


def test_a_fresh_machine_trains_the_first_run_that_has_not_shipped(campaign, tmp_path, monkeypatch):
    """A new machine has no runs/ of the runs an earlier one finished, only their committed checkpoints: the lane
    must not retrain those from step 0 but take the first queued run whose checkpoint is absent."""
    monkeypatch.setattr(campaign, "ROOT", tmp_path)
    monkeypatch.setattr(campaign, "RUNS", tmp_path / "runs")
    monkeypatch.setattr(campaign, "LOGS", tmp_path / "runs" / "logs")
    monkeypatch.setattr(campaign, "LOCKS", tmp_path / "runs" / ".locks")
    for name in [*campaign.FUZZY, "sraven-softmax-s0"]:  # shipped by an earlier machine
        (tmp_path / "checkpoints" / campaign.shipped_name(name)).mkdir(parents=True)
    started = []

    class Failing:  # a failed training ends the lane, so the test sees exactly one start
        pid = 0

        def __init__(self, argv, **kwargs):
            started.append(argv)

        def wait(self):
            return 1

    monkeypatch.setattr(lanes.subprocess, "Popen", Failing)
    campaign.lane()
    assert started == [campaign.command("sraven-hyla-s0")]
    assert campaign.done("fuzzy_logic-hyla-s2-frac0.7") and not campaign.done("sraven-hyla-s0")


def test_stash_warns_about_snapshots_that_no_committed_result_has_read(campaign, tmp_path, monkeypatch, capsys):
    """Snapshots are kept locally only (issue 19), so one the emergence table lacks is lost with the machine: the
    stash, the last thing run before a stop, names it."""
    monkeypatch.setattr(campaign, "ROOT", tmp_path)
    monkeypatch.setattr(campaign, "RUNS", tmp_path / "runs")
    monkeypatch.setattr(campaign, "STASH", tmp_path / "checkpoints" / "in-progress")
    run = campaign.run_dir("sraven-linear-s0")
    for step in (10000, 20000, 30000):
        (run / "snapshots" / f"step-{step:06d}").mkdir(parents=True)
    for file in campaign.RESUME_FILES:
        (run / file).write_text(file)
    (run / "train_state.json").write_text(json.dumps({"step": 31000, "finished": False}))
    table = tmp_path / campaign.EMERGENCE / "sraven-linear-s0" / "emergence.csv"
    table.parent.mkdir(parents=True)
    table.write_text("step,layer\n10000,0\n10000,1\n")

    assert campaign.stash_state() == ["sraven-linear-s0"]
    err = capsys.readouterr().err
    assert "sraven-linear-s0: the snapshots of step 20000, 30000 have no emergence rows" in err
    table.write_text("step,layer\n10000,0\n20000,0\n30000,0\n")
    campaign.stash_state()
    assert "no emergence rows" not in capsys.readouterr().err


def test_table_a1_reads_each_run_here_else_its_shipped_checkpoint(campaign, tmp_path, monkeypatch):
    """On a machine that never trained a shipped run, Table A1's SRAVEN CSV still gets that run's rows (from its
    checkpoint), and a run under way here is read from its own directory once it has evaluated."""
    monkeypatch.setattr(campaign, "ROOT", tmp_path)
    monkeypatch.setattr(campaign, "RUNS", tmp_path / "runs")
    for name in ("sraven-softmax-s0", "sraven-hyla-s0"):  # shipped by an earlier machine
        (tmp_path / "checkpoints" / campaign.shipped_name(name)).mkdir(parents=True)
    evaluated = {"split": "test", "step": 10000, "acc": 0.2}
    lines = {"sraven-linear-s0": [{"split": "train", "step": 50}, evaluated],  # under way, evaluated
             "sraven-hyla-s1": [{"split": "train", "step": 50}],  # just started: no evaluation yet
             "sraven-hyla-s0": [evaluated]}  # its run directory here as well: read that, not the checkpoint
    for name, records in lines.items():
        run = campaign.run_dir(name)
        run.mkdir(parents=True)
        (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    assert campaign.table_runs() == ["checkpoints/sraven-softmax", "runs/table_a1_sraven/sraven-hyla-s0",
                                     "runs/table_a1_sraven/sraven-linear-s0"]


def _weights(run: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(run / "model.safetensors")


def test_a_run_stopped_stashed_and_restored_on_a_fresh_machine_ends_with_the_weights_of_an_uninterrupted_one(
        campaign, tmp_path, monkeypatch, capsys):
    """The campaign's round trip on a tiny SRAVEN point, through the sweep's queue: a lane trains it, the trainer
    gets SIGTERM (what `stash` sends), its resume state is stashed, the run directory is lost with the machine,
    `start` restores it and a lane finishes it. Every weight equals that of the same point trained without a stop."""
    name = "sraven-hyla-s0"
    monkeypatch.setattr(campaign, "ROOT", tmp_path)
    monkeypatch.setattr(campaign, "RUNS", tmp_path / "runs")
    monkeypatch.setattr(campaign, "STASH", tmp_path / "checkpoints" / "in-progress")
    monkeypatch.setattr(campaign, "LOGS", tmp_path / "runs" / "logs")
    monkeypatch.setattr(campaign, "LOCKS", tmp_path / "runs" / ".locks")
    monkeypatch.setattr(campaign, "QUEUE", [name])
    monkeypatch.setattr(campaign, "CHECKPOINT_EVERY", 50)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    steps = 600
    tiny = SweepPoint(name=name, run_dir=campaign.run_dir(name), task="sraven", variant="hyla", preset="tiny", seed=0,
                      train={"steps": steps, "warmup": 10, "eval_every": 200, "log_every": 10, "eval_samples": 64})
    monkeypatch.setattr(campaign, "point", lambda n: tiny)

    reference = dataclasses.replace(tiny, run_dir=tmp_path / "reference" / name)
    [result] = lanes.train_lane([reference], locks=tmp_path / "reference" / "locks", logs=tmp_path / "reference",
                                **campaign._cadence(name))
    assert result.status == "done", result.log.read_text()

    lane = threading.Thread(target=campaign.lane)
    lane.start()
    deadline = time.monotonic() + 300
    trainer = None
    while time.monotonic() < deadline:
        held = lanes.held_locks(campaign.LOCKS)
        metrics = tiny.run_dir / "metrics.jsonl"
        if held.get(name, [])[1:] and metrics.is_file() and '"split": "train"' in metrics.read_text():
            trainer = held[name][1]
            break
        time.sleep(0.2)
    assert trainer is not None, "the lane's trainer never started training"
    os.kill(trainer, signal.SIGTERM)  # the trainer this test's lane started, nothing else
    lane.join(timeout=120)
    assert not lane.is_alive()
    stopped = json.loads((tiny.run_dir / "train_state.json").read_text())
    assert 0 < stopped["step"] < steps and not stopped["finished"], stopped
    assert f"{name} stopped" in capsys.readouterr().err

    assert campaign.stash_state() == [name]
    shutil.rmtree(tiny.run_dir)  # a fresh machine: only the stash is left
    assert campaign.restore() == [name]
    campaign.lane()
    assert json.loads((tiny.run_dir / "train_state.json").read_text())["finished"]
    resumed, uninterrupted = _weights(tiny.run_dir), _weights(reference.run_dir)
    assert resumed.keys() == uninterrupted.keys()
    for key, value in uninterrupted.items():
        assert torch.equal(resumed[key], value), key
