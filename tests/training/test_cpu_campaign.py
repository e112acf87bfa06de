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

import numpy as np
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


def _point_and_campaign_argv(campaign, point: SweepPoint) -> tuple[list[str], list[str]]:
    """The campaign's `latentcode train` arguments for a sweep point, less its one-thread flag (checked here), and the
    point's own arguments with the run directory made absolute as the campaign's is."""
    argv = campaign.command(point.name)[3:]
    expected = point.argv()
    out = expected.index("--out")
    expected[out + 1] = str(ROOT / expected[out + 1])
    threads = argv.index("--threads")
    assert argv[threads:threads + 2] == ["--threads", "1"], point.name
    del argv[threads:threads + 2]
    return argv, expected


def test_each_sraven_run_of_the_queue_is_its_sweep_point_plus_cadence_flags(campaign):
    """The campaign's command is the sweep's (sweeps/table_a1_sraven.yaml) with only flags that leave the numbers
    unchanged: one thread, the checkpoint cadence and the snapshots."""
    points = {p.name: p for p in expand_grid(load_grid(ROOT / "sweeps" / "table_a1_sraven.yaml"))}
    sraven = [name for name in campaign.QUEUE if name.startswith("sraven-")]
    assert len(sraven) == 9 and sraven[:2] == ["sraven-softmax-s0", "sraven-hyla-s0"]
    for name in sraven:
        argv, expected = _point_and_campaign_argv(campaign, points[name])
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


def test_status_speed_is_the_median_recent_rate_and_skips_eval_rows_a_pause_and_a_cut_line(campaign, tmp_path):
    """`status` says how fast a run trains now: the median steps per second of training time (`elapsed_s`) between
    consecutive train rows of the last half hour of metrics.jsonl, so one interval stretched by a paused process
    (CI stops the lanes with SIGSTOP, and `elapsed_s` runs on) leaves it as it was."""
    rows = [{"step": 100 * i, "split": "train", "loss": 1.0, "elapsed_s": 60.0 * i} for i in range(1, 41)]
    for row in rows[30:]:
        row["elapsed_s"] += 1200.0  # a 20-minute pause between steps 3000 and 3100
    rows.insert(10, {"step": 1000, "split": "ood", "accuracy": 0.5})  # an evaluation row: no elapsed_s
    lines = [json.dumps(r) for r in rows] + ['{"step": 4100, "split": "tra']  # cut short by a stop
    (tmp_path / "metrics.jsonl").write_text("\n".join(lines))
    # the window holds steps 2100 to 4000 (elapsed 1260 s to 3600 s): 19 intervals of 100 steps in 60 s, one in 1260 s
    step, rate = campaign.speed(tmp_path, window_s=2400.0)
    assert step == 4000
    assert rate == pytest.approx(100 / 60)
    assert (4000 - 2100) / (3600 - 1260) < 0.5 * rate  # what the mean over the window would have said
    assert campaign.speed(tmp_path / "absent") is None
    (tmp_path / "metrics.jsonl").write_text(json.dumps(rows[0]))
    assert campaign.speed(tmp_path) is None  # one row: no speed yet


