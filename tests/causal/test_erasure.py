"""Tests of latentcode/causal/erasure.py: LEACE erasure of the rule from the codes."""

from __future__ import annotations

import pytest
import torch
from concept_erasure import LeaceEraser

from latentcode.causal.erasure import (
    Erase,
    decodability,
    erased_rank,
    erasure_experiment,
    fit_erasers,
    random_erasers,
    view_codes,
    views,
)
from latentcode.causal.patching import Ablate, Site, intervene
from latentcode.model.transformer import build_model
from latentcode.tasks.fuzzy_logic import FuzzyLogic
from latentcode.tasks.sraven import SRaven
from tests.causal import CAUSAL, CAUSAL_DOC, CAUSAL_README, results_csv, table_rows, titled_tables


def _rule_in_known_directions(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Codes of dimension 10 whose first two coordinates hold one of 4 rules (unbalanced classes), plus noise."""
    generator = torch.Generator().manual_seed(seed)
    rules = torch.multinomial(torch.tensor([0.4, 0.3, 0.2, 0.1]), n, replacement=True, generator=generator)
    centroids = torch.tensor([[2.0, 0.0], [0.0, 2.0], [-2.0, 0.0], [0.0, -2.0]])
    codes = 0.3 * torch.randn(n, 10, generator=generator)
    codes[:, :2] += centroids[rules]
    return codes, rules


def test_leace_erased_codes_decode_at_the_majority_floor():
    codes, rules = _rule_in_known_directions(4000, seed=0)
    held_codes, held_rules = _rule_in_known_directions(4000, seed=1)
    floor = float((held_rules == 0).float().mean())  # class 0 is the most common by construction
    assert decodability(codes, rules, held_codes, held_rules) > 0.95
    (eraser,) = fit_erasers([codes], [rules], 4)
    assert erased_rank(eraser) == 3  # LEACE removes at most n_classes - 1 directions
    erased = decodability(eraser(codes.double()), rules, eraser(held_codes.double()), held_rules)
    assert erased == pytest.approx(floor, abs=0.02)
    # a random subspace of the same rank leaves the rule readable
    (random,) = random_erasers([codes], [3], seed=0)
    assert decodability(random(codes.double()), rules, random(held_codes.double()), held_rules) > floor + 0.2


def test_a_models_erased_codes_decode_at_the_floor_on_the_data_they_were_fit_on():
    task = SRaven()
    torch.manual_seed(0)
    model = build_model(task, "hyla", "tiny").eval()
    batch = task.sample(1024, "train", seed=0, unpermuted=True)
    _, cache = model.run_with_cache(batch.x, names_filter=["blocks.1.attn.hook_pattern"])
    (view, *_) = views(task, "all_features", whole_row=True)
    codes, rules = view_codes(cache["blocks.1.attn.hook_pattern"], view), batch.labels["rules"][:, view.feature]
    (eraser,) = fit_erasers([codes], [rules], int(rules.max()) + 1)
    values, counts = torch.unique(rules, return_counts=True)
    floor = float(counts.max()) / len(rules)
    erased = eraser(codes.double())
    assert decodability(erased, rules, erased, rules) == pytest.approx(floor, abs=0.01)


def test_erase_with_a_full_rank_eraser_about_the_mean_is_a_mean_ablation_of_the_views():
    task = SRaven()
    torch.manual_seed(0)
    model = build_model(task, "hyla", "tiny").eval()
    batch = task.sample(32, "ood", seed=0, unpermuted=True)
    reference = task.sample(64, "train", seed=1, unpermuted=True)
    site = Site("pattern", layers=1, positions="all_features", whole_row=True)
    site_views = views(task, "all_features", whole_row=True)
    _, cache = model.run_with_cache(reference.x, names_filter=["blocks.1.attn.hook_pattern"])
    erasers = []
    for view in site_views:
        mean = view_codes(cache["blocks.1.attn.hook_pattern"], view).double().mean(dim=0)
        eye = torch.eye(len(mean), dtype=torch.float64)
        erasers.append(LeaceEraser(proj_left=eye, proj_right=eye, bias=mean))  # x - (x - mean) = mean
    erased = intervene(model, task, batch, [(site, Erase(site_views, erasers))])
    ablated = intervene(model, task, batch, [(site, Ablate("mean", reference=reference))])
    assert torch.allclose(erased.outputs, ablated.outputs, atol=1e-5)
    assert not torch.allclose(erased.outputs, erased.clean_outputs, atol=1e-3)


def test_erasure_experiment_reports_leace_at_the_floor_beside_its_controls():
    task = SRaven()
    torch.manual_seed(0)
    model = build_model(task, "hyla", "tiny").eval()
    result = erasure_experiment(model, task, layers=[1], n_samples=256, n_fit=1024, progress=False)
    (row,) = result.rows
    assert row["decode_leace"] <= row["decode_floor"] + 0.03
    assert set(result.columns) == set(row)
    assert 0 < row["rank"] <= int(result.rows[0]["rank"])


def test_erasure_refuses_a_task_without_rule_labels_and_bad_layers():
    class NoConcept(FuzzyLogic):  # fuzzy logic without function_answer: neither rules nor terms to erase
        def __getattribute__(self, name):
            if name == "function_answer":
                raise AttributeError(name)
            return super().__getattribute__(name)

    task = NoConcept()
    torch.manual_seed(0)
    model = build_model(task, "hyla", "tiny").eval()
    with pytest.raises(ValueError, match="per-feature rule labels"):
        erasure_experiment(model, task, n_samples=8, n_fit=8)
    task = SRaven()
    model = build_model(task, "hyla", "tiny").eval()
    with pytest.raises(ValueError, match="out of range"):
        erasure_experiment(model, task, layers=[9], n_samples=8, n_fit=8)


SRAVEN_MODELS = ["sraven-softmax", "sraven-linear", "sraven-hyla"]
sraven_results = pytest.mark.skipif(not (CAUSAL / "sraven-hyla").is_dir(), reason="no committed SRAVEN causal results")
DECODE = ("decode_clean", "decode_leace", "decode_random", "decode_floor")


@sraven_results
def test_the_sraven_erasure_tables_in_the_readme_are_the_committed_results():
    tables = titled_tables(CAUSAL_README, "| layer | rank | acc clean | acc LEACE | acc random | per-feature clean "
                           "| per-feature LEACE | per-feature random | decode clean | decode LEACE | decode random "
                           "| floor |")
    assert list(tables) == SRAVEN_MODELS
    for name, (title, rows) in tables.items():
        results = results_csv(CAUSAL / name / "erasure.csv")
        (n_eval,) = {r["n_eval"] for r in results}
        assert title == (f"**{name}** — erasure (accuracy on held-out rule sets, n = {n_eval}; decoding on held-out "
                         "instances of the training rule sets)")
        columns = ("acc_clean", "acc_leace", "acc_random", "acc_per_feature_clean", "acc_per_feature_leace",
                   "acc_per_feature_random", *DECODE)
        assert rows == [[r["layer"], r["rank"], *(f"{float(r[c]):.3f}" for c in columns)] for r in results], name


@sraven_results
def test_the_sraven_erasure_summary_in_the_docs_is_each_models_costliest_layer():
    rows = table_rows(CAUSAL_DOC, "| model | layer | rank | acc clean | acc LEACE | acc random | decode clean "
                      "| decode LEACE | floor |")
    assert [model for model, *_ in rows] == SRAVEN_MODELS
    for model, *cells in rows:
        results = results_csv(CAUSAL / model / "erasure.csv")
        best = max(results, key=lambda r: float(r["acc_clean"]) - float(r["acc_leace"]))
        assert cells == [best["layer"], best["rank"], *(f"{float(best[c]):.3f}" for c in (
            "acc_clean", "acc_leace", "acc_random", "decode_clean", "decode_leace", "decode_floor"))], model
