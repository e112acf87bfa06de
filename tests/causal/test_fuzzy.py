"""Tests of alignment search and erasure on fuzzy logic: `FuzzyLogic.function_answer`, `FunctionCounterfactual`,
`TermsConcept` and `latentcode causal align|erase` on a fuzzy-logic run."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
import torch

from latentcode.causal.alignment import (
    alignment_search,
    counterfactual_for,
    interchange_accuracy,
)
from latentcode.causal.counterfactuals import FunctionCounterfactual
from latentcode.causal.erasure import (
    TermsConcept,
    concept_for,
    erasure_experiment,
    fit_erasers,
    random_erasers,
    set_decodability,
)
from latentcode.causal.interchange import Interchange
from latentcode.causal.patching import Site, Transplant, intervene
from latentcode.model.transformer import build_model
from latentcode.tasks.base import Batch
from latentcode.tasks.fuzzy_logic import FuzzyLogic
from tests.causal import CAUSAL, CAUSAL_README, results_csv, table_rows


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _fuzzy_model(seed: int = 0):
    task = FuzzyLogic()
    torch.manual_seed(seed)
    return build_model(task, "hyla", "tiny").eval(), task


def _by_hand(query: np.ndarray, bits: np.ndarray) -> float:
    """max over terms of min over literals (x_j if the bit is 1, else 1 - x_j), one instance, plain Python."""
    return max(min(x if b else 1.0 - x for x, b in zip(query, term, strict=True)) for term in bits)


def test_the_counterfactual_is_the_sources_function_at_the_bases_query_input():
    task = FuzzyLogic()
    n_pos = task.seq_len
    x = torch.zeros(2, n_pos, 5)
    x[0, -1, :4] = torch.tensor([0.2, 0.9, 0.5, 0.4])
    x[1, -1, :4] = torch.tensor([0.9, 0.1, 0.7, 0.3])
    base = Batch(x=x, y=torch.tensor([0.35, 0.2]), labels={}, split="ood")
    # source 0: x1&x2&x3&x4 (15) or ~x1&x2&~x3&x4 (5); source 1: ~x1&~x2&~x3&~x4 (0) or x1&~x2&x3&~x4 (10)
    bits = torch.tensor([[[1, 1, 1, 1], [0, 1, 0, 1]], [[0, 0, 0, 0], [1, 0, 1, 0]]])
    source = Batch(x=torch.zeros_like(x), y=torch.zeros(2), labels={"term_bits": bits,
                                                                     "terms": torch.tensor([[5, 15], [0, 10]])})
    # by hand: min(.2,.9,.5,.4) = .2 and min(.8,.9,.5,.4) = .4 -> .4; min(.1,.9,.3,.7) = .1, min(.9,.9,.7,.7) = .7 -> .7
    assert task.function_answer(x[:, -1, :4], bits).tolist() == pytest.approx([0.4, 0.7])
    target, informative = FunctionCounterfactual().targets(task, base, source, torch.ones(n_pos, dtype=torch.bool))
    assert target[:, 0].tolist() == pytest.approx([0.4, 0.7])
    assert informative[:, 0].tolist() == [False, True]  # |0.4 - 0.35| <= 0.1 < |0.7 - 0.2|
    off_site = torch.ones(n_pos, dtype=torch.bool)
    off_site[-1] = False
    assert not FunctionCounterfactual().targets(task, base, source, off_site)[1].any()
    # a hit: nearer the counterfactual value than the base's own target
    hits = FunctionCounterfactual().hits(task, torch.tensor([[0.38], [0.5]]), target, base)
    assert hits[:, 0].tolist() == [True, True]  # |.38-.4| < |.38-.35|; |.5-.7| < |.5-.2|
    assert not FunctionCounterfactual().hits(task, torch.tensor([[0.4], [0.4]]), target, base)[1, 0]
    assert isinstance(counterfactual_for(task), FunctionCounterfactual)


@pytest.mark.parametrize("k", [1, "all"])
def test_the_identity_rotation_is_a_transplant_on_fuzzy_logic(k):
    model, task = _fuzzy_model()
    n = int(model.cfg.n_heads)
    k = n if k == "all" else k
    base, source = task.sample(16, "ood", seed=0), task.sample(16, "ood", seed=1)
    site = Site("pattern", layers=1, positions="paper", whole_row=True)
    swapped = intervene(model, task, base, [(site, Interchange(source, torch.eye(n), k))])
    heads = Site("pattern", layers=1, positions="paper", whole_row=True, heads=list(range(k)))
    transplanted = intervene(model, task, base, [(heads, Transplant(source))])
    assert torch.equal(swapped.outputs, transplanted.outputs)
    assert not torch.equal(swapped.outputs, swapped.clean_outputs)


def test_fuzzy_iia_counts_predictions_nearer_the_sources_function_than_the_bases_target():
    model, task = _fuzzy_model()
    n = int(model.cfg.n_heads)
    base, source = task.sample(64, "ood", seed=2), task.sample(64, "ood", seed=3)
    site = Site("pattern", layers=1, positions="paper", whole_row=True)
    hits, total = interchange_accuracy(model, task, site, torch.eye(n), n, base, source)
    prediction = intervene(model, task, base, [(site, Transplant(source))]).prediction.numpy()
    query, bits, own = base.x[:, -1, :4].numpy(), source.labels["term_bits"].numpy(), base.y.numpy()
    counterfactual = np.array([_by_hand(q, b) for q, b in zip(query, bits, strict=True)])
    informative = np.abs(counterfactual - own) > 0.1
    expected = informative & (np.abs(prediction - counterfactual) < np.abs(prediction - own))
    assert (hits, total) == (int(expected.sum()), int(informative.sum()))
    assert 0 < total < 64


def test_alignment_search_on_fuzzy_logic_reports_every_control():
    model, task = _fuzzy_model()
    result = alignment_search(model, task, layers=[1], ks=[1, 2], n_samples=48, n_train=48, steps=2, progress=False)
    assert [(row["layer"], row["k"]) for row in result.rows] == [(1, 1), (1, 2)]
    for row in result.rows:
        assert set(result.columns) <= set(row)
        assert row["iia_low"] <= row["iia"] <= row["iia_high"] and row["n"] > 0 and row["n_control"] > 0
    assert result.params["counterfactual"] == "function_answer" and result.params["site"]["positions"] == "paper"


def _terms_in_known_directions(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Codes of dimension 12 whose first 6 coordinates mark which 2 of 6 terms an instance has, plus noise."""
    generator = torch.Generator().manual_seed(seed)
    weights = torch.tensor([6.0, 5.0, 4.0, 3.0, 2.0, 1.0])
    terms = torch.stack([torch.multinomial(weights, 2, generator=generator) for _ in range(n)])
    sets = torch.zeros(n, 6, dtype=torch.long).scatter_(1, terms, 1)
    codes = 0.3 * torch.randn(n, 12, generator=generator)
    codes[:, :6] += 2.0 * sets
    return codes, sets


