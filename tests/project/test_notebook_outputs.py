"""Notebooks reproduce their committed outputs. CI executes every notebook through nbmake at the `tiny` preset, which
checks that the cells run but compares no output; the committed outputs come from the `small` preset. This test
runs the quickstart's cells up to its training (setup, task, the shared SRAVEN recipe for HYLA and softmax) at the
committed preset in a fresh interpreter and a fresh folder, and compares what they print, character for character,
with the outputs saved in the notebook: the accuracies a reader compares their run against.

Training is seeded (model, data, dropout) and runs on one thread, so two fresh runs agree to the last digit of
every logged loss. Earlier committed HYLA numbers came from a run that a fresh one no longer matched (softmax's
did match): `resume=True` reuses a finished run folder whatever code trained it. HYLA trains through the fused numba kernel (fastmath reassociation), so a CPU with other vector
instructions than the one that made the outputs may round differently; this test would then fail on it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "01_quickstart.ipynb"
LAST_CELL = "runs = {variant: sraven_run(task, variant)"
"""The cells up to the one that trains (or loads) the two models and prints their accuracies."""


def _cells_until_training() -> list[dict]:
    cells = [c for c in json.loads(NOTEBOOK.read_text())["cells"] if c["cell_type"] == "code"]
    last = next(i for i, c in enumerate(cells) if LAST_CELL in "".join(c["source"]))
    return cells[: last + 1]


def _printed(cell: dict) -> str:
    return "".join("".join(o["text"]) for o in cell.get("outputs", ()) if o.get("output_type") == "stream"
                   and o.get("name") == "stdout")


def test_the_committed_outputs_are_printed_text_of_a_small_run():
    """The comparison below means something only if the notebook's saved outputs hold the accuracies of a `small`
    run (not a `tiny` one or none)."""
    cells = _cells_until_training()
    assert _printed(cells[0]).startswith("preset small;")
    trained = _printed(cells[-1])
    assert "hyla     step 1000: test acc" in trained and "softmax  step 1000: test acc" in trained


@pytest.mark.slow
def test_the_quickstart_reproduces_its_committed_accuracies(tmp_path):
    cells = _cells_until_training()
    code = "\n".join("".join(c["source"]).replace("%matplotlib inline", "") for c in cells)
    env = {k: v for k, v in os.environ.items() if k not in ("LATENTCODE_RUNS",)}
    env.update(LATENTCODE_PRESET="small", MPLBACKEND="agg")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(NOTEBOOK.parents[1]), env.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=3600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == "".join(_printed(c) for c in cells), (
        "notebooks/01_quickstart.ipynb does not reproduce its committed outputs; re-execute it (LATENTCODE_PRESET="
        f"small, empty runs/) and commit it, or find what changed.\nprinted now:\n{done.stdout}"
    )
