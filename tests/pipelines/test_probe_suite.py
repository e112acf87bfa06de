"""The probe suite's torch side: the untrained model's codes (`latentcode.codes.untrained`) and the runner's checks
(`latentcode.pipelines.probe_suite`)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from latentcode.codes.extract import extract_latent_codes
from latentcode.codes.untrained import untrained_codes, untrained_model
from latentcode.pipelines.probe_suite import probe_suite
from latentcode.rundir.pretrained import load_pretrained

EXTRACT = {"splits": ("train", "ood"), "n_samples": 32, "seed": 0, "progress": False}


@pytest.fixture(scope="module")
def shipped():
    return load_pretrained("fuzzy_logic-softmax")


def test_untrained_codes_differ_from_trained_ones_and_are_reproducible_for_a_seed(shipped):
    config, task = shipped.config.model, shipped.task
    trained = extract_latent_codes(shipped.model, task, **EXTRACT)
    first = untrained_codes(config, task, shipped.config.train.seed, **EXTRACT)
    again = untrained_codes(config, task, shipped.config.train.seed, **EXTRACT)
    other = untrained_codes(config, task, shipped.config.train.seed + 1, **EXTRACT)
    np.testing.assert_array_equal(first.codes, again.codes)
    np.testing.assert_array_equal(first.inputs, trained.inputs)  # the same instances, read the same way
    assert np.abs(first.codes - trained.codes).max() > 1e-2
    assert np.abs(first.codes - other.codes).max() > 1e-2
    assert first.meta["checkpoint"] == "untrained-seed0"


def test_the_untrained_model_has_the_weights_training_starts_from_and_leaves_the_rng_alone(shipped):
    torch.manual_seed(123)
    expected_next = torch.rand(3)
    torch.manual_seed(123)
    model = untrained_model(shipped.config.model, 0)
    assert torch.equal(torch.rand(3), expected_next)
    torch.manual_seed(0)  # what latentcode.training.train does before building the model
    reference = type(model)(shipped.config.model)
    for (name, a), (_, b) in zip(model.state_dict().items(), reference.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
    trained = dict(shipped.model.named_parameters())
    assert all(not torch.equal(p, trained[name]) for name, p in model.named_parameters() if p.ndim == 2)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"run": "sraven-softmax", "n_samples": 500}, "too few for the MDL blocks"),
        ({"run": "sraven-sofmax"}, "no shipped checkpoint named 'sraven-sofmax'"),
        ({"run": "fuzzy_logic-softmax", "seed": 7}, "no seed 7 of 'fuzzy_logic-softmax' is shipped"),
        ({"run": "fuzzy_logic-softmax", "label": "rule"}, "label='rule' is not a class label of task 'fuzzy_logic'"),
        ({"run": "fuzzy_logic-softmax", "layers": [2]}, r"the model has layers 0..1"),
    ],
)
def test_the_suite_refuses_bad_input_before_any_extraction(kwargs, message):
    with pytest.raises(ValueError, match=message):
        probe_suite(**kwargs)
