"""A catalogue of bad inputs, across the command line and the Python API.

Each entry must give a clear message (it names the offending value and, where there is one, the fix), a non-zero
exit status and no traceback on the command line, and leave every file in the test's folder (the user's files,
the run, its codes) byte for byte as it was.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from latentcode.cli import main
from latentcode.config import ModelConfig, model_config, train_config
from latentcode.pipelines.analysis import decode_run, extract_run
from latentcode.tasks import get_task
from latentcode.training.train import train
from probes import LatentCodes, decode_rules


@pytest.fixture(scope="module")
def base_run(tmp_path_factory) -> Path:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        task = get_task("sraven", seed=0)
        tcfg = train_config("sraven", "tiny", steps=4, warmup=1, eval_every=4, eval_samples=32, log_every=2,
                            checkpoint_every=4)
        run_dir = tmp_path_factory.mktemp("base") / "run"
        train(model_config(task, "hyla", "tiny"), task, tcfg, run_dir, progress=False)
        extract_run(run_dir, n_samples=32, progress=False)
    finally:
        torch.set_num_threads(threads)
    return run_dir


@pytest.fixture
def world(base_run, tmp_path) -> Path:
    """tmp_path holding `run/` (a run with codes), `run2/` (another), `mine/` (user files) and `notes.txt`."""
    shutil.copytree(base_run, tmp_path / "run")
    shutil.copytree(base_run, tmp_path / "run2")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "config.json").write_text('{"my": "settings"}')
    (tmp_path / "mine" / "data.csv").write_text("1,2,3\n")
    (tmp_path / "notes.txt").write_text("my notes\n")
    (tmp_path / "run" / "codes" / "my_codes.npz").write_bytes(b"user file inside a run")
    return tmp_path


def _hashes(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:100])


def _nan_codes(run: Path) -> None:
    codes = LatentCodes.load(run / "codes" / "paper.npz")
    arrays = {"codes": codes.codes.copy(), "split": codes.split}
    arrays["codes"][3] = np.nan
    arrays.update({f"label_{k}": v for k, v in codes.labels.items()})
    np.savez(run / "codes" / "paper.npz", **arrays)


# (id, argv with {w} for the test folder, a change to make first (the "bad file"), text the message must hold)
CLI_CASES = [
    ("unknown-task", ["train", "nosuch", "--model", "hyla"], None, "unknown task 'nosuch'; valid tasks:"),
    ("unknown-variant", ["train", "sraven", "--model", "nosuch"], None, "unknown variant 'nosuch'; valid variants:"),
    ("wrong-type", ["train", "sraven", "--model", "hyla", "--train.lr=abc"], None,
     '--train.lr="abc" is not valid: lr takes a number'),
    ("unknown-override", ["train", "sraven", "--model", "hyla", "--train.speed=3"], None,
     "unknown option(s) --train.speed; valid --train.KEY keys:"),
    ("bad-shape", ["train", "sraven", "--model", "hyla", "--model.d_model=96", "--model.n_heads=5"], None,
     "is not divisible by n_heads=5"),
    ("out-is-a-file", ["train", "sraven", "--model", "hyla", "--preset", "tiny", "--out", "{w}/notes.txt"], None,
     "is a file, not a directory"),
    ("force-on-user-folder", ["train", "sraven", "--model", "hyla", "--preset", "tiny", "--out", "{w}/mine",
                              "--force"], None, "--force refused"),
    ("out-holds-user-files", ["train", "sraven", "--model", "hyla", "--preset", "tiny", "--out", "{w}/mine"], None,
     "holds no latentcode run"),
    ("extract-not-a-run", ["extract", "{w}/mine"], None, "is not a latentcode run config"),
    ("extract-unknown-split", ["extract", "{w}/run", "--splits", "train,bogus"], None, "unknown split 'bogus'"),
    ("extract-zero-samples", ["extract", "{w}/run", "--n-samples", "0"], None, "--n-samples=0 must be positive"),
    # every argument is checked before anything is copied, extracted or written
    ("extract-unknown-split-before-copy", ["extract", "{w}/run", "--splits", "train,val", "--out", "{w}/copy"], None,
     "unknown split 'val' for task 'sraven'"),
    ("extract-unknown-inputs", ["extract", "{w}/run", "--inputs", "shuffled", "--out", "{w}/copy"], None,
     "inputs='shuffled' is not an input choice of task 'sraven'; valid: unpermuted, permuted"),
    ("decode-label-before-extracting", ["decode", "{w}/run", "--label", "rules"],
     lambda w: shutil.rmtree(w / "run" / "codes"), "label='rules' cannot be decoded from sraven codes"),
    ("decode-unknown-inputs", ["decode", "{w}/run", "--inputs", "fixed_query"], None, "valid: unpermuted, permuted"),
    ("figures-unknown-inputs", ["figures", "{w}/run", "--inputs", "bogus"], None, "not an input choice"),
    ("report-unknown-inputs", ["report", "{w}/run", "--inputs", "bogus"], None, "not an input choice"),
    ("demo-unknown-inputs", ["demo", "--inputs", "bogus", "--out", "{w}/demo"], None,
     "valid: fixed_query, uniform, fixed_context"),
    ("decode-unknown-label", ["decode", "{w}/run", "--label", "nosuch"], None, "available labels"),
    ("decode-unknown-positions", ["decode", "{w}/run", "--positions", "somewhere"], None, "is not defined for task 'sraven'; valid: paper, all_features"),
    ("decode-nan-codes", ["decode", "{w}/run"], lambda w: _nan_codes(w / "run"), "NaN or infinite"),
    ("decode-truncated-codes", ["decode", "{w}/run"], lambda w: _truncate(w / "run" / "codes" / "paper.npz"),
     "not a readable latent-code file"),
    ("figures-unknown-format", ["figures", "{w}/run", "--format", "gif"], None, "formats ['gif'] not understood"),
    ("report-several-runs-no-out", ["report", "{w}/run", "{w}/run2"], None, "pass out_dir= (CLI: --out DIR)"),
    ("report-same-run-twice", ["report", "{w}/run", "{w}/run", "--out", "{w}/r"], None, "a run is given twice"),
    ("report-read-only-out", ["report", "{w}/run", "--out", "/sys/latentcode-report"], None, "/sys/latentcode-report"),
    ("eval-truncated-weights", ["eval", "{w}/run"], lambda w: _truncate(w / "run" / "model.safetensors"),
     "model.safetensors"),
    ("eval-corrupt-config", ["eval", "{w}/run"], lambda w: (w / "run" / "config.json").write_text("{nope"),
     "is not valid JSON"),
    ("eval-missing-run", ["eval", "{w}/nowhere"], None, "no run directory or shipped checkpoint named"),
    ("sweep-missing-grid", ["sweep", "{w}/grid.yaml"], None, "grid.yaml"),
    ("sweep-broken-yaml", ["sweep", "{w}/notes.yaml"], lambda w: (w / "notes.yaml").write_text("a: [1, 2\n"),
     "notes.yaml is not valid YAML"),
]


@pytest.mark.parametrize(("argv", "prepare", "message"), [pytest.param(*c[1:], id=c[0]) for c in CLI_CASES])
def test_bad_command_line_input(world, capsys, argv, prepare, message):
    if prepare is not None:
        prepare(world)
    before = _hashes(world)
    code = main([arg.format(w=world) for arg in argv])
    err = capsys.readouterr().err
    assert code != 0
    assert message in " ".join(err.split()), err
    assert "Traceback" not in err
    assert _hashes(world) == before


def test_a_bad_command_in_a_real_process_prints_one_line_and_no_traceback(world):
    before = _hashes(world)
    done = subprocess.run([sys.executable, "-m", "latentcode", "decode", str(world / "mine")], capture_output=True,
                          text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1
    assert _hashes(world) == before


# ---------------------------------------------------------------------------------------------- Python API
def _codes(**changes) -> dict:
    fields = dict(
        codes=np.random.default_rng(0).normal(size=(8, 2, 2, 1, 2)).astype(np.float32),
        labels={"rule": np.arange(8) % 4},
        split=np.array(["train"] * 4 + ["ood"] * 4),
        meta={"task": "sraven", "n_classes": 4, "layers": [0, 1]},
    )
    fields.update(changes)
    return fields


API_CASES = [
    ("codes-wrong-axes", lambda w: LatentCodes(**_codes(codes=np.zeros((8, 2, 2)))), "expected 5 axes"),
    ("codes-nan", lambda w: LatentCodes(**_codes(codes=np.full((8, 2, 2, 1, 2), np.nan))), "NaN or infinite"),
    ("labels-wrong-length", lambda w: LatentCodes(**_codes(labels={"rule": np.arange(3)})),
     "labels['rule'] has shape (3,); its first axis must be n=8"),
    ("unknown-split-name", lambda w: LatentCodes(**_codes(split=np.array(["train"] * 4 + ["valid"] * 4))),
     "unknown names ['valid']"),
    ("layer-not-extracted", lambda w: decode_rules(LatentCodes(**_codes()), layers=[5], progress=False),
     "5 is not an extracted model layer; these codes hold model layers [0, 1]"),
    ("label-missing", lambda w: decode_rules(LatentCodes(**_codes()), label="color", progress=False),
     "label='color' is not in these codes; available labels: ['rule']"),
    ("model-shape", lambda w: ModelConfig(d_in=5, d_out=1, seq_len=4, d_model=96, n_heads=5),
     "is not divisible by n_heads=5"),
    ("load-missing-codes", lambda w: LatentCodes.load(w / "mine" / "codes"), "does not exist"),
    ("extract-run-split-before-copy", lambda w: extract_run(w / "run", splits=("train", "val"), out_dir=w / "copy"),
     "unknown split 'val'"),
    ("decode-run-unknown-inputs", lambda w: decode_run(w / "run", inputs="bogus", out_dir=w / "copy"),
     "not an input choice"),
    ("train-force-user-folder", lambda w: train(ModelConfig(d_in=8, d_out=8, seq_len=36), get_task("sraven"),
                                                train_config("sraven", "tiny"), w / "mine", force=True),
     "--force refused"),
]


@pytest.mark.parametrize(("call", "message"), [pytest.param(*c[1:], id=c[0]) for c in API_CASES])
def test_bad_python_input(world, call, message):
    before = _hashes(world)
    with pytest.raises((ValueError, FileNotFoundError)) as info:
        call(world)
    assert message in str(info.value)
    assert _hashes(world) == before


@pytest.mark.parametrize("error", [KeyboardInterrupt, OSError(28, "No space left on device")],
                         ids=["interrupted", "disk-full"])
def test_an_interrupted_or_failed_write_keeps_the_old_file_and_leaves_no_temp_file(world, monkeypatch, error):
    path = world / "run" / "codes" / "paper.npz"
    before = _hashes(world)
    codes = LatentCodes.load(path)

    def fail(*args, **kwargs):
        raise error

    monkeypatch.setattr(np, "savez_compressed", fail)
    with pytest.raises(type(error) if isinstance(error, OSError) else error):
        codes.save(path)
    assert _hashes(world) == before  # the old codes are intact and no temporary file was left behind
