"""Every recipe's verdict table: per paper claim, the paper's value, ours, a verdict and the
class of the reason for a gap.

Verdicts: `matched` (our number agrees within the recipe's tolerance), `trend` (same
direction, different size), `contradicted` (the opposite direction), `missing` (we have no
number for it). Reason classes, for anything but `matched`: `data` (the paper's trace is not
available; `why` names the command to run with it), `model` (a mechanism we simplify), `paper`
(a misprint, a lost parameter). A `matched` claim keeps no reason or `why`.

A recipe builds its `Claim`s from its results and hands them to `markdown` (reports, docs),
`html` (the sweep report) or `print_table` (the terminal).
"""

from __future__ import annotations

import html as _html
from dataclasses import dataclass

VERDICTS = ("matched", "trend", "contradicted", "missing")
REASONS = ("data", "model", "paper")


@dataclass(frozen=True)
class Claim:
    claim: str
    paper: str
    ours: str
    verdict: str
    reason: str = ""
    why: str = ""

    def __post_init__(self):
        # A matched claim has no gap to explain: callers pass the reason they would give for a
        # gap whatever the verdict, and it is dropped here.
        if self.verdict == "matched":
            object.__setattr__(self, "reason", "")
            object.__setattr__(self, "why", "")
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict `{self.verdict}`: expected one of {', '.join(VERDICTS)}")
        if self.reason and self.reason not in REASONS:
            raise ValueError(f"reason `{self.reason}`: expected one of {', '.join(REASONS)}")
        if self.verdict != "matched" and not self.reason:
            raise ValueError(f"claim `{self.claim}`: a `{self.verdict}` verdict needs a reason class")


def judge(paper: float, ours: float | None, tolerance: float = 0.2) -> str:
    """A number against the paper's: `matched` within `tolerance` of it (relative), `trend` on
    the same side of zero, `contradicted` on the other side (or at zero), `missing` if None."""
    if ours is None or ours != ours:  # None or NaN
        return "missing"
    if abs(ours - paper) <= tolerance * abs(paper):
        return "matched"
    if paper != 0 and ours * paper > 0:
        return "trend"
    return "contradicted"


def judge_share(share: float | None, matched: float = 0.75) -> str:
    """A claim held in a share of the cases ('in most cases'): `matched` from `matched` up,
    `trend` above one half, `contradicted` at or below it."""
    if share is None or share != share:
        return "missing"
    if share >= matched:
        return "matched"
    return "trend" if share > 0.5 else "contradicted"


HEADER = ("the paper reports", "paper", "ours", "verdict", "reason", "why")


def _cells(c: Claim) -> tuple[str, ...]:
    return (c.claim, c.paper, c.ours, c.verdict, c.reason or "–", c.why)


def markdown(claims: list[Claim]) -> str:
    """The table as Markdown (one row per claim)."""
    esc = lambda s: s.replace("|", "\\|")  # noqa: E731
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(esc(x) for x in _cells(c)) + " |" for c in claims]
    return "\n".join(lines) + "\n"


def html(claims: list[Claim]) -> str:
    """The table as HTML (a sweep report's section)."""
    head = "".join(f"<th>{_html.escape(h)}</th>" for h in HEADER)
    rows = "".join("<tr>" + "".join(f"<td>{_html.escape(x)}</td>" for x in _cells(c)) + "</tr>" for c in claims)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def print_table(claims: list[Claim], console, title: str = "Verdict, claim by claim") -> None:
    """The table on a rich console."""
    from rich.table import Table

    t = Table(title=title, show_lines=True)
    for h in HEADER:
        t.add_column(h, overflow="fold")
    for c in claims:
        t.add_row(*_cells(c))
    console.print(t)
