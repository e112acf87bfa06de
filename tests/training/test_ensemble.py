import dataclasses
import json

import pytest
import torch

from latentcode.config import model_config, train_config
from latentcode.rundir.checkpoint import load_run
from latentcode.tasks import get_task
from latentcode.training.ensemble import can_ensemble, train_ensemble
from latentcode.training.train import train

STEPS = 8


def _setup(variant="hyla", **model_overrides):
    task = get_task("sraven")
    mcfg = model_config(task, variant, preset="tiny", **model_overrides)
    cfgs = [
        train_config(
            "sraven",
            "tiny",
            steps=STEPS,
            seed=seed,
            lr=lr,
            eval_every=6,
            checkpoint_every=6,
            log_every=3,
            device="cpu",
        )
        for seed, lr in ((0, 1e-3), (1, 3e-3))
    ]
    return task, mcfg, cfgs


@pytest.mark.parametrize("variant", ["softmax", "hyla"])  # hyla: the plain-ops RMSHead path under vmap
def test_members_match_single_runs(tmp_path, variant):
    # without dropout a member follows exactly the trajectory of a single run with its seed and learning rate
    task, mcfg, cfgs = _setup(variant, attn_dropout=0.0)
    runs = train_ensemble(mcfg, task, cfgs, [tmp_path / "e0", tmp_path / "e1"], progress=False)
    for i, cfg in enumerate(cfgs):
        single = train(mcfg, task, cfg, tmp_path / f"s{i}", progress=False)
        for (name, p), (_, q) in zip(
            runs[i].model.named_parameters(), single.model.named_parameters(), strict=True
        ):
            if variant == "softmax" and name.endswith("b_K"):
                # softmax is invariant to a key bias: its gradient is rounding noise, which Adam amplifies
                continue
            torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5, msg=f"member {i} parameter {name}")
        ens_losses = [r["loss"] for r in runs[i].metrics if r["split"] == "train"]
        single_losses = [r["loss"] for r in single.metrics if r["split"] == "train"]
        assert ens_losses == pytest.approx(single_losses, rel=1e-4)


def test_member_run_directories_have_the_single_run_format(tmp_path):
    task, mcfg, cfgs = _setup()
    train_ensemble(mcfg, task, cfgs, [tmp_path / "e0", tmp_path / "e1"], progress=False)
    train(mcfg, task, cfgs[0], tmp_path / "single", progress=False)
    names = lambda d: sorted(p.name for p in d.iterdir())  # noqa: E731
    assert names(tmp_path / "e0") == names(tmp_path / "single")
    member_cfg = json.loads((tmp_path / "e0" / "config.json").read_text())
    single_cfg = json.loads((tmp_path / "single" / "config.json").read_text())
    assert member_cfg == single_cfg
    state = json.loads((tmp_path / "e1" / "train_state.json").read_text())
    assert state["step"] == STEPS and state["finished"] is True
    run = load_run(tmp_path / "e1")
    assert run.config.train.seed == 1 and run.config.train.lr == 3e-3
    splits = [r["split"] for r in run.metrics]
    assert splits.count("test") == splits.count("ood") == 2


def test_every_kind_of_metrics_line_has_the_same_fields_in_a_member_as_in_a_single_run(tmp_path):
    """One recorder writes both (latentcode/training/record.py): train, test and ood lines (with the value-network
    live fraction) and the snapshots of every evaluation."""
    task, mcfg, cfgs = _setup()
    cfgs = [dataclasses.replace(c, snapshots=True) for c in cfgs]
    train_ensemble(mcfg, task, cfgs, [tmp_path / "e0", tmp_path / "e1"], progress=False)
    train(mcfg, task, cfgs[0], tmp_path / "single", progress=False)

    def fields(run_dir):
        kinds = {}
        for line in (run_dir / "metrics.jsonl").read_text().splitlines():
            record = json.loads(line)
            kinds.setdefault(record["split"], set()).update(record)
        return kinds

    single, member = fields(tmp_path / "single"), fields(tmp_path / "e0")
    assert set(single) == {"train", "test", "ood"}
    assert member == single
    assert "value_live_fraction" in member["ood"]
    snaps = lambda d: sorted(p.name for p in (d / "snapshots").iterdir())  # noqa: E731
    assert snaps(tmp_path / "e0") == snaps(tmp_path / "single") == ["step-000006", "step-000008"]


