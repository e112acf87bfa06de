"""Tests of probes/controls.py (and the `inputs` array of LatentCodes it reads), on constructed codes."""

from __future__ import annotations

import numpy as np
import pytest

from probes.codes import LatentCodes
from probes.decoding.controls import control_labels, input_features, input_types, run_controls
from probes.decoding.decode import decode_rules

N_VALUES = 8
KEYS = [5, 6]
QUERY = [7]


def _sraven_like(n: int, seed: int = 0, *, codes_from: str = "noise", label_from_key: bool = True) -> LatentCodes:
    """SRAVEN-shaped rows: one-hot tokens [n, 8, N_VALUES], codes read at QUERY x KEYS; the label is the value of
    the first key (mod 4) or random."""
    rng = np.random.default_rng(seed)
    values = rng.integers(0, N_VALUES, size=(n, 8))
    inputs = np.eye(N_VALUES, dtype=np.float32)[values]
    inputs[:, 7] = 0.0  # the query token is all zeros, as in SRAVEN
    rule = values[:, KEYS[0]] % 4 if label_from_key else rng.integers(0, 4, size=n)
    if codes_from == "noise":
        codes = rng.normal(size=(n, 2, 2, 1, 2))
    else:  # codes that name the key-value tuple (one-hot over the 64 tuples) and nothing else
        tuples = np.eye(N_VALUES * N_VALUES)[values[:, KEYS[0]] * N_VALUES + values[:, KEYS[1]]]
        codes = np.repeat(tuples[:, None, :, None, None], 2, axis=1)
    split = np.array(["train"] * (n // 2) + ["test"] * (n // 4) + ["ood"] * (n - n // 2 - n // 4))
    meta = {"task": "sraven", "label": "rule", "n_classes": 4, "query": [QUERY], "key": [KEYS], "layers": [0, 1]}
    return LatentCodes(codes, {"rule": rule}, split, meta, inputs=inputs)


def test_inputs_are_saved_loaded_selected_and_optional(tmp_path):
    codes = _sraven_like(40)
    path = codes.save(tmp_path / "codes")
    loaded = LatentCodes.load(path)
    np.testing.assert_array_equal(loaded.inputs, codes.inputs)
    np.testing.assert_array_equal(loaded.select(split="ood").inputs, codes.inputs[codes.split == "ood"])
    # a file written before inputs existed: the same arrays without "inputs"
    with np.load(path) as data:
        arrays = {k: data[k] for k in data.files if k != "inputs"}
    np.savez(path, **arrays)
    old = LatentCodes.load(path)
    assert old.inputs is None and old.select(split="test").inputs is None
    with pytest.raises(ValueError, match=r"inputs has shape \(3, 8, 8\); expected finite \[40, pos, d_in\]"):
        LatentCodes(codes.codes, codes.labels, codes.split, codes.meta, inputs=codes.inputs[:3])


def test_input_features_are_the_tokens_at_the_query_and_key_positions():
    codes = _sraven_like(20)
    expected = np.concatenate([codes.inputs[:, 7], codes.inputs[:, 5], codes.inputs[:, 6]], axis=1)
    np.testing.assert_array_equal(input_features(codes), expected)
    fuzzy = LatentCodes(codes.codes, {}, codes.split, {"task": "fuzzy_logic", "layers": [0, 1]}, inputs=codes.inputs)
    np.testing.assert_array_equal(input_features(fuzzy), codes.inputs.reshape(20, -1))
    types, ids = input_types(codes)
    same = (codes.inputs[:, None, KEYS] == codes.inputs[None, :, KEYS]).all(axis=(2, 3))
    np.testing.assert_array_equal(ids[:, None] == ids[None, :], same)


def test_control_labels_are_fixed_per_input_type_across_calls_and_row_orders():
    codes = _sraven_like(400, label_from_key=False)
    labels = control_labels(codes, random_state=3)
    _, ids = input_types(codes)
    for type_id in np.unique(ids):
        assert np.unique(labels[ids == type_id]).size == 1
    np.testing.assert_array_equal(control_labels(codes, random_state=3), labels)
    order = np.random.default_rng(1).permutation(400)
    shuffled = LatentCodes(codes.codes[order], {"rule": codes.labels["rule"][order]}, codes.split[order], codes.meta,
                           inputs=codes.inputs[order])
    np.testing.assert_array_equal(control_labels(shuffled, random_state=3), labels[order])
    assert not np.array_equal(control_labels(codes, random_state=4), labels)
    assert set(np.unique(labels)) <= {0, 1, 2, 3}


def test_control_labels_follow_the_real_class_frequencies():
    n_types = 4000
    values = np.arange(n_types)
    inputs = np.zeros((n_types, 3, 2), dtype=np.float32)
    inputs[:, 1, 0] = values  # one distinct key token per row
    rule = np.repeat([0, 1, 2], [2800, 800, 400])
    meta = {"task": "sraven", "label": "rule", "n_classes": 3, "query": [[2]], "key": [[1]], "layers": [0]}
    codes = LatentCodes(np.zeros((n_types, 1, 1, 1, 1)), {"rule": rule}, np.array(["train"] * n_types), meta,
                        inputs=inputs)
    freq = np.bincount(control_labels(codes), minlength=3) / n_types
    np.testing.assert_allclose(freq, [0.7, 0.2, 0.1], atol=0.03)


def test_input_only_control_beats_codes_that_hold_nothing_and_decode_shows_it():
    codes = _sraven_like(800, codes_from="noise", label_from_key=True)
    result = decode_rules(codes, layers="each")
    controls = result.controls
    assert controls.input_only["test"] == 1.0 and controls.input_only["ood"] == 1.0
    for split in ("test", "ood"):
        best = max(result.baselines[split].chance, result.baselines[split].majority, controls.input_only[split])
        assert best == 1.0
    table = result.table()
    assert "codes − best test" in table and "input-only ood" in table and "selectivity ood" in table
    rows = [line.split() for line in table.splitlines()[3:5]]
    for layer_row, acc in zip(rows, result.accuracy("test"), strict=True):
        assert f"{acc - 1.0:+.3f}" in layer_row
    headline = result.headlines()["accuracy"]["test"]
    assert headline.control == 1.0 and headline.best_of == "input-only"
    np.testing.assert_allclose(headline.over_best, result.accuracy("test") - 1.0)
    assert decode_rules(codes, layers="each", controls=False).controls is None
    no_inputs = LatentCodes(codes.codes, codes.labels, codes.split, codes.meta)
    assert decode_rules(no_inputs, layers="each").controls is None
    with pytest.raises(ValueError, match="carry no raw inputs"):
        run_controls(no_inputs)


def test_codes_that_copy_the_input_type_solve_the_control_task_so_selectivity_is_low():
    codes = _sraven_like(800, codes_from="key", label_from_key=True)
    controls = run_controls(codes, layers="each")
    result = decode_rules(codes, layers="each")
    for split in ("test", "ood"):
        np.testing.assert_allclose(controls.control_task[split], 1.0)  # memorizes each key value's random class
        np.testing.assert_allclose(controls.selectivity(split, result.accuracy(split)), result.accuracy(split) - 1.0)
    assert controls.n_input_types == N_VALUES * N_VALUES


def test_the_control_task_needs_discrete_inputs():
    codes = _sraven_like(40)
    fuzzy = LatentCodes(codes.codes, {"terms": np.stack([codes.labels["rule"], codes.labels["rule"] + 4], 1)},
                        codes.split, {"task": "fuzzy_logic", "layers": [0, 1]}, inputs=codes.inputs)
    with pytest.raises(ValueError, match="defined for codes with discrete input types"):
        control_labels(fuzzy)
    controls = run_controls(fuzzy, label="terms")
    assert controls.control_task is None and "stands in for selectivity" in controls.note


def test_the_report_summary_shows_the_controls_beside_decoding():
    from probes.run_analysis import RunAnalysis, RunInput, summary_rows

    codes = _sraven_like(400)
    decoding = decode_rules(codes)
    with_inputs = RunAnalysis(RunInput("with", codes), decoding=decoding)
    without = RunAnalysis(RunInput("without", codes), decoding=decode_rules(codes, controls=False))
    rows = dict(summary_rows({"with": with_inputs, "without": without}))
    # n/a: no control was fitted for the run without inputs
    assert rows["input-only control (decoding accuracy), ood"] == [f"{decoding.controls.input_only['ood']:.3f}", "n/a"]
    best = max(decoding.baselines["ood"].chance, decoding.baselines["ood"].majority, decoding.controls.input_only["ood"])
    assert rows["codes − best (decoding accuracy), ood, all layers"][0] == f"{decoding.accuracy('ood')[-1] - best:.3f}"


def test_decode_terms_shows_the_input_only_f1_which_is_perfect_when_terms_are_read_off_the_tokens():
    from probes.decoding.decode import decode_terms

    rng = np.random.default_rng(0)
    first = rng.integers(0, 4, size=600)
    inputs = np.eye(8, dtype=np.float32)[np.stack([first, first + 4], 1)]  # [n, 2 tokens, 8]
    terms = np.stack([first, first + 4], 1)  # each row's two terms are its two tokens
    split = np.array(["train"] * 300 + ["ood"] * 300)
    codes = LatentCodes(rng.normal(size=(600, 1, 2, 1, 1)), {"terms": terms}, split,
                        {"task": "fuzzy_logic", "label": "terms", "n_classes": 8, "layers": [0]}, inputs=inputs)
    result = decode_terms(codes)
    assert result.input_only_f1 == {"ood": 1.0}
    assert "input-only ood" in result.table() and "codes − best ood" in result.table()
    headline = result.headlines()["ood"]
    assert headline.control == 1.0 and headline.best_of == "input-only"
    np.testing.assert_allclose(headline.over_best, result.mean_f1("ood") - 1.0)
    assert decode_terms(codes, controls=False).input_only_f1 is None
    assert decode_rules(codes).extras["terms"].input_only_f1 == {"ood": 1.0}  # the set path of decode_rules carries it too


def test_ridge_bits_shows_the_input_only_r2_which_is_perfect_when_bits_are_read_off_the_tokens(make_fuzzy):
    from probes.decoding.decode import ridge_bits

    codes = make_fuzzy(structure="random")
    bits = codes.labels["term_bits"].reshape(codes.n_samples, 1, -1).astype(np.float32)  # one token of 8 bits
    with_inputs = LatentCodes(codes.codes, codes.labels, codes.split, codes.meta, inputs=bits)
    result = ridge_bits(with_inputs, layers="all", splits=["test", "ood"])
    for split in ("test", "ood"):
        assert result.input_only_r2[split] == pytest.approx(1.0, abs=0.01)
        headline = result.headlines()[split]
        assert headline.best_of == "input-only" and headline.over_best[0] < -0.5
    assert ridge_bits(with_inputs, layers="all", controls=False).input_only_r2 is None
    assert ridge_bits(codes, layers="all").input_only_r2 is None
