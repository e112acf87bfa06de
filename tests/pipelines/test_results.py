"""Result tables: rows collected from run directories, the CSV round trip, mean ± s.e. against numpy, and the
`latentcode table` command."""

from __future__ import annotations

import csv
import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import latentcode as lc
from latentcode.cli import main
from latentcode.pipelines.results import (
    PAPER_TABLE_A1,
    ResultRow,
    collect_results,
    markdown_table,
    read_results_csv,
    seed_table,
    summarize,
    variant_label,
    write_results_csv,
)
from probes import extras_from_dict


def _row(variant: str, seed: int, value: float, *, split: str = "ood", step: int = 10, steps: int = 10) -> ResultRow:
    return ResultRow(task="fuzzy_logic", variant=variant, seed=seed, split=split, metric="r2", value=value,
                     step=step, steps=steps, lr=1e-3, weight_decay=0.1, run=f"{variant}-s{seed}")


def test_mean_and_standard_error_match_numpy():
    values = [0.61, 0.70, 0.655]
    rows = [_row("hyla", s, v) for s, v in enumerate(values)] + [_row("softmax", 0, 0.5), _row("softmax", 1, 0.52)]
    (softmax, hyla) = sorted(summarize(rows), key=lambda s: s.variant != "softmax")
    x = 100 * np.array(values)
    assert hyla.mean == pytest.approx(x.mean())
    assert hyla.sem == pytest.approx(x.std(ddof=1) / np.sqrt(3))
    assert hyla.seeds == (0, 1, 2) and hyla.paper == PAPER_TABLE_A1["fuzzy_logic"]["hyla"]
    assert softmax.sem == pytest.approx(np.std([50.0, 52.0], ddof=1) / np.sqrt(2))
    table = markdown_table([softmax, hyla])
    assert f"| fuzzy_logic | hyla | 0, 1, 2 | {x.mean():.2f} ± {x.std(ddof=1) / np.sqrt(3):.2f} | 81.13 ± 7.77 |" in table
    assert f"| {x.mean() - 81.13:+.2f} | {(x.mean() - 81.13) / 7.77:+.1f} |" in table  # in the paper's s.e.


def test_table_follows_the_paper_row_order_and_skips_unfinished_runs():
    rows = [_row("hyla", 0, 0.8), _row("linear", 0, 0.6), _row("softmax", 0, 0.6), _row("softmax", 1, 0.1, step=5)]
    assert [s.variant for s in summarize(rows)] == ["softmax", "linear", "hyla"]
    assert [s.n_seeds for s in summarize(rows)] == [1, 1, 1]
    assert [s.n_seeds for s in summarize(rows, finished_only=False)][0] == 1  # seed 1 is still training
    one = summarize(rows)[0]
    assert np.isnan(one.sem) and "| 60.00 |" in markdown_table([one])
    # a seed still training is shown beside the finished seed, never averaged with it (that would be 35.00)
    both = summarize(rows, finished_only=False)[0]
    assert (both.mean, both.seeds, both.unfinished) == (pytest.approx(60.0), (0,), ())
    assert both.still_training == ((1, 5, 10, pytest.approx(10.0)),)
    assert "| softmax | 0 | 60.00 (not in the mean, still training: seed 1 10.00 at step 5 of 10) |" in \
        markdown_table([both])
    # a variant with no finished seed is the mean of its unfinished ones, marked as such
    early = summarize([_row("softmax", 0, 0.2, step=5), _row("softmax", 1, 0.1, step=5)], finished_only=False)[0]
    assert early.unfinished == ((0, 5, 10), (1, 5, 10)) and early.still_training == ()
    assert "| 15.00 ± 5.00 (unfinished: seed 0 at step 5 of 10, seed 1 at step 5 of 10) |" in markdown_table([early])


def test_two_settings_of_one_seed_are_refused():
    rows = [_row("hyla", 0, 0.8), _row("hyla", 0, 0.7)]
    with pytest.raises(ValueError, match="several rows for seed"):
        summarize(rows)


def test_csv_round_trip_is_exact(tmp_path):
    rows = [_row("hyla", 0, 0.123456789012345), _row("hyla", 0, 0.5, split="test")]
    path = write_results_csv(rows, tmp_path / "r.csv")
    assert read_results_csv(path) == sorted(rows, key=lambda r: r.split)


