"""How one fuzzy-logic instance is drawn: `FuzzyLogicPicture`, read from an instance's tokens and labels, and its two
renderings, an HTML table for the explorer (`html`) and a matplotlib axes for papers (`plot`). The task's
`FuzzyLogic.instance_html` and `FuzzyLogic.plot_instance` hand their instance to these; no task state or torch here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class FuzzyLogicPicture:
    """What both renderers draw of one instance (L = n_variables)."""

    examples: np.ndarray
    """The in-context examples [seq_len, L + 1]: columns x1..xL and f(x), the query last (its f(x) zeroed)."""
    formula: str
    """The function in words: its terms OR-ed ("terms unknown" when the labels do not give them)."""
    novel: bool
    """Whether the instance uses a term never trained on (a `novel_terms` instance)."""
    held_out: bool
    """Whether the instance's combination of terms is one of the held-out (`ood`) ones."""
    prediction: Any
    """The model's answer at the query, or None."""
    target: Any
    """The true answer at the query, or None."""
    split: str
    """The split named in the title ('' for none)."""

    @classmethod
    def read(
        cls,
        tokens: np.ndarray,
        labels: Mapping[str, Any],
        *,
        seq_len: int,
        names: Sequence[str],
        n_known_terms: int,
        ood: np.ndarray,
    ) -> FuzzyLogicPicture:
        """The picture of an instance given as its tokens [seq_len, L + 1] and labels.

        `names` are the task's 2^L term names (`fuzzy_logic.term_names`), indexed by the `terms` label; terms from
        `n_known_terms` on are novel, and `ood` holds the held-out combinations, one sorted row each. `terms`,
        `prediction`, `target` and `split` are read when present.

        Raises:
            ValueError: tokens of another shape than this task's instances.
        """
        tokens = np.asarray(tokens, dtype=np.float32)
        d_in = len(names).bit_length()  # 2^L names: L variables and f(x)
        if tokens.shape != (seq_len, d_in):
            raise ValueError(f"tokens have shape {tokens.shape}; an instance of this fuzzy-logic task is "
                             f"[{seq_len}, {d_in}]")
        terms = np.asarray(labels["terms"]).reshape(-1) if "terms" in labels else None
        formula = " ∨ ".join(f"({names[int(t)]})" for t in terms) if terms is not None else "terms unknown"
        novel = terms is not None and bool((terms >= n_known_terms).any())
        held_out = terms is not None and bool((ood == np.sort(terms)).all(axis=1).any())
        return cls(examples=tokens, formula=formula, novel=novel, held_out=held_out,
                   prediction=labels.get("prediction"), target=labels.get("target"),
                   split=str(labels.get("split", "")))

    def html(self) -> str:
        """The function f = OR of its terms, then the examples (x1..xL, f(x)) as a table shaded by value, the query
        last with the prediction beside the target, and a red mark for a held-out combination or novel terms."""
        n_var = self.examples.shape[1] - 1

        def cell(value: Any) -> str:
            return f'<td style="background:rgba(21,101,192,{0.08 + 0.6 * float(value):.2f})">{value:.2f}</td>'

        head = "".join(f"<th>x{j + 1}</th>" for j in range(n_var)) + "<th>f(x)</th>"
        rows = []
        for t, row in enumerate(self.examples):
            inputs = "".join(cell(v) for v in row[:n_var])
            if t < len(self.examples) - 1:
                rows.append(f"<tr>{inputs}{cell(row[-1])}</tr>")
                continue
            answer = "?"
            if self.prediction is not None:
                answer = f"<b>{float(self.prediction):.2f}</b>"
                if self.target is not None:
                    answer += f" (true {float(self.target):.2f})"
            rows.append(f'<tr class="lc-query" style="border-top:2px solid #333">{inputs}<td>{answer}</td></tr>')
        marks = "".join(f' <span style="background:#c62828;color:#fff;padding:0 4px;border-radius:3px">{m}</span>'
                        for m, on in (("held-out combination", self.held_out), ("novel terms", self.novel))
                        if on)
        split = f" · {self.split}" if self.split else ""
        return (f'<div class="lc-instance" style="font:11px sans-serif"><b>fuzzy logic{split}</b>{marks}'
                f'<div style="margin:3px 0">f = {self.formula}</div>'
                f'<table style="border-collapse:collapse;text-align:right"><tr>{head}</tr>{"".join(rows)}'
                "</table></div>")

    def plot(self, ax: Any = None) -> Any:
        """The picture of `html` on a matplotlib axes (a new figure's when `ax` is None): the examples as a heatmap
        (columns x1..xL and f(x), the query last) under the function. Returns the axes."""
        import matplotlib.pyplot as plt

        examples = self.examples.copy()
        ax = plt.subplots(figsize=(2.6, 4))[1] if ax is None else ax
        shown = np.ma.masked_array(examples, mask=np.zeros_like(examples, dtype=bool))
        shown.mask[-1, -1] = True
        ax.imshow(shown, cmap="Blues", vmin=0, vmax=1.4, aspect="auto")
        for (t, j), value in np.ndenumerate(examples):
            last = t == len(examples) - 1 and j == examples.shape[1] - 1
            text = "?" if last and self.prediction is None else (f"{float(self.prediction):.2f}" if last
                                                                 else f"{value:.2f}")
            ax.text(j, t, text, ha="center", va="center", fontsize=5.5, fontweight="bold" if last else None)
        ax.axhline(len(examples) - 1.5, color="black", lw=1)
        ax.set_xticks(range(examples.shape[1]), [f"x{j + 1}" for j in range(examples.shape[1] - 1)] + ["f(x)"],
                      fontsize=7)
        ax.set_yticks([])
        ax.set_title("f = " + self.formula.replace(" ∨ ", " ∨\n"), fontsize=7)
        return ax
