"""The value-network live fraction: known dead and fully live layers, the cases where it does not apply, and its
record in training metrics."""

from __future__ import annotations

import pytest
import torch

import latentcode as lc
from latentcode.training.diagnostics import LIVE_KEY, format_live_fraction, value_live_fraction
from latentcode.training.evaluate import live_fraction_inputs
from tests.helpers import tiny_model


def _x(n: int = 7, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, 6, 5, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("sign, expected", [pytest.param(-1.0, 0.0, id="dead"), pytest.param(1.0, 1.0, id="live")])
def test_constant_value_makes_layer_dead_or_fully_live(sign, expected):
    # softmax codes are positive and sum to 1 per head; with W_V = 0 and b_V = sign, the first generated layer is
    # relu(sign * sum_h a_h) = relu(sign * H): never above zero for sign < 0, always for sign > 0.
    model = tiny_model("softmax_hyla")
    with torch.no_grad():
        model.blocks[0].attn.W_V.zero_()
        model.blocks[0].attn.b_V.fill_(sign)
    fractions = value_live_fraction(model, _x())
    assert fractions[0] == expected
    assert 0.0 < fractions[1] < 1.0  # the untouched random layer is partly live
    assert ("(dead)" in format_live_fraction(fractions)) == (expected == 0.0)


def test_matches_a_count_over_the_cached_hidden_units():
    model = tiny_model("hyla", seed=3)
    x = _x(300, seed=1)  # more than one internal chunk of 256
    _, cache = model.run_with_cache(x)
    expected = []
    for layer in range(model.cfg.n_layers):
        hidden = cache[f"blocks.{layer}.attn.hook_value_hidden"].numpy()
        expected.append(float((hidden > 0).mean()))
    assert value_live_fraction(model, x) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("variant", ["softmax", "linear", "hyla_linear"])
def test_not_applicable_without_a_relu_value_network(variant):
    assert value_live_fraction(tiny_model(variant), _x()) == [None, None]
    assert format_live_fraction([None, None]).startswith("n/a")


def test_restores_training_mode():
    model = tiny_model("hyla").train()
    value_live_fraction(model, _x())
    assert model.training


def test_leaves_no_hook_attached_even_when_the_forward_fails():
    model = tiny_model("hyla").train()
    with pytest.raises(RuntimeError):
        value_live_fraction(model, torch.randn(2, 6, 7))  # d_in is 5
    assert model.training
    assert not any(hp.fwd_hooks or hp._forward_hooks for hp in model.hook_dict.values())


def test_training_records_live_fraction_in_the_ood_evaluation(tmp_path):
    task = lc.get_task("fuzzy_logic", seq_len=8)
    run = lc.train(lc.model_config(task, "hyla", preset="tiny"), task, lc.train_config("fuzzy_logic", "tiny"),
                   tmp_path / "run")
    ood = run.eval_metrics("ood")
    assert len(ood[LIVE_KEY]) == run.model.cfg.n_layers
    inputs = live_fraction_inputs(task, run.config.train.seed)
    assert ood[LIVE_KEY] == pytest.approx(value_live_fraction(run.model, inputs), abs=1e-12)
    assert "test" in {m["split"] for m in run.metrics} and LIVE_KEY not in run.eval_metrics("test")


def test_train_and_eval_commands_print_the_live_fraction(tmp_path, capsys):
    from latentcode.cli import main

    out = tmp_path / "run"
    assert main(["train", "fuzzy_logic", "--model", "hyla", "--preset", "tiny", "--out", str(out), "--task.seq_len=8",
                 "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "value network live fraction: L0 " in printed and "[" not in printed  # no raw list in the table
    assert main(["eval", str(out), "--splits", "ood"]) == 0
    line = [x for x in capsys.readouterr().out.splitlines() if x.startswith("value network live fraction")][0]
    fractions = lc.load_run(out).eval_metrics("ood")[LIVE_KEY]
    assert line.endswith(format_live_fraction(fractions))