def test_a_bad_csv_names_the_line_and_column(tmp_path):
    path = write_results_csv([_row("hyla", 0, 0.5)], tmp_path / "r.csv")
    path.write_text(path.read_text().replace("0.5", "half"))
    with pytest.raises(ValueError, match=r"r\.csv:2: column value='half'"):
        read_results_csv(path)
    (tmp_path / "other.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="lacks the column"):
        read_results_csv(tmp_path / "other.csv")


@pytest.fixture(scope="module")
def tiny_runs(tmp_path_factory):
    task = lc.get_task("fuzzy_logic", seq_len=8)
    root = tmp_path_factory.mktemp("runs")
    runs = []
    for seed in (0, 1):
        cfg = dataclasses.replace(lc.train_config("fuzzy_logic", "tiny"), seed=seed)
        runs.append(lc.train(lc.model_config(task, "hyla", preset="tiny"), task, cfg, root / f"hyla-s{seed}",
                             progress=False))
    return runs


def test_rows_are_each_runs_last_evaluation(tiny_runs):
    rows = collect_results([r.path for r in tiny_runs])
    assert len(rows) == 4
    for run in tiny_runs:
        records = [json.loads(line) for line in (run.path / "metrics.jsonl").read_text().splitlines()]
        last_ood = [r for r in records if r["split"] == "ood"][-1]
        (row,) = [r for r in rows if r.run == run.path.name and r.split == "ood"]
        assert row.value == last_ood["r2"] and row.step == last_ood["step"] and row.finished
        assert row.live_fraction == ";".join(f"{f:.4f}" for f in last_ood["value_live_fraction"])


def test_a_shipped_checkpoint_gives_its_source_runs_rows(tiny_runs, tmp_path):
    """A machine without the run directory, only the checkpoint exported from it, writes the same CSV rows."""
    from latentcode.rundir.pretrained import export_checkpoint

    run = tiny_runs[1]
    shipped = export_checkpoint(run.path, tmp_path / "checkpoints" / "fuzzy_logic-hyla-s1")
    assert collect_results([shipped]) == collect_results([run.path])
    assert {r.run for r in collect_results([shipped])} == {"hyla-s1"}


def test_table_command_writes_csv_and_regenerates_the_same_markdown(tiny_runs, tmp_path, capsys):
    csv_path = tmp_path / "rows.csv"
    assert main(["table", *[str(r.path) for r in tiny_runs], "--csv", str(csv_path)]) == 0
    from_runs = capsys.readouterr().out
    assert main(["table", "--from", str(csv_path)]) == 0
    from_csv = capsys.readouterr().out
    table = [line for line in from_runs.splitlines() if line.startswith("|")]
    assert table == [line for line in from_csv.splitlines() if line.startswith("|")]
    values = 100 * np.array([r.value for r in read_results_csv(csv_path) if r.split == "ood"])
    assert f"{values.mean():.2f} ± {values.std(ddof=1) / np.sqrt(2):.2f}" in table[-1]


def test_table_command_errors(tmp_path, capsys):
    assert main(["table"]) == 2
    assert "exactly one" in capsys.readouterr().err
    assert main(["table", str(tmp_path)]) == 2
    assert "config.json" in capsys.readouterr().err


def test_a_run_that_overrides_its_variants_nonlinearity_is_its_own_row():
    assert variant_label(lc.model_config("fuzzy_logic", "hyla", "tiny", value_act="silu")) == "hyla (value_act=silu)"
    assert variant_label(lc.model_config("fuzzy_logic", "hyla", "tiny", n_layers=3)) == "hyla"  # shape, not variant
    rows = [_row("hyla", 0, 0.8), _row("hyla (value_act=silu)", 0, 0.6)]
    by_variant = {s.variant: s for s in summarize(rows)}
    assert by_variant["hyla"].mean == pytest.approx(80.0) and by_variant["hyla"].paper == PAPER_TABLE_A1[
        "fuzzy_logic"]["hyla"]
    assert by_variant["hyla (value_act=silu)"].mean == pytest.approx(60.0)
    assert by_variant["hyla (value_act=silu)"].paper is None


def test_a_run_recorded_before_the_live_diagnostic_gets_it_measured(tiny_runs, tmp_path):
    import shutil

    run = tiny_runs[0]
    old = tmp_path / run.path.name
    shutil.copytree(run.path, old)
    records = [json.loads(line) for line in (old / "metrics.jsonl").read_text().splitlines()]
    recorded = [r for r in records if r["split"] == "ood"][-1]["value_live_fraction"]
    for record in records:
        record.pop("value_live_fraction", None)
    (old / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (row,) = [r for r in collect_results([old]) if r.split == "ood"]
    assert row.live_fraction == ";".join(f"{f:.4f}" for f in recorded)


def test_per_seed_table_shows_each_run_with_its_live_fraction():
    rows = [
        dataclasses.replace(_row("hyla", 1, 0.71234), live_fraction="0.0000;0.3518"),
        _row("softmax", 0, 0.6),
        dataclasses.replace(_row("hyla", 0, 0.9, step=5), live_fraction="0.1000;0.2000"),
    ]
    lines = seed_table(rows).splitlines()
    assert len(lines) == 4  # header, rule, and the two finished runs: softmax first (paper order), then hyla
    assert lines[2].startswith("| fuzzy_logic | softmax | 0 | 60.00 | n/a |")
    assert "| hyla | 1 | 71.23 | L0 0.00% (dead), L1 35.18% | hyla-s1 |" in lines[3]
    with_unfinished = seed_table(rows, finished_only=False)
    assert "| hyla | 0 | 90.00 (step 5 of 10) | L0 10.00%, L1 20.00% |" in with_unfinished


ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results" / "table_a1_fuzzy_logic.csv"
TABLE_START = "<!-- table: results/table_a1_fuzzy_logic.csv (latentcode table --from results/table_a1_fuzzy_logic.csv) -->"


def _gen_tables():
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_tables", ROOT / "docs" / "gen_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not RESULTS.is_file(), reason="no committed results file (not a clone)")
def test_every_generated_table_in_the_docs_is_its_commands_output():
    gen = _gen_tables()
    means = [m["command"] for m in gen.BLOCK.finditer((ROOT / "docs" / "reproduction.md").read_text())]
    per_seed = [m["command"] for m in gen.BLOCK.finditer((ROOT / "results" / "table_a1" / "README.md").read_text())]
    assert means and not any("--per-seed" in c for c in means), "docs/reproduction.md lost its mean ± s.e. tables"
    assert len(per_seed) == 2 and all("--per-seed" in c for c in per_seed), \
        "results/table_a1/README.md lost its per-seed tables"
    assert {"results/emergence/README.md", "results/fig5/README.md", "results/table_a1/README.md"} <= {
        str(path.relative_to(ROOT)) for path in gen.pages()}, "gen_tables.py no longer keeps the full tables current"
    for path in gen.pages():
        assert gen.render(path.read_text()) == path.read_text(), f"{path} is stale: run python docs/gen_tables.py"


@pytest.mark.skipif(not RESULTS.is_file(), reason="no committed results file (not a clone)")
def test_the_reproduction_page_shows_the_table_generated_from_the_committed_results():
    page = (ROOT / "docs" / "reproduction.md").read_text()
    assert TABLE_START in page, "docs/reproduction.md lost its generated-table marker"
    shown = page.split(TABLE_START)[1].split("<!-- /table -->")[0].strip()
    assert shown == markdown_table(summarize(read_results_csv(RESULTS)))
    # the same numbers, recomputed from the CSV with the csv module and numpy alone
    with RESULTS.open(newline="") as f:
        records = [r for r in csv.DictReader(f) if r["split"] == "ood" and int(r["step"]) >= int(r["steps"])]
    for variant in {r["variant"] for r in records}:
        values = 100 * np.array([float(r["value"]) for r in records if r["variant"] == variant])
        (line,) = [line for line in shown.splitlines() if f"| {variant} |" in line]
        mean = f"{values.mean():.2f}"
        assert (f"| {mean} ± {values.std(ddof=1) / np.sqrt(len(values)):.2f} |" if len(values) > 1
                else f"| {mean} |") in line


FIG2B_HEADER = ("| checkpoint | sequence length, pairs held out | layer 0 | layer 1 | all layers | always present | "
                "input-only | codes − best, best layer |")


@pytest.mark.skipif(not (ROOT / "results" / "fig2b").is_dir(), reason="no committed decodings (not a clone)")
def test_the_fig2b_table_matches_the_committed_decodings():
    """Every committed decoding has its row (a Fig. 2B run's joins when `results` decodes it), and each row's
    numbers are recomputed here from the file: per layer the mean F1 over the probed terms on held-out pairs, the
    "always present" floor from each term's support (2s / (n + s)), the input-only control, and the best layer's
    margin over the better of the two."""
    page = (ROOT / "results" / "fig2b" / "README.md").read_text()
    assert FIG2B_HEADER in page, "results/fig2b/README.md lost its Fig. 2B table"
    lines = page.split(FIG2B_HEADER)[1].strip().splitlines()[1:]
    table = lines[: next(i for i, line in enumerate(lines) if not line.startswith("|"))]
    rows = {cells[0].strip(): [c.strip() for c in cells[1:]] for cells in (line.strip("|").split("|") for line in table)}
    files = sorted((ROOT / "results" / "fig2b").glob("*.decode.json"))
    assert sorted(rows) == sorted(path.name.removesuffix(".decode.json") for path in files)
    assert {"fuzzy_logic-softmax", "fuzzy_logic-linear", "fuzzy_logic-hyla"} <= set(rows)
    for path in files:
        name, decoding = path.name.removesuffix(".decode.json"), json.loads(path.read_text())
        terms = extras_from_dict(decoding)["terms"]  # these files predate `extras`: the reader takes both shapes
        with np.errstate(all="ignore"):
            layers = [np.nanmean(np.array(f1, dtype=float)) for f1 in terms["f1"]["ood"]]
        support = np.array(terms["support"]["ood"], dtype=float)[terms["evaluated"]]
        n = decoding["baselines"]["ood"]["n_samples"]
        floor, control = np.mean(2 * support / (n + support)), terms["input_only_f1"]["ood"]
        config = json.loads((ROOT / "checkpoints" / name / "config.json").read_text())["task"]["params"]
        setting, *cells, margin = rows[name]
        assert setting == f"{config['seq_len']}, {round(100 * config['frac_ood'])}%"
        assert cells == [f"{value:.3f}" for value in [*layers, floor, control]], name
        assert margin.startswith(f"{max(layers) - max(floor, control):+.3f} ("), name


FIG5 = ROOT / "results" / "fig5"
# the results page, the campaign log, and the full tables they link
RESULTS_PAGES = ("docs/reproduction.md", "docs/campaign-log.md", "results/fig5/README.md", "results/emergence/README.md")


def _results_pages() -> str:
    """The results pages of RESULTS_PAGES, one after the other."""
    return "\n".join((ROOT / name).read_text() for name in RESULTS_PAGES)
FIG5_TABLES = {"snapshots", "claims", "decode", "cluster", "similarity", "transfer"}


def test_a_generated_block_must_name_its_sources_and_run_a_script_of_the_repository():
    gen = _gen_tables()
    unnamed = "<!-- generated: results/fig5 (python docs/fig5_tables.py table decode x) -->\nold\n<!-- /generated -->\n"
    with pytest.raises(ValueError, match="names results/fig5"):
        gen.render(unnamed)
    missing = "<!-- generated: results/nowhere (python docs/fig5_tables.py table decode --from results/nowhere x) -->\n" \
              "old\n<!-- /generated -->\n"
    with pytest.raises(FileNotFoundError, match="results/nowhere"):
        gen.render(missing)
    foreign = "<!-- generated: results (python /bin/true.py results) -->\nold\n<!-- /generated -->\n"
    with pytest.raises(ValueError, match="not a Python script of the repository"):
        gen.render(foreign)


@pytest.mark.skipif(not FIG5.is_dir(), reason="no committed Fig. 5 results (not a clone)")
def test_the_sraven_fig5_section_is_generated_from_the_committed_results():
    import shlex

    gen = _gen_tables()
    page = _results_pages()
    blocks = [m for m in gen.GENERATED.finditer(page) if "docs/fig5_tables.py" in m["command"]
              and shlex.split(m["command"])[3] in FIG5_TABLES]
    assert {shlex.split(m["command"])[3] for m in blocks} >= FIG5_TABLES, "the Fig. 5 section lost a table"
    for block in blocks:  # every model is labelled with the step it was analysed at (the claims: in the header)
        header, _, *rows = block["body"].splitlines()
        labelled = [header] if shlex.split(block["command"])[3] == "claims" else rows
        assert rows and all("step " in line or "not analysed yet" in line for line in labelled), block["command"]
    decoded = "\n".join(m["body"] for m in blocks if shlex.split(m["command"])[3] == "decode")
    for folder in sorted(p for p in FIG5.iterdir() if (p / "fig5.json").is_file()):
        summary = json.loads((folder / "fig5.json").read_text())
        assert summary["intermediate"] == (summary["step"] < summary["steps"])
        assert set(summary["commands"]) >= {"all", "codes", "decode.json", "clustering.csv", "similarity.csv",
                                            "rule_transfer.csv", "rule_transfer_ood.csv"}
        ood = json.loads((folder / "decode.json").read_text())["headline"]["accuracy"]["ood"]
        for layer, accuracy in zip(ood["layers"], ood["codes"], strict=True):  # read back, not recomputed
            assert f"| {layer} | {accuracy:.3f} | 0.125 |" in decoded, (folder.name, layer)


def _fig5_script():
    import importlib.util

    spec = importlib.util.spec_from_file_location("fig5_tables", ROOT / "docs" / "fig5_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_fig5_tables_without_names_show_every_analysed_model_by_variant_then_seed(tmp_path, capsys):
    """A model joins the Fig. 5 tables when its results land (no list of names in the docs to edit): softmax,
    linear, HYLA, then any other variant, each by seed, at its latest analysed step; a folder with no fig5.json
    (an analysis cut short) is no model, and an empty folder is refused with the command that fills it."""
    module = _fig5_script()
    for folder in ("sraven-hyla-s0-step156250", "sraven-softmax-s2-step156250", "sraven-linear-s1-step100000",
                   "sraven-softmax-s0-step50000", "sraven-softmax-s0-step156250", "sraven-hyla_linear-s0-step10",
                   "sraven-softmax-s10-step156250"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "fig5.json").write_text("{}")
    (tmp_path / "sraven-linear-s0-step156250").mkdir()  # cut short: no fig5.json
    assert module.analysed_models(str(tmp_path)) == ["sraven-softmax-s0", "sraven-softmax-s2", "sraven-softmax-s10",
                                                     "sraven-linear-s1", "sraven-hyla-s0", "sraven-hyla_linear-s0"]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SystemExit, match="holds no Fig. 5 results.*sweeps/fig5.py run"):
        module.main(["table", "decode", "--from", str(empty)])


def test_fig5_accuracy_figure_draws_each_models_committed_accuracy_beside_the_papers(tmp_path):
    """One line per model through its table's model accuracy, one point per step (a table has a row per layer),
    in step order; seeds of a variant share its colour and the paper's final value is a line of that colour."""
    import matplotlib

    matplotlib.use("agg")
    fig5 = _fig5_script()
    tables = {"sraven-softmax-s0": {20000: 0.42, 10000: 0.31}, "sraven-softmax-s1": {10000: 0.29},
              "sraven-hyla-s0": {10000: 0.17, 20000: 0.18, 30000: 0.2}}
    for name, accuracy in tables.items():
        (tmp_path / name).mkdir()
        with (tmp_path / name / "emergence.csv").open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["step", "layer", "decoding", "model_accuracy"])
            for step, value in accuracy.items():  # written out of step order, two layers per step
                writer.writerows([[step, "0", 0.5, value], [step, "all", 0.6, value]])
    records = tmp_path / "checkpoints"  # no committed training record: the tables alone
    figure = fig5.accuracy_figure(str(tmp_path), list(tables), records)
    lines = {line.get_label().split(":")[0]: line for line in figure.axes[0].get_lines()}
    for name, accuracy in tables.items():
        assert list(lines[name].get_xdata()) == sorted(accuracy)
        assert list(lines[name].get_ydata()) == [accuracy[step] for step in sorted(accuracy)]
    assert lines["sraven-softmax-s0"].get_color() == lines["sraven-softmax-s1"].get_color()
    assert lines["sraven-softmax-s0"].get_color() != lines["sraven-hyla-s0"].get_color()
    assert lines["sraven-softmax-s0"].get_linestyle() != lines["sraven-softmax-s1"].get_linestyle()
    assert list(lines["paper, hyla"].get_ydata()) == pytest.approx([0.6913, 0.6913])
    assert lines["paper, hyla"].get_color() == lines["sraven-hyla-s0"].get_color()
    assert "sraven-hyla-s0: 0.200 at step 30,000" in [line.get_label() for line in lines.values()]
    # a snapshot lost before it was analysed (rows every 10,000 steps, none at 30,000): the line breaks there
    (tmp_path / "sraven-linear-s0").mkdir()
    (tmp_path / "sraven-linear-s0" / "emergence.csv").write_text(
        "step,layer,model_accuracy\n10000,0,0.2\n20000,0,0.3\n40000,0,0.4\n50000,0,0.45\n")
    figure = fig5.accuracy_figure(str(tmp_path), ["sraven-linear-s0"], records)
    line = figure.axes[0].get_lines()[0]
    assert line.get_label() == "sraven-linear-s0: 0.450 at step 50,000 (no snapshot analysed at 30,000)"
    assert list(line.get_xdata()) == [10000, 20000, 30000, 40000, 50000]
    y = np.asarray(line.get_ydata(), float)
    assert np.isnan(y[2]) and list(y[[0, 1, 3, 4]]) == [0.2, 0.3, 0.4, 0.45]
    # the run's committed training record has the lost step's evaluation: the point is drawn from it, hollow
    progress = records / "in-progress" / "sraven-linear-s0"
    progress.mkdir(parents=True)
    (progress / "metrics.jsonl").write_text(
        '{"step": 30000, "split": "train", "loss": 0.9}\n{"step": 30000, "split": "ood", "acc": 0.35}\n'
        '{"step": 60000, "split": "ood", "acc": 0.5}\n')
    figure = fig5.accuracy_figure(str(tmp_path), ["sraven-linear-s0"], records)
    line, hollow = figure.axes[0].get_lines()[:2]
    assert line.get_label() == "sraven-linear-s0: 0.450 at step 50,000 (30,000 from the training record)"
    assert list(line.get_xdata()) == [10000, 20000, 30000, 40000, 50000]  # a step past the table adds nothing
    assert list(line.get_ydata()) == [0.2, 0.3, 0.35, 0.4, 0.45]
    assert list(hollow.get_xdata()) == [30000] and hollow.get_markerfacecolor() == "white"
    # a shipped checkpoint's record comes first (seed 0 ships as sraven-<variant>)
    shipped = records / "sraven-linear"
    shipped.mkdir()
    (shipped / "metrics.jsonl").write_text('{"step": 30000, "split": "ood", "acc": 0.36}\n')
    assert fig5.record_accuracy(records, "sraven-linear-s0") == {30000: 0.36}
    assert fig5.record_accuracy(records, "sraven-linear-s1") == {}
    (tmp_path / "sraven-linear-s0" / "emergence.csv").unlink()
    with pytest.raises(SystemExit, match="sraven-linear-s0/emergence.csv does not exist; models with a committed "
                       "emergence table: sraven-hyla-s0, sraven-softmax-s0, sraven-softmax-s1"):
        fig5.accuracy_figure(str(tmp_path), ["sraven-linear-s0"], records)


