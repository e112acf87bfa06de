"""Tests for latentcode/pipelines/emergence.py: Fig. 5F's decoding over the snapshots of a run."""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import asdict

import numpy as np
import pytest
import torch

from latentcode.codes.extract import extract_latent_codes
from latentcode.config import model_config, train_config
from latentcode.pipelines.emergence import COLUMNS, read_emergence, rule_emergence, write_emergence
from latentcode.rundir.checkpoint import Run
from latentcode.rundir.weights import list_snapshots
from latentcode.tasks import get_task
from latentcode.training.train import train
from probes.decoding.decode import decode_rules

N = 256


@pytest.fixture(scope="module")
def snap_run(tmp_path_factory):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    task = get_task("sraven", seed=0, n_features=2, permute_features=False)
    cfg = train_config("sraven", "tiny", steps=60, warmup=6, batch_size=64, eval_every=30, checkpoint_every=60,
                       snapshots=True, device="cpu")
    run = train(model_config(task, "hyla", "tiny"), task, cfg, tmp_path_factory.mktemp("runs") / "hyla",
                progress=False)
    yield run
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def rows(snap_run):
    return rule_emergence(snap_run.path, n_samples=N, progress=False)


def test_one_row_per_snapshot_and_layer_with_the_models_own_accuracy(snap_run, rows):
    assert [(r.step, r.layer) for r in rows] == [(s, layer) for s in (30, 60) for layer in ("0", "1", "all")]
    own = {}
    for line in (snap_run.path / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["split"] == "ood":
            own[record["step"]] = record["acc"]
    assert [r.model_accuracy for r in rows] == [own[r.step] for r in rows]
    assert all(r.chance == pytest.approx(1 / 8) for r in rows)  # SRAVEN has 8 rules
    assert all(r.selectivity == pytest.approx(r.decoding - r.control_task) for r in rows)


def test_each_layer_carries_the_live_fraction_training_recorded(snap_run, rows):
    """HYLA's value units per layer at each snapshot, as metrics.jsonl has them; the "all" row has none."""
    recorded = {}
    for line in (snap_run.path / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["split"] == "ood":
            recorded[record["step"]] = record["value_live_fraction"]
    for r in rows:
        if r.layer == "all":
            assert math.isnan(r.live_fraction)
        else:
            assert r.live_fraction == recorded[r.step][int(r.layer)]
            assert 0.0 <= r.live_fraction <= 1.0


def test_a_table_without_the_live_column_reads_and_update_fills_it(snap_run, rows, tmp_path, capsys):
    """Tables written before the column existed (the committed SRAVEN ones) still read, and --update completes them
    from the run's metrics without recomputing their decoding."""
    from latentcode.cli import main

    out = tmp_path / "emergence"
    out.mkdir()
    old_columns = [c for c in COLUMNS if c != "live_fraction"]
    lines = [",".join(old_columns)] + [",".join(f"{getattr(r, c):.6g}" if isinstance(getattr(r, c), float)
                                                else str(getattr(r, c)) for c in old_columns)
                                       for r in rows if r.step == 30]
    (out / "emergence.csv").write_text("\n".join(lines) + "\n")
    (out / "emergence.json").write_text(json.dumps({"run": str(snap_run.path), "n_samples": 64, "commands": []}))
    old = read_emergence(out)
    assert [r.step for r in old] == [30] * 3 and all(math.isnan(r.live_fraction) for r in old)
    assert main(["emergence", str(snap_run.path), "--out", str(out), "--n-samples", "64", "--update"]) == 0
    new = read_emergence(out)
    assert [r.decoding for r in new[:3]] == [r.decoding for r in old]  # kept, not recomputed
    np.testing.assert_allclose([r.live_fraction for r in new], [r.live_fraction for r in rows], rtol=1e-5)


def test_the_last_snapshot_decodes_as_the_finished_run_does(snap_run, rows):
    """The step-60 snapshot holds the final weights, so its rows equal a decoding of the run itself."""
    run = Run.load(snap_run.path)
    codes = extract_latent_codes(run.model, run.task, splits=("train", "ood"), n_samples=N, progress=False)
    result = decode_rules(codes, "rule", layers="each+all", splits=["ood"], progress=False)
    last = [r for r in rows if r.step == 60]
    np.testing.assert_allclose([r.decoding for r in last], result.accuracy("ood"))
    labels = codes.labels["rule"]
    train_majority = np.bincount(labels[codes.split == "train"]).argmax()
    assert last[0].majority == pytest.approx(np.mean(labels[codes.split == "ood"] == train_majority))
    assert last[0].input_only == pytest.approx(result.controls.input_only["ood"])


def test_the_table_round_trips_and_is_never_overwritten(rows, tmp_path):
    path = write_emergence(rows, tmp_path / "emergence.csv", meta={"run": "x"})
    back = read_emergence(path)
    assert [(r.step, r.layer) for r in back] == [(r.step, r.layer) for r in rows]
    np.testing.assert_allclose([r.decoding for r in back], [r.decoding for r in rows], rtol=1e-5)
    assert json.loads(path.with_suffix(".json").read_text())["columns"] == COLUMNS
    with pytest.raises(FileExistsError, match="exists"):
        write_emergence(rows, path)


def test_runs_without_snapshots_or_steps_without_one_get_clear_errors(snap_run, tmp_path):
    with pytest.raises(FileNotFoundError, match="snapshots=true"):
        rule_emergence(tmp_path, progress=False)
    with pytest.raises(ValueError, match=r"no snapshot of step\(s\) \[45\].*\[30, 60\]"):
        rule_emergence(snap_run.path, steps=[45], progress=False)
    assert [s for s, _ in list_snapshots(snap_run.path)] == [30, 60]
    assert not math.isnan(rule_emergence(snap_run.path, steps=[30], n_samples=64, progress=False)[0].decoding)


def test_the_command_writes_the_table_and_its_figure_and_never_overwrites(snap_run, tmp_path, capsys):
    from latentcode.cli import main

    out = tmp_path / "emergence"
    assert main(["emergence", str(snap_run.path), "--out", str(out), "--n", "64", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "step      30" in printed and "step      60" in printed
    assert {p.name for p in out.iterdir()} == {"emergence.csv", "emergence.json", "emergence.png", "emergence.html",
                                           "plotly.min.js"}  # the html figure loads the folder's one plotly.js
    assert len(read_emergence(out / "emergence.csv")) == 6
    # the folder --out named reads too (assert_equal: NaN cells, such as the "all" row's live fraction, are equal)
    np.testing.assert_equal([asdict(r) for r in read_emergence(out)],
                            [asdict(r) for r in read_emergence(out / "emergence.csv")])
    with pytest.raises(FileNotFoundError, match="latentcode emergence RUN --out"):
        read_emergence(tmp_path)
    assert main(["emergence", str(snap_run.path), "--out", str(out), "--n", "64"]) != 0
    assert "exists" in capsys.readouterr().err


def test_the_figure_draws_every_layer_and_both_floors(rows):
    from probes.figures import emergence_figure

    figure = emergence_figure(rows, title="t")
    fig = figure.plotly()
    names = [trace.name for trace in fig.data]
    assert {"codes, layer 0", "codes, layer 1", "codes, all layers", "input-only control",
            "model OOD accuracy"} <= set(names)
    assert any(n.startswith("chance (0.125)") for n in names) and any(n.startswith("majority") for n in names)
    assert all(trace.type == "scatter" for trace in fig.data)
    assert fig.layout.xaxis.title.text == "training step"
    axes = figure.plot().axes
    assert [a.get_ylabel() for a in axes] == ["accuracy on held-out rule combinations",
                                             "selectivity (codes − control task)",
                                             "live value-network units (%)"]  # HYLA: its value units, per layer
    assert list(axes[0].lines[0].get_xdata()) == [30, 60]
    assert all(ax.get_xlim() == (0, 63) for ax in axes)  # from the start of training to just past the last step
    for layer, line in zip(("0", "1"), axes[2].lines, strict=True):
        np.testing.assert_allclose(line.get_ydata(), [100 * r.live_fraction for r in rows if r.layer == layer])
    assert [t.name for t in fig.data if t.xaxis == "x3"] == ["layer 0", "layer 1"]
    fig_mpl = axes[0].figure
    fig_mpl.canvas.draw()
    for ax in axes:  # each legend sits below its panel, never over the curves
        legend_box = ax.get_legend().get_window_extent()
        assert legend_box.y1 <= ax.get_window_extent().y0
    lines = figure.table().splitlines()
    assert lines[0].endswith("live value units (L0/L1)")
    for line, step in zip(lines[1:], (30, 60), strict=True):
        live = [r.live_fraction for r in rows if r.step == step and r.layer != "all"]
        assert line.endswith("/".join(f"{round(100 * f)}" for f in live) + "%")


def test_without_value_units_the_figure_has_no_live_column_or_panel(rows):
    from dataclasses import replace

    from probes.figures import emergence_figure

    softmax_like = emergence_figure([replace(r, live_fraction=math.nan) for r in rows])
    assert "live" not in softmax_like.table()
    assert len(softmax_like.plot().axes) == 2 and len(softmax_like.plotly().layout.annotations) == 2


@pytest.mark.parametrize(("steps", "missing"), [
    ([10_000, 20_000, 30_000, 50_000], [40_000]),  # one snapshot lost before it was analysed
    ([10_000, 20_000, 50_000, 60_000], [30_000, 40_000]),
    ([*range(10_000, 160_000, 10_000), 156_250], []),  # a run that ends between two evaluations hides nothing
    ([30, 60], []),  # two steps imply no cadence
])
def test_missing_steps_are_the_ones_the_cadence_implies(steps, missing):
    from probes.figures.emergence import missing_steps

    assert missing_steps(steps) == missing


def test_a_lost_snapshot_breaks_every_line_and_is_marked_not_bridged(rows):
    """A table with rows every 30 steps but none at 90: no segment joins 60 to 120 (a line through the gap would
    draw values nobody measured), and the first panel marks the step."""
    from dataclasses import replace

    from probes.figures import emergence_figure

    later = [replace(r, step=r.step + 90) for r in rows]  # steps 30, 60, 120, 150
    figure = emergence_figure([*rows, *later], title="t")
    assert figure.missing_steps == [90]
    axes = figure.plot().axes
    curves = [line for ax in axes for line in ax.lines if len(line.get_xdata()) > 2]
    assert len(curves) == 3 + 3 + 1 + 1 + 2  # decoding and selectivity per layer, input-only, model, live units
    for line in curves:
        x, y = np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)
        assert list(x) == [30, 60, 90, 120, 150] and np.isnan(y[2]) and not np.isnan(y[[0, 1, 3, 4]]).any()
    marks = [line for line in axes[0].lines if line.get_label().startswith("no snapshot analysed")]
    assert len(marks) == 1 and list(marks[0].get_xdata()) == [90, 90]
    assert marks[0].get_label() == "no snapshot analysed (step 90)"
    for trace in figure.plotly().data:
        if trace.name.startswith("codes"):
            assert list(trace.x) == [30, 60, 90, 120, 150] and math.isnan(trace.y[2])
    assert emergence_figure(rows).missing_steps == []


def test_update_adds_only_the_new_snapshots_of_a_run_still_training(snap_run, tmp_path, capsys):
    from latentcode.cli import main

    out = tmp_path / "emergence"
    assert main(["emergence", str(snap_run.path), "--out", str(out), "--n", "64", "--steps", "30"]) == 0
    first = read_emergence(out / "emergence.csv")
    assert {r.step for r in first} == {30}
    assert main(["emergence", str(snap_run.path), "--out", str(out), "--n-samples", "64", "--update"]) == 0
    assert "1 new snapshot(s)" in capsys.readouterr().out
    rows = read_emergence(out / "emergence.csv")
    assert [r.step for r in rows] == [30] * 3 + [60] * 3
    assert [r.decoding for r in rows[:3]] == [r.decoding for r in first]  # the old rows are kept, not recomputed
    assert len(json.loads((out / "emergence.json").read_text())["commands"]) == 2
    other = tmp_path / "other-run"
    shutil.copytree(snap_run.path, other)
    assert main(["emergence", str(other), "--out", str(out), "--n", "64", "--update"]) != 0
    assert f"holds the emergence of run {snap_run.path}, not of {other}" in capsys.readouterr().err
    assert [r.step for r in read_emergence(out / "emergence.csv")] == [30] * 3 + [60] * 3  # untouched
    assert main(["emergence", str(snap_run.path), "--out", str(out), "--n", "128", "--update"]) != 0
    assert "made with --n-samples 64; update it with the same --n-samples" in capsys.readouterr().err
    # argparse's usage error, before any snapshot is read
    assert main(["emergence", str(snap_run.path), "--out", str(tmp_path / "other"), "--steps", "30,thirty"]) == 2
    assert "'30,thirty' is not a comma-separated list of integers" in capsys.readouterr().err
    assert not (tmp_path / "other").exists()


def test_by_default_the_table_goes_into_the_run_where_the_report_shows_it(snap_run, tmp_path, capsys):
    from latentcode.cli import main
    from latentcode.rundir.directory import read_manifest, remove_run_files

    run = tmp_path / "hyla"
    shutil.copytree(snap_run.path, run)
    assert main(["emergence", str(run), "--n-samples", "64", "--steps", "30"]) == 0
    table = run / "emergence" / "emergence.csv"
    assert [r.step for r in read_emergence(table)] == [30, 30, 30]
    assert {"emergence/emergence.csv", "emergence/emergence.json", "emergence/emergence.png",
            "emergence/emergence.html"} <= set(read_manifest(run))  # latentcode's own files: --force may remove them
    assert json.loads((run / "emergence" / "emergence.json").read_text())["commands"][0].endswith(
        "--out " + str(run / "emergence") + " --n-samples 64 --steps 30")
    assert main(["report", str(run), "--embed", "pca", "--no-progress"]) == 0
    page = (run / "report.html").read_text()
    assert ">Rule codes over training</h2>" in page and "<pre>step  layer 0  layer 1  all layers" in page
    capsys.readouterr()
    assert main(["emergence", "checkpoints/fuzzy_logic-hyla"]) != 0  # no snapshots there, and never written into
    assert "has no snapshots" in capsys.readouterr().err
    remove_run_files(run)
    assert not (run / "emergence").exists()


def test_a_long_run_labels_its_steps_in_thousands_a_short_one_in_steps(rows):
    """A paper-length run (156,250 steps) on a 5-inch panel: 100000 and 120000 printed in full run into each other,
    so every panel labels them 100k, 120k; a short run keeps its plain step numbers."""
    from dataclasses import replace

    from probes.figures import emergence_figure

    long_run = emergence_figure([replace(r, step=r.step * 2_500) for r in rows])  # steps 75,000 and 150,000
    for ax in long_run.plot().axes:
        ax.figure.canvas.draw()
        labels = [t.get_text() for t in ax.get_xticklabels()]
        assert labels[0] == "0" and "100k" in labels and all(t == "0" or t.endswith("k") for t in labels)
    short = emergence_figure(rows).plot().axes[0]
    short.figure.canvas.draw()
    assert [t.get_text() for t in short.get_xticklabels()][:2] == ["0", "10"]
