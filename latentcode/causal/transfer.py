"""Transfer experiments: do a donor's codes make the model compute the donor's composition? Each task names its own
(`Task.transfer`, a key of `TRANSFERS`), and each experiment checks the task offers what it needs, not its name.

- `rule_transfer` (tasks with per-feature rules and `rule_answer`, SRAVEN): pairs whose rules differ in one
  feature; the donor's codes at that feature's query position are transplanted, layer by layer; how often the
  answer becomes what the donor's rule gives on the recipient's panels, against how often it stays the recipient's.
- `function_transfer` (tasks that can `recompose` a batch, fuzzy logic): donor and recipient share every input and
  differ in their composition; the task metric of the output against the donor's function and the recipient's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from latentcode.causal.experiment_result import ExperimentResult, layer_bar, layer_choices, take, variant_name
from latentcode.causal.interventions import transplant

__all__ = ["TRANSFERS", "function_transfer", "paired_difference", "rule_transfer"]


def _require(task: Any, needs: tuple[str, ...], experiment: str) -> None:
    missing = [name for name in needs if not hasattr(task, name)]
    if missing:
        raise ValueError(
            f"{experiment} needs a task with {', '.join(needs)}; task {getattr(task, 'name', task)!r} lacks "
            f"{', '.join(missing)} (its transfer experiment is {getattr(task, 'transfer', None)!r})"
        )


_CHUNK = 1024
"""Recipients whose candidate partners are compared at once: the comparison holds a chunk × n_samples block, not
n_samples² (at 8,192 instances 0.4 GB instead of 2.8 GB, bench/transfer_pairs.py). The random draws come in the same
order either way, so the pairs are the same."""


def _one_feature_pairs(rules: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """For each instance, one other instance whose rule tuple differs in exactly one feature (seeded choice)."""
    donors, has = [], []
    for start in range(0, len(rules), _CHUNK):
        candidates = (rules[start:start + _CHUNK, None, :] != rules[None, :, :]).sum(-1) == 1
        scores = torch.rand(candidates.shape, generator=generator) * candidates
        donors.append(scores.argmax(dim=1))
        has.append(candidates.any(dim=1))
    recipient = torch.nonzero(torch.cat(has)).squeeze(1)
    return recipient, torch.cat(donors)[recipient]


def _same_rule_partners(rules: torch.Tensor, of: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """For each instance in `of`, another instance with the same rule tuple (seeded choice); -1 where none."""
    partners = [torch.empty(0, dtype=torch.long)]
    for start in range(0, len(of), _CHUNK):
        chunk = of[start:start + _CHUNK]
        candidates = (rules[chunk][:, None, :] == rules[None, :, :]).all(-1)
        candidates[torch.arange(len(chunk)), chunk] = False  # not itself
        scores = torch.rand(candidates.shape, generator=generator) * candidates
        partners.append(torch.where(candidates.any(dim=1), scores.argmax(dim=1), torch.full_like(chunk, -1)))
    return torch.cat(partners)


def paired_difference(a: torch.Tensor, b: torch.Tensor, z: float = 1.96) -> tuple[float, float]:
    """Mean of a − b over paired 0/1 outcomes (one pair per entry) and the half-width of its normal interval:
    z standard errors of the per-pair difference (95% for z = 1.96); nan for a half-width with fewer than two pairs.
    Pairing counts what two shares measured on the same recipients share, which two independent binomials ignore.

    >>> [round(v, 3) for v in paired_difference(torch.tensor([1, 1, 0, 0, 1]), torch.tensor([0, 1, 0, 0, 0]))]
    [0.4, 0.48]
    """
    d = a.double() - b.double()
    if len(d) == 0:
        return float("nan"), float("nan")
    half = z * float(d.std(correction=1)) / len(d) ** 0.5 if len(d) > 1 else float("nan")
    return float(d.mean()), half


def rule_transfer(
    model: torch.nn.Module,
    task: Any,
    *,
    n_samples: int = 1024,
    split: str = "test",
    seed: int = 0,
    layers: Sequence[int] | None = None,
    whole_row: bool = True,
    progress: bool | None = None,
) -> ExperimentResult:
    """Rule transfer (SRAVEN): does the donor's code at a feature's query make the model apply the donor's rule?

    Instances are drawn unpermuted (so recipient and donor share their column arrangement). Each recipient is
    paired with a donor whose rule tuple differs in exactly one feature f. The donor's codes at feature f's query
    position are transplanted (`whole_row`: that query's codes over every key; else only its paper view, the
    keys of feature f in panels 7 and 8), at one layer at a time and at every layer at once. A pair counts
    when the donor's rule gives a defined answer on the recipient's panels (`SRaven.rule_answer`) that differs
    from the recipient's answer; the others are left out and counted.

    The floor of `transfer` is `control`: the same count when the transplanted codes come from a donor with the
    recipient's own rules (another instance of the same rule tuple), a transplant that moves the codes but no
    rule. Whatever share of answers lands on the donor rule's answer by disruption alone shows up there.

    Args:
        model: a model of `task`.
        task: a task with per-feature rules: `rule_answer`, `all_features` positions, `rules` and `panels` labels
            and an `unpermuted` sample option (SRAVEN).
        n_samples: instances drawn (each can become a recipient).
        split: the split drawn from.
        seed: batch seed (also seeds the donor choice).
        layers: model layers (default: all).
        whole_row: transplant the whole query row (default) rather than the paper's (query, key) pairs.
        progress: progress bar (None: only on a terminal).

    Returns:
        An `ExperimentResult` with columns `transfer` (the answer became the donor rule's: it is with the
        transplant and was not without), `control` (the same, transplanting from a same-rule donor), `keep` (the
        answer is the recipient's), `clean_keep` (the recipient's answer without intervention), `n_pairs` and
        `n_control_pairs` (pairs whose recipient has a same-rule partner), `difference` (transfer minus control,
        both over the pairs with a control) and `difference_ci` (the half-width of its 95% interval, paired: both
        shares come from the same recipients, `paired_difference`), per layer.

    Raises:
        ValueError: a task without what it needs, layers out of range, or no usable pair.
    """
    _require(task, ("rule_answer", "code_positions", "config"), "rule_transfer")
    n_features = int(task.config.n_features)
    views = task.code_positions("all_features")  # view f: feature f's query token and its keys in panels 7, 8
    device = next(model.parameters()).device
    batch = task.sample(n_samples, split, seed=seed, device=device, unpermuted=True)
    rules = batch.labels["rules"].cpu()
    generator = torch.Generator().manual_seed(seed)
    recipient, donor = _one_feature_pairs(rules, generator)
    counts = {"instances": n_samples, "without_partner": n_samples - len(recipient)}
    feature = (rules[recipient] != rules[donor]).int().argmax(dim=1)
    panels = batch.labels["panels"].cpu()
    grid = panels[recipient, :, :, feature]  # [pair, row, column] of the differing feature
    answer, defined = task.rule_answer(grid, rules[donor, feature])
    own = batch.y.cpu()[recipient, feature]
    same = defined & (answer == own)
    keep_pairs = defined & ~same
    counts.update(undefined=int((~defined).sum()), same_answer=int(same.sum()), pairs=int(keep_pairs.sum()))
    if not keep_pairs.any():
        raise ValueError(f"no usable pair among {n_samples} instances; raise n_samples")
    recipient, donor, feature = recipient[keep_pairs], donor[keep_pairs], feature[keep_pairs]
    answer, own = answer[keep_pairs], own[keep_pairs]
    same_rule = _same_rule_partners(rules, recipient, generator)  # drawn after the donors: they stay as before
    controlled = same_rule >= 0
    counts["without_control"] = int((~controlled).sum())
    rows = []
    for name, chosen in layer_bar(layer_choices(model, layers), "rule transfer", progress):
        predictions = torch.empty(len(recipient), dtype=torch.long)
        clean = torch.empty(len(recipient), dtype=torch.long)
        placebo = torch.full((len(recipient),), -1, dtype=torch.long)
        for f in range(n_features):
            at = torch.nonzero(feature == f).squeeze(1)
            if not len(at):
                continue
            positions = {"query": views.query[f].tolist(), "key": views.key[f].tolist()}
            result = transplant(model, task, take(batch, recipient[at]), take(batch, donor[at]), layers=chosen,
                                positions=positions, whole_row=whole_row)
            predictions[at] = result.prediction[:, f].cpu()
            clean[at] = result.clean_prediction[:, f].cpu()
            at = at[controlled[at]]
            if len(at):
                result = transplant(model, task, take(batch, recipient[at]), take(batch, same_rule[at]),
                                    layers=chosen, positions=positions, whole_row=whole_row)
                placebo[at] = result.prediction[:, f].cpu()
        became = (predictions == answer) & (clean != answer)
        by_chance = (placebo == answer) & (clean != answer)
        difference, half_width = paired_difference(became[controlled], by_chance[controlled])
        rows.append({"layer": name, "transfer": float(became.float().mean()),
                     "control": float(by_chance[controlled].float().mean()) if controlled.any() else float("nan"),
                     "keep": float((predictions == own).float().mean()),
                     "clean_keep": float((clean == own).float().mean()), "n_pairs": len(recipient),
                     "n_control_pairs": int(controlled.sum()), "difference": difference,
                     "difference_ci": half_width})
    return ExperimentResult(
        name="rule_transfer",
        task=task.name,
        variant=variant_name(model),
        columns=["transfer", "control", "keep", "clean_keep", "n_pairs", "n_control_pairs", "difference",
                 "difference_ci"],
        rows=rows,
        counts=counts,
        params={"n_samples": n_samples, "split": split, "seed": seed, "whole_row": whole_row},
        description=(
            "transfer: share of pairs whose answer at the differing feature becomes the donor rule's answer on "
            "the recipient's panels (and was not before); control: the same share when the codes come from a "
            "donor with the recipient's own rules (its floor); keep: the answer is the recipient's; clean_keep: "
            "the recipient's answer without intervention; difference: transfer minus control over the pairs that "
            "have a control, difference_ci: the half-width of its paired 95% interval. Pairs whose donor-rule "
            "answer is undefined or equals the recipient's are left out (counts)."
        ),
    )


def function_transfer(
    model: torch.nn.Module,
    task: Any,
    *,
    n_samples: int = 1024,
    split: str = "ood",
    seed: int = 0,
    layers: Sequence[int] | None = None,
    whole_row: bool = True,
    progress: bool | None = None,
) -> ExperimentResult:
    """Function transfer (fuzzy logic): with the donor's codes, does the output follow the donor's function?

    The recipient batch is drawn from `split`; each donor takes the recipient's inputs with the composition of
    another instance of the split (`task.recompose`; fuzzy logic: the two differ only in the y column). The donor's
    codes at the task's `paper` positions (`whole_row`: the query's codes over every key; else only the paper's
    code) are transplanted at one layer at a time and at every layer at once.

    Args:
        model: a model of `task`.
        task: a task that can `recompose` a batch under another instance's composition (fuzzy logic), with a
            composition label (`code_reading.composition`).
        n_samples: pairs.
        split: the split drawn from.
        seed: batch seed.
        layers: model layers (default: all).
        whole_row: transplant the query's whole row of codes (default) rather than the paper's code.
        progress: progress bar.

    Returns:
        An `ExperimentResult` with columns `<m>_donor` and `<m>_recipient` (the task metric m, fuzzy logic's
        `r2`, of the patched output against the donor's and the recipient's targets), and `clean_<m>_donor`,
        `clean_<m>_recipient`, `donor_<m>_donor` (the unpatched runs) per layer.

    Raises:
        ValueError: a task without what it needs, or layers out of range.
    """
    _require(task, ("recompose", "code_reading"), "function_transfer")
    composition, m = task.code_reading.composition, task.metric_name
    if composition is None:
        raise ValueError(f"function_transfer needs a composition label; task {task.name!r} declares none "
                         "(code_reading.composition)")
    device = next(model.parameters()).device
    recipient = task.sample(n_samples, split, seed=seed, device=device)
    other = task.sample(n_samples, split, seed=seed + 1, device=device)
    same = (recipient.labels[composition] == other.labels[composition]).flatten(1).all(dim=1)
    keep = torch.nonzero(~same).squeeze(1)
    recipient, other = take(recipient, keep), take(other, keep)
    donor = task.recompose(recipient, other)
    rows = []
    for name, chosen in layer_bar(layer_choices(model, layers), "function transfer", progress):
        result = transplant(model, task, recipient, donor, layers=chosen, positions="paper",
                            whole_row=whole_row)
        rows.append({
            "layer": name,
            f"{m}_donor": task.metrics(result.outputs, donor)[m],
            f"{m}_recipient": result.metrics[m],
            f"clean_{m}_donor": task.metrics(result.clean_outputs, donor)[m],
            f"clean_{m}_recipient": result.clean_metrics[m],
            f"donor_{m}_donor": task.metrics(result.donor_outputs, donor)[m],
        })
    return ExperimentResult(
        name="function_transfer",
        task=task.name,
        variant=variant_name(model),
        columns=[f"{m}_donor", f"{m}_recipient", f"clean_{m}_donor", f"clean_{m}_recipient", f"donor_{m}_donor"],
        rows=rows,
        counts={"pairs": len(keep), f"same_{composition}": int(same.sum())},
        params={"n_samples": n_samples, "split": split, "seed": seed, "whole_row": whole_row},
        description=(
            f"{m}_donor / {m}_recipient: the task's {m} of the output with the donor's codes against the donor's and "
            f"the recipient's targets (the two share every input); clean_*: the recipient unpatched; "
            f"donor_{m}_donor: the donor's own run. Pairs with equal {composition} are left out (counts)."
        ),
    )


TRANSFERS: dict[str, Callable[..., ExperimentResult]] = {
    "rule_transfer": rule_transfer,
    "function_transfer": function_transfer,
}
"""The transfer experiments by name; a task names its own in `Task.transfer`."""
