"""Building configs from names and overrides: values are checked against each field's type, by name."""

from __future__ import annotations

import pytest

from latentcode.training.build import build_model_config, build_task, build_train_config, parse_value


@pytest.mark.parametrize(
    ("section", "params", "message"),
    [
        pytest.param("train", {"lr": "abc"}, '--train.lr="abc" is not valid: lr takes a number', id="lr-text"),
        pytest.param("train", {"steps": 2.5}, "--train.steps=2.5 is not valid: steps takes an integer",
                     id="steps-float"),
        pytest.param("train", {"compile": "yes"}, '--train.compile="yes" is not valid: compile takes true or false',
                     id="bool-text"),
        pytest.param("train", {"decay_mask": "all"},
                     "--train.decay_mask=\"all\" is not valid: decay_mask takes one of ['ndim>=2', 'weights']",
                     id="literal"),
        pytest.param("train", {"adam_betas": [0.9]}, "adam_betas takes a list of 2", id="tuple-length"),
        pytest.param("train", {"grad_clip": "big"}, "grad_clip takes a number or none", id="optional"),
        pytest.param("model", {"d_model": "wide"}, '--model.d_model="wide" is not valid: d_model takes an integer',
                     id="model-int"),
        pytest.param("task", {"n_values": "many"}, '--task.n_values="many" is not valid', id="task-int"),
    ],
)
def test_a_value_of_the_wrong_type_names_the_field_and_the_value(section, params, message):
    with pytest.raises(ValueError, match=None) as info:
        if section == "train":
            build_train_config("sraven", "tiny", {}, params)
        elif section == "model":
            build_model_config(build_task("sraven", {}), "hyla", "tiny", params)
        else:
            build_task("sraven", params)
    assert message in str(info.value)


def test_right_types_are_converted():
    cfg = build_train_config("sraven", "tiny", {"seed": 3}, {"lr": 1, "adam_betas": [0.8, 0.9], "grad_clip": None})
    assert (cfg.lr, cfg.adam_betas, cfg.grad_clip, cfg.seed) == (1.0, (0.8, 0.9), None, 3)
    assert isinstance(cfg.lr, float)
    assert build_model_config(build_task("sraven", {}), "hyla", "tiny", {"d_model": 32}).d_model == 32


def test_parse_value_reads_json_booleans_and_plain_text():
    assert [parse_value(t) for t in ("3e-3", "4", "True", "None", "relu", "[1, 2]")] == [0.003, 4, True, None,
                                                                                         "relu", [1, 2]]
