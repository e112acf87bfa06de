"""What an intervention does at a site: `Edit` and its four kinds (`Transplant`, `Steer`, `Ablate`, `Zero`).

An edit is pyvene's "what" beside `latentcode.causal.patching.Site`'s "where". `Edit.source` names the batch whose
activations the edit reads (a transplant's donor, an ablation's reference), which `intervene` caches in one run;
`Edit.bind` turns those activations into an `EditFn` for one run. A new edit is a subclass with these two methods
(alignment search's `Interchange` is one, in `latentcode.causal.interchange`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch
from torch import Tensor

from latentcode.tasks.base import Batch

__all__ = ["Ablate", "Edit", "EditFn", "Steer", "Transplant", "Zero"]


EditFn = Callable[[Tensor, Tensor, str], Tensor]
"""(activation, site mask, hook name) -> the edited activation."""


class Edit:
    """What an intervention does at a site; `Transplant`, `Steer`, `Ablate` and `Zero` are the edits."""

    kind: ClassVar[str] = "edit"

    def source(self, batch: Batch) -> Batch | None:
        """The batch whose activations at the site this edit reads (cached in one run), or None."""
        return None

    def bind(self, batch: Batch, cached: Mapping[str, Tensor]) -> EditFn:
        """The edit for one run of `batch`, given the source's activations at the site's hooks."""
        raise NotImplementedError


def _check_paired(donor: Batch, batch: Batch, words: tuple[str, str, str]) -> Batch:
    """`donor` when it pairs instance by instance with `batch` (the same x shape), for the edits that read a donor
    (`Transplant`, `Interchange`); `words` are what the message calls the donor, the batch and the pairing."""
    if donor.x.shape != batch.x.shape:
        donor_word, batch_word, pairing = words
        raise ValueError(
            f"{donor_word} x has shape {tuple(donor.x.shape)} but {batch_word} x has {tuple(batch.x.shape)}; draw "
            f"both from the same task with the same n_samples ({pairing})"
        )
    return donor


@dataclass(frozen=True, eq=False)
class Transplant(Edit):
    """The donor's activations at the site: instance i receives donor instance i's (same shapes)."""

    donor: Batch
    kind: ClassVar[str] = "transplant"

    def source(self, batch: Batch) -> Batch:
        return _check_paired(self.donor, batch, ("donor", "recipient", "instance i receives donor instance i's codes"))

    def bind(self, batch: Batch, cached: Mapping[str, Tensor]) -> EditFn:
        return lambda act, mask, name: torch.where(mask, cached[name], act)


@dataclass(frozen=True, eq=False)
class Steer(Edit):
    """Add `alpha * direction` at the site; `direction` broadcasts over the hook's axes after the batch axis
    (`hook_pattern`: [head_index, query_pos, key_pos]; entries outside the site are ignored)."""

    direction: Tensor | np.ndarray
    alpha: float = 1.0
    kind: ClassVar[str] = "steer"

    def bind(self, batch: Batch, cached: Mapping[str, Tensor]) -> EditFn:
        scaled = (self.alpha * torch.as_tensor(self.direction)).to(batch.x.device)
        return lambda act, mask, name: act + torch.where(mask, scaled, 0.0).to(act.dtype)


def _check_reference(reference: Batch, batch: Batch) -> Batch:
    if reference.x.shape[1:] != batch.x.shape[1:]:
        raise ValueError(
            f"reference x has shape {tuple(reference.x.shape)} but batch x has {tuple(batch.x.shape)}; they must "
            "agree after the batch axis (same task)"
        )
    return reference


@dataclass(frozen=True, eq=False)
class Ablate(Edit):
    """The activations' mean over a reference batch ('mean'), or a random reference instance's ('resample': one
    draw with replacement per instance, from `seed`, shared by every hook). Reference default: the batch itself."""

    method: str = "mean"
    reference: Batch | None = None
    seed: int = 0
    kind: ClassVar[str] = "ablate"

    def __post_init__(self) -> None:
        if self.method not in ("mean", "resample"):
            raise ValueError(f"Ablate(method={self.method!r}) is not one of mean, resample (zeros: Zero())")

    def source(self, batch: Batch) -> Batch:
        return batch if self.reference is None else _check_reference(self.reference, batch)

    def bind(self, batch: Batch, cached: Mapping[str, Tensor]) -> EditFn:
        if self.method == "mean":
            new = {name: value.mean(dim=0, keepdim=True) for name, value in cached.items()}
        else:
            n_reference = next(iter(cached.values())).shape[0]
            index = torch.randint(n_reference, (len(batch),), generator=torch.Generator().manual_seed(self.seed))
            new = {name: value.index_select(0, index.to(batch.x.device)) for name, value in cached.items()}
        return lambda act, mask, name: torch.where(mask, new[name], act)


@dataclass(frozen=True, eq=False)
class Zero(Edit):
    """Zeros at the site."""

    kind: ClassVar[str] = "zero"

    def bind(self, batch: Batch, cached: Mapping[str, Tensor]) -> EditFn:
        return lambda act, mask, name: torch.where(mask, torch.zeros_like(act), act)
