"""A run is opened once (`latentcode.open_run`): the command line and the demo read each file of a shipped
checkpoint once, never copy it, and keep the codes they extracted in memory.

The opens are counted with an audit hook (`sys.addaudithook`, event "open"), which sees every file Python opens,
whatever opens it (json, safetensors, numpy)."""

from __future__ import annotations

import hashlib
import json
import sys
from collections import Counter
from pathlib import Path

import pytest

import latentcode as lc
from latentcode.cli import main
from latentcode.rundir.pretrained import CHECKPOINTS_ENV, checkpoints_dir

REPO_CHECKPOINTS = Path(__file__).resolve().parents[2] / "checkpoints"

_OPENED: list[Path] | None = None
"""Paths opened while a test listens (None: nobody listens)."""


def _hook(event: str, args: tuple) -> None:
    if event == "open" and _OPENED is not None and isinstance(args[0], str | Path):
        _OPENED.append(Path(args[0]))


sys.addaudithook(_hook)  # an audit hook cannot be removed; it records only while _OPENED is a list


def _count_opens(fn, *files: Path) -> tuple[Counter, object]:
    """How many times each of `files` is opened while `fn()` runs, and what `fn` returned."""
    global _OPENED
    _OPENED = []
    try:
        value = fn()
    finally:
        opened, _OPENED = _OPENED, None
    wanted = {f.resolve(): f for f in files}
    counts = Counter({f: 0 for f in files})
    for path in opened:
        resolved = (Path.cwd() / path).resolve() if not path.is_absolute() else path.resolve()
        if resolved in wanted:
            counts[wanted[resolved]] += 1
    return counts, value


def _tree_digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture()
def repo_checkpoints(monkeypatch):
    monkeypatch.delenv(CHECKPOINTS_ENV, raising=False)
    if not (REPO_CHECKPOINTS / "sraven-linear" / "config.json").is_file():
        pytest.skip("the repository's checkpoints/ folder is not here")
    assert checkpoints_dir() == REPO_CHECKPOINTS
    return REPO_CHECKPOINTS


def test_decode_by_name_opens_config_and_weights_once(repo_checkpoints, tmp_path, capsys):
    ckpt = repo_checkpoints / "sraven-linear"
    before = _tree_digest(ckpt)
    out = tmp_path / "analysis"
    counts, code = _count_opens(
        lambda: main(["decode", "sraven-linear", "--n-samples", "24", "--out", str(out), "--no-progress"]),
        ckpt / "config.json", ckpt / "model.safetensors")
    assert code == 0, capsys.readouterr().err
    assert counts == {ckpt / "config.json": 1, ckpt / "model.safetensors": 1}
    written = json.loads((out / "codes" / "paper.decode.json").read_text())
    assert written["n_per_split"] == 24  # the sample count is recorded in the result
    assert not (out / "model.safetensors").exists() and not (out / "config.json").exists()  # nothing copied
    assert _tree_digest(ckpt) == before


def test_the_demo_opens_each_checkpoints_weights_once_and_copies_nothing(repo_checkpoints, tmp_path, capsys,
                                                                         monkeypatch):
    seeds = [repo_checkpoints / "fuzzy_logic-hyla", repo_checkpoints / "fuzzy_logic-hyla-s1"]
    files = [folder / name for folder in seeds for name in ("config.json", "model.safetensors")]
    before = {folder: _tree_digest(folder) for folder in seeds}
    monkeypatch.chdir(tmp_path)  # the default output folder is runs/demo/<task>
    counts, code = _count_opens(
        lambda: main(["demo", "--variants", "hyla", "--seeds", "0,1", "--n-samples", "24", "--embed", "pca",
                      "--no-progress"]), *files)
    assert code == 0, capsys.readouterr().err
    assert counts == {f: 1 for f in files}
    out = tmp_path / "runs" / "demo" / "fuzzy_logic"
    assert not list(out.rglob("*.safetensors")) and not list(out.rglob("config.json"))  # nothing copied
    demo = json.loads((out / "demo.json").read_text())
    assert demo["n_per_split"] == 24 and {row["n_per_split"] for row in demo["rows"]} == {24}
    summary = json.loads((out / "summary.json").read_text())["runs"]
    assert [run["summary"]["n_per_split"] for run in summary.values()] == [24, 24]
    assert {folder: _tree_digest(folder) for folder in seeds} == before
    # another task right after: its own default folder, so nothing is refused
    assert main(["demo", "--task", "sraven", "--variants", "hyla", "--n-samples", "16", "--embed", "pca",
                 "--no-progress"]) == 0, capsys.readouterr().err
    assert (tmp_path / "runs" / "demo" / "sraven" / "report.html").is_file() and (out / "report.html").is_file()


def test_open_run_parses_once_loads_lazily_and_keeps_codes(repo_checkpoints):
    run = lc.open_run("fuzzy_logic-hyla", seed=1)
    assert run.path == repo_checkpoints / "fuzzy_logic-hyla-s1" and run.seed == 1 and run.shipped
    assert run.label == "fuzzy_logic-hyla-s1"
    assert run._model is None  # nothing loaded until the model is needed
    weights = repo_checkpoints / "fuzzy_logic-hyla-s1" / "model.safetensors"
    counts, codes = _count_opens(lambda: run.codes(n_samples=16), weights)
    assert counts[weights] == 1 and codes.meta["n_per_split"] == 16
    counts, again = _count_opens(lambda: (run.codes(n_samples=16), run.model), weights)
    assert counts[weights] == 0 and again[0] is codes  # kept per reading, model loaded once
    assert run.codes(n_samples=8) is not codes  # another sample count is another reading
    assert run.checkpoint_hash == json.loads((run.files.shipped).read_text())["model_sha16"]


def test_open_run_refuses_a_seed_with_a_path_and_an_unknown_seed(repo_checkpoints):
    with pytest.raises(ValueError, match="picks a seed of a shipped checkpoint by name"):
        lc.open_run(repo_checkpoints / "sraven-hyla", seed=1)
    with pytest.raises(ValueError, match="no seed 7 of 'sraven-hyla' is shipped; shipped seeds: 0"):
        lc.open_run("sraven-hyla", seed=7)
