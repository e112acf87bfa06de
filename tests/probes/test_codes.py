"""LatentCodes: validation, selection, the .npz + .json round trip and its error messages; probes stays torch-free."""

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from probes import SPLITS, LatentCodes


def _tiny(**overrides):
    fields = {
        "codes": np.arange(4 * 2 * 3 * 1 * 2, dtype=np.float32).reshape(4, 2, 3, 1, 2),
        "labels": {"rule": np.array([0, 1, 2, 1]), "rules": np.zeros((4, 4), int)},
        "split": np.array(["train", "test", "ood", "train"]),
        "meta": {"task": "sraven", "n_classes": 8, "layers": [1, 3]},
    }
    fields.update(overrides)
    return LatentCodes(**fields)


def test_import_probes_does_not_import_torch():
    code = "import sys, probes; print('torch' in sys.modules, 'latentcode' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_properties_and_flat():
    lc = _tiny()
    assert (lc.n_samples, lc.n_layers, lc.n_heads, len(lc)) == (4, 2, 3, 4)
    assert lc.splits == ("train", "test", "ood")  # SPLITS order, not order of appearance
    assert lc.layer_names == [1, 3] and lc.label == "rule" and lc.task == "sraven"
    assert lc.flat().shape == (4, 12)
    np.testing.assert_array_equal(lc.flat(), lc.codes.reshape(4, -1))
    np.testing.assert_array_equal(lc.flat(layers=3), lc.codes[:, 1].reshape(4, -1))
    np.testing.assert_array_equal(lc.flat(layers=[3, 1]), lc.codes[:, [1, 0]].reshape(4, -1))
    with pytest.raises(ValueError, match=r"2 is not an extracted model layer; these codes hold model layers \[1, 3\]"):
        lc.flat(layers=2)
    with pytest.raises(ValueError, match="not an extracted model layer"):
        lc.flat(layers=-1)


def test_codes_are_float32_and_default_labels_follow_task():
    lc = _tiny(codes=np.zeros((4, 1, 1, 1, 1), np.float64), meta={"task": "fuzzy_logic"})
    assert lc.codes.dtype == np.float32
    assert lc.label == "terms"


@pytest.mark.parametrize(
    ("kwargs", "n", "rules"),
    [
        pytest.param({"split": "train"}, 2, [0, 1], id="one-split"),
        pytest.param({"split": ["test", "ood"]}, 2, [1, 2], id="two-splits"),
        pytest.param({"mask": np.array([True, False, False, True])}, 2, [0, 1], id="bool-mask"),
        pytest.param({"mask": [2, 0]}, 2, [0, 2], id="index-mask"),
        pytest.param(
            {"split": "train", "mask": np.array([True, True, True, False])}, 1, [0], id="split-and-mask"
        ),
    ],
)
def test_select(kwargs, n, rules):
    selected = _tiny().select(**kwargs)
    assert selected.n_samples == n
    assert selected.labels["rule"].tolist() == rules
    assert selected.labels["rules"].shape == (n, 4)
    assert selected.meta == _tiny().meta


def test_select_rejects_unknown_split_and_bad_mask():
    with pytest.raises(ValueError, match="validation"):
        _tiny().select(split="validation")
    with pytest.raises(ValueError, match="shape"):
        _tiny().select(mask=np.array([True, False]))


def test_layer_groups():
    lc = _tiny()
    assert lc.layer_groups("each+all") == [("1", [0]), ("3", [1]), ("all", [0, 1])]
    assert lc.layer_groups("last") == [("3", [1])]
    assert lc.layer_groups([1]) == [("1", [0])]
    assert lc.layer_groups(3) == [("3", [1])]
    with pytest.raises(ValueError, match="each\\+all"):
        lc.layer_groups("every")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        pytest.param({"codes": np.full((4, 2, 3, 1, 2), np.nan)}, "NaN or infinite", id="nan-codes"),
        pytest.param({"codes": np.full((4, 2, 3, 1, 2), np.inf)}, "NaN or infinite", id="inf-codes"),
        pytest.param({"codes": np.zeros((4, 2, 3, 2))}, "5 axes", id="4d-codes"),
        pytest.param({"labels": {"rule": np.array([0, 1, 2])}}, "labels\\['rule'\\]", id="label-length"),
        pytest.param({"split": np.array(["train"] * 3)}, "split has shape", id="split-length"),
        pytest.param({"split": np.array(["train", "valid", "ood", "ood"])}, "valid", id="unknown-split"),
        pytest.param({"meta": {"layers": [0, 1, 2]}}, "meta\\['layers'\\]", id="meta-layers"),
        pytest.param({"meta": {"label_kinds": {"rule": "category"}}}, "label_kinds", id="unknown-label-kind"),
        pytest.param({"meta": {"when": object()}}, "JSON", id="meta-not-json"),
        pytest.param({"labels": {"x": np.array([None] * 4)}}, "object array", id="object-label"),
    ],
)
def test_invalid_codes_raise(overrides, message):
    with pytest.raises(ValueError, match=message):
        _tiny(**overrides)


def test_meta_numpy_values_become_json():
    lc = _tiny(meta={"n_classes": np.int64(8), "layers": np.array([1, 3])})
    assert lc.meta == {"n_classes": 8, "layers": [1, 3]}


