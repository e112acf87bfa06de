"""The command line's refusals (issue 36 §1): each says what is wrong and how to fix it, on one line, with the
subcommand's own usage for a usage error, and before torch is imported."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from latentcode.cli import main
from latentcode.rundir.pretrained import CHECKPOINTS_ENV

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _repo_checkpoints(monkeypatch):
    monkeypatch.delenv(CHECKPOINTS_ENV, raising=False)
    if not (ROOT / "checkpoints" / "sraven-hyla" / "config.json").is_file():
        pytest.skip("the repository's checkpoints/ folder is not here")


def _err(capsys) -> str:
    return capsys.readouterr().err


def test_a_typod_flag_gets_the_subcommands_usage_and_a_suggestion(capsys):
    assert main(["figures", "sraven-hyla", "--fromat", "png"]) == 2
    err = _err(capsys)
    assert err.startswith("usage: latentcode figures ")
    assert "unrecognized arguments: --fromat png; did you mean --format" in err
    assert "see `latentcode figures --help`" in err


def test_a_flag_of_another_command_is_named_with_the_closest_one(capsys):
    assert main(["decode", "sraven-hyla", "--layer", "7"]) == 2
    err = _err(capsys)
    assert err.startswith("usage: latentcode decode ") and "did you mean --label (not --layer)?" in err


def test_a_bad_sample_count_is_refused_by_the_subcommand(capsys):
    assert main(["decode", "sraven-hyla", "--n-samples", "abc"]) == 2
    err = _err(capsys)
    assert err.startswith("usage: latentcode decode ") and "argument --n-samples/--n: invalid int value: 'abc'" in err
    assert main(["figures", "sraven-hyla", "--n-samples", "0"]) == 2
    assert _err(capsys) == "error: --n-samples=0 must be positive (instances per split)\n"


def test_a_typod_name_suggests_the_shipped_names_and_the_pretrained_command(capsys):
    assert main(["decode", "sraven-hyal"]) == 2
    err = _err(capsys)
    assert err.startswith("error: no run directory or shipped checkpoint named 'sraven-hyal'; did you mean "
                          "sraven-hyla or ")
    assert "`latentcode pretrained` lists the shipped checkpoints" in err and err.count("\n") == 1


def test_a_typod_path_suggests_the_run_folders_beside_it(capsys, tmp_path):
    assert main(["report", "checkpoints/sraven-hila", "--seed", "0"]) == 2
    err = _err(capsys)
    assert "named 'checkpoints/sraven-hila'; did you mean checkpoints/sraven-hyla" in err
    folder = tmp_path / "empty"
    folder.mkdir()
    assert main(["extract", str(folder)]) == 2
    assert f"{folder} is not a run directory (no config.json)" in _err(capsys)


def test_an_out_folder_inside_checkpoints_is_refused_for_what_it_is(capsys):
    assert main(["decode", "checkpoints/sraven-hyla", "--out", "checkpoints/my-decode"]) == 2
    err = _err(capsys)
    assert "--out checkpoints/my-decode is inside the shipped checkpoints folder" in err
    assert "choose a folder outside it, e.g. --out runs/analysis/sraven-hyla" in err
    assert "Pass --out" not in err
    assert not (ROOT / "checkpoints" / "my-decode").exists()


def test_a_seed_with_a_path_and_an_unshipped_seed_are_refused(capsys):
    assert main(["decode", "sraven-hyla", "--seed", "9"]) == 2
    assert "no seed 9 of 'sraven-hyla' is shipped; shipped seeds: 0" in _err(capsys)


def test_the_demo_refuses_an_out_folder_inside_checkpoints(capsys):
    assert main(["demo", "--out", "checkpoints/demo"]) == 2
    assert "--out checkpoints/demo is inside the shipped checkpoints folder" in _err(capsys)


def test_the_report_refuses_a_causal_folder_that_is_not_there(capsys):
    assert main(["report", "sraven-hyla", "--causal", "no/such/folder"]) == 2
    err = _err(capsys)
    assert "--causal no/such/folder is not a folder" in err and "e.g. --causal results/causal" in err
    assert err.count("\n") == 1


@pytest.mark.parametrize("command", ["eval", "info", "transfer", "ablate", "emergence", "export", "table"])
def test_every_command_that_takes_a_run_suggests_the_shipped_name_for_a_typo(capsys, command, tmp_path):
    argv = [command, "fuzzy_logic-hyal"] + ([str(tmp_path / "dest")] if command == "export" else [])
    assert main(argv) == 2
    err = _err(capsys)
    assert err.startswith("error: ") and err.count("\n") == 1
    assert "did you mean fuzzy_logic-hyla" in err and "`latentcode pretrained` lists the shipped checkpoints" in err
    assert not (tmp_path / "dest").exists()


def test_info_suggests_a_task_for_a_typod_task_name(capsys):
    assert main(["info", "sravn"]) == 2
    err = _err(capsys)
    assert err == ("error: 'sravn' is neither a task (fuzzy_logic, sraven), a run directory nor a shipped checkpoint; "
                   "did you mean sraven or sraven-hyla? `latentcode pretrained` lists the shipped checkpoints\n")


@pytest.mark.parametrize("command", ["eval", "info", "transfer", "ablate"])
def test_an_unshipped_seed_is_refused_by_every_command(capsys, command):
    # the seeds the repository ships, read from its folder names: sraven-hyla is seed 0, sraven-hyla-sK seed K
    shipped = [0, *sorted(int(p.name.removeprefix("sraven-hyla-s")) for p in (ROOT / "checkpoints").glob("sraven-hyla-s*")
                          if (p / "shipped.json").is_file())]
    assert main([command, "sraven-hyla", "--seed", "9"]) == 2
    assert _err(capsys) == f"error: no seed 9 of 'sraven-hyla' is shipped; shipped seeds: {', '.join(map(str, shipped))}\n"


@pytest.mark.parametrize("command", ["eval", "transfer", "ablate"])
def test_an_out_folder_inside_checkpoints_is_refused_by_every_command(capsys, command):
    assert main([command, "fuzzy_logic-hyla", "--seed", "1", "--out", "checkpoints/mine"]) == 2
    err = _err(capsys)
    assert "--out checkpoints/mine is inside the shipped checkpoints folder" in err and err.count("\n") == 1
    assert not (ROOT / "checkpoints" / "mine").exists()


@pytest.mark.parametrize("command", ["transfer", "ablate", "extract"])
def test_the_old_batch_seed_spelling_on_a_path_points_to_batch_seed(capsys, command):
    assert main([command, "checkpoints/sraven-hyla", "--seed", "2"]) == 2
    assert _err(capsys) == ("error: --seed 2 picks a seed of a shipped checkpoint by name; checkpoints/sraven-hyla "
                            "is a run directory. The seed of the instances drawn is --batch-seed 2 (--seed before "
                            "0.3.0)\n")


def test_the_removed_pairs_option_names_its_replacement(capsys):
    assert main(["transfer", "sraven-hyla", "--pairs", "paper"]) == 2
    err = _err(capsys)
    assert err.startswith("usage: latentcode transfer ")
    assert "unrecognized arguments: --pairs paper; --pairs was removed in 0.3.0; use --positions" in err


@pytest.mark.parametrize("argv", [
    ["decode", "sraven-hyal"],
    ["eval", "sraven-hyal"],
    ["eval", "sraven-hyla", "--out", "checkpoints/x"],
    ["info", "checkpoints/sraven-hila"],
    ["info", "sraven-hyla", "--seed", "4"],
    ["transfer", "sraven-hyal"],
    ["transfer", "checkpoints/sraven-hyla", "--seed", "1"],
    ["ablate", "sraven-hyla", "--out", "checkpoints/x"],
    ["emergence", "sraven-hyla"],
    ["table", "sraven-hyal"],
    ["decode", "checkpoints/sraven-hyla", "--out", "checkpoints/x"],
    ["figures", "sraven-hyla", "--fromat", "png"],
    ["report", "sraven-hyla", "--causal", "no/such/folder"],
])
def test_every_refusal_comes_before_torch_is_imported(argv):
    code = ("import sys; from latentcode.cli import main; rc = main(sys.argv[1:]); "
            "print('torch' in sys.modules, rc)")
    out = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, cwd=ROOT,
                         env={k: v for k, v in __import__("os").environ.items() if k != CHECKPOINTS_ENV})
    assert out.stdout.split() == ["False", "2"], out.stderr


def test_the_probe_suite_refuses_too_few_samples_for_mdl_before_extracting(capsys):
    assert main(["causal", "probes", "sraven-hyla", "--n-samples", "256"]) == 2
    err = _err(capsys)
    assert err == ("error: --n-samples 256 is too few for the MDL blocks (the first is 0.1% of the rows, so it "
                   "needs at least 1000); pass --n-samples 1000 or more\n")
    assert main(["causal", "probes", "sraven-hyal"]) == 2
    assert "did you mean sraven-hyla" in _err(capsys)
