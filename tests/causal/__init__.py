"""Tests of latentcode/causal/: interventions, experiments, alignment search and erasure."""

import csv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CAUSAL = ROOT / "results" / "causal"
"""The committed results of `latentcode causal align|erase`."""
CAUSAL_DOC = ROOT / "docs" / "causal.md"
"""The page that summarises them."""
CAUSAL_README = CAUSAL / "README.md"
"""The folder's README, which holds their full tables."""


def results_csv(path) -> list[dict[str, str]]:
    """The rows of a committed results CSV, as strings."""
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def table_rows(path, header: str) -> list[list[str]]:
    """The body cells of the one markdown table in `path` whose header row is exactly `header`."""
    lines = Path(path).read_text().splitlines()
    starts = [i for i, line in enumerate(lines) if _cells(line) == _cells(header)]
    assert len(starts) == 1, f"{path}: {len(starts)} tables with header {header!r}, expected 1"
    table = []
    for line in lines[starts[0] + 2:]:
        if not line.startswith("|"):
            break
        table.append(_cells(line))
    return table


def titled_tables(path, header: str) -> dict[str, tuple[str, list[list[str]]]]:
    """Every table in `path` whose header row is exactly `header`, keyed by the bold name (`**name**`) that opens
    the line above it, with that whole line and the table's body cells."""
    lines = Path(path).read_text().splitlines()
    tables = {}
    for i, line in enumerate(lines):
        if _cells(line) != _cells(header) or not line.startswith("|"):
            continue
        title = next(lines[j] for j in range(i - 1, -1, -1) if lines[j].strip())
        assert title.startswith("**"), f"{path}: the table at line {i + 1} has no bold name above it"
        name = title[2:title.index("**", 2)]
        assert name not in tables, f"{path}: two tables named {name!r}"
        body = []
        for row in lines[i + 2:]:
            if not row.startswith("|"):
                break
            body.append(_cells(row))
        tables[name] = (title, body)
    return tables


STRONGEST_CONTROLS = {"identity": "identity", "random": "random", "same_rule": "same-rule",
                      "clean_counterfactual": "unpatched"}
"""An alignment row's controls, as the docs' SRAVEN summary table names them."""


def best_alignment_cells(rows: list[dict[str, str]]) -> list[str]:
    """The docs' summary cells for the row of largest held-out IIA: layer, k; IIA; interval; the largest of its
    four controls with its name; the IIA on the training rule sets."""
    best = max(rows, key=lambda row: float(row["iia"]))
    control = max(STRONGEST_CONTROLS, key=lambda column: float(best[column]))
    f3 = {column: f"{float(best[column]):.3f}" for column in best}
    return [f"{best['layer']}, {best['k']}", f3["iia"], f"{f3['iia_low']}–{f3['iia_high']}",
            f"{f3[control]} ({STRONGEST_CONTROLS[control]})", f3["train_iia"]]