def test_fig5_claims_give_no_verdict_without_results_or_without_a_transfer_control(tmp_path):
    fig5 = _fig5_script()
    assert fig5.table_claims(str(tmp_path), ["sraven-x-s0"])[-1] == "| every claim | no results for sraven-x-s0 yet |"
    source = fig5.latest("results/fig5", "sraven-softmax-s0")
    if source is None:
        pytest.skip("no committed Fig. 5 results (not a clone)")
    copy = tmp_path / "results" / source.name
    shutil.copytree(source, copy)
    rows = (copy / "rule_transfer_ood.csv").read_text().splitlines()
    header = rows[0].split(",")
    keep = [i for i, name in enumerate(header) if name != "control"]
    (copy / "rule_transfer_ood.csv").write_text(
        "\n".join(",".join(row.split(",")[i] for i in keep) for row in rows) + "\n")
    claims = fig5.table_claims(str(copy.parent), ["sraven-softmax-s0"])
    transfer = next(line for line in claims if line.startswith("| Rule transfer"))
    assert transfer.endswith("; no control in these results: run them again) |"), transfer
    assert "| n/a (" in transfer


@pytest.mark.skipif(not (ROOT / "results" / "emergence").is_dir(), reason="no committed emergence tables (not a clone)")
def test_the_emergence_table_in_the_docs_holds_every_committed_snapshot():
    """Each committed emergence table's snapshots appear in the results pages with their all-layer decoding and
    the model's accuracy, read back from the CSV (not recomputed), so a new snapshot fails here until
    `python docs/gen_tables.py` has run."""
    import shlex

    gen = _gen_tables()
    page = _results_pages()
    [block] = [m for m in gen.GENERATED.finditer(page) if "docs/fig5_tables.py table emergence" in m["command"]]
    assert "`results/emergence/README.md`" in (ROOT / "docs" / "campaign-log.md").read_text(), "the log lost its link"
    names = shlex.split(block["command"])[6:]
    tables = sorted((ROOT / "results" / "emergence").glob("*/emergence.csv"))
    assert tables and {t.parent.name for t in tables} <= set(names), "a committed table is missing from the docs"
    body = block["body"].splitlines()
    for table in tables:
        with table.open() as f:
            every = list(csv.DictReader(f))
        rows = [r for r in every if r["layer"] == "all"]
        shown = [line for line in body if line.startswith(f"| {table.parent.name} |")]
        assert len(shown) == len(rows), table
        for line, row in zip(shown, rows, strict=True):
            cells = [c.strip() for c in line.strip("|").split("|")]
            assert cells[1] == f"{int(row['step']):,}"
            assert cells[6] == f"{float(row['decoding']):.3f}" and cells[-2] == f"{float(row['model_accuracy']):.3f}"
            live = [float(r["live_fraction"]) for r in every
                    if r["step"] == row["step"] and r["layer"] != "all" and r.get("live_fraction", "nan") != "nan"]
            assert cells[-1] == ("/".join(str(round(100 * v)) for v in live) + "%" if live else "n/a")


