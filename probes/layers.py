"""What `layers=` means, wherever it is taken: the named layer choices (`LAYER_NAMES`), the `LayerChoice` type,
`resolve_layers` (one reading of a choice: named groups of positions on the layer axis), and `LayerAxis`, the
methods by which `LatentCodes` cuts its codes along the layer axis (`layer_groups`, `layer_group`,
`axis_positions`, `flat`).

numpy only; labels, splits and files are `probes.codes`' business. Every name here is importable from
`probes.codes` (and `probes`) too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

LAYER_NAMES: tuple[str, ...] = ("each+all", "each", "all", "last")
"""The named layer choices every `layers=` takes, besides model layer numbers (`resolve_layers`)."""

LayerChoice = str | int | Sequence[int]
"""'each+all' | 'each' | 'all' | 'last' | a model layer number | a list of model layer numbers."""


def resolve_layers(layers: LayerChoice, layer_names: Sequence[int]) -> list[tuple[str, list[int]]]:
    """The one reading of `layers=`, shared by every function and estimator that takes it.

    Args:
        layers: "each" (one group per layer), "all" (one group of every layer), "each+all" (both), "last" (the
            last extracted layer), a model layer number (an int, or its string such as "3", as result tables name
            layers), or a list of model layer numbers (one group each).
        layer_names: the model layer of each entry of the layer axis (`LatentCodes.layer_names`).

    Returns:
        (name, positions on the layer axis) per group: a single layer is named by its model layer ("3"), every
        layer together "all".

    Raises:
        ValueError: one line naming the bad value, the model layers there are and what `layers=` takes.

    Example:
        >>> resolve_layers("last", [0, 1, 3]), resolve_layers([3, 0], [0, 1, 3])
        ([('3', [2])], [('3', [2]), ('0', [0])])
        >>> resolve_layers("each+all", [0, 1])
        [('0', [0]), ('1', [1]), ('all', [0, 1])]
    """
    names = [int(x) for x in layer_names]
    takes = f"layers= takes {', '.join(repr(x) for x in LAYER_NAMES)}, a model layer number or a list of them"
    each = [(str(name), [i]) for i, name in enumerate(names)]
    if isinstance(layers, str):
        choices = {"each": each, "all": [("all", list(range(len(names))))], "last": each[-1:]}
        choices["each+all"] = each + choices["all"]
        if layers in choices:
            return choices[layers]
        if not layers.strip().lstrip("-").isdigit():
            raise ValueError(f"layers={layers!r} is not a layer choice; {takes} (these codes hold model layers "
                             f"{names})")
        wanted: list[Any] = [int(layers)]
    elif isinstance(layers, int | np.integer) and not isinstance(layers, bool):
        wanted = [layers]
    else:
        try:
            wanted = list(layers)  # type: ignore[arg-type]
        except TypeError:
            raise ValueError(f"layers={layers!r} is not a layer choice; {takes}") from None
        if not wanted:
            raise ValueError(f"layers={layers!r} selects nothing; {takes} (these codes hold model layers {names})")
    groups = []
    for layer in wanted:
        if isinstance(layer, bool) or not isinstance(layer, int | np.integer) or int(layer) not in names:
            raise ValueError(
                f"layers={layers!r}: {layer!r} is not an extracted model layer; these codes hold model layers "
                f"{names} ({takes})"
            )
        groups.append(each[names.index(int(layer))])
    return groups


class LayerAxis:
    """The layer-axis methods of `LatentCodes`, for a class with `codes` [n_samples, layer, ...] and `meta` (whose
    `meta["layers"]` names the model layer of each entry of the layer axis)."""

    codes: np.ndarray
    meta: dict[str, Any]

    @property
    def layer_names(self) -> list[int]:
        """The model layer of each entry of the layer axis (`meta["layers"]`, else 0..n_layers-1)."""
        return [int(x) for x in self.meta.get("layers") or range(self.codes.shape[1])]

    def axis_positions(self, layers: LayerChoice) -> list[int]:
        """Positions on the layer axis of the layers `layers` selects (`resolve_layers`: a layer name, a model layer
        number or a list of them), each once, in the order chosen.

        Raises:
            ValueError: a layer that was not extracted, or a name that is not a layer choice (one line saying which
                values `layers=` takes).

        Example:
            >>> import numpy as np
            >>> from probes.codes import LatentCodes
            >>> lc = LatentCodes(np.zeros((2, 2, 1, 1, 1)), {}, np.array(["train", "ood"]), {"layers": [1, 3]})
            >>> lc.axis_positions([3, 1]), lc.axis_positions("last"), lc.axis_positions("all")
            ([1, 0], [1], [0, 1])
        """
        return list(dict.fromkeys(p for _, positions in self.layer_groups(layers) for p in positions))

    def layer_groups(self, layers: LayerChoice = "each+all") -> list[tuple[str, list[int]]]:
        """Resolve a layer choice into named groups of positions on the layer axis (`resolve_layers`).

        Args:
            layers: "each" (one group per layer), "all" (one group of every layer), "each+all" (both),
                "last", a model layer number, or a list of model layer numbers (one group each).

        Returns:
            (name, positions) pairs. A single layer is named by its model layer (`layer_names`), e.g. "3";
            the group of every layer is named "all".

        Example:
            >>> import numpy as np
            >>> from probes.codes import LatentCodes
            >>> lc = LatentCodes(np.zeros((2, 2, 1, 1, 1)), {}, np.array(["train", "ood"]), {"layers": [1, 3]})
            >>> lc.layer_groups("each+all")
            [('1', [0]), ('3', [1]), ('all', [0, 1])]
            >>> lc.layer_groups(3)
            [('3', [1])]
        """
        return resolve_layers(layers, self.layer_names)

    def layer_group(self, layer: str | int, *, what: str = "layer") -> tuple[str, list[int]]:
        """The one layer group `layer` names ("last", "all", a model layer number or its string, e.g. "3"), for
        analyses of a single group (`rule_similarity`, `embed_codes`).

        Raises:
            ValueError: a choice of several groups ("each", "each+all", a list of layers) or an unknown layer.
        """
        groups = self.layer_groups(layer)
        if len(groups) != 1:
            raise ValueError(
                f"{what}={layer!r} selects {len(groups)} layer groups; {what}= takes one: 'last', 'all' or a model "
                f"layer number from {self.layer_names}"
            )
        return groups[0]

    def flat(self, layers: LayerChoice | None = None) -> np.ndarray:
        """Codes as a feature matrix.

        Args:
            layers: the layers to keep, as everywhere a layer is taken (`resolve_layers`): "last", "all", a model
                layer number (see `layer_names`) or a list of them ("each" and "each+all" keep every layer, once);
                None keeps every extracted layer.

        Returns:
            float32 [n_samples, features], features = (layers, head, query, key) flattened in that order.
        """
        codes = self.codes
        if layers is not None:
            codes = codes[:, self.axis_positions(layers)]
        return codes.reshape(codes.shape[0], -1)

    def _flat_axis(self, positions: Sequence[int]) -> np.ndarray:
        """`flat` by positions on the layer axis (what `layer_groups` returns), for the probes."""
        codes = self.codes[:, list(positions)]
        return codes.reshape(codes.shape[0], -1)
