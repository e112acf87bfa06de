"""docs/gpu_tables.py turns the GPU calls' records into the tables of docs/benchmarks.md and results/gpu."""

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("gpu_tables", ROOT / "docs" / "gpu_tables.py")
gpu_tables = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gpu_tables)


def _call(folder: Path, train_s: int, step: int, done_s: int) -> None:
    folder.mkdir(parents=True)
    (folder / "runbook.log").write_text(
        "== gpu_runbook 2026-01-01T00:00:00Z grid=g.yaml jobs=1 budget=300s\n"
        f"== training for at most {train_s} s (cuda_graph on)\n== done at {done_s} s (exit status 0)\n")
    (folder / "sraven-hyla-s1-ensemble2.log").write_text(
        f"time limit reached at step {step} of 156250; checkpoints written (continue with resume)\n"
        f"run: gpu_runs/x/sraven-hyla-s1 (sraven-hyla-s1, step {step} of 156250)\n"
        f"run: gpu_runs/x/sraven-hyla-s2 (sraven-hyla-s2, step {step} of 156250)\n")


def test_each_calls_rate_counts_only_the_steps_that_call_gained(tmp_path):
    _call(tmp_path / "call1", train_s=100, step=5000, done_s=150)
    _call(tmp_path / "call2", train_s=40, step=7000, done_s=60)
    rows = [line.split(" | ") for line in gpu_tables.calls(tmp_path).splitlines()[2:]]
    assert [r[5] for r in rows] == ["5,000", "7,000"]
    assert [r[6].rstrip(" |") for r in rows] == ["50.0", "50.0"]  # 5000/100, then (7000-5000)/40
    assert rows[0][4] == "sraven-hyla-s1, sraven-hyla-s2"


def test_the_summary_picks_each_variants_most_run_steps(tmp_path):
    header = "variant,members,form,warmup_steps,timed_steps,window_s,steps_s,run_steps_s,grid_min,peak_mib,error\n"
    rows = ["hyla,1,eager,1,1,1,20.0,20.0,1000.0,1,", "hyla,1,graphed,1,1,1,200.0,200.0,100.0,1,",
            "hyla,9,graphed,1,1,1,50.0,450.0,52.1,1,", "hyla,3,graphed,1,1,1,120.0,360.0,65.1,1,"]
    (tmp_path / "bench_table.csv").write_text(header + "\n".join(rows) + "\n")
    line = gpu_tables.bench_summary(tmp_path).splitlines()[2]
    assert line == "| hyla | 20.0 | 200.0 | 9, graphed | 450.0 | 52.1 |"


def test_the_device_table_keeps_the_steps_a_gpu_run_reached(tmp_path):
    for name, graph, accs in (("cpu-run", False, {10: 0.1, 20: 0.2, 30: 0.3}), ("gpu-run", True, {10: 0.15, 20: 0.25})):
        run = tmp_path / name
        run.mkdir()
        (run / "config.json").write_text(json.dumps({"train": {"cuda_graph": graph, "device": "auto"}}))
        (run / "metrics.jsonl").write_text("".join(
            json.dumps({"step": s, "split": split, "acc": a}) + "\n" for s, a in accs.items() for split in ("test", "ood")))
    out = tmp_path / "devices.csv"
    gpu_tables.compare([tmp_path / "cpu-run", tmp_path / "gpu-run"], out)
    table = gpu_tables.devices(out).splitlines()
    assert table[0] == "| run (device) | 10 | 20 |"
    assert table[2:] == ["| cpu-run (cpu) | 0.100 | 0.200 |", "| gpu-run (gpu) | 0.150 | 0.250 |"]
