"""What `LatentCodes.meta` says about codes, read the same way by every probe: the default label, each label's kind,
the composition label, which controls apply, and the reading (positions and inputs, in words).

Extraction writes these keys from the task's own declaration (`latentcode.tasks.base.CodeReading.meta`), so the
probes branch on metadata, never on a task's name. Files written by latentcode 0.1 carry only `meta["task"]`;
`LEGACY_META` fills in what those two tasks would have declared. It is a migration of old files, not logic: a new
task never needs an entry. Nothing here imports torch or knows a model.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "LABEL_KINDS",
    "LEGACY_INPUTS",
    "LEGACY_META",
    "meta_control",
    "meta_label_kinds",
    "meta_reading",
    "meta_reading_inputs",
    "meta_value",
    "reading_text",
]

LABEL_KINDS: tuple[str, ...] = ("class", "class_set", "class_tuple", "bits", "value", "group")
"""What a label holds (`meta["label_kinds"]`): one class per row [n], a set of class ids [n, K], one class per slot
[n, K], binary latent bits [n, ...], a continuous value, or an id grouping rows."""

_DEFAULT_CONTROL: dict[str, Any] = {"inputs": "all_tokens", "control_task": False}

# Migration of codes files written by latentcode 0.1, whose meta holds `task` but none of the keys below: what the
# two tasks of that release declare today (their `code_reading`), plus the inputs those files were read at.
LEGACY_META: dict[str, dict[str, Any]] = {
    "sraven": {
        "label": "rule",
        "label_kinds": {"rule": "class", "rules": "class_tuple", "feature": "class", "target": "class",
                        "prediction": "class", "correct": "class", "composition": "group", "instance": "group",
                        "view": "class"},
        "composition_label": "rules",
        "control": {"inputs": "positions", "control_task": True},
        # always drawn unpermuted; such files may say "uniform" in meta["inputs"], which is not to be trusted
        "inputs": "unpermuted",
        "inputs_recorded": False,
    },
    "fuzzy_logic": {
        "label": "terms",
        "label_kinds": {"terms": "class_set", "term_bits": "bits", "target": "value", "prediction": "value",
                        "composition": "group", "instance": "group"},
        "composition_label": "terms",
        "control": {"inputs": "all_tokens", "control_task": False},
        # uniform unless meta["inputs"] says otherwise (`latentcode extract --inputs fixed_query` recorded it)
        "inputs": "uniform",
        "inputs_recorded": True,
    },
}
"""Per task name of latentcode 0.1: what its codes files are read as, where their meta lacks a key."""

LEGACY_INPUTS: dict[str, str] = {task: entry["inputs"] for task, entry in LEGACY_META.items()}
"""What codes files written before readings were recorded (no `meta["reading"]`) are assumed to have been read at:
SRAVEN instances were always drawn unpermuted; fuzzy-logic inputs were uniform unless `meta["inputs"]` says
otherwise."""


def _legacy(meta: dict[str, Any]) -> dict[str, Any]:
    return LEGACY_META.get(meta.get("task") or "", {})


def meta_value(meta: dict[str, Any], key: str) -> Any:
    """`meta[key]`; for a 0.1 file that lacks it, what its task declared (`LEGACY_META`); else None.

    >>> meta_value({"task": "sraven"}, "composition_label"), meta_value({"composition_label": "parts"}, "composition_label")
    ('rules', 'parts')
    """
    if meta.get(key) is not None:
        return meta[key]
    return _legacy(meta).get(key)


def meta_label_kinds(meta: dict[str, Any]) -> dict[str, str]:
    """label name -> `LABEL_KINDS` entry, as far as the codes' producer said (empty when it said nothing)."""
    return dict(meta_value(meta, "label_kinds") or {})


def meta_control(meta: dict[str, Any]) -> dict[str, Any]:
    """Which controls apply: `inputs` ("positions": the raw tokens at the codes' query and key positions;
    "all_tokens": every raw token) and `control_task` (the key tokens are discrete, so Hewitt & Liang's control
    task applies). Codes that say nothing get the input-only control on every token and no control task."""
    return {**_DEFAULT_CONTROL, **(meta_value(meta, "control") or {})}


def meta_reading_inputs(meta: dict[str, Any]) -> str | None:
    """The input choice codes with this `meta` were read at: `meta["inputs"]`; for files written before readings
    were recorded (no `meta["reading"]`), `LEGACY_META`'s assumption (SRAVEN unpermuted, whatever `inputs` says;
    fuzzy logic `meta["inputs"]`, else uniform)."""
    recorded = meta.get("inputs")
    if "reading" in meta:
        return recorded
    legacy = _legacy(meta)
    if legacy and not legacy["inputs_recorded"]:
        return legacy["inputs"]
    return recorded or legacy.get("inputs")


def meta_reading(meta: dict[str, Any]) -> str | None:
    """The reading in words of codes with this `meta` (see `LatentCodes.reading`)."""
    if isinstance(meta.get("reading"), str):
        return meta["reading"]
    if not meta.get("positions"):
        return None
    inputs = meta_reading_inputs(meta)
    text = reading_text(meta["positions"], inputs)
    trusted = _legacy(meta).get("inputs_recorded", True)
    assumed = inputs is not None and (not trusted or not meta.get("inputs"))
    return f"{text} (assumed: written before readings were recorded)" if assumed else text


def reading_text(positions: str | None, inputs: str | None, *, default: bool = False) -> str:
    """A reading in words, as `LatentCodes.reading` and every result show it.

    >>> reading_text("paper", "fixed_query", default=True)
    'paper positions, fixed_query inputs (default)'
    """
    text = f"{positions} positions" if positions else "positions not recorded"
    text += f", {inputs} inputs" if inputs else ", inputs not recorded"
    return text + (" (default)" if default else "")
