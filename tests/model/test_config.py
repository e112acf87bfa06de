"""ModelConfig validation, persistence, variants and presets (and TrainConfig persistence)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from latentcode.config import VARIANTS, ModelConfig, TrainConfig, model_config, train_config
from tests.helpers import ALL_VARIANTS, TASK_DIMS, tiny_model_config

SRAVEN = TASK_DIMS["sraven"]
FUZZY = TASK_DIMS["fuzzy_logic"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        pytest.param(
            dict(d_qk=10, n_heads=4), r"d_qk=10 is not divisible by n_heads=4.*\[1, 2, 5, 10\]", id="d_qk"
        ),
        pytest.param(dict(d_v=6, n_heads=4), r"d_v=6 is not divisible by n_heads=4", id="d_v"),
        pytest.param(
            dict(variant="hyla_plus"), r"valid variants: custom, softmax, linear, hyla", id="variant"
        ),
        pytest.param(dict(n_experts=3, top_k=4), r"top_k=4 must lie in \[1, n_experts=3\]", id="top_k"),
        pytest.param(dict(n_experts=-1), r"n_experts=-1", id="n_experts"),
        pytest.param(
            dict(pos_buckets=8, pos_max_distance=4), r"pos_max_distance=4 must be >= pos_buckets=8", id="pos"
        ),
        pytest.param(dict(pos_buckets=1), r"pos_buckets=1 must be >= 2", id="pos_buckets"),
        pytest.param(dict(attn_dropout=1.0), r"attn_dropout=1.0 must lie in \[0, 1\)", id="attn_dropout"),
        pytest.param(dict(d_model=0), r"d_model=0 must be a positive integer", id="d_model"),
        pytest.param(dict(rms_eps=0.0), r"rms_eps=0.0 must be positive", id="rms_eps"),
    ],
)
def test_bad_config_raises_with_the_fix(overrides, message):
    with pytest.raises(ValueError, match=message):
        tiny_model_config(**overrides)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        pytest.param(
            "score_norm",
            "sparsemax",
            r"score_norm='sparsemax' is not one of softmax, none, rms_head",
            id="score_norm",
        ),
        pytest.param("value_net", "swiglu", r"value_net='swiglu' is not one of linear, mlp", id="value_net"),
        pytest.param(
            "value_act", "swish", r"is not one of relu, gelu, silu, sigmoid, tanh, identity", id="value_act"
        ),
    ],
)
def test_unknown_choice_raises_with_the_valid_ones(field, value, message):
    # Under pytest the jaxtyping/beartype import hook rejects the Literal before __post_init__ runs (TypeError);
    # users get the ValueError, which is checked on its own below.
    with pytest.raises(
        (ValueError, TypeError), match=r"softmax.*none.*rms_head|linear.*mlp|relu.*gelu.*identity"
    ):
        tiny_model_config(**{field: value})
    cfg = tiny_model_config()
    object.__setattr__(cfg, field, value)
    with pytest.raises(ValueError, match=message):
        cfg.__post_init__()


def test_heads_and_position_defaults_derive_from_totals_and_seq_len():
    cfg = tiny_model_config(d_qk=12, d_v=8, n_heads=4, seq_len=9)
    assert (cfg.d_head_qk, cfg.d_head) == (3, 2)
    assert (cfg.pos_buckets, cfg.pos_max_distance) == (9, 9)


def test_to_dict_from_dict_round_trip():
    cfg = model_config("sraven", "hyla+moe", "paper", width=2, **SRAVEN)
    data = cfg.to_dict()
    assert ModelConfig.from_dict(data) == cfg
    assert data["variant"] == "hyla+moe" and data["n_experts"] == 5


def test_from_dict_rejects_unknown_keys():
    data = {**tiny_model_config().to_dict(), "num_heads": 4}
    with pytest.raises(ValueError, match=r"unknown ModelConfig field\(s\) \['num_heads'\]"):
        ModelConfig.from_dict(data)


def test_train_config_round_trip():
    cfg = train_config("fuzzy_logic", "small", lr=3e-4)
    assert TrainConfig.from_dict(cfg.to_dict()) == cfg


def test_paper_presets_match_the_spec():
    fuzzy = model_config("fuzzy_logic", "softmax", "paper", **FUZZY)
    assert (fuzzy.d_model, fuzzy.n_heads, fuzzy.d_qk, fuzzy.d_v, fuzzy.d_mlp, fuzzy.n_layers) == (
        128,
        8,
        16,
        16,
        256,
        2,
    )
    assert (fuzzy.attn_dropout, fuzzy.dropout, fuzzy.ln_eps, fuzzy.rms_eps) == (0.1, 0.0, 1e-6, 1e-6)
    assert (fuzzy.pos_bias, fuzzy.pos_bidirectional, fuzzy.pos_buckets, fuzzy.causal) == (
        True,
        False,
        16,
        False,
    )
    raven = model_config("sraven", "hyla", "paper", **SRAVEN)
    assert (raven.d_model, raven.n_heads, raven.d_qk, raven.d_v, raven.d_mlp, raven.n_layers) == (
        128,
        16,
        64,
        64,
        256,
        4,
    )
    assert raven.d_head == 4 and raven.pos_buckets == 36


@pytest.mark.parametrize("width", [1, 2, 4])
def test_sraven_width_scales_heads_but_not_head_dims(width):
    cfg = model_config("sraven", "hyla", "paper", width=width, n_layers=8, **SRAVEN)
    assert (cfg.d_model, cfg.n_heads, cfg.d_mlp, cfg.n_layers) == (128 * width, 16 * width, 256 * width, 8)
    assert (cfg.d_head, cfg.d_head_qk) == (4, 4)


def test_width_is_sraven_only():
    with pytest.raises(ValueError, match="width applies to sraven only"):
        model_config("fuzzy_logic", "hyla", "paper", width=2, **FUZZY)


@pytest.mark.parametrize("variant", ALL_VARIANTS)
def test_every_variant_sets_its_fields(variant):
    cfg = model_config("sraven", variant, "tiny", **SRAVEN)
    for name, value in VARIANTS[variant].items():
        assert getattr(cfg, name) == value
    assert cfg.variant == variant


def test_variant_table_matches_the_reference_grid():
    grid = {
        name: (v["score_norm"], v["value_net"], v.get("value_act", "relu")) for name, v in VARIANTS.items()
    }
    assert grid["softmax"][:2] == ("softmax", "linear")
    assert grid["linear"][:2] == ("none", "linear")
    assert grid["hyla"] == ("rms_head", "mlp", "relu")
    assert grid["linear_rmshead"][:2] == ("rms_head", "linear")
    assert grid["hyla_no_rmshead"] == ("none", "mlp", "relu")
    assert grid["hyla_linear"] == ("rms_head", "mlp", "identity")
    assert grid["hyla_linear_no_rmshead"] == ("none", "mlp", "identity")
    assert grid["softmax_hyla"] == ("softmax", "mlp", "relu")
    assert VARIANTS["single_head"]["n_heads"] == 1
    assert {VARIANTS[f"{base}+moe"]["n_experts"] for base in ("softmax", "linear", "hyla")} == {5}


def test_overrides_win_over_variant_and_preset():
    cfg = model_config("sraven", "hyla", "small", value_act="gelu", attn_dropout=0.0, **SRAVEN)
    assert (cfg.value_act, cfg.attn_dropout, cfg.score_norm) == ("gelu", 0.0, "rms_head")


def test_task_name_supplies_dims():
    cfg = model_config("sraven", "hyla", "paper")
    assert (cfg.d_in, cfg.d_out, cfg.seq_len, cfg.pos_buckets) == (8, 8, 36, 36)


def test_task_instance_supplies_dims():
    task = SimpleNamespace(name="fuzzy_logic", d_in=7, d_out=1, seq_len=32)
    cfg = model_config(task, "linear", "tiny")
    assert (cfg.d_in, cfg.d_out, cfg.seq_len, cfg.pos_buckets) == (7, 1, 32, 32)


@pytest.mark.parametrize(
    ("args", "overrides", "message"),
    [
        pytest.param(
            ("sraven", "hyla", "huge"),
            SRAVEN,
            r"unknown preset 'huge'; valid presets: tiny, small, paper",
            id="preset",
        ),
        pytest.param(
            ("sraven", "hyla+", "paper"),
            SRAVEN,
            r"unknown variant 'hyla\+'; valid variants: softmax",
            id="variant",
        ),
        pytest.param(
            ("wiki", "hyla", "paper"),
            {},
            r"no model presets for task 'wiki'; valid tasks: fuzzy_logic, sraven",
            id="task",
        ),
        pytest.param(
            ("sraven", "hyla", "paper"),
            {**SRAVEN, "heads": 4},
            r"unknown model override\(s\) \['heads'\]; valid names: .*n_heads",
            id="override",
        ),
    ],
)
def test_model_config_rejects_unknown_names(args, overrides, message):
    with pytest.raises(ValueError, match=message):
        model_config(*args, **overrides)


def test_config_is_frozen():
    cfg = tiny_model_config()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.n_heads = 2  # type: ignore[misc]
