"""A new task is one file: this module defines a small compositional task, registers it, and runs it through the
whole pipeline (train → extract → decode → figures → transfer → report), through the public API and through the
command line, without touching a package file.

The task, `ToySum`: each composition is K=2 of P=5 fixed linear primitives w_p; a sequence holds (x, f(x)) examples
with f(x) = sum of its primitives' w_p · x, the query's y zeroed, and the model regresses f at the query. What the
pipeline needs from it, it declares: presets, how its codes are read (including a named position of its own,
`first_example`) and labelled, and its transfer experiment.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from itertools import combinations
from typing import Any, ClassVar

import numpy as np
import pytest
import torch

import latentcode as lc
import probes
from latentcode.cli import main
from latentcode.tasks.base import PositionSpec
from latentcode.tasks.sampling import (
    batch_generator,
    check_disjoint,
    lookup,
    make_config,
    read_task_dict,
    validate_compositions,
)

NAME = "toy_sum"
N_PRIMITIVES, N_PARTS, D_X = 5, 2, 3


@dataclass(kw_only=True, frozen=True)
class ToySumConfig:
    """Parameters of the toy task."""

    seq_len: int = 8
    """Examples per sequence, the query included."""
    seed: int = 0
    """Seed of the held-out compositions and of the primitives."""


class ToySum(lc.CompositionalTask):
    """Sums of K=2 of 5 linear primitives; splits train, test (fresh draws of train) and ood."""

    name: ClassVar[str] = NAME
    splits: ClassVar[tuple[str, ...]] = ("train", "test", "ood")
    metric_name: ClassVar[str] = "r2"
    presets: ClassVar[lc.TaskPresets] = lc.TaskPresets(  # "toy": a preset name no built-in task has
        train={name: dict(steps=12, batch_size=16, warmup=2, eval_every=6, eval_samples=32, log_every=3,
                          checkpoint_every=6) for name in ("tiny", "toy")},
        model={name: dict(d_model=16, n_heads=2, d_qk=8, d_v=8, d_mlp=16, n_layers=2, attn_dropout=0.0)
               for name in ("tiny", "toy")},
    )
    code_reading: ClassVar[lc.CodeReading] = lc.CodeReading(
        inputs=(lc.InputChoice("uniform", {}, "every x drawn at random, as in training"),),
        labels=("parts", "composition", "instance"),
        label_kinds={"parts": "class_set", "target": "value", "prediction": "value", "composition": "group",
                     "instance": "group"},
        composition="parts",
        input_control="all_tokens",
        control_task=False,
        positions=("paper", "first_example"),
    )
    transfer: ClassVar[str | None] = "function_transfer"

    def __init__(self, **params: Any) -> None:
        config = make_config(ToySumConfig, params)
        combos = np.array(list(combinations(range(N_PRIMITIVES), N_PARTS)), dtype=np.int64)
        order = np.random.default_rng(config.seed).permutation(len(combos))
        self._setup(config, {"train": combos[np.sort(order[3:])], "ood": combos[np.sort(order[:3])]})

    def _setup(self, config: ToySumConfig, comps: dict[str, np.ndarray]) -> None:
        self.config = config
        self.d_in, self.d_out, self.seq_len, self.n_readout = D_X + 1, 1, config.seq_len, 1
        self._comps = {**comps, "test": comps["train"]}
        weights = np.random.default_rng(config.seed + 1).normal(size=(N_PRIMITIVES, D_X))
        self._weights = torch.as_tensor(weights, dtype=torch.float32)

    def sample(self, n: int, split: str = "train", *, seed: int | None = None, device: Any = "cpu",
               unpermuted: bool = False) -> lc.Batch:
        generator = batch_generator(self.config.seed, split, seed, device)
        comps = torch.as_tensor(self.compositions(split), device=device)
        parts = lookup(comps, torch.randint(len(comps), (n,), generator=generator, device=device))
        x = torch.rand(n, self.seq_len, D_X, generator=generator, device=device)
        return self._with(x, parts, split)

    def _with(self, x: torch.Tensor, parts: torch.Tensor, split: str) -> lc.Batch:
        y = torch.einsum("bpd,bkd->bp", x, self._weights.to(x.device)[parts])
        tokens = torch.cat([x, y.unsqueeze(-1)], dim=-1)
        tokens[:, -1, -1] = 0.0
        return lc.Batch(x=tokens, y=y[:, -1], labels={"parts": parts}, split=split)

    def recompose(self, batch: lc.Batch, other: lc.Batch) -> lc.Batch:
        return self._with(batch.x[..., :-1], other.labels["parts"], batch.split)

    def loss(self, outputs: torch.Tensor, batch: lc.Batch) -> torch.Tensor:
        return (self.predict(outputs) - batch.y).pow(2).mean()

    def metrics(self, outputs: torch.Tensor, batch: lc.Batch) -> dict[str, float]:
        err = (self.predict(outputs) - batch.y).pow(2)
        targets = torch.cat([batch.x[:, :-1, -1], batch.y.unsqueeze(1)], dim=1)
        return {"loss": err.mean().item(), "r2": (1.0 - err / targets.var(dim=1, unbiased=False)).mean().item()}

    def predict(self, outputs: torch.Tensor) -> torch.Tensor:
        return outputs[:, -1, 0].float()

    def code_positions(self, name: str) -> PositionSpec:
        """'paper': the query attending to itself; 'first_example': the query attending to the first example."""
        if name == "first_example":
            return PositionSpec(name, np.array([[self.seq_len - 1]]), np.array([[0]]))
        return super().code_positions(name)

    def class_names(self) -> list[str]:
        return [f"w{p}" for p in range(N_PRIMITIVES)]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "params": dataclasses.asdict(self.config),
                "compositions": {s: self._comps[s].tolist() for s in ("train", "ood")}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToySum:
        config, stored = read_task_dict(cls.name, ToySumConfig, data, ("train", "ood"))
        comps = {s: validate_compositions(s, stored[s], N_PARTS, 0, N_PRIMITIVES, strict=True) for s in stored}
        check_disjoint(comps["train"], comps["ood"])
        task = cls.__new__(cls)
        task._setup(config, comps)
        return task


@pytest.fixture
def toy_task():
    """ToySum registered for one test, and unregistered after it (other tests see the normal registry)."""
    before = sorted(lc.TASKS)
    lc.register_task(NAME)(ToySum)
    try:
        yield ToySum
    finally:
        if NAME in lc.TASKS:
            lc.unregister_task(NAME)
        assert sorted(lc.TASKS) == before


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_registration_is_checked_and_undone(toy_task):
    assert lc.TASKS[NAME] is ToySum and isinstance(lc.get_task(NAME), lc.Task)
    with pytest.raises(ValueError, match="already registered"):
        lc.register_task(NAME)(ToySum)
    with pytest.raises(ValueError, match="is named 'toy_sum'; register it as 'toy_sum'"):
        lc.register_task("other_name")(ToySum)
    with pytest.raises(ValueError, match="lacks .*presets.*code_reading"):
        lc.register_task("bare")(type("Bare", (), {"name": "bare"}))
    with pytest.raises(ValueError, match="'nope' is not registered; registered tasks: .*toy_sum"):
        lc.unregister_task("nope")
    assert lc.TRAIN_PRESETS[NAME]["tiny"]["steps"] == 12 and NAME in lc.MODEL_PRESETS
    with pytest.raises(ValueError, match="width applies to sraven only, not 'toy_sum'"):
        lc.model_config(NAME, "hyla", "tiny", width=2)


def test_a_declared_position_needs_its_own_code_positions(toy_task):
    """The inherited `code_positions` places only the default reading; a further declared name is refused, not
    silently read at the default positions under another name."""
    task = lc.get_task(NAME)
    inherited = lc.CompositionalTask.code_positions
    paper = inherited(task, "paper")
    assert paper.query.tolist() == paper.key.tolist() == [[task.seq_len - 1]]
    with pytest.raises(ValueError, match="declares the positions 'first_example' but does not say where they are: "
                                         "override ToySum.code_positions"):
        inherited(task, "first_example")
    assert task.code_positions("first_example").key.tolist() == [[0]]  # the override places it


def test_the_pipeline_through_the_public_api(toy_task, tmp_path):
    torch.manual_seed(0)
    task = lc.get_task(NAME, seed=3)
    run_dir = tmp_path / "run"
    run = lc.train(lc.model_config(task, "hyla", "tiny"), task, lc.train_config(NAME, "tiny"), run_dir, progress=False)
    assert run.step == 12

    # the saved config finds the registered task again, with its exact split; unregistered, it names the fix
    loaded = lc.load_run(run_dir)
    assert type(loaded.task) is ToySum and loaded.task.to_dict() == task.to_dict()
    lc.unregister_task(NAME)
    with pytest.raises(ValueError, match="unknown task 'toy_sum' in saved config; valid tasks: fuzzy_logic, sraven"):
        lc.load_run(run_dir)
    lc.register_task(NAME)(ToySum)

    # extraction: the task's declarations become the codes' metadata; its labels are the batches' own
    assert lc.extract_run(run_dir, n_samples=24, progress=False).is_file()
    codes = lc.load_codes(run_dir)
    assert codes.task == NAME and codes.label == "parts" and codes.composition_label == "parts"
    assert codes.label_kinds["parts"] == "class_set" and codes.meta["n_classes"] == N_PRIMITIVES
    assert codes.control == {"inputs": "all_tokens", "control_task": False}
    assert codes.codes.shape == (3 * 24, 2, 2, 1, 1)
    for split in ("train", "test", "ood"):
        drawn = task.sample(24, split, seed=0)
        rows = codes.select(split=split)
        np.testing.assert_array_equal(rows.labels["parts"], drawn.labels["parts"].numpy())
        np.testing.assert_allclose(rows.labels["target"], drawn.y.numpy(), rtol=1e-6)
    same = (np.sort(codes.labels["parts"], 1)[:, None] == np.sort(codes.labels["parts"], 1)[None]).all(-1)
    np.testing.assert_array_equal(codes.labels["composition"][:, None] == codes.labels["composition"][None], same)

    # decoding: the set label is decoded term by term because the metadata says it is a set (not the task name)
    result, path = lc.decode_run(run_dir, progress=False)
    assert result.label == "parts" and result.kind == "sets" and list(result.extras) == ["parts"]
    assert result.controls.control_task is None
    assert "stands in for selectivity" in result.controls.note
    assert json.loads(path.read_text())["label"] == "parts"
    direct = probes.decode_rules(codes, progress=False)
    assert direct.accuracy("ood").tolist() == result.accuracy("ood").tolist()
    assert probes.topographic_similarity(codes, layers="all", n_pairs=200).distance == "symmetric_difference"

    figures = lc.figures_run(run_dir, formats=("png",), embed_method="pca", progress=False)
    assert figures and all(p.suffix == ".png" and p.stat().st_size > 1000 for p in figures)

    # transfer: the task's own experiment, its metric in the columns; every drawn pair is counted once
    transfer, files = lc.run_experiment(run_dir, "transfer", n_samples=32, split="ood", progress=False)
    assert transfer.name == "function_transfer" and transfer.task == NAME
    assert transfer.columns[:2] == ["r2_donor", "r2_recipient"]
    assert transfer.counts["pairs"] + transfer.counts["same_parts"] == 32
    assert [row["layer"] for row in transfer.rows] == ["0", "1", "all"]
    assert {p.suffix for p in files} == {".csv", ".json", ".png"}

    report = lc.report_runs([run_dir], embed_method="pca", progress=False)
    assert report.name == "report.html" and NAME in report.read_text()


def test_the_pipeline_through_the_command_line(toy_task, tmp_path, capsys):
    run_dir = str(tmp_path / "cli-run")
    assert main(["train", NAME, "--model", "softmax", "--preset", "huge", "--out", run_dir, "--no-progress"]) == 2
    assert "unknown preset 'huge'; valid presets: tiny, toy" in capsys.readouterr().err
    assert main(["train", NAME, "--model", "softmax", "--preset", "toy", "--out", run_dir, "--no-progress"]) == 0
    assert lc.load_run(run_dir).step == 12
    assert main(["extract", run_dir, "--n-samples", "16", "--no-progress"]) == 0
    assert main(["decode", run_dir, "--no-progress"]) == 0
    assert "parts" in capsys.readouterr().out
    assert main(["figures", run_dir, "--format", "png", "--embed", "pca", "--no-progress"]) == 0
    assert main(["transfer", run_dir, "--n-samples", "16", "--no-progress"]) == 0
    assert "function_transfer — toy_sum" in capsys.readouterr().out
    assert main(["report", run_dir, "--embed", "pca", "--no-progress"]) == 0
    assert (tmp_path / "cli-run" / "report.html").is_file()

    # the task's own named positions: accepted by name, checked against the task once the run is loaded
    assert main(["extract", run_dir, "--n-samples", "16", "--positions", "first_example", "--no-progress"]) == 0
    codes, paper = lc.load_codes(run_dir, positions="first_example"), lc.load_codes(run_dir)
    assert codes.meta["positions"] == "first_example" and "first_example" in codes.reading
    np.testing.assert_array_equal(codes.labels["parts"], paper.labels["parts"])  # same instances, other keys
    assert not np.allclose(codes.codes, paper.codes)
    assert main(["decode", run_dir, "--positions", "first_example", "--no-progress"]) == 0
    assert "parts" in capsys.readouterr().out
    assert (tmp_path / "cli-run" / "codes" / "first_example.decode.json").is_file()
    assert main(["decode", run_dir, "--positions", "all_features", "--no-progress"]) == 2
    assert ("positions='all_features' is not defined for task 'toy_sum'; valid: paper, first_example"
            in " ".join(capsys.readouterr().err.split()))
    assert main(["train", "--help"]) == 0
    assert f"task: fuzzy_logic, sraven, {NAME}" in " ".join(capsys.readouterr().out.split())
