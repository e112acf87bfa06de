"""Tests for latentcode/codes/extract.py: positions, labels, equality with reading hook_pattern by hand, errors."""

import numpy as np
import pytest
import torch

from latentcode.codes.extract import (
    LatentCodes,
    codes_from_patterns,
    extract_latent_codes,
    pattern_hook_name,
    resolve_positions,
)
from latentcode.model.transformer import build_model
from latentcode.tasks import get_task


@pytest.fixture(scope="module")
def sraven():
    return get_task("sraven", seed=0)


@pytest.fixture(scope="module")
def fuzzy():
    return get_task("fuzzy_logic", seed=0)


def _model(task, variant="hyla"):
    torch.manual_seed(0)
    return build_model(task, variant, "tiny").eval()


@pytest.mark.parametrize("variant", [pytest.param("hyla", id="hyla"), pytest.param("softmax", id="softmax")])
def test_sraven_paper_codes_equal_hook_pattern_read_by_hand(sraven, variant):
    model = _model(sraven, variant)
    codes = extract_latent_codes(
        model, sraven, splits=("train", "ood"), n_samples=20, batch_size=8, seed=3, progress=False
    )
    assert codes.codes.shape == (40, model.cfg.n_layers, model.cfg.n_heads, 1, 2)
    for i, split in enumerate(("train", "ood")):
        batch = sraven.sample(20, split, seed=3, unpermuted=True)
        with torch.no_grad():
            out, cache = model.run_with_cache(batch.x)
        by_hand = np.stack(
            [
                cache["pattern", layer][:, :, 35][:, :, [27, 31]].numpy()
                for layer in range(model.cfg.n_layers)
            ],
            1,
        )
        rows = slice(20 * i, 20 * (i + 1))
        np.testing.assert_allclose(codes.codes[rows, :, :, 0], by_hand, rtol=1e-5, atol=1e-6)
        assert (codes.split[rows] == split).all()
        rules = batch.labels["rules"].numpy()
        np.testing.assert_array_equal(codes.labels["rule"][rows], rules[:, -1])
        np.testing.assert_array_equal(codes.labels["rules"][rows], rules)
        np.testing.assert_array_equal(codes.labels["target"][rows], batch.y[:, -1].numpy())
        np.testing.assert_array_equal(codes.labels["prediction"][rows], sraven.predict(out)[:, -1].numpy())
    np.testing.assert_array_equal(
        codes.labels["correct"], codes.labels["target"] == codes.labels["prediction"]
    )


def test_sraven_paper_meta_names_everything_the_probes_need(sraven):
    codes = extract_latent_codes(_model(sraven), sraven, n_samples=4, checkpoint="abc123", progress=False)
    meta = codes.meta
    assert meta["task"] == "sraven" and meta["variant"] == "hyla" and meta["score_norm"] == "rms_head"
    assert meta["positions"] == "paper" and meta["query"] == [[35]] and meta["key"] == [[27, 31]]
    assert meta["layers"] == [0, 1] and meta["checkpoint"] == "abc123"
    assert meta["label"] == "rule" and meta["n_classes"] == 8 and len(meta["class_names"]) == 8
    assert codes.splits == ("train", "test", "ood")


