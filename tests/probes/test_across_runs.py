"""Decodability against generalisation across runs (`probes.across_runs`): rank correlations computed by hand."""

from __future__ import annotations

import numpy as np
import pytest

from probes.across_runs import RunPoint, across_runs, read_emergence


def _ranks(values):
    return np.argsort(np.argsort(values)).astype(float)


def test_spearman_rho_is_the_pearson_correlation_of_the_ranks():
    rng = np.random.default_rng(0)
    x, y = rng.random(12), rng.random(12)
    points = [RunPoint(f"r{i % 3}", "sraven", "hyla", 1000 * (i // 3), "3", float(a), float(b), 0.3, 0.35)
              for i, (a, b) in enumerate(zip(x, y, strict=True))]
    result = across_runs(points, n_resamples=200)
    every = next(c for c in result.correlations if c.rows == "every snapshot")
    assert every.n == 12 and every.n_runs == 3
    assert every.rho == pytest.approx(np.corrcoef(_ranks(x), _ranks(y))[0, 1])
    assert every.interval[0] <= every.rho <= every.interval[1]
    last = next(c for c in result.correlations if c.rows == "last snapshot")
    assert last.n == 3  # one row per run: its largest step


def test_read_emergence_keeps_every_row_with_a_model_accuracy(tmp_path):
    path = tmp_path / "emergence.csv"
    path.write_text("step,layer,decoding,input_only,control_task,selectivity,chance,majority,model_accuracy\n"
                    "100,0,0.5,0.4,0.3,0.2,0.125,0.39,0.2\n100,1,0.7,0.4,0.3,0.4,0.125,0.39,0.2\n"
                    "200,0,0.6,0.4,0.3,0.3,0.125,0.39,nan\n")
    points = read_emergence(path, "sraven-hyla-s0", "hyla")
    assert [(p.step, p.layer, p.decoding, p.floor) for p in points] == [(100, "0", 0.5, 0.4), (100, "1", 0.7, 0.4)]
    (tmp_path / "bad.csv").write_text("step,layer,acc\n1,0,0.5\n")
    with pytest.raises(ValueError, match="is not an emergence table: it lacks"):
        read_emergence(tmp_path / "bad.csv", "x", "hyla")
