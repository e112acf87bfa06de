"""Tests of latentcode/rundir/checkpoint.py: the run directory round trip, and clear errors for broken runs."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from latentcode.config import model_config, train_config
from latentcode.constants import CONFIG_FILE, METRICS_FILE, MODEL_FILE, RUN_KIND, TRAIN_STATE_META_FILE
from latentcode.model.transformer import Transformer
from latentcode.rundir.checkpoint import (
    CheckpointError,
    Run,
    RunConfig,
    append_metrics,
    load_run,
    read_metrics,
    recent_speed,
    step_rates,
    train_rows,
    truncate_metrics,
)
from latentcode.rundir.directory import atomic_write_json
from latentcode.rundir.weights import file_hash
from latentcode.tasks import get_task
from latentcode.training.optim import build_optimizer
from latentcode.training.train import train
from latentcode.training.train_state import (
    TrainState,
    capture_rng,
    load_checkpoint,
    restore_rng,
    save_checkpoint,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def run(tmp_path_factory, one_thread):
    task = get_task("fuzzy_logic", frac_ood=0.3, seed=3)
    mcfg = model_config(task, "hyla", "tiny")
    tcfg = train_config(
        "fuzzy_logic", "tiny", steps=8, warmup=2, log_every=4, eval_every=8, checkpoint_every=4
    )
    return train(mcfg, task, tcfg, tmp_path_factory.mktemp("runs") / "run", progress=False)


@pytest.fixture
def run_copy(run, tmp_path):
    """A copy of the run directory that a test may break."""
    copy = tmp_path / "copy"
    copy.mkdir()
    for f in run.path.iterdir():
        (copy / f.name).write_bytes(f.read_bytes())
    return copy


def test_load_run_restores_model_task_config_and_metrics(run):
    loaded = load_run(run.path)
    assert loaded.step == 8 and loaded.finished
    assert not loaded.model.training
    for (name, a), b in zip(run.model.state_dict().items(), loaded.model.state_dict().values(), strict=True):
        assert torch.equal(a.cpu(), b), name
    for split in run.task.splits:
        np.testing.assert_array_equal(loaded.task.compositions(split), run.task.compositions(split))
    assert loaded.config.model == run.config.model and loaded.config.train == run.config.train
    assert loaded.metrics == run.metrics
    assert loaded.checkpoint_hash == run.checkpoint_hash == file_hash(run.path / MODEL_FILE)
    assert re.fullmatch(r"[0-9a-f]{16}", loaded.checkpoint_hash)
    x = run.task.sample(4, "test", seed=0).x
    torch.testing.assert_close(loaded.model(x), run.model(x), rtol=0, atol=0)


def test_a_run_saved_elsewhere_loads_back_identically(run, tmp_path):
    copy = load_run(run.path).save(tmp_path / "export")
    again = load_run(tmp_path / "export")
    assert again.checkpoint_hash == copy.checkpoint_hash and again.step == run.step
    assert again.metrics == run.metrics and again.config.differences(run.config) == []
    for a, b in zip(run.model.state_dict().values(), again.model.state_dict().values(), strict=True):
        assert torch.equal(a.cpu(), b)


def test_a_run_directory_is_named_run_dir_and_the_old_path_keyword_is_gone(run, tmp_path):
    copy = run.save(run_dir=tmp_path / "copy")
    again = load_run(run_dir=tmp_path / "copy")
    also = Run.load(run_dir=tmp_path / "copy")
    assert copy.checkpoint_hash == again.checkpoint_hash == also.checkpoint_hash == run.checkpoint_hash
    for old in (lambda: run.save(path=tmp_path / "other"), lambda: load_run(path=tmp_path / "copy"),
                lambda: Run.load(path=tmp_path / "copy")):
        with pytest.raises(TypeError, match="path|run_dir"):  # Python's own message, or the type checker's
            old()
    assert load_run(run_dir=tmp_path / "copy").path == tmp_path / "copy"


def test_config_json_carries_kind_version_and_exact_splits(run):
    data = json.loads((run.path / CONFIG_FILE).read_text())
    assert data["kind"] == RUN_KIND and data["version"]
    assert set(data) == {"kind", "version", "model", "task", "train"}
    assert data["task"]["compositions"]["ood"] == run.task.compositions("ood").tolist()
    assert RunConfig.from_dict(data).differences(run.config) == []


def test_only_a_config_from_a_newer_release_warns(run, caplog):
    data = json.loads((run.path / CONFIG_FILE).read_text())
    with caplog.at_level("WARNING", logger="latentcode"):
        RunConfig.from_dict({**data, "version": "0.1.0"})  # older files load through the migrations, quietly
        assert not caplog.records
        RunConfig.from_dict({**data, "version": "99.0.0"})
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert "written by latentcode 99.0.0" in caplog.text and "upgrade latentcode" in caplog.text


def test_optimizer_and_rng_state_round_trip(run, tmp_path):
    model = Transformer(run.config.model)
    opt = build_optimizer(model, run.config.train, torch.device("cpu"))
    state = load_checkpoint(run.path, model, opt)
    assert state.step == 8 and state.finished
    out = tmp_path / "again"
    out.mkdir()
    save_checkpoint(
        out, model, opt, TrainState(step=8, finished=True, metrics_lines=0, pending_losses=[], elapsed_s=0.0)
    )
    model2 = Transformer(run.config.model)
    opt2 = build_optimizer(model2, run.config.train, torch.device("cpu"))
    load_checkpoint(out, model2, opt2)
    for (name, p), q in zip(model.named_parameters(), model2.parameters(), strict=True):
        assert opt.state[p].keys() == opt2.state[q].keys() == {"step", "exp_avg", "exp_avg_sq"}
        for key in opt.state[p]:
            assert torch.equal(opt.state[p][key], opt2.state[q][key]), (name, key)
    assert opt2.param_groups[0]["betas"] == tuple(run.config.train.adam_betas)


def test_rng_state_round_trips_through_json():
    state = json.loads(json.dumps(capture_rng()))
    expected = (random.random(), np.random.rand(), torch.rand(1).item())
    restore_rng(state)
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == expected


def test_missing_run_directory_names_the_path_and_how_to_train(tmp_path):
    with pytest.raises(FileNotFoundError, match="no run at .*nowhere.*latentcode train"):
        load_run(tmp_path / "nowhere")


def test_missing_model_file_is_named(run_copy):
    (run_copy / MODEL_FILE).unlink()
    with pytest.raises(FileNotFoundError, match=f"missing {MODEL_FILE}"):
        load_run(run_copy)


def test_truncated_model_file_is_reported_as_corrupt(run_copy):
    data = (run_copy / MODEL_FILE).read_bytes()
    (run_copy / MODEL_FILE).write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=f"{MODEL_FILE} cannot be read.*truncated"):
        load_run(run_copy)


def test_foreign_config_kind_is_rejected(run_copy):
    data = json.loads((run_copy / CONFIG_FILE).read_text())
    data["kind"] = "sae_lens.sae"
    (run_copy / CONFIG_FILE).write_text(json.dumps(data))
    with pytest.raises(CheckpointError, match="not a latentcode run config: kind='sae_lens.sae'"):
        load_run(run_copy)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        pytest.param(
            "d_mlp", 48, r"shape mismatch .*fc_in.weight: file \(64, 32\) vs config \(48, 32\)", id="shape"
        ),
        pytest.param("n_layers", 3, "missing keys.*blocks.2", id="missing-keys"),
        pytest.param("n_layers", 1, "unexpected keys.*blocks.1", id="unexpected-keys"),
    ],
)
def test_weights_that_do_not_match_the_config_are_rejected(run_copy, field, value, message):
    data = json.loads((run_copy / CONFIG_FILE).read_text())
    data["model"][field] = value
    (run_copy / CONFIG_FILE).write_text(json.dumps(data))
    with pytest.raises(CheckpointError, match=f"{MODEL_FILE} does not match.*{message}"):
        load_run(run_copy)


def test_invalid_config_json_is_reported(run_copy):
    (run_copy / CONFIG_FILE).write_text('{"kind": ')
    with pytest.raises(CheckpointError, match=f"{CONFIG_FILE} is not valid JSON"):
        load_run(run_copy)


def test_checkpoint_files_from_different_steps_are_detected(run, run_copy):
    meta = json.loads((run_copy / TRAIN_STATE_META_FILE).read_text())
    meta["step"] = 4
    atomic_write_json(run_copy / TRAIN_STATE_META_FILE, meta)
    model = Transformer(run.config.model)
    with pytest.raises(CheckpointError, match="disagree"):
        load_checkpoint(run_copy, model, build_optimizer(model, run.config.train, torch.device("cpu")))


def test_metrics_truncation_and_half_written_lines(tmp_path):
    append_metrics(tmp_path, [{"step": i} for i in range(4)])
    with open(tmp_path / METRICS_FILE, "a") as f:
        f.write('{"step": 4, "lo')  # a process killed mid-line
    assert [r["step"] for r in read_metrics(tmp_path)] == [0, 1, 2, 3]
    truncate_metrics(tmp_path, 2)
    assert (tmp_path / METRICS_FILE).read_text() == '{"step": 0}\n{"step": 1}\n'
    with pytest.raises(CheckpointError, match="has 2 lines but the checkpoint recorded 5"):
        truncate_metrics(tmp_path, 5)


def test_training_speed_reads_train_rows_only_and_skips_rows_a_resume_repeated(tmp_path):
    """`train_rows` + `step_rates`, which `cpu_campaign.py status` and bench/train_rate.py time runs with: only train
    rows with training time count (an evaluation row has none), and a row that a resume wrote again (same step, same
    or earlier elapsed_s) gives no rate instead of a division by zero or a negative speed."""
    append_metrics(tmp_path, [
        {"step": 100, "split": "train", "loss": 1.0, "elapsed_s": 10.0},
        {"step": 100, "split": "ood", "accuracy": 0.5},
        {"step": 300, "split": "train", "loss": 0.9, "elapsed_s": 20.0},
        {"step": 300, "split": "train", "loss": 0.9, "elapsed_s": 20.0},  # repeated after a resume
        {"step": 400, "split": "train", "loss": 0.8},  # a row from before elapsed_s was logged
        {"step": 700, "split": "train", "loss": 0.7, "elapsed_s": 120.0},
    ])
    rows = train_rows(tmp_path)
    assert [r["step"] for r in rows] == [100, 300, 300, 700]
    assert step_rates(rows) == [pytest.approx(200 / 10), pytest.approx(400 / 100)]
    assert train_rows(tmp_path / "absent") == [] and step_rates([]) == []


def test_recent_speed_is_the_median_rate_of_the_last_window_so_one_paused_interval_does_not_lower_it():
    """`recent_speed`, which `cpu_campaign.py status` prices the queue with and docs/lane_speeds_table.py reads each
    shipped lane's end speed with: 10 steps/s throughout, except one interval stretched tenfold by a SIGSTOP."""
    elapsed = [0.0, 100.0, 200.0, 300.0, 1300.0, 1400.0, 1500.0]  # 300 -> 1300: 1,000 steps in 1,000 s
    rows = [{"step": 1000 * i, "elapsed_s": t} for i, t in enumerate(elapsed)]
    assert recent_speed(rows) == (6000, pytest.approx(10.0))  # rates 10, 10, 10, 1, 10, 10: median 10
    # a window of 150 s holds only the last two rows (1400, 1500): 1,000 steps in 100 s
    assert recent_speed(rows, window_s=150.0) == (6000, pytest.approx(10.0))
    # a window of 50 s holds one row: the last two rows still give a speed
    assert recent_speed(rows[:5], window_s=50.0) == (4000, pytest.approx(1.0))
    assert recent_speed(rows[:1]) is None and recent_speed([]) is None
    assert recent_speed([rows[0], dict(rows[0])]) is None  # a row repeated by a resume: no advancing pair


