"""The run directory's files: the manifest of what latentcode wrote and what `--force` may delete (nothing else)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from latentcode.constants import CONFIG_FILE, MODEL_FILE

OLD_RUN = Path(__file__).parents[1] / "data" / "run_v0.1.0"


@pytest.fixture
def run_copy(tmp_path) -> Path:
    """A run directory (the 0.1.0 fixture's top-level files, no codes) that a test may change."""
    copy = tmp_path / "copy"
    copy.mkdir()
    for f in OLD_RUN.iterdir():
        if f.is_file():
            shutil.copy(f, copy / f.name)
    return copy


def _tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_remove_run_files_removes_only_what_latentcode_wrote(run_copy):
    from latentcode.rundir.directory import read_manifest, record_outputs, remove_run_files

    (run_copy / "codes").mkdir()
    (run_copy / "figures").mkdir()
    ours = [run_copy / "codes" / "paper.npz", run_copy / "figures" / "decoding.png"]
    for path in ours:
        path.write_bytes(b"written by latentcode")
    record_outputs(run_copy, ours + [run_copy.parent / "elsewhere.txt"])  # outside the run: not recorded
    assert read_manifest(run_copy) == ["codes/paper.npz", "figures/decoding.png"]
    user = {"codes/my_codes.npz": b"user", "figures/drawing.svg": b"user", "notes.md": b"user"}
    for name, data in user.items():
        (run_copy / name).write_bytes(data)
    removed = remove_run_files(run_copy)
    assert {p.relative_to(run_copy).as_posix() for p in removed} >= {CONFIG_FILE, MODEL_FILE, "manifest.json",
                                                                      "codes/paper.npz", "figures/decoding.png"}
    assert _tree(run_copy) == user  # every user file, byte for byte, and nothing else


def test_remove_run_files_of_a_run_without_manifest_takes_only_known_names(run_copy):
    from latentcode.rundir.directory import remove_run_files

    (run_copy / "codes").mkdir()
    (run_copy / "codes" / "paper.npz").write_bytes(b"0.1.0 codes")
    (run_copy / "codes" / "paper.decode.json").write_bytes(b"{}")
    (run_copy / "codes" / "mine.npz").write_bytes(b"user")
    remove_run_files(run_copy)
    assert _tree(run_copy) == {"codes/mine.npz": b"user"}
    with pytest.raises(ValueError, match="holds no latentcode run"):  # what is left is no run any more
        remove_run_files(run_copy)


def test_remove_run_files_removes_folders_it_emptied(run_copy):
    from latentcode.rundir.directory import remove_run_files

    (run_copy / "codes").mkdir()
    (run_copy / "codes" / "paper.npz").write_bytes(b"0.1.0 codes")
    remove_run_files(run_copy)
    assert not run_copy.joinpath("codes").exists() and _tree(run_copy) == {}


@pytest.mark.parametrize("user_file", [False, True], ids=["emptied", "holds-a-user-file"])
def test_remove_run_files_removes_the_interventions_folder_only_when_it_empties_it(run_copy, user_file):
    from latentcode.constants import INTERVENTIONS_DIR
    from latentcode.rundir.directory import record_outputs, remove_run_files

    folder = run_copy / INTERVENTIONS_DIR
    folder.mkdir()
    ours = [folder / f"mean_ablation.{ext}" for ext in ("csv", "json", "png")]
    for path in ours:
        path.write_bytes(b"written by latentcode")
    record_outputs(run_copy, ours)
    if user_file:
        (folder / "notes.md").write_bytes(b"user")
    removed = remove_run_files(run_copy)
    assert set(ours) <= set(removed)
    assert _tree(run_copy) == ({f"{INTERVENTIONS_DIR}/notes.md": b"user"} if user_file else {})
    assert folder.is_dir() == user_file


def test_a_manifest_cannot_reach_outside_its_run(run_copy, tmp_path):
    from latentcode.rundir.directory import remove_run_files

    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    (run_copy / "manifest.json").write_text(json.dumps({"kind": "latentcode.manifest", "files": ["../victim.txt"]}))
    remove_run_files(run_copy)
    assert victim.read_text() == "keep"


@pytest.mark.parametrize("marker", ["not a run", "foreign config"])
def test_force_refuses_a_folder_that_holds_no_run(tmp_path, marker):
    from latentcode.rundir.directory import check_force_target, remove_run_files

    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "results.csv").write_text("1,2")
    if marker == "foreign config":
        (folder / CONFIG_FILE).write_text('{"kind": "something else"}')
    before = _tree(folder)
    for call in (check_force_target, remove_run_files):
        with pytest.raises(ValueError, match=r"--force refused: .*data is not empty and holds no latentcode run"):
            call(folder)
    assert _tree(folder) == before
    check_force_target(tmp_path / "missing")  # a new folder is fine


def test_force_refuses_a_shipped_checkpoint(run_copy, tmp_path, monkeypatch):
    from latentcode.rundir.directory import check_force_target, is_shipped, remove_run_files

    before = _tree(run_copy)
    (run_copy / "shipped.json").write_text("{}")
    with pytest.raises(ValueError, match="shipped checkpoint.*refusing to let --force delete files from it.*--out"):
        remove_run_files(run_copy)
    (run_copy / "shipped.json").unlink()
    assert _tree(run_copy) == before
    monkeypatch.setenv("LATENTCODE_CHECKPOINTS", str(tmp_path))
    assert is_shipped(run_copy)
    with pytest.raises(ValueError, match="shipped checkpoint.*--force"):
        check_force_target(run_copy)
    repo_checkpoints = Path(__file__).resolve().parents[2] / "checkpoints" / "any-run"
    assert is_shipped(repo_checkpoints)


def test_one_guard_refuses_every_write_into_a_shipped_checkpoint(run_copy):
    import latentcode.causal.experiments
    import latentcode.rundir.pretrained
    from latentcode.rundir.directory import check_force_target, require_writable_run

    assert latentcode.rundir.pretrained.require_writable_run is require_writable_run  # re-exported, not a second guard
    assert latentcode.causal.experiments.require_writable_run is require_writable_run
    require_writable_run(run_copy)  # an ordinary run may be written into
    check_force_target(run_copy)
    (run_copy / "shipped.json").write_text("{}")
    inside = run_copy / "codes"
    for path, what in [(run_copy, "write a report into"), (inside, "write into")]:
        with pytest.raises(ValueError, match=rf"shipped checkpoint.*refusing to {what} it"):
            require_writable_run(path, what)
    with pytest.raises(ValueError) as guard:
        require_writable_run(run_copy, "let --force delete files from")
    with pytest.raises(ValueError) as force:
        check_force_target(run_copy)
    assert str(force.value) == str(guard.value)  # --force says what every other writer says