def test_a_run_back_from_the_gpu_has_a_speed_here_only_from_the_steps_a_lane_here_trained(campaign, tmp_path,
                                                                                         monkeypatch):
    """A run that came back from the GPU logs tens of steps per second; until a lane here trains it (and writes
    runs/logs/<name>.log), `status` says its speed is not measured instead of pricing the queue at the GPU's. Once a
    lane resumes it, its speed is that of the rows past the step the lane's log says it resumed from, even while the
    GPU's rows still fill the last half hour of training time; after a restart with one row so far, the rows since
    the start before."""
    monkeypatch.setattr(campaign, "RUNS", tmp_path / "runs")
    monkeypatch.setattr(campaign, "LOGS", tmp_path / "runs" / "logs")
    monkeypatch.setattr(campaign, "STASH", tmp_path / "stash")
    run = campaign.run_dir("sraven-linear-s1")
    run.mkdir(parents=True)
    (run / "train_state.json").write_text(json.dumps({"step": 31300, "finished": False}))
    gpu = [{"step": s, "split": "train", "elapsed_s": s / 60.0} for s in range(100, 31301, 100)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in gpu))
    assert campaign.speed(run) == (31300, pytest.approx(60.0))
    assert campaign.speed_here("sraven-linear-s1") is None
    cpu = [{"step": s, "split": "train", "elapsed_s": 31300 / 60.0 + (s - 31300) / 4.0} for s in range(31350, 32001, 50)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in gpu + cpu))
    campaign.LOGS.mkdir(parents=True)
    log = campaign.LOGS / "sraven-linear-s1.log"
    log.write_text(f"resuming {run} from step 31300\ntraining linear on sraven: 4 steps of 128 on cpu\n")
    assert campaign.speed(run)[1] > 30.0  # the last half hour of training time: mostly the GPU's rows
    assert campaign.speed_here("sraven-linear-s1") == (32000, pytest.approx(4.0))
    log.write_text(log.read_text() + f"resuming {run} from step 32000\n")  # restarted: one row since is no speed
    with open(run / "metrics.jsonl", "a") as f:
        f.write(json.dumps({"step": 32050, "split": "train", "elapsed_s": cpu[-1]["elapsed_s"] + 10.0}) + "\n")
    assert campaign.speed_here("sraven-linear-s1") == (32050, pytest.approx(4.0))
    log.write_text("training linear on sraven: 4 steps of 128 on cpu\n")  # a run begun here: every row counts
    assert campaign.speed_here("sraven-linear-s1")[0] == 32050


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
    assert "sraven-softmax-s0 is finished but its result is not committed yet: run `python sweeps/cpu_campaign.py ship`" \
        in capsys.readouterr().err

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


def _empty_machine(campaign, tmp_path, monkeypatch) -> None:
    """The campaign's checkout, runs, stash, lane logs and locks moved under tmp_path: nothing trained or shipped
    yet, and an empty log folder for the test to fill."""
    monkeypatch.setattr(campaign, "ROOT", tmp_path)
    monkeypatch.setattr(campaign, "RUNS", tmp_path / "runs")
    monkeypatch.setattr(campaign, "STASH", tmp_path / "stash")
    monkeypatch.setattr(campaign, "LOGS", tmp_path / "runs" / "logs")
    monkeypatch.setattr(campaign, "LOCKS", tmp_path / "runs" / ".locks")
    campaign.LOGS.mkdir(parents=True)


