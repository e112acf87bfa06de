"""The public samplers and saved-split checks of `latentcode.tasks.sampling`, which every task draws with."""

import numpy as np
import pytest
import torch

from latentcode.tasks.sampling import (
    batch_generator,
    check_disjoint,
    lookup,
    make_config,
    read_task_dict,
    splitmix64,
    validate_compositions,
)
from latentcode.tasks.sraven_rules import SRavenConfig


def test_splitmix64_matches_the_published_sequence():
    # the first two outputs of splitmix64 seeded with 0 (Vigna's reference implementation)
    assert splitmix64(0) == 0xE220A8397B1DCDAF
    assert splitmix64(0x9E3779B97F4A7C15) == 0x6E789E6AA1B965F4


def test_batch_streams_repeat_per_seed_and_differ_per_split():
    a = torch.rand(4, generator=batch_generator(0, "train", 5, "cpu"))
    again = torch.rand(4, generator=batch_generator(0, "train", 5, "cpu"))
    other_split = torch.rand(4, generator=batch_generator(0, "ood", 5, "cpu"))
    other_task = torch.rand(4, generator=batch_generator(1, "train", 5, "cpu"))
    assert torch.equal(a, again)
    assert not torch.equal(a, other_split) and not torch.equal(a, other_task)
    with pytest.raises(ValueError, match="seed=-1 must be a non-negative integer or None"):
        batch_generator(0, "train", -1, "cpu")


def test_lookup_is_indexing_along_the_first_axis():
    table = torch.arange(12).view(4, 3)
    index = torch.tensor([[3, 0], [1, 1]])
    assert torch.equal(lookup(table, index), table[index])


def test_saved_task_dicts_are_checked():
    config, stored = read_task_dict("sraven", SRavenConfig, {"name": "sraven", "params": {"n_features": 3},
                                                              "compositions": {"train": [[0, 1, 2]], "ood": []}},
                                    ("train", "ood"))
    assert config.n_features == 3 and stored["train"] == [[0, 1, 2]]
    with pytest.raises(ValueError, match="saved task is 'fuzzy_logic', not 'sraven'"):
        read_task_dict("sraven", SRavenConfig, {"name": "fuzzy_logic"}, ("train",))
    with pytest.raises(ValueError, match=r"unknown parameter\(s\) \['n_feature'\] for SRavenConfig"):
        make_config(SRavenConfig, {"n_feature": 3})


@pytest.mark.parametrize(
    "rows, strict, message",
    [
        pytest.param([[0, 1]], False, "shape \\[m, 3\\]", id="width"),
        pytest.param([[0, 1, 9]], False, "outside \\[0, 8\\)", id="range"),
        pytest.param([[2, 1, 3]], False, "sorted within rows", id="unsorted"),
        pytest.param([[1, 1, 3]], True, "sorted strictly", id="repeated-part"),
        pytest.param([[1, 2, 3], [1, 2, 3]], False, "repeat a composition", id="repeated-row"),
    ],
)
def test_bad_composition_lists_name_the_rule(rows, strict, message):
    with pytest.raises(ValueError, match=message):
        validate_compositions("train", rows, 3, 0, 8, strict=strict)


def test_valid_compositions_and_disjoint_splits():
    rows = validate_compositions("ood", [[0, 0, 1], [2, 3, 4]], 3, 0, 8, strict=False)
    assert rows.dtype == np.int64 and rows.tolist() == [[0, 0, 1], [2, 3, 4]]
    check_disjoint(rows[:1], rows[1:])
    with pytest.raises(ValueError, match="overlap in 1 rows, e.g. \\(2, 3, 4\\)"):
        check_disjoint(rows, rows[1:])