def test_resume_after_a_crash_is_bitwise(tmp_path, monkeypatch):
    task, mcfg, cfgs = _setup()
    straight = train_ensemble(mcfg, task, cfgs, [tmp_path / "a0", tmp_path / "a1"], progress=False)

    from latentcode.training import ensemble

    original = ensemble._EnsembleLoop._train_step

    def crash_after_first_checkpoint(self, step):
        if step == 6:
            raise RuntimeError("simulated crash")
        return original(self, step)

    monkeypatch.setattr(ensemble._EnsembleLoop, "_train_step", crash_after_first_checkpoint)
    outs = [tmp_path / "b0", tmp_path / "b1"]
    with pytest.raises(RuntimeError, match="simulated crash"):
        train_ensemble(mcfg, task, cfgs, outs, progress=False)
    monkeypatch.setattr(ensemble._EnsembleLoop, "_train_step", original)
    resumed = train_ensemble(mcfg, task, cfgs, outs, resume=True, progress=False)
    for a, b in zip(straight, resumed, strict=True):
        for (name, p), (_, q) in zip(a.model.named_parameters(), b.model.named_parameters(), strict=True):
            assert torch.equal(p, q), name
        strip = lambda rows: [  # noqa: E731
            {k: v for k, v in r.items() if k not in ("samples_per_s", "elapsed_s")}
            for r in rows
        ]
        assert strip(a.metrics) == strip(b.metrics)


def test_a_member_can_be_continued_by_the_single_run_trainer(tmp_path):
    task, mcfg, cfgs = _setup()
    outs = [tmp_path / "e0", tmp_path / "e1"]
    train_ensemble(mcfg, task, cfgs, outs, progress=False)
    again = train(mcfg, task, cfgs[0], outs[0], resume=True, progress=False)  # finished: returned as is
    assert again.step == STEPS


def test_members_that_cannot_share_a_program_are_refused(tmp_path):
    task, mcfg, cfgs = _setup()
    other = [cfgs[0], train_config("sraven", "tiny", steps=STEPS, batch_size=16, device="cpu")]
    assert not can_ensemble(mcfg, other)
    with pytest.raises(ValueError, match="batch_size"):
        train_ensemble(mcfg, task, other, [tmp_path / "x0", tmp_path / "x1"], progress=False)
    moe = model_config(task, "hyla+moe", preset="tiny")
    with pytest.raises(ValueError, match="mixture-of-experts"):
        train_ensemble(moe, task, cfgs, [tmp_path / "y0", tmp_path / "y1"], progress=False)
    with pytest.raises(ValueError, match="one run directory per member"):
        train_ensemble(mcfg, task, cfgs, [tmp_path / "z0"], progress=False)


def test_members_may_hold_out_different_compositions(tmp_path):
    _, mcfg, cfgs = _setup()
    tasks = [get_task("sraven", seed=cfg.seed) for cfg in cfgs]
    runs = train_ensemble(mcfg, tasks, cfgs, [tmp_path / "e0", tmp_path / "e1"], progress=False)
    for run, task in zip(runs, tasks, strict=True):
        assert (run.task.compositions("ood") == task.compositions("ood")).all()
    assert not (runs[0].task.compositions("ood") == runs[1].task.compositions("ood")).all()
    with pytest.raises(ValueError, match="one task, or one per member"):
        train_ensemble(mcfg, tasks[:1] * 3, cfgs, [tmp_path / "f0", tmp_path / "f1"], progress=False)


@pytest.mark.parametrize(
    "dropout",
    [pytest.param(dict(attn_dropout=0.1), id="attn_dropout"),
     pytest.param(dict(attn_dropout=0.1, dropout=0.1), id="attn_and_residual_dropout")],
)
def test_members_match_single_runs_with_dropout(tmp_path, dropout):
    # each member draws its dropout masks from its own step seeds, exactly as the single run of its seed
    task, mcfg, cfgs = _setup("hyla", **dropout)
    cfgs = [dataclasses.replace(cfg, steps=4, warmup=1, eval_every=4, checkpoint_every=4, log_every=1) for cfg in cfgs]
    runs = train_ensemble(mcfg, task, cfgs, [tmp_path / "e0", tmp_path / "e1"], progress=False)
    no_dropout = dataclasses.replace(mcfg, attn_dropout=0.0, dropout=0.0)
    for i, cfg in enumerate(cfgs):
        single = train(mcfg, task, cfg, tmp_path / f"s{i}", progress=False)
        without = train(no_dropout, task, cfg, tmp_path / f"n{i}", progress=False)
        for (name, p), (_, q) in zip(runs[i].model.named_parameters(), single.model.named_parameters(), strict=True):
            torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5, msg=f"member {i} parameter {name}")
        losses = [[r["loss"] for r in run.metrics if r["split"] == "train"] for run in (runs[i], single, without)]
        torch.testing.assert_close(losses[0], losses[1], rtol=1e-5, atol=0)
        # the masks matter: the same run without dropout takes another path from the first step
        assert losses[1][0] != pytest.approx(losses[2][0], rel=1e-3)


