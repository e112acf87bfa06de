"""The report's page, piece by piece: `Page` gathers the HTML body (headings, notes, warnings, preformatted text,
plotly figures, tables), `STYLE` is its stylesheet, `fold_prose` folds the long prose lines of preformatted text,
and `ReportSection` is a section a caller adds of its own (`build_report(sections=)`). What goes on the page, in
which order, is `probes.report`'s.
"""

from __future__ import annotations

import html
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from probes.run_analysis import RunAnalysis

__all__ = ["PROSE_WIDTH", "STYLE", "Page", "ReportSection", "SectionsArg", "check_sections", "fold_prose"]


@dataclass(frozen=True)
class ReportSection:
    """A section of the caller's own on the page (e.g. the demo's table over seeds): a heading, a plain-text
    table, notes under it, and its entry in summary.json.

    Attributes:
        title: the heading (also in the page's navigation).
        text: shown as preformatted text (an aligned table, `table()` of a result).
        notes: one paragraph each, under the text.
        key: summary.json key of `summary` (default: no entry).
        summary: JSON-able data for summary.json (a result's `to_dict()`).
        place: "top" (right under the navigation, before the summary) or "end" (after every other section).
    """

    title: str
    text: str = ""
    notes: Sequence[str] = ()
    key: str | None = None
    summary: Any = None
    place: Literal["top", "end"] = "top"

    def __post_init__(self) -> None:
        if self.place not in ("top", "end"):
            raise ValueError(f"place={self.place!r}; pass 'top' or 'end'")
        if self.key in ("title", "runs"):
            raise ValueError(f"key={self.key!r} is summary.json's own; choose another")


SectionsArg = Sequence[ReportSection] | Callable[[Mapping[str, "RunAnalysis"]], Sequence[ReportSection]]
"""`build_report(sections=)`: the sections, or a function of the runs' analyses that returns them (for sections
built from the analyses, such as a table of every run's decoding)."""


class Page:
    """Accumulates the HTML body; plotly figures share the one plotly.js script in the head."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.n_figures = 0

    def add(self, text: str) -> None:
        self.parts.append(text)

    def heading(self, title: str, level: int = 2) -> None:
        anchor = title.lower().replace(" ", "-")
        self.add(f'<h{level} id="{html.escape(anchor)}">{html.escape(title)}</h{level}>')

    def note(self, text: str) -> None:
        self.add(f'<p class="note">{html.escape(text)}</p>')

    def warning(self, title: str, items: list[str]) -> None:
        entries = "".join(f"<li>{html.escape(item)}</li>" for item in items)
        head = f"<strong>{html.escape(title)}</strong>"
        self.add(f'<div class="warning" role="alert">{head}<ul>{entries}</ul></div>')

    def pre(self, text: str) -> None:
        """`text` preformatted: aligned table rows keep their columns (the block scrolls sideways when wider than
        the page), prose lines are folded at `PROSE_WIDTH` characters (`fold_prose`)."""
        self.add(f"<pre>{html.escape(fold_prose(text))}</pre>")

    def section(self, section: ReportSection) -> None:
        """A caller's section: its heading, its text preformatted, its notes."""
        self.heading(section.title)
        if section.text:
            self.pre(section.text)
        for note in section.notes:
            self.note(note)

    def figure(self, display: Any) -> None:
        self.n_figures += 1
        div = display.plotly().to_html(
            full_html=False, include_plotlyjs=False, div_id=f"figure-{self.n_figures}"
        )
        self.add(f'<div class="figure">{div}</div>')

    def table(self, header: list[str], rows: list[tuple[str, list[str]]]) -> None:
        head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
        body = "".join(
            "<tr><th>"
            + html.escape(name)
            + "</th>"
            + "".join(f"<td>{html.escape(v)}</td>" for v in values)
            + "</tr>"
            for name, values in rows
        )
        self.add(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1400px; padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: right; }
tbody th { text-align: left; font-weight: normal; }
pre { background: #f6f6f6; padding: 0.8em; font-size: 0.85em; white-space: pre; overflow-x: auto; }
.note { color: #666; font-style: italic; }
.caveat { border-left: 4px solid #5b8def; padding: 0.2em 0.8em; }
.warning { background: #fff4d6; border-left: 4px solid #e0a800; padding: 0.5em 1em; margin: 1em 0; }
.warning ul { margin: 0.3em 0 0 0; padding-left: 1.2em; }
nav a { margin-right: 1em; }
"""


PROSE_WIDTH = 120
"""Characters per line of prose inside preformatted text (`fold_prose`)."""


def fold_prose(text: str, width: int = PROSE_WIDTH) -> str:
    """Fold each prose line of `text` longer than `width` onto indented continuation lines, at spaces; a line with a
    run of two or more spaces inside it is a row of an aligned table and is kept whole, so its columns stay aligned.

    >>> print(fold_prose("a long sentence " * 3, width=20))
    a long sentence a
      long sentence a
      long sentence
    >>> fold_prose("layer  test   ood")
    'layer  test   ood'
    """
    lines = []
    for line in text.split("\n"):
        if len(line) <= width or "  " in line.strip():
            lines.append(line)
        else:
            lines.extend(textwrap.wrap(line, width, subsequent_indent="  ", break_long_words=False,
                                       break_on_hyphens=False))
    return "\n".join(lines)


def check_sections(sections: Sequence[ReportSection]) -> None:
    """Refuse what is not a `ReportSection`, and two sections with one title or one summary key."""
    if not all(isinstance(s, ReportSection) for s in sections):
        raise ValueError(f"sections={list(sections)!r}: give ReportSection objects (probes.report.ReportSection)")
    for attr in ("title", "key"):
        values = [getattr(s, attr) for s in sections if getattr(s, attr) is not None]
        if len(set(values)) != len(values):
            raise ValueError(f"sections share a {attr}: {values}; give each section its own")
