"""Fuzzy-logic in-context regression (spec §2.1): the registered task `FuzzyLogic`.

Each task is a disjunction of K conjunctions ("terms") over L variables under Zadeh operators; a sequence holds
`seq_len` (x, f(x)) examples and the model regresses f at the last (query) token. The splits are explicit index
lists drawn once from the task seed (spec §8.1). Batches are generated vectorized on the requested device; this
module holds no model code and no per-sample Python loops. Its parameters (`FuzzyLogicConfig`), terms and their
Zadeh arithmetic are in `fuzzy_logic_terms.py`, and how an instance is drawn (`instance_html`, `plot_instance`)
in `fuzzy_logic_picture.py`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from itertools import combinations
from typing import Any, ClassVar

import numpy as np
import torch
from jaxtyping import Float, Int
from torch import Tensor

from latentcode.tasks.base import (
    Batch,
    CodeReading,
    CompositionalTask,
    InputChoice,
    TaskPresets,
    check_split,
)
from latentcode.tasks.fuzzy_logic_picture import FuzzyLogicPicture
from latentcode.tasks.fuzzy_logic_terms import FuzzyLogicConfig, fuzzy_dnf, term_bits, term_names
from latentcode.tasks.registry import register_task
from latentcode.tasks.sampling import (
    batch_generator,
    check_disjoint,
    hold_out,
    lookup,
    make_config,
    read_task_dict,
    validate_compositions,
)

__all__ = ["FuzzyLogic", "FuzzyLogicConfig", "fuzzy_dnf", "term_bits", "term_names"]

_INPUTS = ("uniform", "fixed_context", "fixed_query")


@register_task("fuzzy_logic")
class FuzzyLogic(CompositionalTask):
    """Fuzzy-logic in-context regression with splits `train`, `test`, `ood` and `novel_terms` (spec §8.1).

    Batch layout: `x` [batch, seq_len, L + 1], each token concat(x_t, y_t), the query's y zeroed; `y` [batch]
    the query's target. Labels: `terms` long [batch, K] (sorted term indices into `term_bits(L)`) and
    `term_bits` long [batch, K, L].

    >>> task = FuzzyLogic(seed=0)
    >>> batch = task.sample(8, "ood", seed=1)
    >>> tuple(batch.x.shape), tuple(batch.y.shape), tuple(batch.labels["term_bits"].shape)
    ((8, 16, 5), (8,), (8, 2, 4))
    >>> task.metrics(torch.zeros(8, 16, 1), batch)["r2"] < 1.0
    True
    """

    name: ClassVar[str] = "fuzzy_logic"
    splits: ClassVar[tuple[str, ...]] = ("train", "test", "ood", "novel_terms")
    metric_name: ClassVar[str] = "r2"
    code_reading: ClassVar[CodeReading] = CodeReading(
        inputs=(
            InputChoice("fixed_query", {"inputs": "fixed_query"},
                        "every instance shares one query input (the reference's *_fixed_query loaders, which "
                        "its latent analyses and the paper's Fig. 2B/2D read; spec §4.1)"),
            InputChoice("uniform", {"inputs": "uniform"}, "every input drawn at random, as in training"),
            InputChoice("fixed_context", {"inputs": "fixed_context"},
                        "every instance shares its seq_len - 1 context inputs (the reference's valid_fixed_context)"),
        ),
        labels=("terms", "composition", "instance"),
        label_kinds={"terms": "class_set", "term_bits": "bits", "target": "value", "prediction": "value",
                     "composition": "group", "instance": "group"},
        composition="terms",
        input_control="all_tokens",  # the query token alone carries no term information
        control_task=False,  # continuous inputs: every input type is new
    )
    """Codes are read by default on instances sharing one query input: the response token's self-code (spec §4.1)."""
    presets: ClassVar[TaskPresets] = TaskPresets(
        train={
            "tiny": dict(steps=40, batch_size=32, warmup=4, eval_every=20, eval_samples=256, log_every=10,
                         checkpoint_every=20),
            "small": dict(steps=3000, batch_size=128, warmup=100, eval_every=1000, eval_samples=4096),
            "paper": dict(steps=50_000, batch_size=128, warmup=100, eval_every=10_000, eval_samples=16_000,
                          checkpoint_every=5000),
        },
        model={
            "tiny": dict(d_model=32, n_heads=4, d_qk=8, d_v=8, d_mlp=64, n_layers=2, attn_dropout=0.0),
            "small": dict(d_model=64, n_heads=8, d_qk=16, d_v=16, d_mlp=128, n_layers=2, attn_dropout=0.1),
            "paper": dict(d_model=128, n_heads=8, d_qk=16, d_v=16, d_mlp=256, n_layers=2, attn_dropout=0.1),
        },
    )
    transfer: ClassVar[str | None] = "function_transfer"

    def __init__(self, **params: Any) -> None:
        """Build the task and draw its held-out compositions from `seed`.

        Args:
            **params: fields of `FuzzyLogicConfig` (n_variables, n_terms, seq_len, frac_ood,
                frac_unseen_terms, seed).

        Raises:
            ValueError: an unknown parameter, or parameters that leave a split empty.
        """
        config = make_config(FuzzyLogicConfig, params)
        self._setup(config, _draw_compositions(config))

    def _setup(self, config: FuzzyLogicConfig, comps: dict[str, np.ndarray]) -> None:
        self.config = config
        self.d_in = config.n_variables + 1
        self.d_out = 1
        self.seq_len = config.seq_len
        self.n_readout = 1  # the query token
        self._comps = {**comps, "test": comps["train"]}
        self._bits = term_bits(config.n_variables)
        self._device_cache: dict[tuple[str, str], Tensor] = {}

    def sample(
        self,
        n: int,
        split: str = "train",
        *,
        seed: int | None = None,
        device: str | torch.device = "cpu",
        unpermuted: bool = False,
        inputs: str = "uniform",
    ) -> Batch:
        """Draw `n` instances of the split's compositions, generated on `device`.

        Args:
            n: number of instances.
            split: one of `FuzzyLogic.splits`.
            seed: batch seed; the same (task, split, seed, n) gives the same batch on one device. None draws
                one from torch's global RNG.
            device: where the batch is generated.
            unpermuted: accepted for the `Task` protocol; fuzzy logic has nothing to permute.
            inputs: 'uniform' (every x ~ U[0,1]^L), or the reference's analysis loaders: 'fixed_context' (every
                instance shares the seq_len - 1 context inputs, drawn from the task seed) and 'fixed_query'
                (every instance shares one query input).

        Returns:
            The `Batch` described in the class docstring.

        Raises:
            ValueError: `n` <= 0, an unknown split, an unknown `inputs`, or a negative seed.
        """
        if n <= 0:
            raise ValueError(f"n={n} must be a positive integer")
        check_split(split, self.splits)
        if inputs not in _INPUTS:
            raise ValueError(f"inputs={inputs!r} is not one of {', '.join(_INPUTS)}")
        generator = batch_generator(self.config.seed, split, seed, device)
        comps = self._on(split, device)
        index = torch.randint(len(comps), (n,), generator=generator, device=device)
        terms = lookup(comps, index)
        bits = lookup(self._on("bits", device), terms)
        x_in = self._inputs(n, inputs, generator, device)
        targets = fuzzy_dnf(x_in, bits)
        x = torch.cat([x_in, targets.unsqueeze(-1)], dim=-1)
        x[:, -1, -1] = 0.0
        return Batch(x=x, y=targets[:, -1], labels={"terms": terms, "term_bits": bits}, split=split)

    def loss(self, outputs: Float[Tensor, "batch pos d_out"], batch: Batch) -> Float[Tensor, ""]:
        """Mean squared error of the query's prediction (the output at the last position)."""
        return (self.predict(outputs) - batch.y).pow(2).mean()

    def metrics(self, outputs: Float[Tensor, "batch pos d_out"], batch: Batch) -> dict[str, float]:
        """`loss` (MSE) and `r2` = mean over instances of 1 - err / var(the instance's seq_len targets)."""
        err = (self.predict(outputs) - batch.y).pow(2)
        targets = torch.cat([batch.x[:, :-1, -1], batch.y.unsqueeze(1)], dim=1).float()
        base = targets.var(dim=1, unbiased=False)
        return {"loss": err.mean().item(), "r2": (1.0 - err / base).mean().item()}

    def predict(self, outputs: Float[Tensor, "batch pos d_out"]) -> Float[Tensor, " batch"]:
        """The scalar output at the query (last) position."""
        if outputs.shape[-1] != self.d_out:
            raise ValueError(f"outputs have d_out={outputs.shape[-1]}; fuzzy logic needs d_out={self.d_out}")
        return outputs[:, -1, 0].float()

    def class_names(self) -> list[str]:
        """The 2^L term names (`term_names`): the classes of the default label, `terms`."""
        return term_names(self.config.n_variables)

    def instance_html(self, tokens: np.ndarray, labels: Mapping[str, Any]) -> str:
        """The function f = OR of its terms, then the in-context examples (x1..xL, f(x)) as a table shaded by
        value, the query last with the model's prediction beside the target. Drawn by
        `fuzzy_logic_picture.FuzzyLogicPicture`, which says which labels it reads.

        >>> task = FuzzyLogic()
        >>> batch = task.sample(1, seed=0)
        >>> page = task.instance_html(batch.x[0].numpy(), {"terms": batch.labels["terms"][0].numpy()})
        >>> page.count("<tr") == task.seq_len + 1, "∨" in page
        (True, True)
        """
        return self._picture(tokens, labels).html()

    def plot_instance(self, tokens: np.ndarray, labels: Mapping[str, Any], ax: Any = None) -> Any:
        """The picture of `instance_html` on a matplotlib axes: the examples as a heatmap (columns x1..xL and
        f(x), the query last) under the function. Returns the axes."""
        return self._picture(tokens, labels).plot(ax)

    def _picture(self, tokens: np.ndarray, labels: Mapping[str, Any]) -> FuzzyLogicPicture:
        return FuzzyLogicPicture.read(tokens, labels, seq_len=self.seq_len, names=term_names(self.config.n_variables),
                                      n_known_terms=self.config.n_known_terms, ood=self._comps["ood"])

    def recompose(self, batch: Batch, other: Batch) -> Batch:
        """`batch`'s inputs x under `other`'s terms: targets recomputed, the query's y zeroed, `other`'s labels
        (what `latentcode.causal.experiments.function_transfer` transplants codes from)."""
        inputs = batch.x[..., :-1]
        targets = fuzzy_dnf(inputs, other.labels["term_bits"])
        x = torch.cat([inputs, targets.unsqueeze(-1)], dim=-1)
        x[:, -1, -1] = 0.0
        return Batch(x=x, y=targets[:, -1], labels=other.labels, split=batch.split)

    def function_answer(
        self, inputs: Float[Tensor, "batch variable"], term_bits: Int[Tensor, "batch term variable"]
    ) -> Float[Tensor, " batch"]:
        """The value a function gives one input per instance: the Zadeh DNF of `term_bits` (another instance's
        `labels["term_bits"]`) at `inputs` (what alignment search needs: the source's function on the base's query
        input, `latentcode.causal.alignment.FunctionCounterfactual`).

        Args:
            inputs: one input per instance [batch, L] (e.g. the base's query, `batch.x[:, -1, :-1]`).
            term_bits: the terms of the function [batch, K, L] (`term_bits` order; 1 = plain, 0 = negated).

        Returns:
            float [batch]: max over terms of min over literals.

        >>> task = FuzzyLogic()
        >>> task.function_answer(torch.tensor([[0.2, 0.9, 0.5, 0.4]]), torch.tensor([[[1, 1, 1, 1], [0, 1, 0, 1]]]))
        tensor([0.4000])
        """
        if inputs.ndim != 2 or term_bits.ndim != 3 or inputs.shape[-1] != term_bits.shape[-1]:
            raise ValueError(f"inputs {tuple(inputs.shape)} and term_bits {tuple(term_bits.shape)} must be [batch, L] "
                             "and [batch, K, L] with the same L")
        return fuzzy_dnf(inputs.unsqueeze(1), term_bits.to(inputs.device)).squeeze(1)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: name, params and the explicit composition lists of `train`, `ood` and `novel_terms`."""
        return {
            "name": self.name,
            "params": dataclasses.asdict(self.config),
            "compositions": {s: self._comps[s].tolist() for s in ("train", "ood", "novel_terms")},
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FuzzyLogic:
        """Rebuild the task with exactly the stored composition lists (they are validated, not recomputed).

        Raises:
            ValueError: another task's name, unknown params, or lists of the wrong shape, out of range,
                unsorted, repeated, or overlapping between splits.
        """
        config, stored = read_task_dict(cls.name, FuzzyLogicConfig, data, ("train", "ood", "novel_terms"))
        n_known, n_all = config.n_known_terms, 2**config.n_variables
        ranges = {"train": (0, n_known), "ood": (0, n_known), "novel_terms": (n_known, n_all)}
        comps = {
            split: validate_compositions(split, stored[split], config.n_terms, low, high, strict=True)
            for split, (low, high) in ranges.items()
        }
        check_disjoint(comps["train"], comps["ood"])
        task = cls.__new__(cls)
        task._setup(config, comps)
        return task

    def _on(self, what: str, device: str | torch.device) -> Tensor:
        key = (what, str(torch.device(device)))
        if key not in self._device_cache:
            array = self._bits if what == "bits" else self._comps[what]
            self._device_cache[key] = torch.as_tensor(array, dtype=torch.long, device=device)
        return self._device_cache[key]

    def _inputs(
        self, n: int, inputs: str, generator: torch.Generator, device: str | torch.device
    ) -> Float[Tensor, "batch pos variable"]:
        shape = (n, self.seq_len, self.config.n_variables)
        x = torch.rand(shape, generator=generator, device=device)
        if inputs == "uniform":
            return x
        # the shared inputs come from the task seed on CPU, so every device sees the same values
        fixed = torch.rand(shape[1:], generator=torch.Generator().manual_seed(self.config.seed)).to(device)
        if inputs == "fixed_context":
            x[:, :-1] = fixed[:-1]
        else:
            x[:, -1] = fixed[-1]
        return x


def _draw_compositions(config: FuzzyLogicConfig) -> dict[str, np.ndarray]:
    n_known, k = config.n_known_terms, config.n_terms
    known = np.array(list(combinations(range(n_known), k)), dtype=np.int64).reshape(-1, k)
    novel = np.array(list(combinations(range(n_known, 2**config.n_variables), k)), dtype=np.int64).reshape(-1, k)
    return {**hold_out(known, config.frac_ood, config.seed), "novel_terms": novel}
