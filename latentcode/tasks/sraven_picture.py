"""How one SRAVEN instance is drawn: `SRavenPicture`, read from an instance's tokens and labels, and its two
renderings, an SVG for the explorer (`svg`) and a matplotlib axes for papers (`plot`). The task's
`SRaven.instance_html` and `SRaven.plot_instance` hand their instance to these; no task state or torch here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from latentcode.tasks.sraven_rules import RULE_NAMES


@dataclass(frozen=True)
class SRavenPicture:
    """What both renderers draw of one instance (K = n_features)."""

    panels: np.ndarray
    """Values [9, K] in presented slot order; -1 where unknown (panel 9 without an answer or prediction)."""
    truth: np.ndarray
    """The true panel 9 [K]; -1 where not given."""
    rules: np.ndarray | None
    """Each feature's rule (indices into `RULE_NAMES`), or None when the labels do not give them."""
    held_out: bool
    """Whether the instance's rule multiset is one of the held-out (`ood`) ones."""
    slot: int | None
    """The analysed slot (the `feature` label), outlined in panel 9 and named in bold."""
    shuffled: bool
    """Whether the feature slots are permuted per column (the rules are then listed without their slots)."""
    split: str
    """The split named in the title ('' for none)."""
    n_values: int
    """Values a feature takes: sets the colour of each value."""

    @classmethod
    def read(
        cls, tokens: np.ndarray, labels: Mapping[str, Any], *, n_features: int, n_values: int, ood: np.ndarray
    ) -> SRavenPicture:
        """The picture of an instance given as its one-hot tokens [9 * n_features, n_values] and labels.

        Panel 9 comes from `answer` (all slots) or `prediction` at slot `feature`, its truth from `truth` or
        `target`; `rules`, `permuted` and `split` are read when present. `ood` holds the held-out rule
        multisets, one sorted row each.

        Raises:
            ValueError: tokens of another shape than this task's instances.
        """
        tokens = np.asarray(tokens, dtype=np.float32)
        if tokens.shape != (9 * n_features, n_values):
            raise ValueError(f"tokens have shape {tokens.shape}; an instance of this SRAVEN task is "
                             f"[{9 * n_features}, {n_values}]")
        panels = np.full((9, n_features), -1, dtype=np.int64)
        panels[:8] = tokens[: 8 * n_features].argmax(-1).reshape(8, n_features)
        truth = np.full(n_features, -1, dtype=np.int64)
        slot = int(labels["feature"]) if "feature" in labels else None
        if "answer" in labels:
            panels[8] = np.asarray(labels["answer"]).reshape(n_features)
        elif slot is not None and "prediction" in labels:
            panels[8, slot] = int(labels["prediction"])
        if "truth" in labels:
            truth = np.asarray(labels["truth"]).reshape(n_features)
        elif slot is not None and "target" in labels:
            truth[slot] = int(labels["target"])
        rules = np.asarray(labels["rules"]).reshape(-1) if "rules" in labels else None
        held_out = rules is not None and bool((ood == np.sort(rules)).all(axis=1).any())
        return cls(panels=panels, truth=truth, rules=rules, held_out=held_out, slot=slot,
                   shuffled=bool(labels.get("permuted", False)), split=str(labels.get("split", "")),
                   n_values=n_values)

    @property
    def title(self) -> str:
        return "SRAVEN" + (f" · {self.split}" if self.split else "")

    def svg(self) -> str:
        """The 3x3 grid as SVG: each panel's features as coloured value cells, panel 9 blank where unknown and a
        wrong cell outlined in red with the true value beside it, each feature's rule named below (the analysed
        one in bold), and a red mark when the rule set is held out."""
        n_features, cell, gap = self.panels.shape[1], 17, 8
        width_panel = n_features * cell + 6
        height_grid = 3 * (cell + 6 + gap)
        n_lines = 1 if self.shuffled or self.rules is None else n_features
        height = 22 + height_grid + 14 * n_lines + 4
        width = max(3 * (width_panel + gap), 220)
        out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="lc-instance" width="{width}" height="{height}" '
               f'font-family="sans-serif" font-size="11">']
        out.append(f'<text x="2" y="13" font-weight="bold">{self.title}</text>')
        if self.held_out:
            out.append(f'<rect x="{width - 104}" y="2" width="102" height="15" rx="3" fill="#c62828"/>'
                       f'<text x="{width - 53}" y="13" fill="#fff" text-anchor="middle">held-out rule set</text>')
        for p in range(9):
            row, col = divmod(p, 3)
            x0, y0 = col * (width_panel + gap), 22 + row * (cell + 6 + gap)
            dash = ' stroke-dasharray="3 2"' if p == 8 else ""
            out.append(f'<rect x="{x0}" y="{y0}" width="{width_panel}" height="{cell + 6}" fill="none" '
                       f'stroke="#555"{dash}/>')
            for k in range(n_features):
                value = int(self.panels[p, k])
                x, y = x0 + 3 + k * cell, y0 + 3
                if value < 0:
                    out.append(f'<rect x="{x}" y="{y}" width="{cell - 1}" height="{cell}" fill="#eee"/>'
                               f'<text x="{x + cell / 2}" y="{y + 12}" text-anchor="middle" fill="#999">?</text>')
                    continue
                wrong = p == 8 and self.truth[k] >= 0 and self.truth[k] != value
                stroke = ' stroke="#c62828" stroke-width="2"' if wrong else ""
                fill = f"hsl({int(360 * value / self.n_values)},60%,78%)"
                out.append(f'<rect x="{x}" y="{y}" width="{cell - 1}" height="{cell}" fill="{fill}"{stroke}/>'
                           f'<text x="{x + cell / 2}" y="{y + 12}" text-anchor="middle">{value}</text>')
                if wrong:
                    out.append(f'<text x="{x + cell / 2}" y="{y0 + cell + 16}" text-anchor="middle" '
                               f'fill="#c62828" font-size="9">{int(self.truth[k])}</text>')
            if p == 8 and self.slot is not None:
                x = x0 + 3 + self.slot * cell
                out.append(f'<rect x="{x - 1}" y="{y0 + 1}" width="{cell + 1}" height="{cell + 4}" fill="none" '
                           'stroke="#1565c0" stroke-width="1.5"/>')
        y = 22 + height_grid + 10
        if self.rules is not None:
            names = [RULE_NAMES[int(r)] for r in self.rules]
            if self.shuffled:
                out.append(f'<text x="2" y="{y}">rules (slots shuffled per column): {", ".join(names)}</text>')
            else:
                for k, name in enumerate(names):
                    bold = ' font-weight="bold"' if k == self.slot else ""
                    out.append(f'<text x="2" y="{y + 14 * k}"{bold}>feature {k + 1}: {name}</text>')
        out.append("</svg>")
        return "".join(out)

    def plot(self, ax: Any = None) -> Any:
        """The picture of `svg` on a matplotlib axes (a new figure's when `ax` is None). Returns the axes."""
        import matplotlib.pyplot as plt
        from matplotlib.patches import Rectangle

        n_features = self.panels.shape[1]
        ax = plt.subplots(figsize=(3.2, 3.4))[1] if ax is None else ax
        cmap = plt.get_cmap("hsv")
        for p in range(9):
            row, col = divmod(p, 3)
            x0, y0 = col * (n_features + 1), -row * 2
            ax.add_patch(Rectangle((x0 - 0.1, y0 - 0.1), n_features + 0.2, 1.2, fill=False,
                                   ls="--" if p == 8 else "-", ec="0.3"))
            for k in range(n_features):
                value = int(self.panels[p, k])
                wrong = p == 8 and value >= 0 and self.truth[k] >= 0 and self.truth[k] != value
                face = (0.93, 0.93, 0.93) if value < 0 else (*cmap(value / self.n_values)[:3], 0.35)
                ax.add_patch(Rectangle((x0 + k, y0), 0.95, 1, fc=face, ec="#c62828" if wrong else "none",
                                       lw=2 if wrong else 0))
                ax.text(x0 + k + 0.47, y0 + 0.5, "?" if value < 0 else str(value), ha="center", va="center",
                        fontsize=8)
        if self.rules is not None:
            names = [RULE_NAMES[int(r)] for r in self.rules]
            text = ("rules: " + ", ".join(names)) if self.shuffled else "\n".join(
                f"feature {k + 1}: {name}" for k, name in enumerate(names))
            ax.text(0, -4.8, text, va="top", fontsize=7)
        ax.set_title(self.title + ("  [held-out rule set]" if self.held_out else ""), fontsize=8,
                     color="#c62828" if self.held_out else "black")
        ax.set_xlim(-0.3, 3 * (n_features + 1))
        ax.set_ylim(-4.9 - 0.35 * n_features, 1.3)
        ax.set_aspect("equal")
        ax.axis("off")
        return ax
