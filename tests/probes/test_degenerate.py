"""The constant-codes check: which layers it calls constant, at what tolerance, and how it warns."""

import json
import warnings

import numpy as np
import pytest

from probes import LatentCodes
from probes.degenerate import (
    CONSTANT_RTOL,
    ConstantCodesWarning,
    check_constant_codes,
    code_spread,
    is_constant,
    relative_spread,
)


def _codes(layers: list[np.ndarray]) -> LatentCodes:
    """Codes from one [n, head] array per layer (query = key = 1, as fuzzy logic)."""
    array = np.stack(layers, axis=1)[:, :, :, None, None]
    n = array.shape[0]
    return LatentCodes(array, {}, np.array(["train", "test"] * (n // 2)), {"task": "fuzzy_logic"})


def _dead_and_live(n=2048, dead_std=1e-4, seed=0):
    """Like the shipped HYLA fuzzy-logic checkpoint: 8 rms_head-normalized heads (RMS 1); layer 0's code
    moves by `dead_std` across instances, layer 1's by 0.1-0.6 (what a live layer of it measures)."""
    rng = np.random.default_rng(seed)
    mean = rng.normal(size=8)
    mean /= np.sqrt(np.mean(mean**2))
    dead = mean + dead_std * rng.normal(size=(n, 8))
    live = rng.normal(size=8) + rng.uniform(0.1, 0.6, size=8) * rng.normal(size=(n, 8))
    return _codes([dead, live])


@pytest.mark.parametrize(
    "dead_std",
    [
        pytest.param(1e-5, id="std-1e-5"),
        pytest.param(1e-4, id="std-1e-4"),
        pytest.param(0.0, id="exactly-constant"),
    ],
)
def test_a_dead_layer_is_constant_and_a_live_one_is_not(dead_std):
    spread = code_spread(_dead_and_live(dead_std=dead_std))
    assert spread.layer_names == ["0", "1", "all"]
    assert spread.constant_layers == ["0"]  # "all" holds the live layer too
    dead, live = spread.layers[0], spread.layers[1]
    assert dead.relative == pytest.approx(dead_std, rel=0.05, abs=1e-12)  # std / RMS, RMS = 1
    assert live.relative > 0.1


def test_spread_is_rms_deviation_over_rms_and_scale_free():
    rng = np.random.default_rng(0)
    X = rng.normal(3.0, 0.01, size=(500, 4))
    spread, scale, relative = relative_spread(X)
    assert spread == pytest.approx(np.sqrt(np.mean((X - X.mean(0)) ** 2)))
    assert scale == pytest.approx(np.sqrt(np.mean(X**2)))
    assert relative == pytest.approx(spread / scale)
    for factor in (1e-6, 1.0, 1e6):  # units do not matter
        assert relative_spread(factor * X)[2] == pytest.approx(relative)


@pytest.mark.parametrize(
    ("X", "constant"),
    [
        pytest.param(np.zeros((10, 3)), True, id="all-zero"),
        pytest.param(np.ones((1, 3)), False, id="one-row-nothing-to-judge"),
        pytest.param(np.ones((10, 3)) * (1 + 0.9 * CONSTANT_RTOL * np.linspace(-1, 1, 10)[:, None]), True,
                     id="just-below-rtol"),
        pytest.param(np.ones((10, 3)) * (1 + 3 * CONSTANT_RTOL * np.linspace(-1, 1, 10)[:, None]), False,
                     id="above-rtol"),
        pytest.param(np.eye(4), False, id="one-hot"),
    ],
)
def test_is_constant_edges(X, constant):
    assert is_constant(X) is constant


def test_check_warns_once_naming_the_layers_and_points_at_the_caller():
    codes = _dead_and_live()
    with pytest.warns(ConstantCodesWarning) as caught:
        spread = check_constant_codes(codes, what="hyla fixed_query")
    assert len(caught) == 1 and caught[0].filename == __file__
    message = str(caught[0].message)
    assert message.startswith("hyla fixed_query: constant codes in layer 0 (") and "UMAP" in message
    assert spread.constant_layers == ["0"] and spread.is_constant(0) and not spread.is_constant("1")
    assert issubclass(ConstantCodesWarning, UserWarning)
    data = json.loads(json.dumps(spread.to_dict(), allow_nan=False))
    assert data["rtol"] == CONSTANT_RTOL and data["layers"][0]["constant"] is True
    assert "yes" in spread.table().splitlines()[2]


def test_no_warning_for_live_codes_and_rtol_is_checked(make_sraven):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        spread = check_constant_codes(make_sraven(n=200))
    assert spread.constant_layers == [] and spread.message() == ""
    assert code_spread(_dead_and_live(dead_std=0.02), rtol=0.05).constant_layers == ["0"]
    with pytest.raises(ValueError, match="rtol"):
        code_spread(make_sraven(n=50), rtol=1.5)


def test_split_restricts_the_rows_measured():
    rng = np.random.default_rng(0)
    layer = np.ones((100, 4))
    layer[1::2] += rng.normal(size=(50, 4))  # only the test rows (odd rows) vary
    codes = _codes([layer])
    assert code_spread(codes, "each", split="train").constant_layers == ["0"]
    assert code_spread(codes, "each", split="test").constant_layers == []
    assert code_spread(codes, "each", split="train").n_samples == 50


def test_a_command_line_gets_one_log_line_per_warning(caplog, monkeypatch):
    import logging

    from probes.degenerate import log_constant_warnings

    monkeypatch.setattr(warnings, "showwarning", warnings.showwarning)  # restored after the test
    monkeypatch.setattr(warnings, "filters", list(warnings.filters))
    log_constant_warnings()
    log_constant_warnings()  # idempotent
    caplog.set_level(logging.WARNING, logger="probes.degenerate")
    codes = _dead_and_live()
    for _ in range(2):
        check_constant_codes(codes, what="run x")
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [f"warning: run x: {code_spread(codes, 'each').message()}"]  # once, one line