@pytest.mark.parametrize("suffix", [pytest.param("", id="no-suffix"), pytest.param(".npz", id="npz-suffix")])
def test_save_load_round_trip(tmp_path, suffix):
    lc = _tiny(
        labels={
            "rule": np.array([0, 1, 2, 1]),
            "correct": np.array([True, False, True, True]),
            "name": np.array(["a", "b", "c", "d"]),
        }
    )
    written = lc.save(tmp_path / f"codes{suffix}")
    assert written == tmp_path / "codes.npz"
    assert (tmp_path / "codes.json").exists()
    back = LatentCodes.load(tmp_path / "codes")
    np.testing.assert_array_equal(back.codes, lc.codes)
    np.testing.assert_array_equal(back.split, lc.split)
    assert back.labels.keys() == lc.labels.keys()
    for name in lc.labels:
        np.testing.assert_array_equal(back.labels[name], lc.labels[name])
        assert back.labels[name].dtype.kind == lc.labels[name].dtype.kind
    assert back.meta == lc.meta
    assert LatentCodes.load(tmp_path / "codes.npz").n_samples == 4
    assert not list(tmp_path.glob("*.tmp"))


def test_load_missing_file_says_how_to_make_codes(tmp_path):
    with pytest.raises(FileNotFoundError, match="latentcode extract"):
        LatentCodes.load(tmp_path / "nothing")
    _tiny().save(tmp_path / "codes")
    (tmp_path / "codes.json").unlink()
    with pytest.raises(FileNotFoundError, match="codes.json"):
        LatentCodes.load(tmp_path / "codes")


def test_load_truncated_file(tmp_path):
    path = _tiny().save(tmp_path / "codes")
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(ValueError, match="codes.npz.*truncated"):
        LatentCodes.load(path)


def test_load_foreign_file(tmp_path):
    np.savez(tmp_path / "other.npz", weights=np.zeros(3))
    (tmp_path / "other.json").write_text("{}")
    with pytest.raises(ValueError, match="lacks the arrays \\['codes', 'split'\\]"):
        LatentCodes.load(tmp_path / "other")


def test_load_rejects_pickled_arrays(tmp_path):
    np.savez(tmp_path / "codes.npz", codes=np.zeros((1, 1, 1, 1, 1)), split=np.array(["train"], dtype=object))
    (tmp_path / "codes.json").write_text("{}")
    with pytest.raises(ValueError, match="not a readable latent-code file"):
        LatentCodes.load(tmp_path / "codes")


def test_load_nan_codes_names_the_file(tmp_path):
    codes = np.zeros((2, 1, 1, 1, 1), np.float32)
    codes[1] = np.nan
    np.savez_compressed(tmp_path / "bad.npz", codes=codes, split=np.array(["train", "ood"]))
    (tmp_path / "bad.json").write_text(json.dumps({"task": "sraven"}))
    with pytest.raises(ValueError, match="bad.npz.*NaN"):
        LatentCodes.load(tmp_path / "bad")


def test_saved_npz_holds_only_plain_arrays(tmp_path):
    path = _tiny().save(tmp_path / "codes")
    with zipfile.ZipFile(path) as archive:
        assert sorted(archive.namelist()) == ["codes.npy", "label_rule.npy", "label_rules.npy", "split.npy"]
    assert set(SPLITS) == {"train", "test", "ood", "novel_terms"}


DATA = Path(__file__).parents[1] / "data"


@pytest.mark.parametrize(
    ("make", "real"),
    [
        pytest.param("make_sraven", DATA / "run_v0.1.0" / "codes" / "paper.npz", id="sraven"),
        pytest.param("make_fuzzy", DATA / "fuzzy_logic_codes.npz", id="fuzzy_logic"),
    ],
)
def test_synthetic_fixtures_carry_exactly_the_labels_extraction_writes(request, make, real):
    """The probes tests run on synthetic codes; these must look like `latentcode extract`'s files (tests/data
    holds one of each task, written by the extraction code), so a probe never relies on a label extraction
    does not write."""
    fixture, extracted = request.getfixturevalue(make)(n=40), LatentCodes.load(real)
    assert sorted(fixture.labels) == sorted(extracted.labels)
    for name, values in extracted.labels.items():
        assert fixture.labels[name].shape[1:] == values.shape[1:], name
        assert fixture.labels[name].dtype.kind == values.dtype.kind, name
    assert set(fixture.meta) <= set(extracted.meta)
    assert fixture.meta["positions"] == extracted.meta["positions"] and fixture.task == extracted.task


@pytest.mark.parametrize(
    ("meta", "inputs", "reading"),
    [
        pytest.param({"task": "fuzzy_logic", "positions": "paper"}, "uniform",
                     "paper positions, uniform inputs (assumed: written before readings were recorded)",
                     id="fuzzy-before-inputs-were-recorded"),
        pytest.param({"task": "fuzzy_logic", "positions": "paper", "inputs": "fixed_query"}, "fixed_query",
                     "paper positions, fixed_query inputs", id="fuzzy-inputs-recorded"),
        pytest.param({"task": "sraven", "positions": "all_features", "inputs": "uniform"}, "unpermuted",
                     "all_features positions, unpermuted inputs (assumed: written before readings were recorded)",
                     id="sraven-always-unpermuted"),
        pytest.param({"task": "sraven", "positions": "paper", "inputs": "permuted",
                      "reading": "paper positions, permuted inputs"}, "permuted",
                     "paper positions, permuted inputs", id="recorded-reading"),
        pytest.param({"task": "sraven"}, "unpermuted", None, id="made-by-hand"),
    ],
)
def test_files_written_before_readings_were_recorded_load_with_their_assumed_reading(tmp_path, meta, inputs,
                                                                                     reading):
    written = LatentCodes(np.zeros((4, 1, 2, 1, 1)), {"rule": np.array([0, 1, 0, 1])},
                          np.array(["train", "train", "ood", "ood"]), meta).save(tmp_path / "old")
    codes = LatentCodes.load(written)
    assert codes.reading_inputs == inputs and codes.reading == reading
    assert codes.meta == meta  # loading does not rewrite what the file says
