"""Hook names and temporary hooks: `hook_name` (TransformerLens' `get_act_name`, for this model) and `hooks`.

Every hook name comes from `hook_name`: `hook_name("pattern", 0)` is `"blocks.0.attn.hook_pattern"`. It takes
TransformerLens' short names and aliases where they mean the same thing here (`"attn"` = `"pattern"`, `"k6"`), and
rejects the ones this model lacks (TransformerLens' MLP internals `pre`/`post`, `result`, ...) with the valid list.
`hooks(model, fwd_hooks=...)` attaches hooks for one `with` block and always removes them, on errors too. What
hooks do lives elsewhere (`patching.py`, `extract.py`, `diagnostics.py`); nothing here imports torch.
"""

from __future__ import annotations

import difflib
import operator
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, SupportsIndex

__all__ = ["HOOK_ALIASES", "HOOK_NAMES", "check_hook_names", "hook_name", "hooks", "split_hook_name"]

_TEMPLATES: dict[str, str] = {
    "embed": "hook_embed",  # [batch, pos, d_model]
    "resid_pre": "blocks.{layer}.hook_resid_pre",  # [batch, pos, d_model]
    "q": "blocks.{layer}.attn.hook_q",  # [batch, pos, head_index, d_head_qk]
    "k": "blocks.{layer}.attn.hook_k",  # [batch, pos, head_index, d_head_qk]
    "v": "blocks.{layer}.attn.hook_v",  # [batch, pos, head_index, d_head]
    "attn_scores": "blocks.{layer}.attn.hook_attn_scores",  # [batch, head_index, query_pos, key_pos]
    "pattern": "blocks.{layer}.attn.hook_pattern",  # [batch, head_index, query_pos, key_pos]: the latent codes
    "value_hidden": "blocks.{layer}.attn.hook_value_hidden",  # [batch, query_pos, key_pos, d_head] (mlp only)
    "z": "blocks.{layer}.attn.hook_z",  # [batch, pos, head_index, d_head]
    "attn_out": "blocks.{layer}.hook_attn_out",  # [batch, pos, d_model]
    "resid_mid": "blocks.{layer}.hook_resid_mid",  # [batch, pos, d_model]
    "router": "blocks.{layer}.mlp.hook_router",  # [batch, pos, n_experts] (mixture of experts only)
    "mlp_out": "blocks.{layer}.hook_mlp_out",  # [batch, pos, d_model]
    "resid_post": "blocks.{layer}.hook_resid_post",  # [batch, pos, d_model]
    "normalized": "ln_final.hook_normalized",  # [batch, pos, d_model]
}

HOOK_NAMES: tuple[str, ...] = tuple(_TEMPLATES)
"""The short name of every hook of a latentcode `Transformer`, in forward order."""

HOOK_ALIASES: dict[str, str] = {
    "attn": "pattern",
    "attn_logits": "attn_scores",
    "key": "k",
    "query": "q",
    "value": "v",
}
"""TransformerLens' aliases (`get_act_name`) that name a hook of this model: alias -> short name."""

_PATTERNS = {
    short: re.compile("^" + re.escape(template).replace(re.escape("{layer}"), r"(\d+)") + "$")
    for short, template in _TEMPLATES.items()
}
_COMPACT = re.compile(r"^([a-z_]*[a-z])(\d+)$")  # TransformerLens' "k6" = ("k", 6)


def _unknown(name: str) -> ValueError:
    valid = sorted([*HOOK_NAMES, *HOOK_ALIASES])
    close = difflib.get_close_matches(name, valid, n=3)
    hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
    return ValueError(f"no hook named {name!r} in latentcode's Transformer.{hint} Valid short names: "
                      f"{', '.join(valid)} (or a full name such as 'blocks.0.attn.hook_pattern')")


def split_hook_name(name: str) -> tuple[str, int | None]:
    """The inverse of `hook_name`: a full hook name as (short name, layer), layer None outside the blocks.

    Raises:
        ValueError: `name` is not the full name of a hook of latentcode's `Transformer`.

    >>> split_hook_name("blocks.3.attn.hook_v"), split_hook_name("hook_embed")
    (('v', 3), ('embed', None))
    """
    for short, pattern in _PATTERNS.items():
        match = pattern.match(name)
        if match:
            return short, int(match.group(1)) if match.groups() else None
    raise _unknown(name)


