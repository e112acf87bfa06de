"""Old names keep working for a release, with a DeprecationWarning that points at the caller."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from probes import decode_rules, rule_similarity, topographic_similarity
from probes.deprecation import renamed_kwargs


def test_renamed_kwargs_warns_at_the_caller_and_rejects_both_names():
    @renamed_kwargs(old="new")
    def f(*, new=None):
        return new

    with pytest.warns(DeprecationWarning, match=r"f\(old=\.\.\.\) is deprecated; use new=") as caught:
        assert f(old=3) == 3
    assert caught[0].filename == __file__
    with pytest.raises(TypeError, match="got both old= .* and new="):
        f(old=1, new=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert f(new=5) == 5


def test_old_keywords_give_the_same_results(sraven):
    with pytest.warns(DeprecationWarning, match="eval_splits"):
        old = decode_rules(sraven, layers="last", eval_splits="ood", progress=False)
    new = decode_rules(sraven, layers="last", splits="ood", progress=False)
    assert old.accuracy("ood").tolist() == new.accuracy("ood").tolist() and new.splits == ["ood"]
    with pytest.warns(DeprecationWarning, match="assignment"):
        old_topo = topographic_similarity(sraven, assignment="rules", layers="all", n_pairs=500)
    new_topo = topographic_similarity(sraven, label="rules", layers="all", n_pairs=500)
    np.testing.assert_array_equal(old_topo.rho, new_topo.rho)
    with pytest.warns(DeprecationWarning, match="TopographicResult.assignment"):
        assert new_topo.assignment == new_topo.label == "rules"
    with pytest.warns(DeprecationWarning, match="layers"):
        old_sim = rule_similarity(sraven, layers="last")
    np.testing.assert_array_equal(old_sim.similarity, rule_similarity(sraven, layer="last").similarity)


def test_old_attribute_names(sraven):
    with pytest.warns(DeprecationWarning, match="LatentCodes.n is deprecated; use LatentCodes.n_samples"):
        assert sraven.n == sraven.n_samples == sraven.codes.shape[0]
    with pytest.warns(DeprecationWarning, match="get_label"):
        np.testing.assert_array_equal(sraven.get_label("rule"), sraven.label_values("rule"))
    baseline = decode_rules(sraven, layers="last", splits="ood", progress=False).baselines["ood"]
    with pytest.warns(DeprecationWarning, match="Baseline.n"):
        assert baseline.n == baseline.n_samples == int((sraven.split == "ood").sum())


def test_warning_points_at_the_caller_through_every_decorator(sraven):
    with pytest.warns(DeprecationWarning) as caught:
        decode_rules(sraven, layers="last", eval_splits="ood", progress=False)
        rule_similarity(sraven, layers="last")
    assert [w.filename for w in caught] == [__file__, __file__]