def test_atomic_writes_leave_no_temp_files_and_readable_permissions(run):
    assert not list(run.path.glob(".*"))
    assert (run.path / MODEL_FILE).stat().st_mode & 0o044  # group/other may read, as with open()


FORBIDDEN = re.compile(
    r"^\s*(import|from)\s+c?[pP]ickle\b|(?<![\w.])torch\.load\(|allow_pickle\s*=\s*True", re.M
)


def test_no_pickle_anywhere_in_the_packages():
    offenders = []
    for package in ("latentcode", "probes"):
        for path in (ROOT / package).rglob("*.py"):
            offenders += [
                f"{path.relative_to(ROOT)}: {m.group(0)}" for m in FORBIDDEN.finditer(path.read_text())
            ]
    assert offenders == []


@pytest.mark.parametrize(
    "line",
    [
        "import pickle",
        "from pickle import loads",
        "state = torch.load(path)",
        "np.load(f, allow_pickle=True)",
    ],
)
def test_the_pickle_scan_catches_each_forbidden_form(line):
    assert FORBIDDEN.search(f"x = 1\n{line}\n")


# ------------------------------------------------------------------------------------ runs of earlier releases
OLD_RUN = Path(__file__).parents[1] / "data" / "run_v0.1.0"


def test_a_run_written_by_release_0_1_0_still_loads_evaluates_and_decodes(tmp_path):
    """tests/data/run_v0.1.0 was written by latentcode 0.1.0, before the vocabulary renames (see its README)."""
    import shutil

    from latentcode.pipelines.analysis import decode_run
    from latentcode.pipelines.run_codes import load_codes
    from latentcode.training.evaluate import evaluate

    run_dir = tmp_path / "old"
    shutil.copytree(OLD_RUN, run_dir)
    run = load_run(run_dir)
    assert (run.step, run.config.model.variant, run.config.model.n_layers, run.task.name) == (4, "hyla", 2, "sraven")
    recorded = {r["split"]: r for r in run.metrics if r.get("split") == "test"}["test"]
    again = evaluate(run.model, run.task, splits=("test",), n_samples=16, seed=run.config.train.seed)
    assert again["test"]["loss"] == pytest.approx(recorded["loss"], rel=1e-5)  # same weights, same eval batch
    codes = load_codes(run_dir)
    assert codes.n_samples == 72 and codes.layer_names == [0, 1]
    result, _ = decode_run(run_dir, progress=False)
    assert result.layer_names == ["0", "1", "all"] and result.baselines["ood"].n_samples == 24