def hook_name(name: str, layer: SupportsIndex | None = None) -> str:
    """The full name of a hook, from its short name and layer (TransformerLens' `get_act_name`).

    Args:
        name: a short name (`HOOK_NAMES`: 'pattern', 'v', 'value_hidden', 'resid_pre', 'embed', ...), one of
            TransformerLens' aliases (`HOOK_ALIASES`: 'attn', 'attn_logits', 'key', 'query', 'value'), a short name
            with its layer attached ('k6'), the attribute name ('hook_pattern'), or a full name (checked and
            returned unchanged).
        layer: the block (0-based) for hooks inside the blocks; None for 'embed' and 'normalized'.

    Returns:
        The name as in `model.hook_dict`.

    Raises:
        ValueError: an unknown name, a missing or negative layer for a block hook, or a layer for a hook outside
            the blocks. Whether this model has the hook (enough layers; `value_hidden` needs value_net='mlp',
            `router` a mixture of experts) is `check_hook_names`'s question.

    >>> hook_name("pattern", 0), hook_name("value", 1), hook_name("resid_pre", 2), hook_name("embed")
    ('blocks.0.attn.hook_pattern', 'blocks.1.attn.hook_v', 'blocks.2.hook_resid_pre', 'hook_embed')
    >>> hook_name("attn", 1) == hook_name("pattern1") == hook_name("hook_pattern", 1) == "blocks.1.attn.hook_pattern"
    True
    """
    if "." in name:
        if layer is not None:
            raise ValueError(f"hook_name({name!r}, {layer!r}): a full name carries its layer; pass layer=None")
        split_hook_name(name)
        return name
    short = name.removeprefix("hook_")
    compact = _COMPACT.match(short)
    if compact and layer is None and short not in _TEMPLATES:
        short, layer = compact.group(1), int(compact.group(2))
    short = HOOK_ALIASES.get(short, short)
    if short not in _TEMPLATES:
        raise _unknown(name)
    template = _TEMPLATES[short]
    if "{layer}" not in template:
        if layer is not None:
            raise ValueError(f"hook {short!r} sits outside the blocks ({template}); pass layer=None")
        return template
    if layer is None or isinstance(layer, bool):
        raise ValueError(f"hook {short!r} sits in every block; pass its layer, e.g. hook_name({short!r}, 0)")
    index = operator.index(layer)
    if index < 0:
        raise ValueError(f"layer={index} is negative; layers are numbered 0..n_layers-1")
    return template.format(layer=index)


def check_hook_names(model: Any, names: Iterable[str]) -> None:
    """Raise if a name is not a hook of `model` (a silently missing name reads as a result: TL#923).

    Raises:
        ValueError: the first missing name, why it is missing where that is known, and close matches.
    """
    hook_dict = model.hook_dict
    for name in names:
        if name in hook_dict:
            continue
        try:
            short, layer = split_hook_name(name)
        except ValueError as e:
            close = difflib.get_close_matches(name, list(hook_dict), n=3)
            hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
            raise ValueError(f"{name!r} is not a hook of this model{hint} ({e})") from None
        cfg = getattr(model, "cfg", None)
        n_layers = getattr(cfg, "n_layers", None)
        if layer is not None and n_layers is not None and layer >= n_layers:
            why = f"the model has {n_layers} layers, numbered 0..{n_layers - 1}"
        elif short == "value_hidden":
            why = f"value_net={getattr(cfg, 'value_net', '?')!r} generates no hidden layer (only 'mlp' does)"
        elif short == "router":
            why = "the model has no mixture of experts (n_experts=0)"
        else:
            why = "this model does not define it"
        raise ValueError(f"{name!r} is not a hook of this model: {why}")


HookFn = Callable[..., Any]
"""`fn(activation, hook) -> activation | None`: a returned tensor replaces the activation."""


@contextmanager
def hooks(
    model: Any,
    fwd_hooks: Sequence[tuple[str | Callable[[str], bool], HookFn]] = (),
    bwd_hooks: Sequence[tuple[str | Callable[[str], bool], HookFn]] = (),
) -> Iterator[Any]:
    """Attach hooks for the length of a `with` block; they are removed when it ends, also on an exception.

    TransformerLens' `HookedRootModule.hooks` (`reset_hooks_end=True`), after checking every named hook exists.
    Only the hooks added here are removed: hooks of an enclosing `hooks` block and permanent hooks stay.

    Args:
        model: a `HookedRootModule` (our `Transformer`).
        fwd_hooks: (name, fn) pairs; a name is a full hook name (`hook_name(...)`) or a predicate on names.
        bwd_hooks: the same for the backward pass (run `backward()` inside the block).

    Yields:
        The model.

    Raises:
        ValueError: a named hook the model does not have (nothing is attached then).

    >>> import torch
    >>> from latentcode.model.transformer import build_model
    >>> model = build_model("fuzzy_logic", "hyla", "tiny").eval()
    >>> seen = []
    >>> with hooks(model, fwd_hooks=[(hook_name("pattern", 0), lambda a, hook: seen.append(hook.name))]):
    ...     _ = model(torch.zeros(1, 16, 5))
    >>> seen, any(hp.fwd_hooks for hp in model.hook_dict.values())
    (['blocks.0.attn.hook_pattern'], False)
    """
    fwd, bwd = list(fwd_hooks), list(bwd_hooks)
    check_hook_names(model, [name for name, _ in fwd + bwd if isinstance(name, str)])
    with model.hooks(fwd_hooks=fwd, bwd_hooks=bwd, reset_hooks_end=True):
        yield model