def test_sraven_all_features_gives_one_row_per_feature_labelled_with_its_rule(sraven):
    model = _model(sraven)
    codes = extract_latent_codes(
        model, sraven, splits=("ood",), n_samples=6, positions="all_features", progress=False
    )
    assert codes.codes.shape == (24, 2, 4, 1, 2)
    assert codes.meta["query"] == [[32], [33], [34], [35]]
    assert codes.meta["key"] == [[24, 28], [25, 29], [26, 30], [27, 31]]
    np.testing.assert_array_equal(codes.labels["feature"], np.tile(np.arange(4), 6))
    np.testing.assert_array_equal(
        codes.labels["rule"], codes.labels["rules"][np.arange(24), codes.labels["feature"]]
    )
    np.testing.assert_array_equal(codes.labels["instance"], np.repeat(np.arange(6), 4))

    batch = sraven.sample(6, "ood", seed=0, unpermuted=True)
    with torch.no_grad():
        _, cache = model.run_with_cache(batch.x)
    for f in range(4):
        by_hand = cache["pattern", 1][:, :, 32 + f][:, :, [24 + f, 28 + f]].numpy()
        np.testing.assert_allclose(codes.codes[f::4, 1, :, 0], by_hand, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(codes.labels["target"][f::4], batch.y[:, f].numpy())


def test_fuzzy_logic_paper_codes_are_the_query_attending_to_itself(fuzzy):
    model = _model(fuzzy, "linear")
    codes = extract_latent_codes(model, fuzzy, splits=("train", "ood"), n_samples=10, progress=False)
    assert codes.codes.shape == (20, 2, 4, 1, 1)
    batch = fuzzy.sample(10, "ood", seed=0, inputs="fixed_query")  # the default reading: one shared query input
    with torch.no_grad():
        out, cache = model.run_with_cache(batch.x)
    np.testing.assert_allclose(
        codes.codes[10:, 0, :, 0, 0], cache["pattern", 0][:, :, 15, 15].numpy(), rtol=1e-5
    )
    np.testing.assert_array_equal(codes.labels["terms"][10:], batch.labels["terms"].numpy())
    np.testing.assert_array_equal(codes.labels["term_bits"][10:], batch.labels["term_bits"].numpy())
    np.testing.assert_allclose(codes.labels["target"][10:], batch.y.numpy())
    np.testing.assert_allclose(codes.labels["prediction"][10:], fuzzy.predict(out).numpy(), rtol=1e-5)
    assert codes.meta["label"] == "terms" and codes.meta["n_classes"] == 16


def test_composition_ids_group_rows_of_one_composition_across_train_and_test(fuzzy):
    codes = extract_latent_codes(_model(fuzzy), fuzzy, splits=("train", "test", "ood"), n_samples=64, progress=False)
    comp, terms = codes.labels["composition"], codes.labels["terms"]
    assert (comp >= 0).all()
    for c in np.unique(comp):
        assert len({tuple(t) for t in terms[comp == c]}) == 1
    n_train = len(fuzzy.compositions("train"))  # train compositions are numbered first
    assert (comp[codes.split != "ood"] < n_train).all() and (comp[codes.split == "ood"] >= n_train).all()
    expected = {tuple(c): i for i, c in enumerate(fuzzy.compositions("train"))}
    test = codes.split == "test"
    assert [expected[tuple(t)] for t in terms[test]] == comp[test].tolist()


def test_layers_subset_and_model_mode_restored(sraven):
    model = _model(sraven).train()
    codes = extract_latent_codes(model, sraven, splits=("test",), n_samples=4, layers=[1], progress=False)
    assert codes.codes.shape == (4, 1, 4, 1, 2) and codes.meta["layers"] == [1]
    assert model.training


def test_explicit_positions(sraven):
    model = _model(sraven)
    codes = extract_latent_codes(
        model, sraven, splits=("test",), n_samples=5, positions={"query": [33], "key": [0, 1, -1]}, progress=False
    )
    assert codes.codes.shape == (5, 2, 4, 1, 3)
    assert codes.meta["positions"] == "custom" and codes.meta["key"] == [[0, 1, 35]]
    # a single query token of feature 1 is asked, so its rule is the label
    np.testing.assert_array_equal(codes.labels["rule"], codes.labels["rules"][:, 1])
    same = extract_latent_codes(
        model, sraven, splits=("test",), n_samples=5, positions=([33], [0, 1, 35]), progress=False
    )
    np.testing.assert_array_equal(codes.codes, same.codes)


@pytest.mark.parametrize(
    "positions, message",
    [
        pytest.param({"query": [36], "key": [0]}, "valid positions are 0..35", id="query-too-large"),
        pytest.param({"query": [35], "key": [-37]}, "valid positions are 0..35", id="key-too-negative"),
        pytest.param("everything", "valid: paper, all_features", id="unknown-name"),
        pytest.param({"query": [1]}, "'query' and 'key'", id="missing-key"),
    ],
)
def test_bad_positions_raise_naming_the_valid_range(sraven, positions, message):
    with pytest.raises(ValueError, match=message):
        extract_latent_codes(_model(sraven), sraven, n_samples=2, positions=positions, progress=False)


def test_named_positions_are_the_tasks_own(fuzzy):
    with pytest.raises(ValueError, match="'all_features' is not defined for task 'fuzzy_logic'; valid: paper"):
        resolve_positions(fuzzy, "all_features")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        pytest.param(dict(splits=("validation",)), "valid splits: train, test, ood", id="unknown-split"),
        pytest.param(dict(layers=[2]), "the model has 2 layers", id="layer-out-of-range"),
        pytest.param(dict(n_samples=0), "must be positive", id="n-zero"),
        pytest.param(dict(splits=("train", "train")), "names a split twice", id="split-twice"),
        pytest.param(dict(inputs="fixed_query"), "valid: unpermuted, permuted", id="another-tasks-inputs"),
    ],
)
def test_bad_arguments_raise(sraven, kwargs, message):
    with pytest.raises(ValueError, match=message):
        extract_latent_codes(_model(sraven), sraven, **{"n_samples": 2, "progress": False, **kwargs})


