"""The paper's Fig. 5 (SRAVEN) on one opened run: the per-layer analysis set, as library functions.

`fig5_analysis` takes an `OpenRun` (or a path or shipped name) and reads its codes once at the paper's reading
(spec §4.1: query = the last token, keys = the last feature of panels 7 and 8, instances unpermuted). On those
codes it computes

- Fig. 5F, rule decoding per layer beside its floors and controls (`decode_run`);
- rule transfer on the `test` and the `ood` split (`latentcode.causal.transfer.rule_transfer`);
- Fig. 5A/B's cluster-vs-label scores per layer (`cluster_rows`: k-means, against the rule and the target, on
  every row and on the held-out rows);
- Fig. 5E's cosine of the rule-average codes per layer, raw and centred, with the same cosines of the raw key
  values as the input-only control (`similarity_rows`, `probes.input_similarity`);

and returns them as a `Fig5Result`, whose `save` writes the small files a campaign commits (`FIG5_FILES`).
`fig5_figures` draws the per-layer figures. The model's own accuracy at the step read is `step_metrics`.

>>> import latentcode as lc
>>> from latentcode.pipelines.fig5 import fig5_analysis
>>> result = fig5_analysis(lc.open_run("sraven-hyla"), out_dir="runs/fig5/sraven-hyla")  # doctest: +SKIP
>>> result.save("results/fig5/" + result.name)                                          # doctest: +SKIP
"""

from __future__ import annotations

import csv
import io
import os
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from latentcode.pipelines.analysis import decode_run, decoding_record
from latentcode.pipelines.opened_run import OpenRun, open_run
from latentcode.pipelines.run_codes import check_out_dir, codes_for
from latentcode.rundir.checkpoint import read_metrics
from latentcode.rundir.directory import atomic_write_bytes, atomic_write_json

__all__ = ["CLUSTER_LABELS", "CLUSTER_ROWS", "FIG5_FILES", "PAPER_OOD_ACC", "TRANSFER_SPLITS", "Fig5Result",
           "cluster_rows", "fig5_analysis", "fig5_figures", "results_name", "similarity_rows", "step_metrics"]

PAPER_OOD_ACC = {"softmax": 56.56, "linear": 56.30, "hyla": 69.13}
"""Table A1's SRAVEN OOD accuracy (%), mean over 3 seeds."""
CLUSTER_LABELS = ("rule", "target")
"""The labels the clusters are scored against."""
CLUSTER_ROWS = {"all": None, "ood": "ood"}
"""Rows clustered: every split's codes, or the held-out rule sets' only."""
TRANSFER_SPLITS = {"test": "", "ood": "_ood"}
"""Rule transfer's splits and the suffix of their files."""
FIG5_FILES = ("decode.json", "rule_transfer.csv", "rule_transfer.json", "rule_transfer_ood.csv",
              "rule_transfer_ood.json", "clustering.csv", "similarity.csv", "fig5.json")
"""What `Fig5Result.save` writes."""


def results_name(run: OpenRun | str | os.PathLike) -> str:
    """`RUN-stepNNNNNN`: the run's folder name (a snapshot `RUN/snapshots/step-N`: its run's) and the step of the
    weights read, so a run still training never reuses an older step's analysis."""
    run = open_run(run)
    base = run.path.parent.parent if run.path.parent.name == "snapshots" else run.path
    return f"{base.name}-step{run.step:06d}"


def step_metrics(run: OpenRun | str | os.PathLike) -> dict[str, Any]:
    """The model's own evaluation at the step of its weights: `test_acc`, `ood_acc` and, where recorded (HYLA),
    `value_live_fraction`; a snapshot (`RUN/snapshots/step-N`) reads its run's metrics.jsonl. {} if none."""
    run = open_run(run)
    step = run.step
    sources = [run.metrics]
    if run.path.parent.name == "snapshots":
        sources.append(read_metrics(run.path.parent.parent))
    for records in sources:
        found: dict[str, Any] = {}
        for record in records:
            if record.get("step") == step and record.get("split") in ("test", "ood") and "acc" in record:
                found[f"{record['split']}_acc"] = record["acc"]
                live = record.get("value_live_fraction")
                if live and any(v is not None for v in live):
                    found["value_live_fraction"] = live
        if found:
            return found
    return {}


