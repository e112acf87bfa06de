"""Tests of latentcode/cli/app.py and training.py: exit codes and one-line errors, --help examples, dotted
overrides, each command."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from latentcode.cli.app import build_parser, main, split_overrides
from latentcode.cli.training import COMMANDS
from latentcode.rundir.checkpoint import load_run
from latentcode.rundir.pretrained import CHECKPOINTS_ENV
from latentcode.training.build import parse_value


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


TINY = (
    "--preset",
    "tiny",
    "--steps",
    "4",
    "--train.warmup=1",
    "--train.log_every=2",
    "--train.eval_every=4",
    "--train.eval_samples=64",
    "--no-progress",
)


@pytest.fixture(scope="module")
def trained(tmp_path_factory, one_thread):
    out = tmp_path_factory.mktemp("cli") / "run"
    assert main(["-q", "train", "fuzzy_logic", "--model", "linear", *TINY, "--out", str(out)]) == 0
    return out


# ------------------------------------------------------------------------------------------- user errors
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(
            ["train", "chess", "--model", "hyla"],
            "unknown task 'chess'; valid tasks: fuzzy_logic, sraven",
            id="unknown-task",
        ),
        pytest.param(
            ["train", "sraven", "--model", "hyper"],
            "unknown variant 'hyper'; valid variants: softmax",
            id="unknown-variant",
        ),
        pytest.param(
            ["train", "sraven", "--model", "hyla", "--preset", "huge"],
            "unknown preset 'huge'; valid presets: tiny, small, paper",
            id="unknown-preset",
        ),
        pytest.param(
            ["train", "sraven", "--model", "hyla", "--model.depth=3"],
            "unknown option(s) --model.depth; valid --model.KEY keys: act_fn, attn_dropout",
            id="unknown-model-key",
        ),
        pytest.param(
            ["train", "sraven", "--model", "hyla", "--task.frac_test=0.3"],
            "unknown option(s) --task.frac_test; valid --task.KEY keys: frac_ood",
            id="unknown-task-key",
        ),
        pytest.param(
            ["train", "sraven", "--model", "hyla", "--train.learning_rate=1"],
            "unknown option(s) --train.learning_rate; valid --train.KEY keys: adam_betas",
            id="unknown-train-key",
        ),
        pytest.param(
            ["train", "sraven", "--model", "hyla", "--task.frac_ood=2"], "frac_ood=2", id="invalid-value"
        ),
        pytest.param(
            ["train", "sraven", "--model", "hyla", "--train.lr=fast"],
            '--train.lr="fast" is not valid: lr takes a number',
            id="wrong-type",
        ),
        pytest.param(
            ["train", "sraven", "--model", "hyla", "--steps", "5", "--train.steps=6"],
            "--steps=5 and --train.steps=6 disagree",
            id="conflicting-steps",
        ),
        pytest.param(["eval", "/nonexistent/run"], "no run directory or shipped checkpoint named '/nonexistent/run'",
                     id="missing-run"),
        pytest.param(
            ["info", "nothing-here"], "'nothing-here' is neither a task (fuzzy_logic, sraven), a run directory nor a "
            "shipped checkpoint", id="unknown-info-target"
        ),
        pytest.param(
            ["eval", "/tmp", "--train.lr=1"],
            "`latentcode eval` takes no config overrides",
            id="overrides-not-taken",
        ),
        pytest.param(
            ["train", "sraven", "--model", "hyla", "--model.n_layers"],
            "--model.n_layers needs a value",
            id="override-without-value",
        ),
    ],
)
def test_user_errors_print_one_line_and_exit_2(capsys, argv, message):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert message in err
    assert "Traceback" not in err and out == ""


def test_argparse_usage_errors_exit_2(capsys):
    code, _, err = run_cli(capsys, "train", "sraven")
    assert code == 2 and "--model" in err


# ------------------------------------------------------------------------------------------------ help
@pytest.mark.parametrize(
    "command", [None] + [add.__name__[len("_add_") : -len("_parser")] for add, _ in COMMANDS]
)
def test_every_help_ends_with_an_example(capsys, command):
    code, out, _ = run_cli(capsys, *([command] if command else []), "--help")
    assert code == 0
    lines = [line for line in out.splitlines() if line.strip()]
    assert lines[-2].strip() == "example:"
    assert lines[-1].strip().startswith("latentcode ")


def test_train_help_lists_every_registered_task(capsys):
    """The help names the tasks from the preset tables (the registry would load torch); they must be the same."""
    from latentcode.tasks import TASKS

    _, out, _ = run_cli(capsys, "train", "--help")
    assert f"task: {', '.join(sorted(TASKS))}" in " ".join(out.split())


def test_every_command_is_in_the_parser():
    choices = build_parser()._subparsers._group_actions[0].choices
    assert {"train", "eval", "info", "sweep"} <= set(choices)


# ------------------------------------------------------------------------------------------- overrides
def test_dotted_overrides_take_both_spellings_and_parse_values():
    rest, found = split_overrides(
        [
            "train",
            "sraven",
            "--model.n_layers=4",
            "--train.lr",
            "3e-3",
            "--task.permute_features=false",
            "--model",
            "hyla",
        ]
    )
    assert rest == ["train", "sraven", "--model", "hyla"]
    assert found == {"model": {"n_layers": 4}, "task": {"permute_features": False}, "train": {"lr": 3e-3}}
    assert parse_value("[0.9, 0.95]") == [0.9, 0.95] and parse_value("None") is None


def test_info_for_a_task_applies_overrides_and_lists_params_and_hooks(capsys):
    code, out, _ = run_cli(
        capsys,
        "info",
        "sraven",
        "--model",
        "softmax",
        "--preset",
        "tiny",
        "--model.n_layers=3",
        "--train.lr=3e-3",
        "--task.frac_ood=0.5",
    )
    assert code == 0
    config = json.loads(out[: out.index("\nparameters:")])
    assert config["model"]["n_layers"] == 3 and config["model"]["score_norm"] == "softmax"
    assert config["train"]["lr"] == 3e-3 and config["task"]["params"]["frac_ood"] == 0.5
    assert "parameters: " in out
    assert "  blocks.2.attn.hook_pattern" in out and "  blocks.0.hook_resid_post" in out


def _info_train_config(capsys, *argv: str) -> dict:
    code, out, _ = run_cli(capsys, "info", "sraven", "--preset", "paper", *argv)
    assert code == 0
    return json.loads(out[: out.index("\nparameters:")])["train"]


def test_steps_shorter_than_the_preset_warmup_keep_the_warmup_share(capsys):
    assert _info_train_config(capsys, "--train.steps=2000")["warmup"] == 1000  # fits: unchanged
    short = _info_train_config(capsys, "--train.steps=500")
    assert short["steps"] == 500 and short["warmup"] == int(500 * 1000 / 156_250)
    assert _info_train_config(capsys, "--train.steps=500", "--train.warmup=50")["warmup"] == 50


# ----------------------------------------------------------------------------------------- commands
def test_train_writes_a_loadable_run(trained):
    run = load_run(trained)
    assert run.step == 4 and run.config.model.variant == "linear" and run.config.train.steps == 4


def test_train_default_out_dir_and_refusal_to_overwrite(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = ["train", "fuzzy_logic", "--model", "softmax", *TINY, "--seed", "3"]
    code, out, _ = run_cli(capsys, *argv)
    assert code == 0
    run = load_run(tmp_path / "runs" / "fuzzy_logic-softmax-tiny-s3")
    assert run.config.train.seed == 3 and run.task.config.seed == 3  # --seed also draws the split
    assert "test" in out and "ood" in out and "r2" in out
    code, _, err = run_cli(capsys, *argv)
    assert code == 2 and "already holds a run" in err
    code, _, err = run_cli(capsys, *argv, "--resume")
    assert code == 0


def test_eval_prints_the_metrics_of_the_final_evaluation(trained, capsys):
    code, out, _ = run_cli(capsys, "eval", str(trained), "--json")
    assert code == 0
    results = json.loads(out)["results"]
    final = {r["split"]: r for r in load_run(trained).metrics if r["split"] != "train"}
    for split in ("test", "ood"):
        assert results[split]["r2"] == pytest.approx(final[split]["r2"], rel=1e-6)
    code, out, _ = run_cli(capsys, "eval", str(trained), "--splits", "novel_terms", "--n-samples", "32")
    assert code == 0 and "novel_terms" in out


def test_info_for_a_run_prints_its_config_params_and_hooks(trained, capsys):
    code, out, _ = run_cli(capsys, "info", str(trained))
    assert code == 0
    assert '"variant": "linear"' in out and "compositions" in out and "parameters: " in out
    assert "blocks.1.attn.hook_pattern" in out


def test_broken_checkpoint_exits_2(trained, tmp_path, capsys):
    broken = tmp_path / "broken"
    broken.mkdir()
    for f in trained.iterdir():
        (broken / f.name).write_bytes(f.read_bytes())
    (broken / "model.safetensors").write_bytes(b"\x10")
    code, _, err = run_cli(capsys, "eval", str(broken))
    assert code == 2 and "model.safetensors cannot be read" in err


def test_python_dash_m_latentcode_runs_the_cli():
    result = subprocess.run(
        [sys.executable, "-m", "latentcode", "train", "sraven", "--model", "nope"],
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert result.returncode == 2
    assert result.stderr.startswith("error: unknown variant 'nope'")


def test_time_limit_stops_train_with_a_checkpoint_and_resume_finishes_it(tmp_path, capsys):
    out = tmp_path / "cut"
    args = ["-q", "train", "fuzzy_logic", "--model", "softmax", "--preset", "tiny", "--steps", "6", "--out", str(out),
            "--threads", "1", "--no-progress"]
    # the limit counts from the start of the process, which is older than 0 s: stop after the first step
    assert main([*args, "--time-limit", "0"]) == 0
    assert "stopped by --time-limit at step 1 of 6; continue with --resume" in capsys.readouterr().out
    assert load_run(out).step == 1
    assert main([*args, "--resume"]) == 0
    assert load_run(out).finished
    assert main([*args, "--resume", "--time-limit", "-5"]) == 2
    assert "--time-limit=-5.0 must be" in capsys.readouterr().err
    assert main([*args, "--resume", "--threads", "0"]) == 2


# ------------------------------------------------------------------------------- shipped checkpoints by name
REPO_CHECKPOINTS = Path(__file__).resolve().parents[2] / "checkpoints"


@pytest.fixture()
def in_empty_folder(tmp_path, monkeypatch):
    """The repository's shipped checkpoints, a fresh empty working directory, and a check that neither the
    checkpoints nor anything outside --out is written."""
    monkeypatch.delenv(CHECKPOINTS_ENV, raising=False)
    if not (REPO_CHECKPOINTS / "fuzzy_logic-hyla-s1" / "config.json").is_file():
        pytest.skip("the repository's checkpoints/ folder is not here")
    monkeypatch.chdir(tmp_path)
    before = _digest(REPO_CHECKPOINTS)
    yield tmp_path
    assert _digest(REPO_CHECKPOINTS) == before


def _digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and "in-progress" not in p.parts}


def _files(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def test_eval_takes_a_shipped_name_and_seed_and_writes_nothing_unless_told(in_empty_folder, capsys):
    code, by_name, _ = run_cli(capsys, "eval", "fuzzy_logic-hyla", "--seed", "1", "--n-samples", "64", "--json")
    assert code == 0 and _files(in_empty_folder) == []
    code, by_path, _ = run_cli(capsys, "eval", str(REPO_CHECKPOINTS / "fuzzy_logic-hyla-s1"), "--n-samples", "64",
                               "--json")
    assert code == 0
    record = json.loads(by_name)
    shipped = json.loads((REPO_CHECKPOINTS / "fuzzy_logic-hyla-s1" / "shipped.json").read_text())
    assert (record["run"], record["seed"], record["checkpoint"]) == ("fuzzy_logic-hyla-s1", 1, shipped["model_sha16"])
    assert record["results"] == json.loads(by_path)["results"]  # the name opens the same model as the path
    code, out, _ = run_cli(capsys, "eval", "fuzzy_logic-hyla", "--seed", "1", "--n-samples", "64", "--out", "ev")
    assert code == 0 and "written: ev/eval.json" in out
    assert _files(in_empty_folder) == ["ev/eval.json"]
    assert json.loads((in_empty_folder / "ev" / "eval.json").read_text())["results"] == record["results"]


def test_info_takes_a_shipped_name_and_seed_and_writes_nothing(in_empty_folder, capsys):
    code, out, _ = run_cli(capsys, "info", "fuzzy_logic-linear", "--seed", "2")
    assert code == 0 and _files(in_empty_folder) == []
    assert out.startswith(f"run: {REPO_CHECKPOINTS / 'fuzzy_logic-linear-s2'} (step ")
    shown = json.loads(out[out.index("{"): out.index("\nparameters:")])
    saved = json.loads((REPO_CHECKPOINTS / "fuzzy_logic-linear-s2" / "config.json").read_text())
    for section in ("model", "train"):  # the fields saved there (newer fields show their defaults)
        assert {key: shown[section][key] for key in saved[section]} == saved[section]
    assert shown["train"]["seed"] == 2
    assert "blocks.0.attn.hook_pattern" in out


@pytest.mark.parametrize(("argv", "folder", "stem"), [
    (["transfer", "fuzzy_logic-hyla", "--seed", "1", "--positions", "paper"], "runs/analysis/fuzzy_logic-hyla-s1/"
     "interventions", "function_transfer"),
    (["ablate", "fuzzy_logic-linear", "--method", "zero"], "runs/analysis/fuzzy_logic-linear/interventions",
     "zero_ablation"),
])
def test_transfer_and_ablate_take_a_shipped_name_and_write_under_runs_analysis(in_empty_folder, capsys, argv,
                                                                             folder, stem):
    code, out, _ = run_cli(capsys, *argv, "--n-samples", "16", "--layers", "0", "--batch-seed", "3", "--no-progress")
    assert code == 0, out
    assert _files(in_empty_folder) == [f"{folder}/{stem}.{ext}" for ext in ("csv", "json", "png")]
    saved = json.loads((in_empty_folder / folder / f"{stem}.json").read_text())
    shipped = json.loads((REPO_CHECKPOINTS / Path(folder).parent.name / "shipped.json").read_text())
    assert saved["params"]["checkpoint"] == shipped["model_sha16"] and saved["params"]["seed"] == 3
    code, _, _ = run_cli(capsys, *argv, "--n-samples", "16", "--layers", "0", "--no-progress", "--out", "mine")
    assert code == 0 and sorted(p.name for p in (in_empty_folder / "mine").iterdir()) == [
        f"{stem}.csv", f"{stem}.json", f"{stem}.png"]


def test_table_takes_shipped_names(in_empty_folder, capsys):
    names = ["fuzzy_logic-hyla", "fuzzy_logic-hyla-s1", "fuzzy_logic-hyla-s2"]
    code, out, _ = run_cli(capsys, "table", *names)
    assert code == 0
    ood = [json.loads((REPO_CHECKPOINTS / n / "shipped.json").read_text())["evaluation"]["results"]["ood"]["r2"]
           for n in names]
    assert f"| fuzzy_logic | hyla | 0, 1, 2 | {100 * sum(ood) / 3:.2f} ± " in out


def test_the_removed_shims_are_refused(capsys, tmp_path):
    from latentcode.pipelines.run_report import report_runs

    with pytest.raises(TypeError, match="unexpected keyword argument 'out'"):
        report_runs([], out=tmp_path / "report")
    code, _, err = run_cli(capsys, "transfer", "sraven-hyla", "--pairs", "paper")
    assert code == 2 and err.startswith("usage: latentcode transfer ")
    assert "--pairs was removed in 0.3.0; use --positions" in err
