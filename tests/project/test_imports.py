"""The library never imports its command line: importing any library module leaves `latentcode.cli` and its
modules unloaded (no import circle between the CLI and the library). And imports stay light: `import
latentcode` loads no plotting or probing stack, `latentcode --version` and `--help` load no torch (each checked as
the set of modules a fresh interpreter holds, never as a time), while `latentcode`'s public names all resolve."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys
import types

import pytest

import latentcode
import probes

CLI_MODULES = {"latentcode.cli", "latentcode.__main__"}


def _library_modules() -> list[str]:
    names = []
    for package in (latentcode, probes):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if info.name in CLI_MODULES or info.name.startswith("latentcode.cli."):
                continue
            names.append(info.name)
    return sorted(names)


def test_the_module_list_is_complete():
    modules = _library_modules()
    assert {
        "latentcode.training.sweep", "latentcode.training.build", "latentcode.pipelines.analysis", "probes.report"
    } <= set(modules)
    assert not CLI_MODULES & set(modules)


def test_no_library_module_imports_the_cli():
    """One interpreter imports every library module in turn; after each, no CLI module may be loaded (a module
    imported as a dependency of an earlier one is checked at that earlier import, which is just as exact)."""
    code = (
        "import sys, importlib\n"
        f"for name in {_library_modules()!r}:\n"
        "    importlib.import_module(name)\n"
        "    cli = sorted(m for m in sys.modules if m == 'latentcode.cli' or m.startswith('latentcode.cli.'))\n"
        "    if cli:\n"
        "        print(name, cli)\n"
        "        break\n"
        "else:\n"
        "    print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ok", f"a library module imports the command line: {out.stdout.strip()}"


def test_cli_modules_import_no_sibling_cli_module_at_import_time():
    code = (
        "import sys, latentcode.cli.analysis; "
        "print('latentcode.cli.app' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ------------------------------------------------------------------------------------------- light imports
HEAVY = ("torch", "matplotlib", "sklearn", "umap", "plotly")
"""Packages that take seconds to import."""

PUBLIC_API = {
    "Batch", "CheckpointError", "ExperimentResult", "FuzzyLogic", "InterventionResult", "LatentCodes",
    "MODEL_PRESETS", "ModelConfig", "NonFiniteLossError", "Run", "SRaven", "TASKS", "TRAIN_PRESETS", "Task",
    "TrainConfig", "Transformer", "VARIANTS", "__version__", "ablate", "build_model", "can_ensemble",
    "code_direction", "codes_from_patterns", "collect_results", "decode_run", "demo", "evaluate",
    "extract_latent_codes", "extract_run", "figures_run", "function_transfer", "get_task", "hypernetwork_forward",
    "list_pretrained", "load_codes", "load_pretrained", "load_run", "mean_ablation", "model_config", "report_runs",
    "rule_transfer", "run_experiment", "site_mask", "steer", "summarize", "task_from_dict", "train",
    "train_config", "train_ensemble", "transplant", "value_live_fraction", "value_network_weights",
}  # fmt: skip
"""`latentcode.__all__` as it was when `__init__` imported everything eagerly (0.1)."""
PUBLIC_API_0_2 = PUBLIC_API | {
    "Ablate", "Edit", "Site", "Steer", "Transplant", "Zero", "ensure_codes", "hook_name", "hooks", "intervene",
    "pretrained_seeds", "read_emergence", "rule_emergence", "CodeReading", "CompositionalTask", "InputChoice", "TaskPresets",
    "register_task", "unregister_task",
}  # fmt: skip
"""What 0.2 adds: the intervention runner, hook names, every shipped seed, the emergence analysis, and what a new
task, in its own file, is written and registered with."""
PUBLIC_API_0_3 = PUBLIC_API_0_2 | {"OpenRun", "open_run", "Explorer", "explore", "instance_picture",
                                     "register_analysis", "unregister_analysis", "fig5_analysis"}
"""What 0.3 adds: a run opened once, and the latent-code explorer."""


def _loaded_after(code: str) -> dict:
    """Run `code` in a fresh interpreter; the heavy packages and the latentcode modules it left loaded, and its
    standard output."""
    report = (
        "\nimport json, sys\n"
        f"print(json.dumps({{'heavy': [m for m in {HEAVY!r} if m in sys.modules], "
        "'latentcode': sorted(m for m in sys.modules if m.startswith('latentcode'))}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code + report], capture_output=True, text=True, check=True)
    *printed, last = out.stdout.strip().splitlines()
    return {**json.loads(last), "stdout": "\n".join(printed)}


def test_import_latentcode_loads_no_plotting_or_probing_stack():
    loaded = _loaded_after("import latentcode")
    assert not {"matplotlib", "sklearn", "umap", "plotly"} & set(loaded["heavy"]), loaded


@pytest.mark.parametrize("flag", ["--version", "--help"])
def test_version_and_help_load_no_torch(flag):
    """What `latentcode --version` and `latentcode --help` run (`main` of the console script), in a fresh
    interpreter: building the parser, subcommands included, imports none of the heavy packages."""
    loaded = _loaded_after(f"from latentcode.cli import main\nassert main([{flag!r}]) == 0")
    assert loaded["stdout"].startswith("latentcode " if flag == "--version" else "usage: latentcode")
    assert loaded["heavy"] == [], f"{flag} loaded {loaded['heavy']} through {loaded['latentcode']}"


def test_public_api_names_all_resolve():
    assert set(latentcode.__all__) == PUBLIC_API_0_3
    assert PUBLIC_API_0_3 <= set(dir(latentcode))
    for name in sorted(PUBLIC_API_0_3):
        assert getattr(latentcode, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        latentcode.no_such_name  # noqa: B018


def test_public_functions_named_like_their_modules_stay_functions():
    """`latentcode.train`, `.evaluate` and `.demo` are functions, also once their modules were imported first
    (importing a submodule sets an attribute of its name on the package; in 0.1 those modules were
    `latentcode.train`, `.evaluate` and `.demo` themselves)."""
    code = (
        "import latentcode.training.train, latentcode.training.evaluate, latentcode.pipelines.demo\n"
        "import latentcode as lc\n"
        "from latentcode import train\n"
        "names = ('train', 'evaluate', 'demo')\n"
        "print([type(getattr(lc, n)).__name__ for n in names], type(train).__name__, lc.config.__name__)\n"
    )
    loaded = _loaded_after(code)
    assert loaded["stdout"] == "['function', 'function', 'function'] function latentcode.config"
    assert isinstance(latentcode.config, types.ModuleType)  # submodules stay reachable as attributes
