"""docs/benchmarks.md's one-thread speed tables (docs/lane_speeds_table.py) say what the committed benchmark records
and the shipped runs' metrics say: each is recomputed here from the files."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
RECORDS = sorted((ROOT / "results" / "lane_speeds").glob("*.json"))
STEPS = {"sraven": 156_250, "fuzzy_logic": 50_000}
"""The paper's training length of each task (spec: 156,250 steps of 128 for SRAVEN, 50k for fuzzy logic)."""


def _block(page: str, record: Path) -> list[list[str]]:
    """The table rows of the generated block of this record on the page, as cells."""
    rel = record.relative_to(ROOT).as_posix()
    head = f"<!-- generated: {rel} (python docs/lane_speeds_table.py {rel}) -->"
    assert head in page, f"docs/benchmarks.md has no table of {rel}"
    body = page.split(head)[1].split("<!-- /generated -->")[0]
    return [[c.strip() for c in line.strip("|").split("|")] for line in body.splitlines()
            if line.startswith("| ") and not line.startswith("| variant")]


def _end_speed(checkpoint: Path) -> float:
    """Median steps/s between consecutive train rows of the last 1800 s of training."""
    rows = [json.loads(line) for line in (checkpoint / "metrics.jsonl").read_text().splitlines() if line.strip()]
    rows = [r for r in rows if r.get("split") == "train" and "elapsed_s" in r]
    steps, elapsed = np.array([r["step"] for r in rows]), np.array([r["elapsed_s"] for r in rows])
    keep = elapsed >= elapsed[-1] - 1800
    d_step, d_time = np.diff(steps[keep]), np.diff(elapsed[keep])
    ok = (d_step > 0) & (d_time > 0)
    return float(np.median(d_step[ok] / d_time[ok]))


def test_every_record_is_one_thread_and_its_table_holds_its_speeds_and_the_lanes_they_are_read_against():
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    assert {p.name for p in RECORDS} >= {"sraven.json", "fuzzy_logic-seq32.json", "fuzzy_logic-seq96.json"}
    lanes_seen = 0
    for record_path in RECORDS:
        record = json.loads(record_path.read_text())
        assert record["threads"] == 1 and "--threads 1" in record["command"], record_path.name
        table = {cells[0]: cells for cells in _block(page, record_path)}
        assert list(table) == [row["variant"] for row in record["rows"]]
        for row in record["rows"]:
            cells = table[row["variant"]]
            assert cells[2] == f"{row['steps_per_cpu_s']:.2f}"
            hours = STEPS[row["task"]] / row["steps_per_cpu_s"] / 3600
            assert cells[3] == (f"{hours:.1f} h" if hours >= 2 else f"{60 * hours:.0f} min")
            if row["task"] != "sraven":
                continue
            # every SRAVEN checkpoint of the variant shipped from a one-thread lane, its end speed beside it
            names = sorted(p.name for p in (ROOT / "checkpoints").iterdir()
                           if re.fullmatch(rf"sraven-{re.escape(row['variant'])}(-s\d+)?", p.name)
                           and "--threads 1 " in json.loads((p / "shipped.json").read_text())["command"])
            assert names, row["variant"]
            expected = ", ".join(f"{_end_speed(ROOT / 'checkpoints' / n):.2f} ({n})" for n in names)
            assert cells[4] == expected
            lanes_seen += len(names)
    assert lanes_seen >= 3