def test_codes_from_patterns_accepts_dicts_caches_and_several_views():
    pattern = torch.arange(2 * 3 * 6 * 6, dtype=torch.float32).reshape(2, 3, 6, 6)
    codes = codes_from_patterns(
        {0: pattern, 2: pattern.numpy() * 2}, query=[5], key=[1, 4], split=["train", "ood"]
    )
    assert codes.codes.shape == (2, 2, 3, 1, 2) and codes.meta["layers"] == [0, 2]
    np.testing.assert_array_equal(codes.codes[:, 1, :, 0], 2 * pattern[:, :, 5][:, :, [1, 4]].numpy())
    by_name = codes_from_patterns(
        {pattern_hook_name(0): pattern, "blocks.0.hook_resid_post": pattern}, [5], [1, 4]
    )
    np.testing.assert_array_equal(by_name.codes[:, 0], codes.codes[:, 0])

    views = codes_from_patterns(
        {0: pattern}, query=[[4], [5]], key=[[0, 1], [2, 3]], labels={"y": np.array([7, 8])}
    )
    assert views.codes.shape == (4, 1, 3, 1, 2)
    np.testing.assert_array_equal(views.labels["y"], [7, 7, 8, 8])
    np.testing.assert_array_equal(views.labels["view"], [0, 1, 0, 1])
    np.testing.assert_array_equal(views.codes[3, 0, :, 0], pattern[1, :, 5, 2:4].numpy())


@pytest.mark.parametrize(
    "patterns, kwargs, message",
    [
        pytest.param(
            {0: torch.zeros(2, 3, 6, 6)}, dict(query=[6], key=[0]), "valid positions are 0..5", id="query"
        ),
        pytest.param(
            {0: torch.zeros(2, 3, 6, 6)}, dict(query=[0], key=[9]), "valid positions are 0..5", id="key"
        ),
        pytest.param(
            {"hook_embed": torch.zeros(2, 3)}, dict(query=[0], key=[0]), "no attention patterns", id="none"
        ),
        pytest.param(
            {0: torch.zeros(2, 3, 6, 6)},
            dict(query=[0], key=[0], labels={"y": [1, 2, 3]}),
            "first axis",
            id="labels",
        ),
    ],
)
def test_codes_from_patterns_rejects_bad_input(patterns, kwargs, message):
    with pytest.raises(ValueError, match=message):
        codes_from_patterns(patterns, **kwargs)


