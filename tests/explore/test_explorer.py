"""Instance pictures and the explorer without a browser: what each task draws, the page's data, bad input.
(tests/explore/test_explorer_browser.py drives the page in Chromium.)"""

from __future__ import annotations

import base64
import gzip
import json
import re
from types import SimpleNamespace

import matplotlib
import numpy as np
import pytest

import latentcode as lc
from latentcode.explore.colours import label_values
from latentcode.explore.explorer import NoRendererWarning, has_renderer, instance_picture
from latentcode.explore.page import page_data
from latentcode.model.transformer import build_model
from latentcode.tasks.fuzzy_logic import FuzzyLogic, term_names
from latentcode.tasks.sraven import RULE_NAMES, SRaven
from probes import LatentCodes

matplotlib.use("agg")


def sraven_instance(split: str, seed: int = 0):
    task = SRaven()
    batch = task.sample(1, split, seed=seed, unpermuted=True)
    return task, batch.x[0].numpy(), batch


def test_sraven_picture_shows_panels_answer_rules_and_held_out_mark():
    task, tokens, batch = sraven_instance("ood")
    panels = batch.labels["panels"][0].numpy().reshape(9, 4)
    answer = panels[8].copy()
    answer[1] = (answer[1] + 1) % 8  # one wrong feature
    labels = {"rules": batch.labels["rules"][0].numpy(), "answer": answer, "truth": panels[8]}
    svg = task.instance_html(tokens, labels)
    values = [int(v) for v in re.findall(r">(\d)</text>", svg)]
    # panels 1-8, then panel 9's answer with the true value under the wrong cell
    assert values == panels.ravel()[:32].tolist() + [*answer[:1], answer[1], panels[8, 1], *answer[2:]]
    assert svg.count('stroke="#c62828"') == 1  # the one wrong cell
    for k, rule in enumerate(batch.labels["rules"][0].tolist()):
        assert f"feature {k + 1}: {RULE_NAMES[rule]}" in svg
    assert "held-out rule set" in svg
    _, train_tokens, train = sraven_instance("train")
    assert "held-out rule set" not in task.instance_html(train_tokens, {"rules": train.labels["rules"][0].numpy()})
    blank = task.instance_html(tokens, {})  # nothing known about panel 9: four blanks
    assert blank.count(">?</text>") == 4
    ax = task.plot_instance(tokens, labels)
    assert len(ax.patches) == 9 + 36


def test_fuzzy_picture_shows_terms_examples_and_query():
    task = FuzzyLogic(seq_len=6)
    batch = task.sample(1, "ood", seed=3)
    terms = batch.labels["terms"][0].numpy()
    page = task.instance_html(batch.x[0].numpy(), {"terms": terms, "prediction": 0.25, "target": float(batch.y[0])})
    names = term_names(4)
    assert f"f = ({names[terms[0]]}) ∨ ({names[terms[1]]})" in page
    assert page.count("<tr") == 1 + 6
    assert f"{float(batch.x[0, 2, 1]):.2f}" in page and f"<b>0.25</b> (true {float(batch.y[0]):.2f})" in page
    assert "held-out combination" in page
    assert task.plot_instance(batch.x[0].numpy(), {"terms": terms}).get_title().startswith("f = ")


def test_a_task_without_renderer_falls_back_to_a_table_and_says_so():
    class Plain(SRaven):
        instance_html = lc.CompositionalTask.instance_html
        plot_instance = lc.CompositionalTask.plot_instance

    codes = codes_of(SRaven(), n=4)
    assert has_renderer(SRaven()) and not has_renderer(Plain())
    with pytest.warns(NoRendererWarning, match="draws no instance picture"):
        table = instance_picture(codes, 0, task=Plain())
    assert "<table" in table and "plain table" in table
    assert instance_picture(codes, 0).startswith("<svg")


def codes_of(task, n=6, model=None) -> LatentCodes:
    model = model or build_model(task, "softmax", "tiny")
    return lc.extract_latent_codes(model, task, ("train", "ood"), n, progress=False)


def test_bad_input_gets_one_line():
    codes = codes_of(SRaven())
    with pytest.raises(ValueError, match=r"label='colour' is not a label of these codes; colour by one of: split, "):
        lc.explore(codes, label="colour", method="pca")
    bare = LatentCodes(codes=codes.codes, labels=codes.labels, split=codes.split, meta=codes.meta)
    with pytest.raises(ValueError, match="these codes carry no instances"):
        lc.explore(bare, method="pca")
    with pytest.raises(ValueError, match="name no task"):
        lc.explore(LatentCodes(codes=codes.codes, labels={}, split=codes.split, inputs=codes.inputs), method="pca")
    with pytest.raises(ValueError, match="neither a shipped model"):
        lc.explore("no-such-model")
    with pytest.raises(ValueError, match="not among the codes' layers"):
        lc.explore(codes, layer=7, method="pca")


def unpack(text: str) -> bytes:
    return gzip.decompress(base64.b64decode(text))


def test_page_data_matches_the_run():
    task = SRaven()
    model = build_model(task, "softmax", "tiny")
    explorer = lc.explore(SimpleNamespace(model=model, task=task), n_samples=5, method="pca")
    data = page_data(explorer)
    n = explorer.codes.n_samples
    assert data["n"] == n == 10
    # the per-head code at the site is the codes' last layer, exactly
    site = np.frombuffer(unpack(data["codes"]), np.float32).reshape(n, *data["code_shape"])
    np.testing.assert_array_equal(site, explorer.codes.codes[:, -1])
    # the pattern is the model's own, recomputed here from a fresh batch (within the 16-level quantization)
    batch = task.sample(5, "train", seed=0, unpermuted=True)
    _, cache = model.run_with_cache(batch.x, names_filter=["blocks.1.attn.hook_pattern"])
    expected = cache["blocks.1.attn.hook_pattern"][:, :, [35], :].detach().numpy()
    shape = data["pattern"]["shape"]
    packed = np.frombuffer(unpack(data["pattern"]["data"]), np.uint8)
    quantized = np.stack([packed >> 4, packed & 15], axis=1).ravel()[: n * np.prod(shape)].reshape(n, *shape)[:5]
    low = np.frombuffer(unpack(data["pattern"]["low"]), np.float32).reshape(n, shape[0])[:5]
    high = np.frombuffer(unpack(data["pattern"]["high"]), np.float32).reshape(n, shape[0])[:5]
    restored = low[:, :, None, None] + quantized / 15 * (high - low)[:, :, None, None]
    np.testing.assert_allclose(restored, expected, atol=(high - low).max() / 30 + 1e-6)
    # the site's code sits inside that pattern row at the site's keys
    np.testing.assert_allclose(expected[:, :, 0][:, :, [27, 31]], explorer.codes.codes[:5, -1, :, 0], rtol=1e-6)
    # the answer drawn in panel 9 is the model's prediction at every query token
    pictures = json.loads(unpack(data["pictures"]))
    first = pictures[data["picture_index"][0]]
    answer = explorer.extra["answer"][0]
    assert re.findall(r'middle">(\d)</text>', first)[32:36] == [str(v) for v in answer]
    index, names = label_values(explorer.codes, "rule")
    assert data["labels"]["rule"]["names"] == names and names == [RULE_NAMES[r] for r in
                                                                  np.unique(explorer.codes.labels["rule"])]
    fig = explorer.figure(row=3)
    assert len(fig.axes) == 3
    assert explorer._repr_html_().startswith('<iframe class="lc-explorer" srcdoc="&lt;!DOCTYPE html&gt;')
