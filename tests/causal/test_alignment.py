"""Tests of latentcode/causal/alignment.py: distributed alignment search on the codes."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from transformer_lens import HookedRootModule
from transformer_lens.hook_points import HookPoint

from latentcode.causal.alignment import (
    Rotation,
    alignment_search,
    counterfactual_for,
    interchange_accuracy,
    random_rotation,
    wilson_interval,
)
from latentcode.causal.interchange import Interchange
from latentcode.causal.patching import Site, Transplant, intervene
from latentcode.model.transformer import build_model
from latentcode.tasks.base import Batch
from latentcode.tasks.fuzzy_logic import FuzzyLogic
from latentcode.tasks.sraven import SRaven
from tests.causal import (
    CAUSAL,
    CAUSAL_DOC,
    CAUSAL_README,
    best_alignment_cells,
    results_csv,
    table_rows,
    titled_tables,
)


def _sraven_model(seed: int = 0):
    task = SRaven()
    torch.manual_seed(seed)
    return build_model(task, "hyla", "tiny").eval(), task


@pytest.mark.parametrize("k", [1, "all"])
def test_the_identity_rotation_is_todays_transplant_of_the_first_k_heads(k):
    model, task = _sraven_model()
    n = int(model.cfg.n_heads)
    k = n if k == "all" else k
    base = task.sample(16, "ood", seed=0, unpermuted=True)
    source = task.sample(16, "ood", seed=1, unpermuted=True)
    site = Site("pattern", layers=1, positions="all_features")
    swapped = intervene(model, task, base, [(site, Interchange(source, torch.eye(n), k))])
    heads = Site("pattern", layers=1, positions="all_features", heads=list(range(k)))
    transplanted = intervene(model, task, base, [(heads, Transplant(source))])
    assert torch.equal(swapped.outputs, transplanted.outputs)
    assert not torch.equal(swapped.outputs, swapped.clean_outputs)  # the site matters to this model


def test_interchange_accuracy_counts_the_transplants_hits_on_the_counterfactual_answer():
    model, task = _sraven_model()
    n = int(model.cfg.n_heads)
    base = task.sample(64, "ood", seed=2, unpermuted=True)
    source = task.sample(64, "ood", seed=3, unpermuted=True)
    site = Site("pattern", layers=1, positions="all_features")
    hits, total = interchange_accuracy(model, task, site, torch.eye(n), n, base, source)
    prediction = intervene(model, task, base, [(site, Transplant(source))]).prediction
    # the counterfactual by hand: feature f of the base's panels under the source's rule for f
    expected_hits = expected_total = 0
    for f in range(task.config.n_features):
        answer, defined = task.rule_answer(base.labels["panels"][..., f], source.labels["rules"][:, f])
        counted = defined & (answer != base.y[:, f])
        expected_total += int(counted.sum())
        expected_hits += int(((prediction[:, f] == answer) & counted).sum())
    assert (hits, total) == (expected_hits, expected_total)
    assert total > 0


class _SubspaceModel(HookedRootModule):
    """A model whose answer reads its code only through a known 2-d subspace `basis`: the code (the scores of
    `n_heads` heads for query 1 x key 0) is the input's second token; the logits are minus the squared distance of
    the code's coordinates in `basis` to each class centroid."""

    def __init__(self, basis: torch.Tensor, centroids: torch.Tensor) -> None:
        super().__init__()
        from types import SimpleNamespace

        self.cfg = SimpleNamespace(n_layers=1, n_heads=basis.shape[0], variant="subspace")
        self.register_buffer("basis", basis)
        self.register_buffer("centroids", centroids)
        self.unused = torch.nn.Parameter(torch.zeros(1))
        self.blocks = torch.nn.ModuleList([torch.nn.Module()])
        self.blocks[0].attn = torch.nn.Module()
        self.blocks[0].attn.hook_pattern = HookPoint()
        self.setup()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pattern = torch.zeros(len(x), self.cfg.n_heads, 2, 2)
        pattern[:, :, 1, 0] = x[:, 1]
        code = self.blocks[0].attn.hook_pattern(pattern)[:, :, 1, 0]
        logits = -((code @ self.basis)[:, None, :] - self.centroids[None]).pow(2).sum(-1)
        return torch.stack([torch.zeros_like(logits), logits], dim=1)


