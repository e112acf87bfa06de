"""Tests of latentcode/pipelines/fig5.py and probes.input_similarity: Fig. 5's analysis set of one opened SRAVEN run,
checked against values computed by hand or by the probes called directly."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest
import torch

from latentcode.config import model_config, train_config
from latentcode.pipelines.fig5 import (
    FIG5_FILES,
    cluster_rows,
    fig5_analysis,
    results_name,
    similarity_rows,
    step_metrics,
)
from latentcode.pipelines.opened_run import open_run
from latentcode.tasks import get_task
from latentcode.training.train import train
from probes import LatentCodes, input_similarity, rule_similarity


def _hand_made(rules: list[int], key_values: list[tuple[int, int]], n_classes: int = 2) -> LatentCodes:
    """Codes of len(rules) rows whose inputs hold `key_values` at positions 0 and 1 (the key positions)."""
    n = len(rules)
    inputs = np.array([[a, b, 9] for a, b in key_values], dtype=np.float32)[:, :, None]
    rng = np.random.default_rng(0)
    return LatentCodes(rng.normal(size=(n, 2, 1, 1, 2)).astype(np.float32),
                       {"rule": np.array(rules), "target": np.array(rules)}, np.array(["test"] * n),
                       {"task": "sraven", "label": "rule", "n_classes": n_classes, "class_names": ["f", "g", "h"][:n_classes],
                        "query": [2], "key": [0, 1], "layers": [0, 1]}, inputs=inputs)


def test_input_similarity_is_the_cosine_of_each_rules_share_of_input_types():
    # rule f sees the key pair (1, 2) twice; rule g sees (1, 2) once and (3, 4) once:
    # mean one-hots f = (1, 0), g = (1/2, 1/2): cosine 1/sqrt(2); the grand mean (3/4, 1/4) removed they point apart
    codes = _hand_made([0, 0, 1, 1], [(1, 2), (1, 2), (1, 2), (3, 4)])
    raw = input_similarity(codes, center=False)
    assert raw.layer == "input-only" and raw.class_names == ["f", "g"] and list(raw.counts) == [2, 2]
    assert raw.similarity[0, 1] == pytest.approx(1 / math.sqrt(2))
    assert input_similarity(codes, center=True).similarity[0, 1] == pytest.approx(-1.0)
    # the codes themselves play no part: a rule pair with the same input distribution is identical here
    same = _hand_made([0, 0, 1, 1], [(1, 2), (3, 4), (3, 4), (1, 2)])
    assert input_similarity(same, center=False).similarity[0, 1] == pytest.approx(1.0)


def test_input_similarity_marks_a_class_without_rows_and_refuses_codes_without_inputs():
    codes = _hand_made([0, 0, 1, 1], [(1, 2), (1, 2), (1, 2), (3, 4)], n_classes=3)
    sim = input_similarity(codes, center=False)
    assert list(sim.counts) == [2, 2, 0] and np.isnan(sim.similarity[0, 2]) and np.isnan(sim.similarity[2, 1])
    bare = LatentCodes(codes.codes, codes.labels, codes.split, codes.meta)
    with pytest.raises(ValueError, match="inputs"):
        input_similarity(bare)


def test_similarity_rows_hold_each_layers_rule_cosines_then_the_input_only_control():
    codes = _hand_made([0, 1, 0, 1, 0, 1], [(1, 2), (3, 4), (1, 2), (1, 2), (3, 4), (3, 4)])
    rows = similarity_rows(codes)
    assert [(r["layer"], r["centered"]) for r in rows] == [(layer, c) for layer in ("0", "1", "all", "input-only")
                                                           for c in (False, True)]
    for row in rows[:-2]:  # one pair (f, g) per layer and centring: the probes' own cosine, rounded
        layer = row["layer"] if row["layer"] == "all" else int(row["layer"])
        expected = rule_similarity(codes, layer=layer, center=row["centered"]).similarity[0, 1]
        assert row["cosine"] == round(float(expected), 4) and (row["rule_a"], row["rule_b"]) == ("f", "g")
    # input-only: f sees (1,2) twice and (3,4) once, g the reverse: cosine (2 + 2) / 5
    assert rows[-2]["cosine"] == pytest.approx(0.8, abs=1e-4)


def test_cluster_rows_score_each_label_on_every_row_and_on_the_held_out_rows():
    rng = np.random.default_rng(1)
    rule = np.repeat([0, 1], 20)
    codes = LatentCodes((rule[:, None] * 10.0 + rng.normal(size=(40, 2))).reshape(40, 1, 1, 1, 2),
                        {"rule": rule, "target": rng.integers(0, 2, 40)}, np.array(["test", "ood"] * 20),
                        {"task": "sraven", "label": "rule", "n_classes": 2, "layers": [0]})
    rows = [r for r in cluster_rows(codes, k=2) if str(r["layer"]) == "0"]
    assert [(r["label"], r["rows"], r["n_samples"]) for r in rows] == [
        ("rule", "all", 40), ("rule", "ood", 20), ("target", "all", 40), ("target", "ood", 20)]
    assert rows[0]["ami"] == 1.0 and rows[0]["ari"] == 1.0  # two far-apart blobs, one per rule
    assert abs(rows[2]["ami"]) < 0.2  # the target is independent of the blobs


@pytest.fixture(scope="module")
def tiny_sraven(tmp_path_factory):
    torch.set_num_threads(1)
    task = get_task("sraven")
    cfg = train_config("sraven", "tiny", steps=4, warmup=1, eval_every=4, log_every=4, checkpoint_every=4,
                       eval_samples=32, device="cpu", snapshots=True)
    run_dir = tmp_path_factory.mktemp("runs") / "sraven-hyla-s0"
    train(model_config(task, "hyla", "tiny"), task, cfg, run_dir, progress=False)
    return run_dir


def test_results_name_and_step_metrics_read_the_weights_step_and_the_runs_own_evaluation(tiny_sraven):
    run = open_run(tiny_sraven)
    assert results_name(run) == "sraven-hyla-s0-step000004"
    expected = {f"{r['split']}_acc": r["acc"] for r in map(json.loads, (tiny_sraven / "metrics.jsonl").open())
                if r.get("step") == 4 and r.get("split") in ("test", "ood")}
    assert expected and step_metrics(run).items() >= expected.items()
    snapshot = tiny_sraven / "snapshots" / "step-000004"  # a snapshot reads its run's metrics
    assert results_name(snapshot) == "sraven-hyla-s0-step000004"
    assert step_metrics(snapshot).items() >= expected.items()


def test_fig5_analysis_of_an_open_run_saves_what_the_probes_and_the_transfer_give(tiny_sraven, tmp_path):
    from latentcode.causal.transfer import rule_transfer

    run = open_run(tiny_sraven)
    result = fig5_analysis(run, out_dir=tmp_path / "analysis", n_samples=32, transfer_samples=64, progress=False)
    paths = result.save(tmp_path / "results", {"all": "the command"})
    assert [p.name for p in paths] == list(FIG5_FILES) and all(p.is_file() for p in paths)
    summary = json.loads((tmp_path / "results" / "fig5.json").read_text())
    assert summary["step"] == 4 and summary["codes"]["n_samples"] == 96 and summary["commands"] == {"all": "the command"}
    assert summary["model"] == step_metrics(run) and summary["paper_ood_acc"] == 69.13
    # the decoding is decode_run's file for the same codes, the transfer the experiment run directly
    decoded = json.loads((tmp_path / "analysis" / "codes" / "paper.decode.json").read_text())
    assert json.loads((tmp_path / "results" / "decode.json").read_text()) == decoded
    direct = rule_transfer(run.model, run.task, n_samples=64, split="ood", seed=0, progress=False)
    with (tmp_path / "results" / "rule_transfer_ood.csv").open() as f:
        saved = list(csv.DictReader(f))
    assert [float(r["transfer"]) for r in saved] == pytest.approx([r["transfer"] for r in direct.rows])
    with (tmp_path / "results" / "similarity.csv").open() as f:
        control = [r for r in csv.DictReader(f) if r["layer"] == "input-only" and r["centered"] == "False"]
    sim = input_similarity(result.codes, "rule", center=False)
    expected = [round(float(sim.similarity[i, j]), 4) for i in range(8) for j in range(i + 1, 8)]
    np.testing.assert_array_equal([float(r["cosine"]) for r in control], expected)  # NaN: a rule without rows


def test_fig5_analysis_refuses_a_run_of_another_task_before_any_work(tmp_path):
    task = get_task("fuzzy_logic")
    cfg = train_config("fuzzy_logic", "tiny", steps=2, warmup=1, eval_every=2, log_every=1, eval_samples=8,
                       device="cpu")
    run_dir = tmp_path / "fuzzy"
    train(model_config(task, "linear", "tiny"), task, cfg, run_dir, progress=False)
    with pytest.raises(ValueError, match="is a fuzzy_logic run; Fig. 5 is SRAVEN's"):
        fig5_analysis(run_dir, out_dir=tmp_path / "out")
    assert not (tmp_path / "out").exists()