def test_time_limit_stops_every_member_and_resume_matches_a_straight_run(tmp_path):
    task, mcfg, cfgs = _setup("hyla", attn_dropout=0.1)
    straight = train_ensemble(mcfg, task, cfgs, [tmp_path / "a0", tmp_path / "a1"], progress=False)
    outs = [tmp_path / "b0", tmp_path / "b1"]
    steps = []
    while not steps or steps[-1] < STEPS:  # a limit of 0 s stops after every step
        runs = train_ensemble(mcfg, task, cfgs, outs, resume=True, progress=False, time_limit=0.0)
        steps.append(runs[0].step)
        assert {run.step for run in runs} == {steps[-1]}
    assert steps == list(range(1, STEPS + 1))
    for a, b in zip(straight, runs, strict=True):
        for (name, p), (_, q) in zip(a.model.named_parameters(), b.model.named_parameters(), strict=True):
            assert torch.equal(p, q), name
        strip = lambda rows: [  # noqa: E731
            {k: v for k, v in r.items() if k not in ("samples_per_s", "elapsed_s")} for r in rows
        ]
        assert strip(a.metrics) == strip(b.metrics)


def test_replayed_dropout_masks_are_the_single_runs_masks(device):
    # the masks the ensemble draws outside vmap for a seed are those a single forward pass draws after seeding
    from latentcode.model.attention import MultiHeadAttention
    from latentcode.model.transformer import Transformer
    from latentcode.training.dropout_replay import DropoutReplay

    task = get_task("sraven")
    mcfg = model_config(task, "hyla", preset="tiny", attn_dropout=0.1, dropout=0.1)
    x = task.sample(8, "train", seed=0, device=device).x
    drawn = []
    original_mask, original_dropout = MultiHeadAttention.dropout_mask, torch.nn.functional.dropout

    def record_mask(self, pattern):
        drawn.append(original_mask(self, pattern))
        return drawn[-1]

    def record_dropout(input, p=0.5, training=True, inplace=False):
        out = original_dropout(input, p, training, inplace)
        drawn.append((input.detach().clone(), out.detach()))
        return out

    single = Transformer(mcfg).to(device).train()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(MultiHeadAttention, "dropout_mask", record_mask)
        patch.setattr(torch.nn.functional, "dropout", record_dropout)
        torch.manual_seed(123)
        single(x, keep_last=task.n_readout)
    base = Transformer(mcfg).to(device).train()
    replay = DropoutReplay(base, 8, task, torch.device(device), autocast=False)
    masks = replay.draw([7, 123])  # member 1 has the single run's seed
    assert [kind for kind, *_ in replay.sites] == ["dropout"] + ["attention", "dropout", "dropout"] * 2
    assert len(masks) == len(drawn) == 7
    for site, (mask, expected) in enumerate(zip(masks, drawn, strict=True)):
        if isinstance(expected, tuple):  # residual dropout: the replay computes input * mask, bit for bit
            assert torch.equal(expected[0] * mask[1], expected[1]), f"site {site}"
        else:
            assert torch.equal(mask[1], expected), f"site {site}"
        assert not torch.equal(mask[0], mask[1]), f"site {site}: two seeds drew the same mask"


@pytest.mark.gpu
def test_members_match_single_runs_with_dropout_on_cuda(tmp_path):
    # TF32 matmuls round differently in vmapped and plain kernels, so the tolerance is loose; the masks are exact
    task, mcfg, cfgs = _setup("hyla", attn_dropout=0.1)
    cfgs = [dataclasses.replace(cfg, device="cuda", steps=4, warmup=1, eval_every=4, checkpoint_every=4, log_every=1)
            for cfg in cfgs]
    runs = train_ensemble(mcfg, task, cfgs, [tmp_path / "e0", tmp_path / "e1"], progress=False)
    for i, cfg in enumerate(cfgs):
        single = train(mcfg, task, cfg, tmp_path / f"s{i}", progress=False)
        losses = [[r["loss"] for r in run.metrics if r["split"] == "train"] for run in (runs[i], single)]
        torch.testing.assert_close(losses[0], losses[1], rtol=1e-2, atol=0)


def test_train_ensemble_takes_run_dirs_and_the_old_out_dirs_keyword_is_gone(tmp_path):
    task, mcfg, cfgs = _setup()
    with pytest.raises(ValueError, match="got 2 train configs and 1 run directories"):
        train_ensemble(mcfg, task, cfgs, run_dirs=[tmp_path / "a"])
    with pytest.raises(TypeError, match="unexpected keyword argument 'out_dirs'|missing a required argument: 'run_dirs'"):
        train_ensemble(mcfg, task, cfgs, out_dirs=[tmp_path / "a", tmp_path / "b"])
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