class _SubspaceTask:
    """Instances of 3 rules; the code holds the rule's centroid in the known subspace plus large noise outside it."""

    name, seq_len, n_classes = "subspace", 2, 3

    def __init__(self, basis: torch.Tensor, complement: torch.Tensor, centroids: torch.Tensor) -> None:
        self.basis, self.complement, self.centroids = basis, complement, centroids

    def sample(self, n: int, split: str = "train", *, seed: int = 0, device="cpu", unpermuted: bool = True) -> Batch:
        generator = torch.Generator().manual_seed(seed)
        rules = torch.randint(self.n_classes, (n,), generator=generator)
        noise = 3.0 * torch.randn(n, self.complement.shape[1], generator=generator)
        code = self.centroids[rules] @ self.basis.T + noise @ self.complement.T
        x = torch.stack([torch.zeros_like(code), code], dim=1)
        return Batch(x=x, y=rules[:, None], labels={"rules": rules[:, None]}, split=split)


class _SourceRule:
    """Counterfactual of the subspace task: the answer is the source's rule."""

    name = "source_rule"

    def targets(self, task, base, source, site_queries):
        target = source.labels["rules"]
        return target, target != base.labels["rules"]

    def logits(self, task, outputs):
        return outputs[:, 1:]

    def sample(self, task, n, split, seed, device):
        return task.sample(n, split, seed=seed)


def test_the_search_recovers_a_subspace_that_stores_the_rule_and_a_random_rotation_does_not():
    n_heads = 6
    frame = random_rotation(n_heads, seed=11)  # a known orthonormal frame, unrelated to the search's seeds
    basis, complement = frame[:, :2], frame[:, 2:]
    centroids = 2.0 * torch.tensor([[math.cos(a), math.sin(a)] for a in (0.0, 2 * math.pi / 3, 4 * math.pi / 3)])
    model, task = _SubspaceModel(basis, centroids), _SubspaceTask(basis, complement, centroids)
    positions = np.zeros((2, 2), dtype=bool)
    positions[1, 0] = True
    result = alignment_search(model, task, layers=[0], ks=[2], positions=positions, n_samples=512, n_train=512,
                              steps=300, batch_size=64, lr=0.05, seed=0, counterfactual=_SourceRule(),
                              progress=False)
    row = result.rows[0]
    found = result.rotations[(0, 2)].subspace(2).detach()
    cosines = torch.linalg.svdvals(basis.T @ found)  # cosines of the principal angles
    assert float(cosines.min()) > math.cos(math.radians(10))
    assert row["iia"] > 0.95 and row["train_iia"] > 0.95
    assert row["random"] < 0.7 and row["identity"] < 0.7
    assert row["same_rule"] < 0.05  # a source with the base's own rule moves nothing towards another rule
    assert row["iia_low"] <= row["iia"] <= row["iia_high"]


def test_a_rotation_saves_and_loads_as_safetensors_and_json(tmp_path):
    rotation = Rotation(5, init="random", seed=3)
    paths = rotation.save(tmp_path / "layer1_k2", {"layer": 1, "k": 2})
    assert sorted(p.suffix for p in paths) == [".json", ".safetensors"]
    loaded, meta = Rotation.load(tmp_path / "layer1_k2.safetensors")
    assert torch.allclose(loaded.matrix, rotation.matrix, atol=1e-6)
    assert meta["layer"] == 1 and meta["k"] == 2 and meta["n"] == 5
    assert torch.allclose(loaded.matrix @ loaded.matrix.T, torch.eye(5), atol=1e-5)


def test_identity_and_random_rotations_are_orthogonal():
    assert torch.equal(Rotation(4, init="identity").matrix.detach(), torch.eye(4))
    q = random_rotation(7, seed=1)
    assert torch.allclose(q @ q.T, torch.eye(7), atol=1e-5)


def test_the_wilson_interval_matches_its_closed_form():
    # 0 of 10: the interval is [0, z^2 / (n + z^2)]
    low, high = wilson_interval(0, 10)
    assert low == 0.0 and high == pytest.approx(1.96**2 / (10 + 1.96**2))
    assert all(math.isnan(v) for v in wilson_interval(0, 0))


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"ks": [99]}, r"k=99 must be an integer in 1\.\."),
        ({"layers": [7]}, r"layers=\[7\] out of range"),
        ({"positions": "nonsense"}, r"nonsense"),
    ],
)
def test_bad_alignment_inputs_fail_in_one_line_before_any_work(options, match):
    model, task = _sraven_model()
    with pytest.raises(ValueError, match=match) as error:
        alignment_search(model, task, **{"n_samples": 8, "n_train": 8, "steps": 1, **options})
    assert "\n" not in str(error.value)