def _top2_floor(train_sets: torch.Tensor, sets: torch.Tensor) -> float:
    """Fraction of a row's 2 terms among the 2 most frequent training terms (frequencies here are distinct)."""
    top = set(torch.argsort(train_sets.sum(dim=0), descending=True)[:2].tolist())
    return float(np.mean([len(top & set(torch.nonzero(row).squeeze(1).tolist())) / 2 for row in sets]))


def test_leace_on_the_multi_hot_terms_leaves_them_at_the_floor_and_a_random_erasure_does_not():
    codes, sets = _terms_in_known_directions(3000, seed=0)
    held_codes, held_sets = _terms_in_known_directions(3000, seed=1)
    floor = _top2_floor(sets, held_sets)
    assert TermsConcept().floor(sets, held_sets) == pytest.approx(floor)
    assert set_decodability(codes, sets, held_codes, held_sets) > 0.95
    (eraser,) = fit_erasers([codes], [sets], 6)
    erased = set_decodability(eraser(codes.double()), sets, eraser(held_codes.double()), held_sets)
    assert erased == pytest.approx(floor, abs=0.03)
    (random,) = random_erasers([codes], [5], seed=0)
    assert set_decodability(random(codes.double()), sets, random(held_codes.double()), held_sets) > floor + 0.2


def test_erasure_on_fuzzy_logic_reports_r2_and_decodes_at_the_floor():
    model, task = _fuzzy_model()
    assert isinstance(concept_for(task), TermsConcept)
    result = erasure_experiment(model, task, layers=[1], whole_row=True, n_samples=256, n_fit=1024, progress=False)
    (row,) = result.rows
    assert list(row) == list(result.columns)
    assert {"r2_clean", "r2_leace", "r2_random", "loss_clean", "loss_leace", "loss_random"} <= set(row)
    assert row["decode_leace"] <= row["decode_floor"] + 0.03
    assert 0 < row["rank"] <= 2 ** task.config.n_variables - 1
    with pytest.raises(ValueError, match="not an input choice") as error:
        erasure_experiment(model, task, inputs="nonsense", n_samples=8, n_fit=8, progress=False)
    assert "\n" not in str(error.value)


@pytest.fixture(scope="module")
def tiny_fuzzy_run(tmp_path_factory):
    from latentcode.config import model_config, train_config
    from latentcode.tasks import get_task
    from latentcode.training.train import train

    task = get_task("fuzzy_logic")
    torch.set_num_threads(1)
    return train(model_config(task, "hyla", "tiny"), task, train_config("fuzzy_logic", "tiny"),
                 tmp_path_factory.mktemp("run") / "fuzzy", progress=False)


