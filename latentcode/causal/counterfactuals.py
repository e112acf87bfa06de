"""Counterfactual ground truth for distributed alignment search (`latentcode.causal.alignment`): what the answer
would be if the base instance took the source instance's rule, per task.

A counterfactual gives, for (base, source) pairs, the `targets` and which entries count (`informative`), the model's
output to score (`scores`), the training `loss` of a rotation, whether an output is a `hit`, the `concept` that a
same-rule source shares with its base, the site's default `positions` and how instances are drawn (`sample`).

- `RuleCounterfactual` (SRAVEN, a classification): at each feature, the answer the source's rule gives on the base's
  panels (`SRaven.rule_answer`). A hit is the argmax answer equal to it.
- `FunctionCounterfactual` (fuzzy logic, a regression): the source's function at the base's query input
  (`FuzzyLogic.function_answer`). A hit is a prediction closer to that value than to the base's own target, counted
  only where the two differ by more than `margin`.

`counterfactual_for` picks the task's counterfactual, or says in one line that the task has none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor

from latentcode.tasks.base import Batch

__all__ = ["FunctionCounterfactual", "RuleCounterfactual", "as_counterfactual", "counterfactual_for"]


@dataclass(frozen=True)
class RuleCounterfactual:
    """SRAVEN's counterfactual: at each feature, the answer the source's rule gives on the base's panels
    (`task.rule_answer`). An entry (instance, feature) counts (is informative) where that answer is defined, differs
    from the base's own answer, and the site intervenes at the feature's query position. A hit: the model's most
    likely answer at the feature is the counterfactual one."""

    name: ClassVar[str] = "rule_answer"
    positions: ClassVar[str] = "all_features"
    """The site's default positions: each feature's query token attending to that feature in panels 7 and 8."""

    def targets(self, task: Any, base: Batch, source: Batch, site_queries: Tensor) -> tuple[Tensor, Tensor]:
        """(counterfactual answer long [batch, feature], informative bool [batch, feature])."""
        n_features = int(task.config.n_features)
        panels, rules = base.labels["panels"].cpu(), source.labels["rules"].cpu()
        answers, informative = [], []
        queries = int(task.seq_len) - n_features + torch.arange(n_features)
        for f in range(n_features):
            answer, defined = task.rule_answer(panels[..., f], rules[:, f])
            answers.append(answer)
            informative.append(defined & (answer != base.y.cpu()[:, f]) & bool(site_queries[queries[f]]))
        return torch.stack(answers, dim=1), torch.stack(informative, dim=1)

    def scores(self, task: Any, outputs: Tensor) -> Tensor:
        """float [batch, feature, value]: the answer logits at each feature's query."""
        return task._query_logits(outputs)

    def loss(self, scores: Tensor, target: Tensor) -> Tensor:
        """Cross-entropy of the (informative) entries' logits [entry, value] against their answers [entry]."""
        return torch.nn.functional.cross_entropy(scores, target)

    def hits(self, task: Any, scores: Tensor, target: Tensor, base: Batch) -> Tensor:
        """bool [batch, feature]: the most likely answer is the counterfactual one."""
        return scores.argmax(dim=-1).cpu() == target

    def concept(self, batch: Batch) -> Tensor:
        """long [batch, feature]: the rules; a same-rule source shares all of them with its base."""
        return batch.labels["rules"]

    def sample(self, task: Any, n: int, split: str, seed: int, device: Any, **options: Any) -> Batch:
        """Instances drawn unpermuted (slot f holds feature f in base and source alike); `options` are further
        keywords of the task's `sample` (an input choice's)."""
        return task.sample(n, split, seed=seed, device=device, **{**options, "unpermuted": True})


