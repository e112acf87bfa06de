"""latentcode: attention as a hypernetwork, made inspectable.

Train softmax, linear and HYLA transformers on the paper's compositional tasks, extract the latent codes (the
attention scores across heads of a query-key pair), and hand them to the torch-free `probes` package. This
module re-exports the public API; nothing else needs importing from private modules. Each name loads its module
on first use (PEP 562), so `import latentcode` itself imports neither torch nor the plotting and probing stack.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

from latentcode._version import __version__

_EXPORTS: dict[str, tuple[str, ...]] = {
    "latentcode.pipelines.analysis": ("decode_run", "extract_run", "figures_run"),
    "latentcode.rundir.checkpoint": ("CheckpointError", "Run", "load_run"),
    "latentcode.config": (
        "MODEL_PRESETS", "TRAIN_PRESETS", "VARIANTS", "ModelConfig", "TrainConfig", "model_config", "train_config"
    ),
    "latentcode.pipelines.demo": ("demo",),
    "latentcode.training.diagnostics": ("value_live_fraction",),
    "latentcode.pipelines.emergence": ("read_emergence", "rule_emergence"),
    "latentcode.training.ensemble": ("can_ensemble", "train_ensemble"),
    "latentcode.training.evaluate": ("evaluate",),
    "latentcode.causal.experiments": (
        "ExperimentResult", "function_transfer", "mean_ablation", "rule_transfer", "run_experiment"
    ),
    "latentcode.explore.explorer": ("Explorer", "explore", "instance_picture"),
    "latentcode.codes.extract": ("LatentCodes", "codes_from_patterns", "extract_latent_codes"),
    "latentcode.model.hooks": ("hook_name", "hooks"),
    "latentcode.model.hypernetwork": ("hypernetwork_forward", "value_network_weights"),
    "latentcode.causal.interventions": (
        "InterventionResult", "ablate", "code_direction", "site_mask", "steer", "transplant"
    ),
    "latentcode.model.transformer": ("Transformer", "build_model"),
    "latentcode.causal.edits": ("Ablate", "Edit", "Steer", "Transplant", "Zero"),
    "latentcode.causal.patching": ("Site", "intervene"),
    "latentcode.rundir.pretrained": ("list_pretrained", "load_pretrained", "pretrained_seeds"),
    "latentcode.pipelines.results": ("collect_results", "summarize"),
    "latentcode.pipelines.run_codes": ("ensure_codes", "load_codes"),
    "latentcode.pipelines.opened_run": ("OpenRun", "open_run"),
    "latentcode.pipelines.run_report": ("report_runs",),
    "latentcode.pipelines.run_analyses": ("register_analysis", "unregister_analysis"),
    "latentcode.pipelines.fig5": ("fig5_analysis",),
    "latentcode.tasks": (
        "TASKS", "Batch", "CodeReading", "CompositionalTask", "FuzzyLogic", "InputChoice", "SRaven", "Task",
        "TaskPresets", "get_task", "register_task", "task_from_dict", "unregister_task"
    ),
    "latentcode.training.record": ("NonFiniteLossError",),
    "latentcode.training.train": ("train",),
}  # fmt: skip
"""The module each public name is imported from."""

_SOURCE = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = ["__version__", *sorted(_SOURCE)]


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use (then cached here); else a submodule, as before."""
    if name in _SOURCE:
        value = getattr(importlib.import_module(_SOURCE[name]), name)
        globals()[name] = value
        return value
    if not name.startswith("_"):  # `lc.config.VARIANTS` kept working while __init__ imported everything
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


class _Package(types.ModuleType):
    """Keeps `latentcode.train`, `.evaluate` and `.demo` the functions of those names. Importing a submodule sets
    an attribute of its name on the package (in 0.1, `import latentcode.train` set `latentcode.train` to the
    module); for a public name that is dropped, so the lazy lookup above returns the function, as the eager
    imports this module used to make did."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _SOURCE and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