def cluster_rows(codes: Any, *, k: int = 8, random_state: int = 0) -> list[dict[str, Any]]:
    """Fig. 5A/B: k-means of each layer's codes scored against each of `CLUSTER_LABELS`, on every row and on the
    `ood` rows (`probes.cluster_codes`); one row per (label, rows, layer), scores rounded to 4 decimals."""
    from probes import cluster_codes

    rows = []
    for label in CLUSTER_LABELS:
        for name, split in CLUSTER_ROWS.items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = cluster_codes(codes, label=label, split=split, k=k, random_state=random_state)
            rows += [{"label": label, "rows": name, "n_samples": result.n_samples, "k": result.k, "layer": row.layer,
                      "ami": round(row.ami, 4), "ari": round(row.ari, 4), "silhouette": round(row.silhouette, 4)}
                     for row in result.layers]
    return rows


def _pairs(layer: str, sim: Any) -> list[dict[str, Any]]:
    names = sim.class_names
    return [{"layer": layer, "centered": sim.centered, "rule_a": a, "rule_b": b,
             "cosine": round(float(sim.similarity[i, j]), 4)}
            for i, a in enumerate(names) for j, b in enumerate(names) if i < j]


def similarity_rows(codes: Any) -> list[dict[str, Any]]:
    """Fig. 5E: the cosine of every pair of rule-average codes (`probes.rule_similarity` on every row), per layer
    and over all layers, raw and centred; then the same pairs on the raw key values (`layer` "input-only",
    `probes.input_similarity`). Cosines rounded to 4 decimals."""
    from probes import input_similarity, rule_similarity

    rows = []
    for layer in [*map(str, codes.layer_names), "all"]:
        for centered in (False, True):
            sim = rule_similarity(codes, layer=layer if layer == "all" else int(layer), center=centered)
            rows += _pairs(layer, sim)
    for centered in (False, True):
        rows += _pairs("input-only", input_similarity(codes, "rule", center=centered))
    return rows


def fig5_figures(codes: Any, folder: str | os.PathLike, *, umap: bool = True) -> list[Path]:
    """Per layer, the heatmap of the raw rule-average cosines (`similarity_layer{L}.png`) and, with `umap`, a UMAP
    of the codes coloured by rule and by target (`umap_layer{L}.png/.html`, the slow part); returns the files."""
    from probes import embed_codes, rule_similarity
    from probes.figures import embedding_figure, save_figure, similarity_figure

    folder = Path(folder)
    written: list[Path] = []
    for layer in codes.layer_names:
        sim = rule_similarity(codes, layer=int(layer), center=False)
        figure = similarity_figure(sim, title=f"Mean-code cosine per rule (layer {layer})")
        written += save_figure(figure, folder / f"similarity_layer{layer}", formats=("png",))
    if umap:
        for layer in codes.layer_names:
            embedding = embed_codes(codes, "umap", int(layer), max_points=3000, random_state=0)
            figure = embedding_figure(embedding, color_by=["rule", "target"])
            written += save_figure(figure, folder / f"umap_layer{layer}", formats=("png", "html"))
    return written


