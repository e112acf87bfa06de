"""Constant codes: layers whose codes barely vary across instances, found before an analysis draws noise.

`code_spread` measures, per layer group, how far the codes move across rows against their size; groups
below `CONSTANT_RTOL` are constant. `check_constant_codes` also warns (`ConstantCodesWarning`, as
scikit-learn warns with `ConvergenceWarning`). `embed_codes`, `cluster_codes` and `topographic_similarity`
skip constant groups and the figures say "constant codes". Nothing here fits, drops features or draws.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from probes.codes import LatentCodes
from probes.codes_io import jsonable

CONSTANT_RTOL = 1e-3
"""Codes whose spread across instances is at most this fraction of their size are constant.

Spread is the root-mean-square deviation of the codes from their mean code; size is the root-mean-square
of the codes themselves, so the ratio lies in [0, 1] and does not depend on the codes' units. 1e-3 is
about 2**-10, the spacing of 10-bit-mantissa numbers (TF32 matmuls on GPUs, float16) relative to their
size: variation below it cannot be told apart from rounding differences between batches, kernels or
devices, and a layer this flat carries nothing an embedding or k-means can show. Live layers of trained
models sit far above it (about 0.1 to 0.5). Codes computed under bfloat16 autocast (spacing 2**-7) need
`rtol=1e-2`.
"""


class ConstantCodesWarning(UserWarning):
    """Some layers' codes are (nearly) the same for every instance: analyses of those layers show only noise.

    Filter it like any warning: ``warnings.simplefilter("ignore", ConstantCodesWarning)``, or
    ``warnings.simplefilter("error", ConstantCodesWarning)`` to stop at the first constant layer.
    """


@dataclass(frozen=True)
class LayerSpread:
    """How much one layer group's codes vary.

    Attributes:
        layer: model layer ("3") or "all".
        spread: root-mean-square deviation of the codes from their mean code (over rows and features).
        scale: root-mean-square of the codes (over rows and features).
        relative: spread / scale, in [0, 1] (0 when every code is exactly zero).
        constant: relative <= the tolerance of the check (and at least 2 rows).
    """

    layer: str
    spread: float
    scale: float
    relative: float
    constant: bool


@dataclass(frozen=True)
class CodeSpread:
    """Per layer group, the spread of the codes across instances against their size.

    Attributes:
        layers: one `LayerSpread` per layer group.
        rtol: the tolerance used (`CONSTANT_RTOL` by default).
        n_samples: rows the spread was measured on.
        params: how it was measured (split).
    """

    layers: list[LayerSpread]
    rtol: float = CONSTANT_RTOL
    n_samples: int = 0
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def constant_layers(self) -> list[str]:
        """Names of the constant layer groups, in order."""
        return [row.layer for row in self.layers if row.constant]

    @property
    def layer_names(self) -> list[str]:
        """Layer group names, in order."""
        return [row.layer for row in self.layers]

    def is_constant(self, layer: str | int) -> bool:
        """Whether layer group `layer` ("3", 3 or "all") is constant; False for a group not measured."""
        return any(row.constant for row in self.layers if row.layer == str(layer))

    def message(self) -> str:
        """One sentence naming the constant layers and their relative spread ("" when none is constant)."""
        rows = [row for row in self.layers if row.constant]
        if not rows:
            return ""
        which = ", ".join(f"{row.layer} ({row.relative:.1e})" for row in rows)
        noun = "layer" if len(rows) == 1 else "layers"
        return (
            f"constant codes in {noun} {which}: across {self.n_samples} instances they vary by at most "
            f"{self.rtol:g} of their size (spread / RMS in brackets), the level of rounding noise, so "
            "embeddings (UMAP, PCA) and k-means skip them and a standardized probe of them reads noise. A "
            "dead layer, or inputs that fix what the layer sees, gives such codes."
        )

    def table(self) -> str:
        """Plain-text table of spread, scale and their ratio per layer group."""
        lines = [f"code spread across {self.n_samples} rows (constant: spread / RMS <= {self.rtol:g})"]
        lines.append(f"{'layer':<8}{'spread':>12}{'RMS':>12}{'ratio':>12}  constant")
        for r in self.layers:
            flag = "yes" if r.constant else "no"
            lines.append(f"{r.layer:<8}{r.spread:>12.3g}{r.scale:>12.3g}{r.relative:>12.3g}  {flag}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict."""
        return jsonable(asdict(self))


def relative_spread(X: np.ndarray) -> tuple[float, float, float]:
    """(spread, scale, spread / scale) of a feature matrix [rows, features], in float64.

    Example:
        >>> import numpy as np
        >>> X = np.array([[1.0, 2.0], [1.0, 2.0 + 1e-6]])
        >>> [f"{v:.2g}" for v in relative_spread(X)]
        ['3.5e-07', '1.6', '2.2e-07']
    """
    X = np.asarray(X, dtype=np.float64).reshape(len(X), -1)
    if X.size == 0:
        return 0.0, 0.0, 0.0
    spread = float(np.sqrt(X.var(axis=0).mean()))
    scale = float(np.sqrt(np.mean(X**2)))
    return spread, scale, (spread / scale if scale > 0 else 0.0)


