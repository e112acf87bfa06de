"""The `causal` command: does the model use its codes? `latentcode causal align` (distributed alignment search,
`latentcode.causal.alignment`), `latentcode causal erase` (LEACE erasure, `latentcode.causal.erasure`) and
`latentcode causal probes` (conditional, MDL and baseline probes, `latentcode.pipelines.probe_suite`).

RUN is a run directory or the name of a shipped checkpoint (SRAVEN or fuzzy logic; `--seed` picks a shipped seed by
name, as `latentcode causal probes` does). Options are checked against the run's config.json
(layers, k against the number of heads, the task) before torch is imported or a model loaded. No analysis logic
lives here.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from latentcode.cli.util import RUN_HELP, _add_progress, _add_run, _echo, _int_csv, _subparser

DEFAULT_OUT = Path("runs") / "causal"
"""Where results go without --out: runs/causal/<run name>/<align|erase>."""

CAUSAL_TASKS = ("sraven", "fuzzy_logic")
"""Tasks with counterfactual ground truth and an erasable concept (`latentcode.causal.counterfactuals`)."""


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return value


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a non-negative integer")
    return value


def _common(parser: argparse.ArgumentParser, n_samples: int) -> None:
    parser.add_argument("run", metavar="RUN", help=RUN_HELP)
    parser.add_argument("--layers", type=_int_csv, default=None, help="model layers, comma-separated (default: all)")
    parser.add_argument("--n-samples", dest="n_samples", type=_positive, default=n_samples, metavar="N",
                        help=f"held-out instances scored (default: {n_samples})")
    parser.add_argument("--seed", type=_non_negative, default=None, metavar="K",
                        help="seed of the batches and fits, and of a shipped name's checkpoint (default: 0)")
    parser.add_argument("--whole-row", dest="whole_row", action="store_true",
                        help="widen each site to every key of its query (default: the task's (query, key) pairs). "
                        "SRAVEN's pairs are each feature's query and its keys in panels 7 and 8, fuzzy logic's the "
                        "query token attending to itself")
    parser.add_argument("--out", type=Path, default=None, metavar="DIR",
                        help=f"output folder (default: {DEFAULT_OUT}/<run name>/<subcommand>)")
    parser.add_argument("--device", default="cpu", help="device for the model (default: cpu)")
    _add_progress(parser)


def _add_inputs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--inputs", default=None, metavar="NAME",
                        help="input choice to read every batch at (default: drawn as in training, SRAVEN's "
                        "features unpermuted). The task's choice NAME holds for every batch; fuzzy logic: fixed_query, "
                        "every instance sharing one query input, as the probes read them")


def _add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = _subparser(
        subparsers,
        "causal",
        help="does the model use its codes, and how well are they read?",
        description="Causal analyses of the latent codes. align: learn a rotation of each layer's code and swap "
        "its first k coordinates from a source instance; report how often the answer becomes the counterfactual "
        "one (IIA), beside the identity and a random rotation, a same-rule source, the training rule sets and a "
        "Wilson interval. erase: remove the rule from one layer's codes with LEACE; report the held-out accuracy "
        "before and after, beside a random erasure of the same rank, and the rule's decodability against its "
        "floor.",
        example="latentcode causal align sraven-hyla --k 1,4,8 --out results/causal/sraven-hyla",
    )
    commands = parser.add_subparsers(dest="causal_command", metavar="SUBCOMMAND", required=True)
    align = _subparser(
        commands, "align", help="distributed alignment search on the codes",
        description="Per layer and k: IIA on held-out rule sets of a rotation trained on the training rule sets. "
        "SRAVEN: how often the answer becomes the source's rule on the base's panels. Fuzzy logic: how often the "
        "prediction lands nearer the source's function at the base's query than the base's own target (entries "
        "where the two differ by more than 0.1).",
        example="latentcode causal align sraven-hyla --layers 2,3 --k 1,4,8",
    )
    _common(align, 256)
    align.add_argument("--k", type=_int_csv, default=None,
                       help="swapped dimensions, comma-separated, each in 1..n_heads (default: 1, n_heads/4, "
                       "n_heads/2)")
    align.add_argument("--n-train", dest="n_train", type=_positive, default=512, metavar="N",
                       help="training pairs (default: 512)")
    align.add_argument("--steps", type=_positive, default=50, help="training steps per rotation (default: 50)")
    _add_inputs(align)
    align.set_defaults(causal_func=_cmd_align)
    erase = _subparser(
        commands, "erase", help="LEACE erasure of the rule (SRAVEN) or terms (fuzzy logic) from the codes",
        description="Per layer: the model's held-out score (SRAVEN accuracy, fuzzy logic R^2 and MSE) with the rule "
        "or the function's terms erased from the codes (LEACE) and with a random subspace of the same rank erased, "
        "and the concept's decodability after each beside its floor.",
        example="latentcode causal erase sraven-hyla --n-samples 1024",
    )
    _common(erase, 1024)
    erase.add_argument("--n-fit", dest="n_fit", type=_positive, default=2048, metavar="N",
                       help="instances the erasers and probes fit on (default: 2048). They are drawn from the "
                       "training rule sets")
    _add_inputs(erase)
    erase.set_defaults(causal_func=_cmd_erase)
    probes = _subparser(
        commands, "probes", help="conditional, MDL and baseline probes (any task)",
        description="How well the codes are read, beside what the inputs alone give: conditional probing "
        "([inputs, codes] against inputs alone), online codelength (MDL) against the uniform, input-only and "
        "no-feature codelengths, and PCA-k, kNN, MLP and untrained-model baselines beside the linear decoder.",
        example="latentcode causal probes fuzzy_logic-hyla --seed 1",
    )
    _add_run(probes)
    probes.add_argument("--n-samples", dest="n_samples", type=_positive, default=2048, metavar="N",
                        help="instances per split (default: 2048)")
    probes.add_argument("--label", default=None, help="label to decode (default: rule for SRAVEN, terms for fuzzy logic)")
    probes.add_argument("--n-resamples", dest="n_resamples", type=_positive, default=1000, metavar="N",
                        help="bootstrap resamples of the intervals (default: 1000)")
    probes.add_argument("--mdl-only", dest="mdl_only", action="store_true", help="run MDL alone")
    probes.add_argument("--out", type=Path, default=None, metavar="DIR",
                        help=f"output folder (default: {DEFAULT_OUT}/<run name>/probes)")
    _add_progress(probes)
    probes.set_defaults(causal_func=_cmd_probes)
    return parser


def _resolve(args: argparse.Namespace) -> tuple[Path, dict[str, Any]]:
    """The run's directory and config.json, with --layers and --k checked against it (no torch yet). Sets
    `args.label` (the default output folder's name: the shipped name, with -s<seed> for another seed)."""
    from latentcode.rundir.pretrained import resolve_run

    is_dir = (Path(args.run) / "config.json").is_file()
    path, name = resolve_run(args.run, None if is_dir else args.seed)
    args.label = path.name if name is None else name + (f"-s{args.seed}" if args.seed else "")
    config_file = path / "config.json"
    if not config_file.is_file():
        raise ValueError(f"{path} has no config.json; give a run directory or a shipped checkpoint's name")
    config = json.loads(config_file.read_text())
    n_layers, n_heads = int(config["model"]["n_layers"]), int(config["model"]["n_heads"])
    task = config["task"]["name"]
    if task not in CAUSAL_TASKS:
        raise ValueError(f"latentcode causal {args.causal_command} needs a task with counterfactual answers and "
                         f"rule labels ({', '.join(CAUSAL_TASKS)}); {path} is a {task} run")
    bad = [layer for layer in args.layers or [] if not 0 <= layer < n_layers]
    if bad:
        raise ValueError(f"--layers {','.join(map(str, bad))} out of range: the model has {n_layers} layers, "
                         f"0..{n_layers - 1}")
    bad = [k for k in getattr(args, "k", None) or [] if not 1 <= k <= n_heads]
    if bad:
        raise ValueError(f"--k {','.join(map(str, bad))} out of range: the code has {n_heads} dimensions (heads), "
                         f"so k is in 1..{n_heads}")
    return path, config


def _out(args: argparse.Namespace, run_path: Path) -> Path:
    return args.out if args.out is not None else DEFAULT_OUT / args.label / args.causal_command


def _cmd_align(args: argparse.Namespace) -> int:
    run_path, _ = _resolve(args)
    out = _out(args, run_path)
    from latentcode.causal.alignment import alignment_search
    from latentcode.rundir.checkpoint import load_run

    run = load_run(run_path, device=args.device)
    result = alignment_search(run.model, run.task, layers=args.layers, ks=args.k, whole_row=args.whole_row,
                              n_samples=args.n_samples, n_train=args.n_train, steps=args.steps, seed=args.seed or 0,
                              inputs=args.inputs, progress=args.progress)
    result.params.update(run=str(args.run), run_seed=args.seed, step=run.step)
    paths = result.save(out)
    _echo(result.table())
    _echo(f"written: {out} ({len(paths)} files)")
    return 0


def _cmd_erase(args: argparse.Namespace) -> int:
    run_path, _ = _resolve(args)
    out = _out(args, run_path)
    from latentcode.causal.erasure import erasure_experiment
    from latentcode.rundir.checkpoint import load_run

    run = load_run(run_path, device=args.device)
    result = erasure_experiment(run.model, run.task, layers=args.layers, whole_row=args.whole_row,
                                n_samples=args.n_samples, n_fit=args.n_fit, seed=args.seed or 0,
                                inputs=args.inputs, progress=args.progress)
    result.params.update(run=str(args.run), run_seed=args.seed, step=run.step)
    paths = result.save(out)
    _echo(result.table())
    _echo("written: " + ", ".join(str(p) for p in paths))
    return 0


def _cmd_probes(args: argparse.Namespace) -> int:
    if args.n_samples < 1000:  # MDL's first block is 0.1% of the rows: said before anything is extracted
        raise ValueError(f"--n-samples {args.n_samples} is too few for the MDL blocks (the first is 0.1% of the "
                         "rows, so it needs at least 1000); pass --n-samples 1000 or more")
    from latentcode.rundir.pretrained import resolve_run

    run_path, name = resolve_run(args.run, args.seed)
    label = run_path.name if name is None else name + (f"-s{args.seed}" if args.seed else "")
    out = args.out if args.out is not None else DEFAULT_OUT / label / "probes"
    from latentcode.pipelines.probe_suite import probe_suite

    command = "latentcode causal probes " + " ".join(sys.argv[2:])
    suite = probe_suite(args.run, out, seed=args.seed, n_samples=args.n_samples, label=args.label,
                        n_resamples=args.n_resamples, progress=args.progress, command=command,
                        stages=("mdl",) if args.mdl_only else ("baselines", "conditional", "mdl"))
    _echo(suite.table())
    _echo(f"written: {out}")
    return 0


def _cmd_causal(args: argparse.Namespace) -> int:
    return args.causal_func(args)


COMMANDS: list[tuple[Callable[[Any], argparse.ArgumentParser], Callable[[argparse.Namespace], int]]] = [
    (_add_parser, _cmd_causal),
]
"""The `causal` command: (adds its parser, runs it)."""