def test_the_causal_command_runs_align_and_erase_on_a_tiny_fuzzy_logic_run(tiny_fuzzy_run, tmp_path, capsys):
    from latentcode.cli.app import main

    run = str(tiny_fuzzy_run.path)
    assert main(["causal", "align", run, "--layers", "1", "--k", "1,2", "--n-samples", "32", "--n-train", "32",
                 "--steps", "2", "--seed", "1", "--out", str(tmp_path / "align"), "--no-progress"]) == 0
    with open(tmp_path / "align" / "alignment.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["layer"], r["k"]) for r in rows] == [("1", "1"), ("1", "2")]
    assert (tmp_path / "align" / "rotations" / "layer1_k2.safetensors").is_file()
    params = json.loads((tmp_path / "align" / "alignment.json").read_text())["params"]
    assert params["seed"] == 1 and params["counterfactual"] == "function_answer"
    assert main(["causal", "erase", run, "--whole-row", "--n-samples", "64", "--n-fit", "128",
                 "--out", str(tmp_path / "erase"), "--no-progress"]) == 0
    with open(tmp_path / "erase" / "erasure.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["layer"] for r in rows] == ["0", "1"] and "r2_leace" in rows[0]
    assert "erasure — fuzzy_logic" in capsys.readouterr().out


def _informative_by_hand(task, n: int, seed: int, split: str = "ood", **options) -> int:
    """Pairs whose two targets differ by more than the 0.1 margin at the base's query input: the base drawn with seed
    `seed`, the source with `seed + 1` (as alignment search draws its pairs), the source's function evaluated in
    plain Python."""
    base = task.sample(n, split, seed=seed, **options)
    source = task.sample(n, split, seed=seed + 1, **options)
    counterfactual = [_by_hand(query, bits) for query, bits in
                      zip(base.x[:, -1, :-1].tolist(), source.labels["term_bits"].tolist(), strict=True)]
    return sum(abs(value - target) > 0.1 for value, target in zip(counterfactual, base.y.tolist(), strict=True))


@pytest.fixture(scope="module")
def fuzzy_run_task_seed_1(tmp_path_factory):
    """A tiny fuzzy-logic run of task seed 1, two steps: its fixed query input leaves many informative pairs (task
    seed 0's tiny fixed query gives every function nearly the same value)."""
    from latentcode.cli.app import main
    from latentcode.rundir.checkpoint import load_run

    out = tmp_path_factory.mktemp("run") / "fuzzy-s1"
    assert main(["-q", "train", "fuzzy_logic", "--model", "hyla", "--preset", "tiny", "--steps", "2", "--seed", "1",
                 "--out", str(out), "--no-progress", "--threads", "1"]) == 0
    return load_run(out)


def test_causal_align_inputs_draws_every_pair_at_that_input_choice(fuzzy_run_task_seed_1, tmp_path):
    """`--inputs fixed_query` reaches the search: its held-out entries (column n) are those of pairs that share one
    query input, counted by hand, not those of pairs drawn as in training."""
    from latentcode.cli.app import main

    run, n, seed = str(fuzzy_run_task_seed_1.path), 64, 3
    task = fuzzy_run_task_seed_1.task
    expected = {inputs: _informative_by_hand(task, n, seed + 10, **({"inputs": inputs} if inputs else {}))
                for inputs in (None, "fixed_query")}
    assert expected[None] != expected["fixed_query"]  # the counts tell the two draws apart
    for inputs in (None, "fixed_query"):
        out = tmp_path / str(inputs)
        assert main(["causal", "align", run, "--layers", "1", "--k", "1", "--n-samples", str(n), "--n-train", "16",
                     "--steps", "1", "--seed", str(seed), "--out", str(out), "--no-progress",
                     *(["--inputs", inputs] if inputs else [])]) == 0
        with open(out / "alignment.csv") as handle:
            (row,) = csv.DictReader(handle)
        assert int(row["n"]) == expected[inputs], inputs
        assert json.loads((out / "alignment.json").read_text())["params"]["inputs"] == inputs


def test_alignment_search_says_when_an_input_choice_leaves_no_informative_pair():
    """Task seed 0's tiny fixed query gives every function nearly the same value: no pair counts, counted by hand."""
    model, task = _fuzzy_model()
    assert _informative_by_hand(task, 64, 0, "train", inputs="fixed_query") == 0
    with pytest.raises(ValueError, match="no training pair drawn at inputs='fixed_query'.*choose other inputs") as error:
        alignment_search(model, task, layers=[1], ks=[1], n_train=64, inputs="fixed_query", progress=False)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["align", "fuzzy_logic-hyla", "--seed", "7"], "no seed 7 of 'fuzzy_logic-hyla' is shipped"),
        (["align", "fuzzy_logic-hyla", "--inputs", "fixed"], "inputs='fixed' is not an input choice of 'fuzzy_logic'; "
         "valid: fixed_query, uniform, fixed_context"),
        (["erase", "fuzzy_logic-hyla", "--seed", "1", "--layers", "2"], "--layers 2 out of range"),
        (["align", "fuzzy_logic-hyla", "--k", "9"], "--k 9 out of range"),
    ],
)
def test_the_causal_command_rejects_bad_fuzzy_logic_options_in_one_line(argv, match, capsys):
    from latentcode.cli.app import main

    assert main(["causal", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert match in err and "\n" not in err


SITES = {"query→query": "", "whole row": "-whole-row", "fixed query": "-fixed-query"}
CHECKPOINTS = [f"fuzzy_logic-{variant}{seed}" for variant in ("softmax", "linear", "hyla") for seed in ("", "-s1", "-s2")]
no_results = pytest.mark.skipif(not (CAUSAL / "fuzzy_logic-hyla").is_dir(), reason="no committed fuzzy-logic causal results")


@no_results
def test_the_fuzzy_logic_alignment_table_in_the_readme_is_each_runs_largest_iia_in_the_committed_results():
    rows = table_rows(CAUSAL_README, "| model | site | layer, k | IIA | 95% interval | identity (transplant) | random "
                      "rotation | same-function source (floor) | unpatched | IIA, training functions | n |")
    assert [(model, site) for model, site, *_ in rows] == \
        [(m, s) for m in CHECKPOINTS for s in ("query→query", "whole row")]  # three variants x three seeds x two sites
    for model, site, layer_k, *cells in rows:
        results = results_csv(CAUSAL / (model + SITES[site]) / "alignment.csv")
        best = max(results, key=lambda r: float(r["iia"]))
        assert layer_k == f"{best['layer']}, {best['k']}", (model, site)
        f3 = [f"{float(best[c]):.3f}" for c in ("iia", "iia_low", "iia_high", "identity", "random", "same_rule",
                                                 "clean_counterfactual", "train_iia")]
        assert cells == [f3[0], f"{f3[1]}–{f3[2]}", *f3[3:], best["n"]], (model, site)


@no_results
@pytest.mark.parametrize(("header", "sites"), [
    ("| model | site | layer | rank | R² clean | R² LEACE | R² random | MSE clean | MSE LEACE | MSE random "
     "| decode clean | decode LEACE | decode random | floor |", ("query→query", "whole row")),
    ("| model | inputs | layer | rank | R² clean | R² LEACE | R² random | MSE clean | MSE LEACE | MSE random "
     "| decode clean | decode LEACE | decode random | floor |", ("fixed query",)),
])
def test_the_fuzzy_logic_erasure_tables_in_the_readme_are_the_committed_results(header, sites):
    rows = table_rows(CAUSAL_README, header)
    # nine checkpoints x two layers, at two sites / on the paper's reading
    assert [(model, site, layer) for model, site, layer, *_ in rows] == \
        [(m, s, layer) for m in CHECKPOINTS for s in sites for layer in ("0", "1")]
    for model, site, layer, *cells in rows:
        (result,) = [r for r in results_csv(CAUSAL / (model + SITES[site]) / "erasure.csv") if r["layer"] == layer]
        expected = [result["rank"], *(f"{float(result[c]):.3f}" for c in ("r2_clean", "r2_leace", "r2_random")),
                    *(f"{float(result[c]):.4f}" for c in ("loss_clean", "loss_leace", "loss_random")),
                    *(f"{float(result[c]):.3f}" for c in ("decode_clean", "decode_leace", "decode_random",
                                                          "decode_floor"))]
        assert cells == expected, (model, site, layer)


@no_results
def test_the_fuzzy_logic_erasure_summary_in_the_readme_is_each_runs_costliest_erasure():
    rows = table_rows(CAUSAL_README, "| model | site | layer | rank | R² clean | R² LEACE | R² random | decode clean "
                      "| decode LEACE | floor |")
    assert [model for model, *_ in rows] == CHECKPOINTS
    for model, site, layer, *cells in rows:
        candidates = [(s, r) for s in SITES for r in results_csv(CAUSAL / (model + SITES[s]) / "erasure.csv")]
        best_site, best = max(candidates, key=lambda sr: float(sr[1]["r2_clean"]) - float(sr[1]["r2_leace"]))
        assert (site, layer) == (best_site, best["layer"]), model
        assert cells == [best["rank"], *(f"{float(best[c]):.3f}" for c in (
            "r2_clean", "r2_leace", "r2_random", "decode_clean", "decode_leace", "decode_floor"))], model