def is_constant(X: np.ndarray, rtol: float = CONSTANT_RTOL) -> bool:
    """Whether the rows of X [rows, features] are all (nearly) the same: spread / RMS <= `rtol`, 2+ rows.

    Example:
        >>> import numpy as np
        >>> is_constant(np.ones((5, 3)) + 1e-6 * np.arange(5)[:, None]), is_constant(np.eye(3))
        (True, False)
    """
    X = np.asarray(X)
    return len(X) >= 2 and relative_spread(X)[2] <= rtol


def code_spread(
    codes: LatentCodes,
    layers: str | int | list[int] = "each+all",
    *,
    split: str | list[str] | None = None,
    rtol: float = CONSTANT_RTOL,
) -> CodeSpread:
    """Spread of the codes across instances against their size, per layer group; no warning.

    Args:
        codes: latent codes.
        layers: as in `probes.decode_rules` ("each+all", "each", "all", "last", model layer numbers).
        split: measure on these split(s) only (default: every row).
        rtol: a group whose spread / RMS is at most this is constant (`CONSTANT_RTOL`).

    Returns:
        A `CodeSpread`.

    Raises:
        ValueError: rtol outside [0, 1).

    Example:
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> X = np.stack([np.full((50, 2), 0.7), rng.normal(size=(50, 2))], axis=1)[:, :, :, None, None]
        >>> spread = code_spread(LatentCodes(X, {}, np.array(["test"] * 50)))
        >>> spread.constant_layers, spread.is_constant(1)
        (['0'], False)
    """
    if not 0 <= rtol < 1:
        raise ValueError(f"rtol={rtol!r} must lie in [0, 1): it is a fraction of the codes' RMS")
    rows = codes.select(split=split) if split is not None else codes
    spreads = []
    for name, positions in rows.layer_groups(layers):
        spread, scale, relative = relative_spread(rows._flat_axis(positions))
        spreads.append(LayerSpread(name, spread, scale, relative, rows.n_samples >= 2 and relative <= rtol))
    return CodeSpread(spreads, rtol, rows.n_samples, {"split": split})


def warn_constant(spread: CodeSpread, what: str = "", *, stacklevel: int = 2) -> None:
    """Issue a `ConstantCodesWarning` for the constant groups of `spread` (nothing when none is constant).

    Args:
        spread: from `code_spread`.
        what: prefix naming the codes, e.g. a run name.
        stacklevel: as `warnings.warn(stacklevel=...)` written where this function is called (1: that line;
            2, the default: the caller of the function that calls this one).
    """
    message = spread.message()
    if message:
        text = f"{what}: {message}" if what else message
        warnings.warn(text, ConstantCodesWarning, stacklevel=stacklevel + 1)


def check_constant_codes(
    codes: LatentCodes,
    layers: str | int | list[int] = "each",
    *,
    split: str | list[str] | None = None,
    rtol: float = CONSTANT_RTOL,
    what: str = "",
    stacklevel: int = 2,
) -> CodeSpread:
    """Check each layer's codes and warn (`ConstantCodesWarning`) about the constant ones.

    Call it once on freshly loaded or extracted codes, before decoding, clustering or embedding them.

    Args:
        codes: latent codes.
        layers: layer groups to check (default: each layer).
        split: check these split(s) only (default: every row).
        rtol: tolerance, see `CONSTANT_RTOL`.
        what: prefix of the warning naming the codes (a run name, a path).
        stacklevel: as in `warnings.warn` (2: the caller of this function).

    Returns:
        The `CodeSpread` (its `constant_layers` and `message()` for a CLI or a page).

    Example:
        >>> import numpy as np, warnings
        >>> X = np.full((20, 1, 2, 1, 1), 0.5)
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     check_constant_codes(LatentCodes(X, {}, np.array(["test"] * 20))).constant_layers
        ['0']
        >>> caught[0].category.__name__
        'ConstantCodesWarning'
    """
    spread = code_spread(codes, layers, split=split, rtol=rtol)
    warn_constant(spread, what, stacklevel=stacklevel)
    return spread


def log_constant_warnings(logger: logging.Logger | None = None) -> None:
    """Show each `ConstantCodesWarning` as one log line (`logger.warning`, once per message) instead of
    Python's `file:line: Category: message` and source line; other warnings are shown as before.

    For a command line: call once at start-up, after logging is configured. Calling it again changes nothing.

    Args:
        logger: where the lines go (default: the `probes.degenerate` logger).
    """
    previous = warnings.showwarning
    if getattr(previous, "_constant_codes", False):
        return
    log = logger or logging.getLogger(__name__)

    def show(message, category, filename, lineno, file=None, line=None):  # warnings.showwarning's signature
        if issubclass(category, ConstantCodesWarning):
            log.warning("warning: %s", message)
        else:
            previous(message, category, filename, lineno, file, line)

    show._constant_codes = True  # type: ignore[attr-defined]
    warnings.showwarning = show
    warnings.filterwarnings("once", category=ConstantCodesWarning)
