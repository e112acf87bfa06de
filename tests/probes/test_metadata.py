"""`probes.metadata`: probes act on what the codes' metadata declares, and 0.1 files (only `task` in their meta)
read as their task declares today."""

import numpy as np
import pytest

from probes import (
    BitRegressionResult,
    LatentCodes,
    TermDecodingResult,
    decode_rules,
    input_features,
    topographic_similarity,
)
from probes.decoding.controls import control_labels
from probes.metadata import meta_control, meta_reading, meta_reading_inputs, meta_value

DECLARED = {
    "task": "made_up",
    "label": "part",
    "label_kinds": {"part": "class", "parts": "class_set", "bits": "bits", "composition": "group"},
    "composition_label": "parts",
    "control": {"inputs": "positions", "control_task": False},
    "query": [[2]],
    "key": [[0, 1]],
}


def _codes(meta, n=120, seed=0):
    rng = np.random.default_rng(seed)
    parts = np.sort(np.stack([rng.integers(0, 3, n), rng.integers(3, 6, n)], 1), axis=1)
    codes = rng.normal(size=(n, 1, 2, 1, 2)).astype(np.float32)
    codes[:, 0, 0, 0] += 3 * np.eye(6)[parts].sum(1)[:, :2]  # parts 0 and 1 are visible in the codes
    labels = {"part": parts[:, 0], "parts": parts, "bits": np.eye(6)[parts].sum(1)[:, :3],
              "composition": parts[:, 0] * 6 + parts[:, 1]}
    split = np.where(np.arange(n) < 80, "train", "ood")
    return LatentCodes(codes, labels, split, meta, inputs=rng.normal(size=(n, 4, 3)))


def test_any_task_name_is_accepted_and_its_declarations_are_read():
    codes = _codes(DECLARED)
    assert codes.task == "made_up" and codes.label == "part" and codes.composition_label == "parts"
    assert codes.labels_of_kind("class_set") == ["parts"] and codes.labels_of_kind("bits") == ["bits"]
    assert codes.control == {"inputs": "positions", "control_task": False}


def test_decoding_extras_and_controls_follow_the_metadata():
    result = decode_rules(_codes(DECLARED), layers="all", progress=False)
    assert result.label == "part" and list(result.extras) == ["parts", "bits"]  # keyed by the codes' own labels
    assert isinstance(result.extras["parts"], TermDecodingResult) and result.extras["parts"].label == "parts"
    assert isinstance(result.extras["bits"], BitRegressionResult) and result.extras["bits"].label == "bits"
    assert set(result.headlines()) == {"accuracy", "term_f1", "bit_r2"}
    assert result.controls.control_task is None and "stands in for selectivity" in result.controls.note
    plain = decode_rules(_codes({**DECLARED, "label_kinds": {"part": "class"}}), layers="all", progress=False)
    assert plain.extras == {}  # no label declared a set or bits: no per-label results


def test_input_features_follow_the_declared_control():
    at_positions = _codes(DECLARED)
    # row tokens at query position 2 then key positions 0 and 1, flattened
    expected = at_positions.inputs[:, [2, 0, 1]].reshape(len(at_positions), -1)
    np.testing.assert_array_equal(input_features(at_positions), expected)
    every = _codes({**DECLARED, "control": {"inputs": "all_tokens", "control_task": False}})
    np.testing.assert_array_equal(input_features(every), every.inputs.reshape(len(every), -1))
    with pytest.raises(ValueError, match=r"discrete input types .*\(task 'made_up'\) have none"):
        control_labels(at_positions)


def test_topographic_similarity_reads_the_composition_label_and_its_kind():
    result = topographic_similarity(_codes(DECLARED), layers="all", n_pairs=300)
    assert result.label == "parts" and result.distance == "symmetric_difference"
    tuples = topographic_similarity(_codes({**DECLARED, "label_kinds": {"parts": "class_tuple"}}), layers="all",
                                    n_pairs=300)
    assert tuples.distance == "hamming"
    with pytest.raises(ValueError, match="no composition label"):
        topographic_similarity(_codes({"task": "made_up"}), layers="all")


def test_files_of_0_1_read_as_their_task_declares_today():
    sraven, fuzzy = {"task": "sraven"}, {"task": "fuzzy_logic"}
    assert (meta_value(sraven, "label"), meta_value(sraven, "composition_label")) == ("rule", "rules")
    assert meta_control(sraven) == {"inputs": "positions", "control_task": True}
    assert meta_value(fuzzy, "label_kinds")["terms"] == "class_set"
    assert meta_control({"task": "made_up"}) == {"inputs": "all_tokens", "control_task": False}
    assert meta_value({"task": "sraven", "label": "feature"}, "label") == "feature"  # what a file says wins
    # readings: SRAVEN files were always unpermuted, whatever they say; fuzzy logic's say it, else uniform
    assert meta_reading_inputs({"task": "sraven", "inputs": "uniform"}) == "unpermuted"
    assert meta_reading_inputs({"task": "fuzzy_logic", "inputs": "fixed_query"}) == "fixed_query"
    assert meta_reading_inputs({"task": "fuzzy_logic"}) == "uniform"
    assert meta_reading_inputs({"task": "made_up", "inputs": "plain", "reading": "x"}) == "plain"
    assert meta_reading({"task": "made_up", "positions": "paper", "inputs": "plain"}) == "paper positions, plain inputs"
    assert meta_reading({"task": "sraven", "positions": "paper", "inputs": "uniform"}).endswith(
        "unpermuted inputs (assumed: written before readings were recorded)")
