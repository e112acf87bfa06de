"""latentcode: attention as a hypernetwork, made inspectable.

Train softmax, linear and HYLA transformers on the paper's compositional tasks, extract the latent codes (the
attention scores across heads of a query-key pair), and hand them to the torch-free `probes` package. This
module re-exports the public API; nothing else needs importing from private modules.
"""

from latentcode._version import __version__
from latentcode.analysis import decode_run, extract_run, figures_run, load_codes, report_runs
from latentcode.checkpoint import CheckpointError, Run, load_run
from latentcode.config import (
    MODEL_PRESETS,
    TRAIN_PRESETS,
    VARIANTS,
    ModelConfig,
    TrainConfig,
    model_config,
    train_config,
)
from latentcode.demo import demo
from latentcode.diagnostics import value_live_fraction
from latentcode.ensemble import can_ensemble, train_ensemble
from latentcode.experiments import (
    ExperimentResult,
    function_transfer,
    mean_ablation,
    rule_transfer,
    run_experiment,
)
from latentcode.extract import LatentCodes, codes_from_patterns, extract_latent_codes
from latentcode.hypernetwork import hypernetwork_forward, value_network_weights
from latentcode.interventions import InterventionResult, ablate, code_direction, site_mask, steer, transplant
from latentcode.model import Transformer, build_model
from latentcode.pretrained import list_pretrained, load_pretrained
from latentcode.results import collect_results, summarize
from latentcode.tasks import TASKS, Batch, FuzzyLogic, SRaven, Task, get_task, task_from_dict
from latentcode.train import NonFiniteLossError, evaluate, train

__all__ = [
    "summarize",
    "collect_results",
    "load_pretrained",
    "list_pretrained",
    "value_live_fraction",
    "MODEL_PRESETS",
    "TASKS",
    "TRAIN_PRESETS",
    "VARIANTS",
    "Batch",
    "CheckpointError",
    "ExperimentResult",
    "FuzzyLogic",
    "InterventionResult",
    "LatentCodes",
    "ModelConfig",
    "NonFiniteLossError",
    "Run",
    "SRaven",
    "Task",
    "TrainConfig",
    "Transformer",
    "__version__",
    "ablate",
    "build_model",
    "can_ensemble",
    "code_direction",
    "codes_from_patterns",
    "decode_run",
    "demo",
    "evaluate",
    "extract_latent_codes",
    "extract_run",
    "figures_run",
    "function_transfer",
    "get_task",
    "hypernetwork_forward",
    "load_codes",
    "load_run",
    "mean_ablation",
    "model_config",
    "report_runs",
    "rule_transfer",
    "run_experiment",
    "site_mask",
    "steer",
    "task_from_dict",
    "train",
    "train_config",
    "train_ensemble",
    "transplant",
    "value_network_weights",
]