def test_queue_hours_prices_each_unfinished_run_at_its_variants_measured_speed(campaign, tmp_path, monkeypatch):
    """`status` ends with the training the queue still needs: a run under way at its own speed, a run not started at
    the speed of its task and variant (here HYLA seed 0's, which finished), and a variant never trained is named
    instead of guessed."""
    _empty_machine(campaign, tmp_path, monkeypatch)  # no shipped checkpoints here

    def make(name, rate, last_step, finished):
        run = campaign.run_dir(name)
        run.mkdir(parents=True)
        (campaign.LOGS / f"{name}.log").write_text("")  # trained by a lane of this machine
        (run / "config.json").write_text(json.dumps({"train": {"steps": 1000}}))
        (run / "train_state.json").write_text(json.dumps({"step": last_step, "finished": finished}))
        rows = [{"step": step, "split": "train", "elapsed_s": step / rate} for step in range(100, last_step + 1, 100)]
        (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    for name in campaign.FUZZY:
        make(name, rate=50.0, last_step=1000, finished=True)
    make("sraven-softmax-s0", rate=2.0, last_step=400, finished=False)
    make("sraven-hyla-s0", rate=1.0, last_step=1000, finished=True)
    make("fuzzy_logic-hyla-s2024-frac0.5", rate=4.0, last_step=400, finished=False)  # Fig. 2B, sequence length 96
    here, elsewhere, benchmarked, unmeasured = campaign.queue_hours()  # no benchmark record on this machine
    assert benchmarked == 0.0
    expected_s = (1000 - 400) / 2.0 + 2 * 1000 / 2.0 + 2 * 1000 / 1.0  # softmax s0, s1, s2; HYLA s1, s2
    expected_s += (1000 - 400) / 4.0  # Fig. 2B HYLA at its own speed, not at the sequence-length-32 runs' 50
    assert here == pytest.approx(expected_s / 3600) and elsewhere == 0.0
    assert unmeasured == ["sraven-linear-s0", "sraven-linear-s1", "sraven-linear-s2",
                          "fuzzy_logic-softmax-s2024-frac0.5", "fuzzy_logic-linear-s2024-frac0.5",
                          *campaign.ABLATIONS]  # the seq-32 HYLA speed prices no ablation row either


def test_status_prices_a_run_from_another_machine_at_its_variants_speed_here(campaign, tmp_path, monkeypatch,
                                                                             capsys):
    """A run back from the GPU has no speed of its own on this machine; its `status` line gives the hours left at
    the speed of a run of its sweep and variant that a lane here trains, and says that is what it does."""
    _empty_machine(campaign, tmp_path, monkeypatch)
    for name, step in (("sraven-softmax-s1", 400), ("sraven-softmax-s2", 1000 - 7200), ("sraven-linear-s1", 300)):
        run = campaign.run_dir(name)
        run.mkdir(parents=True)
        (run / "config.json").write_text(json.dumps({"train": {"steps": 1000 + 7200}}))
        (run / "train_state.json").write_text(json.dumps({"step": step + 7200, "finished": False}))
    here = campaign.run_dir("sraven-softmax-s1")
    (campaign.LOGS / "sraven-softmax-s1.log").write_text("")  # a lane of this machine trains it, 2 steps/s
    rows = [{"step": 7200 + s, "split": "train", "elapsed_s": s / 2.0} for s in range(100, 401, 100)]
    (here / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    campaign.status()
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert "2.00 steps/s, 0.1 h to step 8,200" in lines["sraven-softmax-s1"]  # (8200 - 7600) / 2 s = 0.08 h
    # (8200 - 1000) / 2 s = 1.0 h, at softmax s1's speed
    assert "not trained here yet; at this machine's softmax speed (2.00 steps/s) 1.0 h to step 8,200" in \
        lines["sraven-softmax-s2"]
    assert lines["sraven-linear-s1"].endswith("no speed measured on this machine yet")  # no linear run trains here


def test_a_variant_not_trained_here_is_priced_at_the_speed_its_shipped_one_thread_run_ended_with(
        campaign, tmp_path, monkeypatch, capsys):
    """On a fresh machine no linear run has trained yet: linear seed 1, back from the GPU, is priced at the speed
    linear seed 0 ended its training with (its shipped metrics, one-thread lane), said so and counted apart from
    the speeds measured here. A variant whose only shipped run finished on two threads gets no such estimate."""
    _empty_machine(campaign, tmp_path, monkeypatch)
    for name, threads, rate in (("sraven-linear-s0", 1, 5.0), ("sraven-hyla-s0", 2, 3.0)):
        shipped = tmp_path / "checkpoints" / campaign.shipped_name(name)
        shipped.mkdir(parents=True)
        command = f"latentcode train sraven --seed 0 --threads {threads} --no-progress"
        (shipped / "shipped.json").write_text(json.dumps({"command": command}))
        # 60 s at 100 steps/s (a GPU start), then its last half hour on a CPU at `rate`
        rows = [{"step": s, "split": "train", "elapsed_s": s / 100.0} for s in range(100, 6001, 100)]
        rows += [{"step": 6000 + s, "split": "train", "elapsed_s": 60.0 + s / rate} for s in range(50, 9001, 50)]
        (shipped / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for name in ("sraven-linear-s1", "sraven-hyla-s1"):
        run = campaign.run_dir(name)
        run.mkdir(parents=True)
        (run / "config.json").write_text(json.dumps({"train": {"steps": 45000}}))
        (run / "train_state.json").write_text(json.dumps({"step": 9000, "finished": False}))
    campaign.status()
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    # (45000 - 9000) / 5 s = 2.0 h
    assert ("no linear speed here yet; at the speed sraven-linear ended its training with elsewhere (5.00 steps/s) "
            "2.0 h to step 45,000") in lines["sraven-linear-s1"]
    assert lines["sraven-hyla-s1"].endswith("no speed measured on this machine yet")
    here, elsewhere, benchmarked, unmeasured = campaign.queue_hours()
    assert here == 0.0 and benchmarked == 0.0
    assert elsewhere == pytest.approx(((45000 - 9000) + (45000 - 0)) / 5.0 / 3600)  # linear seeds 1 and 2
    assert "sraven-linear-s1" not in unmeasured and "sraven-hyla-s1" in unmeasured


def test_a_sweep_no_lane_has_trained_is_priced_at_a_committed_benchmarks_steps_per_cpu_second(
        campaign, tmp_path, monkeypatch, capsys):
    """Fig. 2B's runs and the ablation rows have no speed here and no shipped run: `status` prices each at the
    one-thread steps per CPU-second that `bench/train_throughput.py --json` recorded for its task, sequence length
    and variant, over the steps its sweep point trains (50,000 of 128 in both sweeps' own words) when none of its
    sweep has started, says so, and counts those hours apart. A two-thread record and a row of another sequence
    length price nothing; a run with no row stays named as unmeasured."""
    _empty_machine(campaign, tmp_path, monkeypatch)
    speeds = tmp_path / "results" / "lane_speeds"
    speeds.mkdir(parents=True)

    def record(path, threads, rows):
        rows = [{"task": "fuzzy_logic", "seq_len": seq_len, "variant": variant, "steps_per_cpu_s": rate}
                for seq_len, variant, rate in rows]
        path.write_text(json.dumps({"command": "python bench/train_throughput.py", "threads": threads, "rows": rows}))

    record(speeds / "a-seq96.json", 1, [(96, "hyla", 2.0), (16, "hyla", 99.0)])
    record(speeds / "b-seq32.json", 1, [(32, "hyla_linear", 10.0), (96, "linear", 7.0)])
    record(speeds / "c-two-threads.json", 2, [(96, "softmax", 50.0), (32, "linear_rmshead", 50.0)])
    hyla = campaign.run_dir("fuzzy_logic-hyla-s2024-frac0.5")  # back from elsewhere at step 10,000
    hyla.mkdir(parents=True)
    (hyla / "config.json").write_text(json.dumps({"train": {"steps": 50000}}))
    (hyla / "train_state.json").write_text(json.dumps({"step": 10000, "finished": False}))
    campaign.status()
    out = capsys.readouterr().out
    lines = {line.split()[0]: line for line in out.splitlines()}
    # (50000 - 10000) / 2 s = 5.6 h
    assert lines["fuzzy_logic-hyla-s2024-frac0.5"].endswith(
        "no hyla speed here yet; at the steps per CPU-second a benchmark measured (2.00, "
        "results/lane_speeds/a-seq96.json) 5.6 h to step 50,000")
    here, elsewhere, benchmarked, unmeasured = campaign.queue_hours()
    expected_s = (50000 - 10000) / 2.0 + 50000 / 7.0 + 3 * 50000 / 10.0  # Fig. 2B HYLA and linear; HYLA − nonlinearity
    assert (here, elsewhere) == (0.0, 0.0) and benchmarked == pytest.approx(expected_s / 3600)
    priced = {"fuzzy_logic-hyla-s2024-frac0.5", "fuzzy_logic-linear-s2024-frac0.5",
              *(f"fuzzy_logic-hyla_linear-s{seed}-frac0.7" for seed in (0, 1, 2))}
    assert set(unmeasured) == set(campaign.QUEUE) - priced  # Fig. 2B softmax's only row is two threads'
    assert f"{expected_s / 3600:.1f} of them at the steps per CPU-second of one thread that a benchmark measured" in out


def _fresh_machine(campaign, tmp_path, monkeypatch) -> list[list[str]]:
    """A machine with no runs/ whose trainings fail at once, so a lane starts exactly one: returns the list each
    started command is appended to."""
    monkeypatch.setattr(campaign, "ROOT", tmp_path)
    monkeypatch.setattr(campaign, "RUNS", tmp_path / "runs")
    monkeypatch.setattr(campaign, "LOGS", tmp_path / "runs" / "logs")
    monkeypatch.setattr(campaign, "LOCKS", tmp_path / "runs" / ".locks")
    started = []

    class Failing:  # a failed training ends the lane
        pid = 0

        def __init__(self, argv, **kwargs):
            started.append(argv)

        def wait(self):
            return 1

    monkeypatch.setattr(lanes.subprocess, "Popen", Failing)
    return started


def test_a_fresh_machine_trains_the_first_run_that_has_not_shipped(campaign, tmp_path, monkeypatch):
    """A new machine has no runs/ of the runs an earlier one finished, only their committed checkpoints: the lane
    must not retrain those from step 0 but take the first queued run whose checkpoint is absent."""
    started = _fresh_machine(campaign, tmp_path, monkeypatch)
    for name in [*campaign.FUZZY, "sraven-softmax-s0"]:  # shipped by an earlier machine
        (tmp_path / "checkpoints" / campaign.shipped_name(name)).mkdir(parents=True)
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


def test_the_queue_goes_on_with_fig2b_then_the_ablation_rows_in_the_issues_order(campaign):
    """Issue 31's queue after the SRAVEN seeds: the three Fig. 2B runs at the paper's setting, then every ablation
    row latentcode builds, three seeds each, HYLA − nonlinearity, linear + RMSHead and HYLA − RMSHead first."""
    queue = campaign.QUEUE
    last_sraven = max(queue.index(name) for name in queue if name.startswith("sraven-"))
    after = queue[last_sraven + 1:]
    assert after[:3] == ["fuzzy_logic-softmax-s2024-frac0.5", "fuzzy_logic-linear-s2024-frac0.5",
                         "fuzzy_logic-hyla-s2024-frac0.5"]
    assert after[3:12] == [f"fuzzy_logic-{v}-s{s}-frac0.7" for v in ("hyla_linear", "linear_rmshead",
                                                                     "hyla_no_rmshead") for s in (0, 1, 2)]
    from latentcode.config.model import VARIANTS
    from latentcode.pipelines.results import PAPER_TABLE_A1

    ablations = {name.split("-")[1] for name in after[3:]}
    assert ablations == set(PAPER_TABLE_A1["fuzzy_logic"]) - {"softmax", "linear", "hyla"}
    assert ablations <= set(VARIANTS) and len(after) == 3 + 3 * len(ablations)
    assert len(set(queue)) == len(queue)


def test_fig2b_runs_train_the_paper_setting_and_ablations_the_core_rows_setting(campaign):
    """A Fig. 2B run is its sweep's point as `latentcode sweep sweeps/fig2_fuzzy_logic_latent.yaml` trains it
    (sequence length 96, half the pairs held out, seed 2024); an ablation row trains like the core rows it is
    compared with (0.1's exact GELU and schedule, sequence length 32, 70% held out)."""
    points = {p.name: p for p in expand_grid(load_grid(ROOT / "sweeps" / "fig2_fuzzy_logic_latent.yaml"))}
    for name in campaign.FIG2B:
        argv, expected = _point_and_campaign_argv(campaign, points[name])
        assert argv == expected, name  # no cadence flags, no 0.1 settings
        assert {"--seed", "2024", "--task.seq_len=96", "--task.frac_ood=0.5"} <= set(argv)
        assert not any("v0.1" in a or "act_fn" in a for a in argv)
    for name in campaign.ABLATIONS:
        argv = campaign.command(name)
        assert {"--task.seq_len=32", "--task.frac_ood=0.7", '--model.act_fn="gelu"', '--train.lr_schedule="v0.1"'} <= \
            set(argv), argv
        assert argv[argv.index("--model") + 1] == name.split("-")[1]
        assert argv[argv.index("--out") + 1] == str(ROOT / "runs" / "table_a1_fuzzy_logic" / name)


def test_a_fresh_machine_goes_from_the_sraven_runs_to_fig2b_and_skips_ablation_rows_in_the_table(
        campaign, tmp_path, monkeypatch):
    """With every SRAVEN run shipped, a lane starts the first Fig. 2B run; with those shipped too and the first
    ablation row's test and OOD rows in the committed fuzzy-logic table, it starts the next ablation row."""
    started = _fresh_machine(campaign, tmp_path, monkeypatch)
    for name in [*campaign.FUZZY, *campaign.SRAVEN]:
        (tmp_path / "checkpoints" / campaign.shipped_name(name)).mkdir(parents=True)
    campaign.lane()
    assert started == [campaign.command("fuzzy_logic-softmax-s2024-frac0.5")]

    for name in campaign.FIG2B:
        (tmp_path / "checkpoints" / f"fuzzy_logic_latent-{name.split('-')[1]}").mkdir()
    table = tmp_path / "results" / "table_a1_fuzzy_logic.csv"
    table.parent.mkdir()
    header = "task,variant,seed,split,metric,value,step,steps,lr,weight_decay,live_fraction,run\n"
    row = "fuzzy_logic,hyla_linear,0,{split},r2,0.8,{step},50000,0.001,0.1,,fuzzy_logic-hyla_linear-s0-frac0.7\n"
    table.write_text(header + row.format(split="ood", step=50000))  # its test row is missing: not recorded yet
    started.clear()
    campaign.lane()
    assert started == [campaign.command("fuzzy_logic-hyla_linear-s0-frac0.7")]
    table.write_text(header + row.format(split="ood", step=50000) + row.format(split="test", step=50000))
    started.clear()
    campaign.lane()
    assert started == [campaign.command("fuzzy_logic-hyla_linear-s1-frac0.7")]
    assert campaign.done("fuzzy_logic-hyla_linear-s0-frac0.7")


def _tiny_fuzzy_run(run: Path, variant: str, seed: int) -> None:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        task = get_task("fuzzy_logic", seq_len=8)
        cfg = train_config("fuzzy_logic", "tiny", steps=8, warmup=2, batch_size=16, eval_every=8, eval_samples=64,
                           seed=seed, device="cpu")
        train(model_config(task, variant, "tiny"), task, cfg, run, progress=False)
    finally:
        torch.set_num_threads(threads)


def test_a_finished_fig2b_run_ships_under_its_setting_name_and_its_decode_lands_in_results(
        campaign, tmp_path, monkeypatch, capsys):
    """`ship` exports a finished Fig. 2B run as `fuzzy_logic_latent-<variant>`, which loads by that name with its
    seed 2024; `results` then decodes it into results/fig2b/ once, beside the input-only control."""
    monkeypatch.setattr(campaign, "ROOT", tmp_path)
    monkeypatch.setattr(campaign, "RUNS", tmp_path / "runs")
    monkeypatch.setattr(campaign, "DECODE_ARGS", ["--no-progress", "--n-samples", "128"])
    monkeypatch.setenv("LATENTCODE_CHECKPOINTS", str(tmp_path / "checkpoints"))
    name = "fuzzy_logic-hyla-s2024-frac0.5"
    _tiny_fuzzy_run(campaign.run_dir(name), "hyla", seed=2024)

    assert campaign.ship() == ["checkpoints/fuzzy_logic_latent-hyla"]
    from latentcode.rundir.pretrained import pretrained_seeds

    assert pretrained_seeds("fuzzy_logic_latent-hyla") == {2024: "fuzzy_logic_latent-hyla"}
    record = json.loads((tmp_path / "checkpoints" / "fuzzy_logic_latent-hyla" / "shipped.json").read_text())
    assert "sweeps/fig2_fuzzy_logic_latent.yaml" in record["command"]
    assert campaign.recorded(name)

    assert campaign.campaign_results.fig2b_decodes(campaign) == [name]
    decoded = json.loads((tmp_path / "results" / "fig2b" / "fuzzy_logic_latent-hyla.decode.json").read_text())
    assert decoded["task"] == "fuzzy_logic" and decoded["label"] == "terms"
    assert {layer["layer"] for layer in decoded["layers"]} >= {"0", "1"}
    assert campaign.campaign_results.fig2b_decodes(campaign) == []  # already there: not redone

    # its row in results/fig2b/README.md's table (docs/fig2b_table.py), from the decode file's own per-term F1,
    # stored floor and control, with the setting of the shipped checkpoint (its length, half the pairs held out)
    spec = importlib.util.spec_from_file_location("fig2b_table", ROOT / "docs" / "fig2b_table.py")
    fig2b_table = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fig2b_table)
    assert fig2b_table.main([str(tmp_path / "results" / "fig2b")]) == 0
    (row,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| fuzzy_logic_latent-hyla |")]
    terms = decoded["extras"]["terms"]
    with np.errstate(all="ignore"):
        layers = [np.nanmean(np.array(f1, dtype=float)) for f1 in terms["f1"]["ood"]]
    expected = [f"{v:.3f}" if np.isfinite(v) else "n/a" for v in [*layers, terms["always_present_f1"]["ood"],
                                                                  terms["input_only_f1"]["ood"]]]
    params = json.loads((tmp_path / "checkpoints" / "fuzzy_logic_latent-hyla" / "config.json").read_text())["task"]["params"]
    assert [c.strip() for c in row.strip("|").split("|")][1:-1] == [f"{params['seq_len']}, 50%", *expected]


def test_a_finished_ablation_row_joins_the_fuzzy_table_and_its_stash_goes_only_then(
        campaign, tmp_path, monkeypatch, capsys):
    """The ablation rows do not ship: their results file is what a fresh clone keeps. So the stash keeps a finished
    row's state until `results` has put its rows in results/table_a1_fuzzy_logic.csv, which keeps every other row
    (here a SiLU row that no run directory on this machine could give back)."""
    monkeypatch.setattr(campaign, "ROOT", tmp_path)
    monkeypatch.setattr(campaign, "RUNS", tmp_path / "runs")
    monkeypatch.setattr(campaign, "STASH", tmp_path / "checkpoints" / "in-progress")
    name = "fuzzy_logic-linear_rmshead-s1-frac0.7"
    _tiny_fuzzy_run(campaign.run_dir(name), "linear_rmshead", seed=1)
    table = tmp_path / "results" / "table_a1_fuzzy_logic.csv"
    table.parent.mkdir()
    header = "task,variant,seed,split,metric,value,step,steps,lr,weight_decay,live_fraction,run\n"
    silu = "fuzzy_logic,hyla (value_act=silu),1,ood,r2,0.94,50000,50000,0.001,0.1,,fuzzy_logic-hyla-s1-frac0.7\n"
    stale = "fuzzy_logic,linear_rmshead,1,ood,r2,0.5,4000,50000,0.001,0.1,,fuzzy_logic-linear_rmshead-s1-frac0.7\n"
    table.write_text(header + silu + stale)

    assert campaign.stash_state() == [name]
    assert "is finished but its result is not committed yet" in capsys.readouterr().err
    assert (campaign.STASH / name / "model.safetensors").is_file()

    assert campaign.campaign_results.ablation_rows(campaign) == [name]
    from latentcode.pipelines.results import collect_results, read_results_csv

    rows = read_results_csv(table)
    assert [(r.variant, r.seed, r.split) for r in rows] == [("hyla (value_act=silu)", 1, "ood"),
                                                            ("linear_rmshead", 1, "ood"), ("linear_rmshead", 1, "test")]
    assert rows[0].value == 0.94
    fresh = {r.split: r.value for r in collect_results([campaign.run_dir(name)])}
    assert {r.split: r.value for r in rows[1:]} == fresh and rows[1].step == rows[1].steps == 8
    assert campaign.campaign_results.ablation_rows(campaign) == []

    assert campaign.stash_state() == []
    assert not (campaign.STASH / name).exists()


def test_a_lane_of_two_threads_trains_its_run_on_two_threads(campaign, tmp_path, monkeypatch):
    """`start --lanes 1 --threads 2` (a run near its end, finished sooner on both cores): the lane's trainer gets
    `--threads 2` and OMP_NUM_THREADS=2; its sweep point and cadence are those of the one-thread command."""
    started = _fresh_machine(campaign, tmp_path, monkeypatch)
    envs = []
    failing = lanes.subprocess.Popen

    class Recording(failing):
        def __init__(self, argv, **kwargs):
            super().__init__(argv, **kwargs)
            envs.append(kwargs["env"])

    monkeypatch.setattr(lanes.subprocess, "Popen", Recording)
    campaign.lane(threads=2)
    [argv] = started
    one_thread = campaign.command(campaign.FUZZY[0])
    at = one_thread.index("--threads")
    assert argv == [*one_thread[:at], "--threads", "2", *one_thread[at + 2:]]
    assert envs[0]["OMP_NUM_THREADS"] == "2"
    with pytest.raises(SystemExit, match="at least 1"):
        campaign.start(lanes=1, threads=0)