class _NoCounterfactual(FuzzyLogic):
    """Fuzzy logic without its `function_answer`: a task with no counterfactual ground truth."""

    def __getattribute__(self, name):
        if name == "function_answer":
            raise AttributeError(name)
        return super().__getattribute__(name)


def test_a_task_without_counterfactual_ground_truth_is_refused():
    task = _NoCounterfactual()
    with pytest.raises(ValueError, match="no counterfactual ground truth") as error:
        counterfactual_for(task)
    assert "\n" not in str(error.value)
    torch.manual_seed(0)
    model = build_model(task, "hyla", "tiny").eval()
    with pytest.raises(ValueError, match="no counterfactual ground truth"):
        alignment_search(model, task, n_samples=8, n_train=8, steps=1)


def test_an_interchange_site_must_span_every_head():
    model, task = _sraven_model()
    batch = task.sample(4, seed=0, unpermuted=True)
    site = Site("pattern", layers=0, positions="all_features", heads=[0])
    with pytest.raises(ValueError, match="every head"):
        intervene(model, task, batch, [(site, Interchange(batch, torch.eye(int(model.cfg.n_heads)), 1))])


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["align", "checkpoints/sraven-hyla", "--k", "17"], "--k 17 out of range"),
        (["align", "checkpoints/sraven-hyla", "--layers", "4"], "--layers 4 out of range"),
        (["align", "checkpoints/sraven-hyla", "--inputs", "permuted"], "inputs='permuted' permutes the features"),
    ],
)
def test_the_causal_command_rejects_bad_options_in_one_line(argv, match, capsys):
    from latentcode.cli.app import main

    assert main(["causal", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert match in err and "\n" not in err


SRAVEN_MODELS = ["sraven-softmax", "sraven-linear", "sraven-hyla"]
sraven_results = pytest.mark.skipif(not (CAUSAL / "sraven-hyla").is_dir(), reason="no committed SRAVEN causal results")


@sraven_results
def test_the_sraven_alignment_tables_in_the_readme_are_the_committed_results():
    tables = titled_tables(CAUSAL_README, "| layer | k | IIA | 95% interval | identity (transplant) | random rotation "
                           "| same-rule source (floor) | IIA, training rule sets |")
    assert list(tables) == [*SRAVEN_MODELS, "sraven-softmax-whole-row"]
    for name, (title, rows) in tables.items():
        results = results_csv(CAUSAL / name / "alignment.csv")
        (n,), (n_control,) = {r["n"] for r in results}, {r["n_control"] for r in results}
        (unpatched,) = {f"{float(r['clean_counterfactual']):.3f}" for r in results}
        assert title == (f"**{name}** — alignment search (IIA on held-out rule sets; n = {n} entries, same-rule "
                         f"control n = {n_control}; unpatched model already on the counterfactual answer: "
                         f"{unpatched})")
        f3 = [[f"{float(r[c]):.3f}" for c in ("iia", "iia_low", "iia_high", "identity", "random", "same_rule",
                                               "train_iia")] for r in results]
        assert rows == [[r["layer"], r["k"], f[0], f"{f[1]}–{f[2]}", *f[3:]] for r, f in zip(results, f3, strict=True)], name


@sraven_results
def test_the_sraven_alignment_summary_in_the_docs_is_each_models_best_iia_beside_its_strongest_control():
    rows = table_rows(CAUSAL_DOC, "| model | site | layer, k | best IIA | 95% interval | strongest control "
                      "| IIA, training rule sets |")
    folders = {"task's pairs": "", "whole row": "-whole-row"}
    assert [(model, site) for model, site, *_ in rows] == \
        [*((m, "task's pairs") for m in SRAVEN_MODELS), ("sraven-softmax", "whole row")]
    for model, site, *cells in rows:
        assert cells == best_alignment_cells(results_csv(CAUSAL / (model + folders[site]) / "alignment.csv")), model
