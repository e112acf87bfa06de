"""Each package's deprecation helper: a renamed keyword keeps working with a DeprecationWarning that points at the
caller, and names removed in the 0.3 clean break fail with Python's own error."""

from __future__ import annotations

import warnings

import pytest

import latentcode.deprecation
import probes.deprecation
from probes import decode_rules, rule_similarity


@pytest.mark.parametrize("helper", [probes.deprecation, latentcode.deprecation], ids=["probes", "latentcode"])
def test_renamed_kwargs_warns_at_the_caller_and_rejects_both_names(helper):
    @helper.renamed_kwargs(old="new")
    def f(*, new=None):
        return new

    with pytest.warns(DeprecationWarning, match=r"f\(old=\.\.\.\) is deprecated; use new=") as caught:
        assert f(old=3) == 3
    assert [w.filename for w in caught if "f(old=" in str(w.message)] == [__file__]
    with pytest.raises(TypeError, match="got both old= .* and new="):
        f(old=1, new=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert f(new=5) == 5


@pytest.mark.parametrize("helper", [probes.deprecation, latentcode.deprecation], ids=["probes", "latentcode"])
def test_warn_renamed_points_at_the_user_of_the_old_attribute(helper):
    class Thing:
        @property
        def old(self):
            helper.warn_renamed("Thing.old", "Thing.new")
            return 1

    with pytest.warns(DeprecationWarning, match=r"Thing.old is deprecated; use Thing.new") as caught:
        assert Thing().old == 1
    assert [w.filename for w in caught if "Thing.old" in str(w.message)] == [__file__]


def test_names_removed_in_the_clean_break_fail_plainly(sraven):
    with pytest.raises(TypeError, match="eval_splits"):
        decode_rules(sraven, layers="last", eval_splits="ood", progress=False)
    with pytest.raises(TypeError, match="layers"):
        rule_similarity(sraven, layers="last")
    assert not hasattr(sraven, "get_label") and not hasattr(type(sraven), "n")
