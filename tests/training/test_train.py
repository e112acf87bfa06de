"""Tests of latentcode/training/train.py: schedule, weight-decay mask, the loop's outputs, resume, NaN and
Ctrl-C."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import safetensors.torch
import torch

from latentcode.config import TrainConfig, model_config, train_config
from latentcode.constants import METRICS_FILE, MODEL_FILE, TRAIN_STATE_FILE
from latentcode.model.transformer import Transformer
from latentcode.rundir.checkpoint import Run, read_metrics
from latentcode.rundir.weights import list_snapshots
from latentcode.tasks import get_task
from latentcode.training.diagnostics import LIVE_KEY
from latentcode.training.evaluate import eval_seed, evaluate
from latentcode.training.optim import build_optimizer, decay_mask, lr_at
from latentcode.training.record import NonFiniteLossError
from latentcode.training.train import train
from latentcode.training.train_state import read_train_state
from latentcode.training.train_step import resolve_device, step_seeds

TIMING_FIELDS = ("samples_per_s", "elapsed_s")


def tiny(variant: str = "softmax", task_name: str = "fuzzy_logic", **train_overrides):
    """(model config, task, train config) of a tiny run; tiny presets: 40 steps of 32, eval at 20 and 40."""
    task = get_task(task_name)
    return model_config(task, variant, "tiny"), task, train_config(task_name, "tiny", **train_overrides)


def without_timing(records: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in TIMING_FIELDS} for r in records]


def tensors(path: Path) -> dict[str, torch.Tensor]:
    return safetensors.torch.load_file(str(path))


def assert_same_tensors(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny models train fastest on one thread, and a busy machine makes two threads crawl."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, one_thread):
    mcfg, task, tcfg = tiny("hyla")
    return train(mcfg, task, tcfg, tmp_path_factory.mktemp("run") / "hyla", progress=False)


# ------------------------------------------------------------------------------------------------ schedule
def test_optax_lr_starts_at_zero_spans_steps_minus_two_warmups_then_holds_the_floor():
    """The default schedule is optax's warmup_cosine_decay_schedule at the optimizer count k = step - 1."""
    cfg = TrainConfig(steps=120, warmup=10, lr=2e-3, min_lr_ratio=0.1)
    assert cfg.lr_schedule == "optax"
    assert [lr_at(s, cfg) for s in (1, 6, 11)] == pytest.approx([0.0, 1e-3, 2e-3])
    # the cosine runs over k = 10 .. 110 (steps - 2 * warmup = 100 updates): halfway at k = 60, i.e. step 61
    assert lr_at(61, cfg) == pytest.approx(2e-4 + 0.5 * (2e-3 - 2e-4))
    assert [lr_at(s, cfg) for s in (111, 115, 120)] == pytest.approx([2e-4] * 3)  # the floor for the last warmup
    assert lr_at(110, cfg) > 2e-4


def test_an_optax_run_of_at_most_two_warmups_holds_the_floor_after_warming_up():
    cfg = TrainConfig(steps=20, warmup=10, lr=1.0, min_lr_ratio=0.1)
    assert [lr_at(s, cfg) for s in (1, 10, 11, 20)] == pytest.approx([0.0, 0.9, 0.1, 0.1])


def test_configs_written_before_the_schedule_field_keep_the_v01_schedule():
    old = TrainConfig(steps=110, warmup=10).to_dict()
    del old["lr_schedule"]
    assert TrainConfig.from_dict(old).lr_schedule == "v0.1"
    assert TrainConfig.from_dict(TrainConfig(steps=110, warmup=10).to_dict()).lr_schedule == "optax"