@pytest.mark.parametrize(("transfer", "control", "expected"), [
    # 1.96 * sqrt(0.5 * 0.5 / 100 + 0.1 * 0.9 / 100) = 0.114: the bar (0.1) is far below +0.4
    (0.5, 0.1, "| yes (0.500, control 0.100; +0.400 ± 0.114) |"),
    # 1.96 * sqrt(0.25 * 0.75 / 100 + 0.1 * 0.9 / 100) = 0.103 > |0.15 - 0.1|: a yes, but a close one
    (0.25, 0.1, "| yes (0.250, control 0.100; +0.150 ± 0.103, close: the bar is inside the interval) |"),
    (0.1, 0.1, "| no (0.100, control 0.100; +0.000 ± 0.083) |"),
    # results with the paired interval: its difference and half-width are the ones given, not recomputed
    ((0.25, 0.16, 0.05), 0.1, "| yes (0.250, control 0.100; +0.160 ± 0.050) |"),
    ((0.25, 0.14, 0.05), 0.1, "| yes (0.250, control 0.100; +0.140 ± 0.050, close: the bar is inside the interval) |"),
])
def test_fig5_claims_give_the_transfer_verdict_with_its_95_percent_interval(tmp_path, transfer, control, expected):
    fig5 = _fig5_script()
    source = fig5.latest("results/fig5", "sraven-softmax-s0")
    if source is None:
        pytest.skip("no committed Fig. 5 results (not a clone)")
    copy = tmp_path / "results" / source.name
    shutil.copytree(source, copy)
    if isinstance(transfer, tuple):  # (transfer, paired difference, its half-width)
        transfer, difference, half = transfer
        header, paired = ",difference,difference_ci", f",{difference},{half}"
    else:
        header, paired = "", ""
    (copy / "rule_transfer_ood.csv").write_text(
        f"layer,transfer,control,keep,clean_keep,n_pairs,n_control_pairs{header}\n"
        f"all,{transfer},{control},0.2,0.8,100,100{paired}\n")
    claims = fig5.table_claims(str(copy.parent), ["sraven-softmax-s0"])
    row = next(line for line in claims if line.startswith("| Rule transfer"))
    assert row.endswith(expected), row