@dataclass(frozen=True)
class Fig5Result:
    """Fig. 5's analysis set of one run at one step.

    Attributes:
        name: `RUN-stepNNNNNN` (`results_name`).
        summary: what `fig5.json` holds: the run, its variant, step and training length, the model's own accuracy
            at that step (`step_metrics`), the paper's value, and the codes read (rows, splits, reading, layers).
        decoding: the `.decode.json` record of the rule decoding (`decoding_record`).
        transfer: the rule-transfer `ExperimentResult` per split (`test`, `ood`).
        clustering: `cluster_rows` of the codes.
        similarity: `similarity_rows` of the codes.
        codes: the codes every analysis read (not saved by `save`).
    """

    name: str
    summary: dict[str, Any]
    decoding: dict[str, Any]
    transfer: dict[str, Any]
    clustering: list[dict[str, Any]]
    similarity: list[dict[str, Any]]
    codes: Any = field(repr=False, default=None)

    def save(self, folder: str | os.PathLike, commands: dict[str, str] | None = None) -> list[Path]:
        """Write `FIG5_FILES` into `folder` (created; each file atomically), `commands` recorded in `fig5.json`
        under "commands"; returns the paths."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_json(folder / "decode.json", self.decoding)
        for split, suffix in TRANSFER_SPLITS.items():
            result = self.transfer[split]
            _write_csv(folder / f"rule_transfer{suffix}.csv", result.rows, ["layer", *result.columns], "\r\n")
            atomic_write_json(folder / f"rule_transfer{suffix}.json", result.to_dict())
        _write_csv(folder / "clustering.csv", self.clustering)
        _write_csv(folder / "similarity.csv", self.similarity)
        atomic_write_json(folder / "fig5.json", {**self.summary, "commands": dict(commands or {})})
        return [folder / name for name in FIG5_FILES]


def _write_csv(path: Path, rows: list[dict[str, Any]], columns: list[str] | None = None, end: str = "\n") -> None:
    """Rows as CSV (the transfer tables end their lines with CRLF, as `ExperimentResult.save` writes them)."""
    table = io.StringIO(newline="")
    writer = csv.DictWriter(table, fieldnames=columns or list(rows[0]), lineterminator=end)
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_bytes(path, table.getvalue().encode())


def fig5_analysis(
    run: OpenRun | str | os.PathLike,
    *,
    out_dir: str | os.PathLike | None = None,
    name: str | None = None,
    n_samples: int | None = None,
    transfer_samples: int = 1024,
    progress: bool | None = None,
) -> Fig5Result:
    """Fig. 5's analysis set of one SRAVEN run (see the module docstring), on codes read once.

    The codes and their decoding go where `decode_run` puts them (`<out>/codes/paper.npz`, `.decode.json`, `<out>`
    the run itself or `out_dir`; codes already there for this checkpoint are reused), and each transfer's CSV,
    JSON and figure under `<out>/interventions[_ood]/`. Nothing else is written: `Fig5Result.save` writes the
    small files, `fig5_figures` the figures.

    Args:
        run: an `OpenRun`, a run directory (or a snapshot `RUN/snapshots/step-N`) or a shipped name.
        out_dir: where codes, decoding and transfer files go (required for a shipped checkpoint).
        name: the result's name (default: `results_name`).
        n_samples: instances per split whose codes are read (None: codes already in `out_dir`, else the task's
            default, `latentcode.pipelines.opened_run.N_SAMPLES`).
        transfer_samples: instances each rule transfer draws.
        progress: progress bars (None: only on a terminal).

    Raises:
        ValueError: a run of another task than SRAVEN, or an `out_dir` an analysis may not write to.
    """
    from latentcode.causal.transfer import rule_transfer

    run = open_run(run)
    if run.task.name != "sraven":
        raise ValueError(f"{run.path} is a {run.task.name} run; Fig. 5 is SRAVEN's (open a sraven run)")
    target = check_out_dir(run, out_dir)
    codes, _ = codes_for(run, target, positions="paper", n_samples=n_samples, progress=progress)
    decoding, _ = decode_run(run, out_dir=out_dir, n_samples=n_samples, progress=progress)
    transfer = {}
    for split, suffix in TRANSFER_SPLITS.items():
        result = rule_transfer(run.model, run.task, n_samples=transfer_samples, split=split, seed=0,
                               progress=progress)
        result = replace(result, params={**result.params, "run": _shown(run.path), "step": run.step,
                                         "checkpoint": run.checkpoint_hash})
        result.save(target / f"interventions{suffix}")
        transfer[split] = result
    variant, steps, step = run.config.model.variant, run.config.train.steps, run.step
    summary = {
        "kind": "latentcode.fig5",
        "name": name or results_name(run),
        "run": _shown(run.path),
        "variant": variant,
        "step": step,
        "steps": steps,
        "intermediate": step < steps,
        "label": f"step {step:,} of {steps:,}" + (" (intermediate snapshot)" if step < steps else ""),
        "model": step_metrics(run),
        "paper_ood_acc": PAPER_OOD_ACC.get(variant),
        "codes": {"n_samples": codes.n_samples, "splits": list(codes.splits), "reading": codes.reading,
                  "layers": [str(layer) for layer in codes.layer_names]},
    }
    return Fig5Result(summary["name"], summary, decoding_record(decoding, codes), transfer, cluster_rows(codes),
                      similarity_rows(codes), codes)


def _shown(path: Path) -> str:
    """A path as results record it: relative to the working directory when inside it."""
    path = path.resolve()
    return str(path.relative_to(Path.cwd())) if path.is_relative_to(Path.cwd()) else str(path)