def test_v01_lr_warms_up_linearly_then_decays_by_cosine_to_the_floor():
    cfg = TrainConfig(steps=110, warmup=10, lr=2e-3, min_lr_ratio=0.1, lr_schedule="v0.1")
    assert [lr_at(s, cfg) for s in (1, 5, 10)] == pytest.approx([2e-4, 1e-3, 2e-3])
    assert lr_at(60, cfg) == pytest.approx(2e-4 + 0.5 * (2e-3 - 2e-4))  # halfway through the cosine
    assert lr_at(110, cfg) == pytest.approx(2e-4)  # the floor, reached at the last step
    decay = [lr_at(s, cfg) for s in range(10, 111)]
    assert all(a >= b for a, b in zip(decay, decay[1:], strict=False))
    assert min(lr_at(s, cfg) for s in range(1, 111)) > 0


def test_lr_without_warmup_starts_at_peak_and_rejects_steps_outside_the_run():
    cfg = TrainConfig(steps=100, warmup=0, lr=1.0, min_lr_ratio=0.0, lr_schedule="v0.1")
    assert lr_at(1, cfg) == pytest.approx(0.5 * (1 + math.cos(math.pi / 100)))
    assert lr_at(100, cfg) == pytest.approx(0.0)
    optax = TrainConfig(steps=100, warmup=0, lr=1.0, min_lr_ratio=0.0)
    assert lr_at(1, optax) == 1.0 and lr_at(100, optax) == pytest.approx(0.5 * (1 + math.cos(math.pi * 99 / 100)))
    with pytest.raises(ValueError, match="step=0"):
        lr_at(0, cfg)
    with pytest.raises(ValueError, match="step=101"):
        lr_at(101, cfg)


# ------------------------------------------------------------------------------------------- decay mask
@pytest.fixture(scope="module")
def hyla_model():
    return Transformer(model_config(get_task("fuzzy_logic"), "hyla", "tiny"))


def test_reference_decay_mask_decays_every_parameter_with_two_or_more_dims(hyla_model):
    mask = decay_mask(hyla_model, "ndim>=2")
    decayed = {n for n, d in mask.items() if d}
    assert {"blocks.0.attn.W_Q", "blocks.0.attn.W_O", "embed.weight", "unembed.weight"} <= decayed
    # the reference's quirks (spec §3.2): q/k/v biases and position tables decay too
    assert {"blocks.0.attn.b_Q", "blocks.0.attn.b_V", "blocks.0.attn.position_bias.weight"} <= decayed
    assert not decayed & {
        "blocks.0.attn.b_O",
        "blocks.0.ln1.weight",
        "blocks.0.ln1.bias",
        "embed.bias",
        "blocks.0.mlp.fc_in.bias",
        "ln_final.weight",
    }
    assert decayed == {n for n, p in hyla_model.named_parameters() if p.ndim >= 2}


def test_weights_decay_mask_decays_projection_matrices_only(hyla_model):
    mask = decay_mask(hyla_model, "weights")
    decayed = {n for n, d in mask.items() if d}
    assert {
        "blocks.0.attn.W_Q",
        "blocks.0.attn.W_K",
        "blocks.0.attn.W_V",
        "blocks.0.attn.W_O",
        "blocks.0.mlp.fc_in.weight",
        "embed.weight",
        "unembed.weight",
    } <= decayed
    assert not any(".b_" in n or n.endswith(".bias") or "ln" in n or "position" in n for n in decayed)


def test_unknown_decay_mask_is_rejected(hyla_model):
    with pytest.raises(ValueError, match="'ndim>=2', 'weights'"):
        decay_mask(hyla_model, "all")


def test_optimizer_groups_follow_the_mask(hyla_model):
    cfg = TrainConfig(weight_decay=0.3, decay_mask="weights", adam_betas=(0.8, 0.95), adam_eps=1e-7)
    opt = build_optimizer(hyla_model, cfg, torch.device("cpu"))
    mask = decay_mask(hyla_model, "weights")
    names = {id(p): n for n, p in hyla_model.named_parameters()}
    for group in opt.param_groups:
        assert {mask[names[id(p)]] for p in group["params"]} == {group["weight_decay"] > 0}
        assert group["betas"] == (0.8, 0.95) and group["eps"] == 1e-7
    assert sum(len(g["params"]) for g in opt.param_groups) == len(names)