def test_codes_from_a_transformer_bridge_cache():
    """TransformerLens' TransformerBridge names its pattern hook `blocks.{i}.attn.hook_pattern`, as we do."""
    from transformer_lens.config import TransformerBridgeConfig
    from transformer_lens.model_bridge import TransformerBridge
    from transformer_lens.model_bridge.sources import native  # noqa: F401  (attaches boot_native)

    config = TransformerBridgeConfig(
        d_model=16, d_head=4, n_heads=4, n_layers=2, n_ctx=12, d_vocab=10, d_mlp=32, act_fn="gelu", seed=0
    )
    bridge = TransformerBridge.boot_native(config)
    tokens = torch.randint(0, 10, (3, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        _, cache = bridge.run_with_cache(tokens, names_filter=lambda name: name.endswith("hook_pattern"))
    assert sorted(cache.keys()) == [pattern_hook_name(0), pattern_hook_name(1)]
    codes = codes_from_patterns(cache, query=[11], key=[10, 11], meta={"variant": "bridge"})
    assert isinstance(codes, LatentCodes)
    assert codes.codes.shape == (3, 2, 4, 1, 2) and codes.meta["variant"] == "bridge"
    np.testing.assert_allclose(
        codes.codes[:, 1, :, 0], cache["blocks.1.attn.hook_pattern"][:, :, 11, 10:12].numpy()
    )
    # softmax codes: every query's row over all keys sums to one
    full = codes_from_patterns(cache, query=[11], key=list(range(12)))
    np.testing.assert_allclose(full.codes.sum(-1), 1.0, rtol=1e-5)


def test_saved_codes_round_trip(sraven, tmp_path):
    codes = extract_latent_codes(_model(sraven), sraven, n_samples=3, positions="all_features", progress=False)
    loaded = LatentCodes.load(codes.save(tmp_path / "codes" / "all_features"))
    np.testing.assert_array_equal(loaded.codes, codes.codes)
    np.testing.assert_array_equal(loaded.split, codes.split)
    assert loaded.meta == codes.meta and sorted(loaded.labels) == sorted(codes.labels)
    for name, value in codes.labels.items():
        np.testing.assert_array_equal(loaded.labels[name], value)


def test_fuzzy_logic_codes_are_read_at_one_shared_query_input_by_default():
    from latentcode import build_model, extract_latent_codes, get_task

    task = get_task("fuzzy_logic", seq_len=8)
    model = build_model(task, "hyla", preset="tiny")
    default = extract_latent_codes(model, task, ("train", "ood"), 16, progress=False)
    uniform = extract_latent_codes(model, task, ("train", "ood"), 16, inputs="uniform", progress=False)
    n_variables = task.config.n_variables
    query_x = default.inputs[:, -1, :n_variables]
    assert np.all(query_x == query_x[0])  # every train and ood instance shares the query input
    assert not np.all(uniform.inputs[:, -1, :n_variables] == uniform.inputs[0, -1, :n_variables])
    assert default.meta["inputs"] == "fixed_query" and default.meta["default_reading"] is True
    assert default.reading == default.meta["reading"] == "paper positions, fixed_query inputs (default)"
    assert uniform.meta["inputs"] == "uniform" and uniform.meta["default_reading"] is False
    assert uniform.reading == "paper positions, uniform inputs"
    context = extract_latent_codes(model, task, ("ood",), 8, inputs="fixed_context", progress=False)
    assert np.all(context.inputs[:, :-1, :n_variables] == context.inputs[:1, :-1, :n_variables])
    with pytest.raises(ValueError, match="valid: fixed_query, uniform, fixed_context"):
        extract_latent_codes(model, task, ("train",), 4, inputs="shuffled", progress=False)


def test_sraven_codes_are_read_unpermuted_by_default_and_permuted_on_request():
    task = get_task("sraven", seed=0, permute_features=True)
    model = _model(task)
    default = extract_latent_codes(model, task, ("ood",), 64, positions="all_features", progress=False)
    assert default.meta["inputs"] == "unpermuted" and default.meta["default_reading"] is False  # not paper positions
    assert default.reading == "all_features positions, unpermuted inputs"
    np.testing.assert_array_equal(default.labels["feature"], np.tile(np.arange(4), 64))
    paper = extract_latent_codes(model, task, ("ood",), 4, progress=False)
    assert paper.reading == "paper positions, unpermuted inputs (default)"

    permuted = extract_latent_codes(model, task, ("ood",), 64, positions="all_features", inputs="permuted",
                                    progress=False)
    batch = task.sample(64, "ood", seed=0)  # what the permuted reading draws
    perm, rules = batch.labels["perm"].numpy(), batch.labels["rules"].numpy()
    slot = np.tile(np.arange(4), 64)
    instance = np.repeat(np.arange(64), 4)
    feature = perm[instance, 2, slot]  # panel 9 sits in column 2
    assert not np.array_equal(feature, slot)  # the columns are permuted
    np.testing.assert_array_equal(permuted.labels["feature"], feature)
    np.testing.assert_array_equal(permuted.labels["rule"], rules[instance, feature])
    np.testing.assert_array_equal(permuted.labels["target"], batch.y.numpy()[instance, slot])
    np.testing.assert_array_equal(permuted.inputs[::4], batch.x.numpy())
    assert permuted.meta["inputs"] == "permuted"


def test_check_extraction_rejects_bad_arguments_without_a_model():
    from latentcode.codes.extract import check_extraction

    task = get_task("sraven")
    spec, choice = check_extraction(task, ("train", "ood"), 8)
    assert spec.name == "paper" and choice.name == "unpermuted"
    with pytest.raises(ValueError, match="unknown split 'val'"):
        check_extraction(task, ("train", "val"))
    with pytest.raises(ValueError, match="one string"):
        check_extraction(task, "train")
