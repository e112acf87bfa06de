"""The boundary between `latentcode` and `probes` is crossed by public names only.

Read from the source with `ast`, so a function-local import counts as much as one at the top: no module of one
package imports a private module (`probes._x`) or a private name (`from probes.codes import _x`) of the other.
Each package carries its own deprecation helper, so neither needs the other's internals for that either.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("latentcode", "probes")


def _private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def private_crossings(source: str, package: str) -> list[str]:
    """`module.name` for every private module or name of the *other* package that `source` imports."""
    other = next(p for p in PACKAGES if p != package)
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names
                      if a.name.split(".")[0] == other and any(map(_private, a.name.split(".")))]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if node.module.split(".")[0] != other:
                continue
            if any(map(_private, node.module.split("."))):
                found.append(node.module)
            found += [f"{node.module}.{a.name}" for a in node.names if _private(a.name)]
    return found


def test_the_scanner_finds_private_modules_and_names_even_inside_functions():
    source = ("import probes._compat\nfrom probes.codes import LatentCodes, _jsonable\n"
              "def f():\n    from probes._codes_io import read_codes\n    from latentcode.x import _own\n")
    assert private_crossings(source, "latentcode") == ["probes._compat", "probes.codes._jsonable",
                                                       "probes._codes_io"]
    assert private_crossings("from probes import __version__\nimport probes.codes\n", "latentcode") == []


def test_no_private_name_crosses_between_latentcode_and_probes():
    offenders = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            crossings = private_crossings(path.read_text(), package)
            if crossings:
                offenders[str(path.relative_to(ROOT))] = crossings
    assert not offenders, f"private names of the other package imported (give them a public name): {offenders}"