@dataclass(frozen=True)
class FunctionCounterfactual:
    """Fuzzy logic's counterfactual: the source's function at the base's query input (`task.function_answer`),
    one entry per pair.

    Fuzzy logic is a regression, so "the output becomes the counterfactual answer" needs a definition. An entry is a
    hit when the patched prediction is closer to the counterfactual value than to the base's own target:
    |pred - f_source(x)| < |pred - f_base(x)|, x the base's query input. It counts (is informative) only where the two
    targets differ by more than `margin` (|f_source(x) - f_base(x)| > margin; targets lie in [0, 1]) and the site
    intervenes at the query (last) position. An unpatched model that predicts its base's target well scores near 0
    (`clean_counterfactual`); a model that follows the source's function scores near 1. The rotation trains on the
    squared error to the counterfactual value.

    Args:
        margin: the smallest gap between the two targets that makes an entry informative (default 0.1).
    """

    margin: float = 0.1
    name: ClassVar[str] = "function_answer"
    positions: ClassVar[str] = "paper"
    """The site's default positions: the query token attending to itself (the paper's reading); widen it with
    `whole_row` to the query's attention to every example."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.margin < 1.0:
            raise ValueError(f"margin={self.margin} must lie in [0, 1): fuzzy-logic targets lie in [0, 1]")

    def targets(self, task: Any, base: Batch, source: Batch, site_queries: Tensor) -> tuple[Tensor, Tensor]:
        """(counterfactual value float [batch, 1], informative bool [batch, 1])."""
        query = int(task.seq_len) - 1
        target = task.function_answer(base.x[:, query, :-1], source.labels["term_bits"]).cpu().float()[:, None]
        informative = ((target - base.y.cpu().float()[:, None]).abs() > self.margin) & bool(site_queries[query])
        return target, informative

    def scores(self, task: Any, outputs: Tensor) -> Tensor:
        """float [batch, 1]: the prediction at the query."""
        return task.predict(outputs)[:, None]

    def loss(self, scores: Tensor, target: Tensor) -> Tensor:
        """Mean squared error of the (informative) entries' predictions against their counterfactual values."""
        return torch.nn.functional.mse_loss(scores, target.to(scores.dtype))

    def hits(self, task: Any, scores: Tensor, target: Tensor, base: Batch) -> Tensor:
        """bool [batch, 1]: the prediction is closer to the counterfactual value than to the base's own target."""
        scores = scores.detach().cpu().float()
        return (scores - target).abs() < (scores - base.y.cpu().float()[:, None]).abs()

    def concept(self, batch: Batch) -> Tensor:
        """long [batch, K]: the (sorted) terms; a same-function source has exactly the base's terms."""
        return batch.labels["terms"]

    def sample(self, task: Any, n: int, split: str, seed: int, device: Any, **options: Any) -> Batch:
        """Instances with every input drawn at random, as in training, unless `options` (keywords of the task's
        `sample`, an input choice's: `inputs='fixed_query'`, say) draw them otherwise."""
        return task.sample(n, split, seed=seed, device=device, **options)


def counterfactual_for(task: Any) -> RuleCounterfactual | FunctionCounterfactual:
    """The task's counterfactual ground truth (SRAVEN: `RuleCounterfactual`; fuzzy logic: `FunctionCounterfactual`);
    raises ValueError (one line) when the task has none."""
    if all(hasattr(task, name) for name in ("function_answer", "seq_len", "sample", "predict")):
        return FunctionCounterfactual()
    if all(hasattr(task, name) for name in ("rule_answer", "config", "sample")):
        return RuleCounterfactual()
    raise ValueError(
        f"task {getattr(task, 'name', type(task).__name__)!r} has no counterfactual ground truth for alignment "
        "search: it needs rule_answer (SRAVEN: the source's rule on the base's panels) or function_answer (fuzzy "
        "logic: the source's function on the base's query input); give the task one, or pass counterfactual= an "
        "object like latentcode.causal.counterfactuals.RuleCounterfactual"
    )


_METHODS = ("targets", "scores", "loss", "hits", "concept", "sample")


@dataclass(frozen=True)
class _ClassifierCounterfactual(RuleCounterfactual):
    """An object with only `targets`, `logits` and `sample` (the protocol before fuzzy logic had a counterfactual),
    completed as a classification: scores are its `logits`, a hit is the argmax answer, the concept is
    `labels['rules']`."""

    inner: Any = None

    @property
    def name(self) -> str:  # type: ignore[override]
        return str(getattr(self.inner, "name", type(self.inner).__name__))

    @property
    def positions(self) -> Any:  # type: ignore[override]
        return getattr(self.inner, "positions", RuleCounterfactual.positions)

    def targets(self, task: Any, base: Batch, source: Batch, site_queries: Tensor) -> tuple[Tensor, Tensor]:
        return self.inner.targets(task, base, source, site_queries)

    def scores(self, task: Any, outputs: Tensor) -> Tensor:
        return self.inner.logits(task, outputs)

    def sample(self, task: Any, n: int, split: str, seed: int, device: Any, **options: Any) -> Batch:
        return self.inner.sample(task, n, split, seed, device, **options)


def as_counterfactual(counterfactual: Any) -> Any:
    """`counterfactual` itself when it has every method (targets, scores, loss, hits, concept, sample); one with
    only targets, logits and sample is completed as a classification (`RuleCounterfactual`'s loss, hits and
    concept); anything else raises ValueError (one line)."""
    if all(hasattr(counterfactual, name) for name in _METHODS):
        return counterfactual
    if all(hasattr(counterfactual, name) for name in ("targets", "logits", "sample")):
        return _ClassifierCounterfactual(inner=counterfactual)
    missing = [name for name in _METHODS if not hasattr(counterfactual, name)]
    raise ValueError(f"counterfactual={type(counterfactual).__name__} lacks {', '.join(missing)}; give it the methods "
                     "of latentcode.causal.counterfactuals.RuleCounterfactual")