# ---------------------------------------------------------------------------------------- small pieces
def test_step_seeds_depend_on_seed_rank_and_step_only():
    assert step_seeds(0, 0, 5) == step_seeds(0, 0, 5)
    seeds = {step_seeds(s, r, t) for s in (0, 1) for r in (0, 1) for t in (1, 2)}
    assert len(seeds) == 8
    assert all(0 <= x < 2**63 for pair in seeds for x in pair)


@pytest.mark.parametrize(
    ("cuda", "mps", "request_", "local_rank", "expected"),
    [
        pytest.param(False, False, "auto", 0, "cpu", id="auto-cpu"),
        pytest.param(True, False, "auto", 0, "cuda:0", id="auto-cuda"),
        pytest.param(True, True, "auto", 3, "cuda:3", id="auto-cuda-before-mps-local-rank"),
        pytest.param(False, True, "auto", 0, "mps", id="auto-mps"),
        pytest.param(True, False, "cuda", 2, "cuda:2", id="cuda-takes-the-local-rank"),
        pytest.param(True, False, "cuda:1", 2, "cuda:1", id="explicit-index-wins"),
        pytest.param(True, True, "cpu", 0, "cpu", id="cpu-on-request"),
    ],
)
def test_resolve_device_on_every_kind_of_host(monkeypatch, cuda, mps, request_, local_rank, expected):
    """Both branches run on any machine: the accelerators' availability is what the host would report."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)
    assert resolve_device(request_, local_rank=local_rank) == torch.device(expected)


def test_devices_the_host_lacks_and_unknown_devices_are_rejected(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    with pytest.raises(ValueError, match="CUDA is not available"):
        resolve_device("cuda")
    with pytest.raises(ValueError, match="MPS is not available"):
        resolve_device("mps")
    with pytest.raises(ValueError, match="unknown device 'gpu0'"):
        resolve_device("gpu0")


@pytest.mark.gpu
def test_training_on_cuda_matches_its_own_evaluation_on_the_cpu(tmp_path):
    mcfg, task, tcfg = tiny("hyla", steps=6, warmup=1, eval_every=6, log_every=3, device="cuda")
    run = train(mcfg, task, tcfg, tmp_path / "gpu", progress=False)
    assert next(run.model.parameters()).device.type == "cuda"
    on_cpu = evaluate(run.model.cpu(), task, n_samples=tcfg.eval_samples, seed=tcfg.seed)
    for split in ("test", "ood"):
        logged = run.eval_metrics(split)
        assert on_cpu[split]["loss"] == pytest.approx(logged["loss"], rel=1e-3)  # TF32 on the GPU


# ------------------------------------------------------------------------------------------------- the loop
def test_training_reduces_the_loss(tiny_run):
    losses = [m["loss"] for m in tiny_run.metrics if m["split"] == "train"]
    assert losses[-1] < 0.5 * losses[0]


def test_metrics_jsonl_has_train_and_eval_lines(tiny_run):
    lines = (tiny_run.path / METRICS_FILE).read_text().splitlines()
    records = [json.loads(line) for line in lines]
    train_lines = [r for r in records if r["split"] == "train"]
    assert [r["step"] for r in train_lines] == [10, 20, 30, 40]
    for r in train_lines:
        assert set(r) == {"step", "split", "loss", "lr", "samples_per_s", "elapsed_s"}
        assert r["samples_per_s"] > 0 and r["elapsed_s"] > 0
    assert train_lines[-1]["lr"] == pytest.approx(lr_at(40, tiny_run.config.train))
    evals = [(r["step"], r["split"]) for r in records if r["split"] != "train"]
    assert evals == [(20, "test"), (20, "ood"), (40, "test"), (40, "ood")]
    for r in records:
        if r["split"] == "test":
            assert set(r) == {"step", "split", "loss", "r2"}
        elif r["split"] == "ood":  # the held-out evaluation also records the value-network live fraction
            assert set(r) == {"step", "split", "loss", "r2", LIVE_KEY}
            assert len(r[LIVE_KEY]) == tiny_run.config.model.n_layers
    assert tiny_run.metrics == records


def test_train_returns_the_run_in_eval_mode_with_its_checkpoint(tiny_run):
    assert tiny_run.step == 40 and tiny_run.finished
    assert not tiny_run.model.training
    state = read_train_state(tiny_run.path)
    assert state.finished and state.step == 40 and state.model_hash == tiny_run.checkpoint_hash
    saved = tensors(tiny_run.path / MODEL_FILE)
    assert_same_tensors(saved, {k: v.cpu() for k, v in tiny_run.model.state_dict().items()})


def test_evaluate_reproduces_the_final_evaluation(tiny_run):
    cfg = tiny_run.config.train
    results = evaluate(tiny_run.model, tiny_run.task, n_samples=cfg.eval_samples, seed=cfg.seed)
    for split in ("test", "ood"):
        logged = {k: v for k, v in tiny_run.eval_metrics(split).items() if k not in ("step", "split", LIVE_KEY)}
        assert results[split] == pytest.approx(logged, rel=1e-6)


def test_sraven_training_logs_accuracy(tmp_path):
    mcfg, task, tcfg = tiny(
        "softmax", "sraven", steps=6, warmup=2, eval_every=6, eval_samples=64, log_every=3
    )
    run = train(mcfg, task, tcfg, tmp_path / "sraven", progress=False)
    ood = run.eval_metrics("ood")
    assert ood["step"] == 6
    # recompute from the logits: the fixed ood eval batch, argmax at the 4 query positions (the last 4)
    batch = task.sample(64, "ood", seed=eval_seed(tcfg.seed, "ood"))
    with torch.no_grad():
        predicted = run.model.eval()(batch.x)[:, -task.config.n_features :].argmax(dim=-1)
    correct = predicted == batch.y
    assert ood["acc"] == pytest.approx(correct.all(dim=-1).float().mean().item())
    assert ood["acc_per_feature"] == pytest.approx(correct.float().mean().item())


# ----------------------------------------------------------------------------------------------- out dir
def test_out_dir_holding_a_run_is_refused_unless_resume_or_force(tiny_run, tmp_path):
    mcfg, task, tcfg = tiny("hyla")
    with pytest.raises(ValueError, match="already holds a run.*--resume.*--force"):
        train(mcfg, task, tcfg, tiny_run.path, progress=False)
    other = tmp_path / "notes"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="not empty and holds no latentcode run"):
        train(mcfg, task, tcfg, other, progress=False)
    assert (other / "notes.txt").read_text() == "mine"


def test_resume_with_another_config_is_refused_and_names_the_difference(tiny_run):
    mcfg, task, tcfg = tiny("hyla", lr=3e-3)
    with pytest.raises(ValueError, match=r"train\.lr: 0\.001 != 0\.003"):
        train(mcfg, task, tcfg, tiny_run.path, resume=True, progress=False)


def test_resuming_a_finished_run_returns_it_unchanged(tiny_run):
    mcfg, task, tcfg = tiny("hyla")
    before = (tiny_run.path / METRICS_FILE).read_text()
    run = train(mcfg, task, tcfg, tiny_run.path, resume=True, progress=False)
    assert run.step == 40 and run.checkpoint_hash == tiny_run.checkpoint_hash
    assert (tiny_run.path / METRICS_FILE).read_text() == before


def test_force_starts_over(tmp_path):
    mcfg, task, tcfg = tiny("linear", steps=4, warmup=1, log_every=2, eval_every=4)
    first = train(mcfg, task, tcfg, tmp_path / "r", progress=False)
    (tmp_path / "r" / "keep.txt").write_text("not ours")
    again = train(mcfg, task, tcfg, tmp_path / "r", force=True, progress=False)
    assert again.checkpoint_hash == first.checkpoint_hash  # same seed, same run
    assert len(again.metrics) == len(first.metrics)  # the old metrics were replaced, not appended to
    assert (tmp_path / "r" / "keep.txt").exists()


def test_force_refuses_a_folder_without_a_run_and_leaves_it_unchanged(tmp_path):
    mcfg, task, tcfg = tiny("linear", steps=4, warmup=1, log_every=2, eval_every=4)
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "config.json").write_text('{"my": "settings"}')
    (folder / "metrics.jsonl").write_text("my own metrics\n")
    with pytest.raises(ValueError, match="--force refused: .*holds no latentcode run"):
        train(mcfg, task, tcfg, folder, force=True, progress=False)
    assert (folder / "config.json").read_text() == '{"my": "settings"}'
    assert (folder / "metrics.jsonl").read_text() == "my own metrics\n"


# ------------------------------------------------------------------------------------ NaN and interrupts
def test_nan_loss_stops_naming_the_step_and_keeps_the_last_good_checkpoint(tmp_path):
    mcfg, task, tcfg = tiny("softmax", log_every=5, checkpoint_every=10)
    calls = {"n": 0}
    real_loss = task.loss

    def loss(outputs, batch):  # the loss of step 23 onwards is NaN
        calls["n"] += 1
        value = real_loss(outputs, batch)
        return value * float("nan") if calls["n"] >= 23 else value

    task.loss = loss
    with pytest.raises(NonFiniteLossError, match="nan at step 23.*checkpoint \\(step 20\\)") as info:
        train(mcfg, task, tcfg, tmp_path / "nan", progress=False)
    assert info.value.step == 23
    state = read_train_state(tmp_path / "nan")
    assert state.step == 20 and not state.finished
    weights = tensors(tmp_path / "nan" / MODEL_FILE)
    assert all(torch.isfinite(t).all() for t in weights.values())
    assert all(r["step"] <= 20 for r in read_metrics(tmp_path / "nan") if r["split"] == "train")


def test_ctrl_c_writes_a_checkpoint_and_resume_matches_an_uninterrupted_run(tmp_path):
    mcfg, task, tcfg = tiny("hyla", steps=24, log_every=4, checkpoint_every=10, eval_every=12)
    straight = train(mcfg, task, tcfg, tmp_path / "straight", progress=False)

    calls = {"n": 0}
    real_loss = task.loss

    def loss(outputs, batch):  # Ctrl-C arrives during step 13
        calls["n"] += 1
        if calls["n"] == 13:
            signal.raise_signal(signal.SIGINT)
        return real_loss(outputs, batch)

    task.loss = loss
    with pytest.raises(KeyboardInterrupt):
        train(mcfg, task, tcfg, tmp_path / "cut", progress=False)
    assert read_train_state(tmp_path / "cut").step == 13
    del task.loss
    resumed = train(mcfg, task, tcfg, tmp_path / "cut", resume=True, progress=False)
    assert_same_tensors(tensors(straight.path / MODEL_FILE), tensors(resumed.path / MODEL_FILE))
    assert without_timing(resumed.metrics) == without_timing(straight.metrics)


# ------------------------------------------------------------------------------------- resume after SIGKILL
def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "latentcode", "-q", *args]


ONE_THREAD_ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


@pytest.mark.slow
def test_resume_after_sigkill_is_bitwise_identical_to_a_straight_run(tmp_path):
    steps, every = 150, 10
    args = [
        "train",
        "fuzzy_logic",
        "--model",
        "hyla",
        "--preset",
        "tiny",
        "--steps",
        str(steps),
        "--checkpoint-every",
        str(every),
        "--train.log_every=4",
        "--train.eval_every=100",
        "--train.warmup=10",
        "--no-progress",
    ]
    cut = tmp_path / "cut"
    proc = subprocess.Popen(
        _cli(*args, "--out", str(cut)), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ONE_THREAD_ENV
    )
    deadline = time.monotonic() + 120
    state = None
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            state = read_train_state(cut)
        except (ValueError, OSError):  # caught mid-rename; look again
            state = None
        if state is not None and state.step >= 2 * every:
            break
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()
    killed_at = read_train_state(cut).step
    assert every <= killed_at < steps

    resumed = subprocess.run(
        _cli(*args, "--out", str(cut), "--resume"), capture_output=True, text=True, env=ONE_THREAD_ENV
    )
    assert resumed.returncode == 0, resumed.stderr

    mcfg, task, tcfg = tiny(
        "hyla", steps=steps, checkpoint_every=every, log_every=4, eval_every=100, warmup=10
    )
    straight = train(mcfg, task, tcfg, tmp_path / "straight", progress=False)
    assert_same_tensors(tensors(cut / MODEL_FILE), tensors(straight.path / MODEL_FILE))
    assert_same_tensors(tensors(cut / TRAIN_STATE_FILE), tensors(straight.path / TRAIN_STATE_FILE))
    assert without_timing(read_metrics(cut)) == without_timing(straight.metrics)
    assert not list(cut.glob(".*.tmp"))


# ------------------------------------------------------------------------------------------------- time limit
def test_time_limit_stops_with_a_checkpoint_and_resume_matches_a_straight_run(tmp_path):
    mcfg, task, tcfg = tiny("hyla", steps=6, log_every=4, checkpoint_every=10, eval_every=4, warmup=1)
    straight = train(mcfg, task, tcfg, tmp_path / "straight", progress=False)
    steps = []
    for _ in range(tcfg.steps):  # a limit of 0 s stops after every step
        run = train(mcfg, task, tcfg, tmp_path / "cut", resume=True, progress=False, time_limit=0.0)
        steps.append(run.step)
        if run.step == tcfg.steps:
            break
    assert steps == [1, 2, 3, 4, 5, 6]
    assert read_train_state(tmp_path / "cut").finished
    assert_same_tensors(tensors(straight.path / MODEL_FILE), tensors(tmp_path / "cut" / MODEL_FILE))
    assert without_timing(read_metrics(tmp_path / "cut")) == without_timing(straight.metrics)
    with pytest.raises(ValueError, match="time_limit=-1"):
        train(mcfg, task, tcfg, tmp_path / "neg", progress=False, time_limit=-1.0)


def test_a_run_started_with_autocast_resumes_with_it(tmp_path):
    # runs written before fp32 became the default say autocast=true; resuming keeps it (no config mismatch)
    mcfg, task, tcfg = tiny("softmax", steps=4, warmup=1, autocast=True)
    assert TrainConfig().autocast is False
    train(mcfg, task, tcfg, tmp_path / "old", progress=False, time_limit=0.0)
    default = train_config("fuzzy_logic", "tiny", steps=4, warmup=1)
    run = train(mcfg, task, default, tmp_path / "old", resume=True, progress=False)
    assert run.step == 4 and run.config.train.autocast is True
    assert json.loads((tmp_path / "old" / "config.json").read_text())["train"]["autocast"] is True


def test_a_run_whose_config_predates_the_reference_defaults_resumes_as_it_was_started(tmp_path):
    """A 0.1 run (no act_fn, no lr_schedule in config.json) resumes with the exact GELU and the v0.1 schedule, and
    ends bitwise where an uninterrupted 0.1-style run ends."""
    mcfg, task, tcfg = tiny("softmax", steps=6, warmup=2, log_every=2, eval_every=6, checkpoint_every=10)
    legacy_model = dataclasses.replace(mcfg, act_fn="gelu")
    legacy_train = dataclasses.replace(tcfg, lr_schedule="v0.1")
    straight = train(legacy_model, task, legacy_train, tmp_path / "straight", progress=False)
    train(legacy_model, task, legacy_train, tmp_path / "old", progress=False, time_limit=0.0)
    config = json.loads((tmp_path / "old" / "config.json").read_text())
    del config["model"]["act_fn"], config["train"]["lr_schedule"]  # as 0.1 wrote it
    (tmp_path / "old" / "config.json").write_text(json.dumps(config))
    run = train(mcfg, task, tcfg, tmp_path / "old", resume=True, progress=False)  # today's defaults requested
    assert (run.config.model.act_fn, run.config.train.lr_schedule) == ("gelu", "v0.1")
    assert_same_tensors(tensors(straight.path / MODEL_FILE), tensors(tmp_path / "old" / MODEL_FILE))
    lrs = [r["lr"] for r in read_metrics(tmp_path / "old") if r["split"] == "train"]
    assert lrs == [lr_at(s, legacy_train) for s in (2, 4, 6)]


def test_resuming_a_run_committed_to_git_and_cloned_elsewhere_continues_bitwise(tmp_path):
    """The preemptible-machine recipe (docs/campaign-log.md): commit a stopped run's resume files, clone the
    repository on another machine (new paths, new mtimes), resume there."""
    mcfg, task, tcfg = tiny("hyla", steps=8, warmup=1, log_every=2, eval_every=4, checkpoint_every=100)
    straight = train(mcfg, task, tcfg, tmp_path / "straight", progress=False)
    repo = tmp_path / "repo"
    stopped = train(mcfg, task, tcfg, repo / "in-progress" / "run", progress=False, time_limit=0.0)
    assert stopped.step == 1
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
    subprocess.run([*git, "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "-C", str(repo), "add", "-A"], check=True)
    subprocess.run([*git, "-C", str(repo), "commit", "-qm", "stash"], check=True)
    subprocess.run([*git, "clone", "-q", str(repo), str(tmp_path / "clone")], check=True)
    run = train(mcfg, task, tcfg, tmp_path / "clone" / "in-progress" / "run", resume=True, progress=False)
    assert run.step == 8
    assert_same_tensors(tensors(straight.path / MODEL_FILE), tensors(run.path / MODEL_FILE))
    assert without_timing(read_metrics(run.path)) == without_timing(straight.metrics)


def test_snapshots_keep_the_weights_of_every_evaluation_as_loadable_runs(tmp_path):
    mcfg, task, tcfg = tiny("softmax", steps=6, warmup=1, eval_every=2, checkpoint_every=100, snapshots=True)
    run = train(mcfg, task, tcfg, tmp_path / "run", progress=False)
    found = list_snapshots(run.path)
    assert [step for step, _ in found] == [2, 4, 6]
    last = Run.load(found[-1][1])
    assert last.step == 6 and last.config.to_dict() == run.config.to_dict()
    assert_same_tensors(tensors(found[-1][1] / MODEL_FILE), tensors(run.path / MODEL_FILE))
    # the snapshot of step 2 holds different weights than the final model
    assert not torch.equal(tensors(found[0][1] / MODEL_FILE)["embed.weight"], run.model.embed.weight.cpu())
    # --force removes them with the run's other files
    train(mcfg, task, dataclasses.replace(tcfg, snapshots=False), run.path, force=True, progress=False)
    assert list_snapshots(run.path) == [] and not (run.path / "snapshots").exists()


def test_the_run_directory_is_run_dir_and_the_old_out_dir_keyword_is_gone(tmp_path):
    mcfg, task, cfg = tiny(steps=2, warmup=1, eval_every=2, log_every=1)
    run = train(mcfg, task, cfg, run_dir=tmp_path / "new", progress=False)
    assert run.path == tmp_path / "new"
    with pytest.raises(TypeError, match="unexpected keyword argument 'out_dir'|missing a required argument: 'run_dir'"):
        train(mcfg, task, cfg, out_dir=tmp_path / "old", progress=False)
    assert not (tmp_path / "old").exists()
