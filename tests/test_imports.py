"""The library never imports its command line: importing any library module leaves `latentcode.cli` and the
`_cli_*` modules unloaded (no import circle between the CLI and the library)."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import latentcode
import probes

CLI_MODULES = {"latentcode.cli", "latentcode.__main__"}


def _library_modules() -> list[str]:
    names = []
    for package in (latentcode, probes):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if info.name in CLI_MODULES or info.name.split(".")[-1].startswith("_cli"):
                continue
            names.append(info.name)
    return sorted(names)


def test_the_module_list_is_complete():
    modules = _library_modules()
    assert {"latentcode.sweep", "latentcode.build", "latentcode.analysis", "probes.report"} <= set(modules)
    assert not CLI_MODULES & set(modules)


def test_no_library_module_imports_the_cli():
    """One interpreter imports every library module in turn; after each, no CLI module may be loaded (a module
    imported as a dependency of an earlier one is checked at that earlier import, which is just as exact)."""
    code = (
        "import sys, importlib\n"
        f"for name in {_library_modules()!r}:\n"
        "    importlib.import_module(name)\n"
        "    cli = sorted(m for m in sys.modules if m == 'latentcode.cli' or m.startswith('latentcode._cli'))\n"
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
        "import sys, latentcode._cli_analysis; "
        "print('latentcode.cli' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
