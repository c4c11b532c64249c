"""The Markdown report: one row per mutant, the equivalent mutants, and the kill ratios."""

from __future__ import annotations

from dataclasses import dataclass, field

from hlotrace.testing.mutation.catalog import Mutant
from hlotrace.testing.mutation.runner import PROPERTY_FILE, Verdict

BEGIN, END = "<!-- mutation-table:begin -->", "<!-- mutation-table:end -->"
ANY = "any column"  # the summary row of mutants killed by at least one column


@dataclass
class Results:
    columns: list[str]
    mutants: list[Mutant]
    lines: dict[str, str]  # mutant name -> "file:line"
    verdicts: dict[str, dict[str, Verdict]] = field(default_factory=dict)  # mutant name -> column -> verdict
    targets: dict[str, float] = field(default_factory=dict)
    wall_seconds: float = 0.0
    header: str = ""

    def counted(self) -> list[Mutant]:
        return [m for m in self.mutants if m.equivalent is None and m.name in self.verdicts]

    def ratio(self, column: str) -> tuple[int, int]:
        """(killed, counted) in ``column``; ANY: killed by at least one column. A mutant the
        column cannot test (n/a) is not counted there."""
        if column == ANY:
            counted = self.counted()
            return sum(any(v.killed for v in self.verdicts[m.name].values()) for m in counted), len(counted)
        counted = [m for m in self.counted() if not self.verdicts[m.name][column].not_applicable]
        return sum(self.verdicts[m.name][column].killed for m in counted), len(counted)

    def below_targets(self) -> list[str]:
        missed = []
        for column, target in self.targets.items():
            killed, total = self.ratio(column)
            if total and killed / total < target:
                missed.append(f"{column}: {killed}/{total} = {killed / total:.1%} < {target:.0%}")
        return missed


def short_test(nodeid: str) -> str:
    """``test_compiled_matches_eager[max]`` for property tests, else ``file_stem::test[param]``."""
    if nodeid.startswith(PROPERTY_FILE + "::"):
        return nodeid.split("::", 1)[1]
    return nodeid.removeprefix("tests/").replace(".py::", "::", 1)


def cell(verdict: Verdict | None, short: bool = False) -> str:
    if verdict is None:
        return "not run"
    if verdict.error:
        return "ERROR (nothing tested)"
    if verdict.not_applicable:
        return f"n/a ({verdict.not_applicable})" if not short else "n/a"
    if verdict.timed_out:
        return "killed (timeout)"
    if not verdict.killed:
        return f"SURVIVED ({verdict.by})" if verdict.by and not short else "SURVIVED"
    text = f"killed: {short_test(verdict.by)}"
    return text if short or not verdict.via or verdict.via == "hint" else f"{text} (via {verdict.via})"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return lines + ["| " + " | ".join(_md(c) for c in row) + " |" for row in rows]


def _duration(seconds: float) -> str:
    minutes, seconds = divmod(round(seconds), 60)
    return f"{minutes}m {seconds:02d}s" if minutes else f"{seconds}s"


def render(results: Results) -> str:
    out = [results.header, ""] if results.header else []
    rows = []
    for m in results.counted():
        verdicts = results.verdicts[m.name]
        rows.append([f"`{m.name}`", results.lines[m.name], m.why] + [cell(verdicts.get(c)) for c in results.columns])
    out += _table(["mutant", "change", "why", *results.columns], rows)
    equivalent = [m for m in results.mutants if m.equivalent is not None]
    if equivalent:
        out += ["", "Equivalent mutants (cannot change a result on this backend; not counted):", ""]
        checked = any(m.name in results.verdicts for m in equivalent)
        head = ["mutant", "change", "why it is equivalent"] + (["verdicts"] if checked else [])
        rows = []
        for m in equivalent:
            row = [f"`{m.name}`", results.lines[m.name], m.equivalent]
            if checked:
                verdicts = results.verdicts.get(m.name, {})
                row.append(", ".join(f"{c}: {cell(verdicts.get(c), short=True)}" for c in results.columns))
            rows.append(row)
        out += _table(head, rows)
    out += ["", *summary_lines(results)]
    return "\n".join(out) + "\n"


def summary_lines(results: Results) -> list[str]:
    counted = results.counted()
    equivalent = sum(m.equivalent is not None for m in results.mutants)
    lines = [f"Non-equivalent mutants: {len(counted)} (equivalent, not counted: {equivalent}).", ""]
    rows = []
    for column in results.columns + ([ANY] if len(results.columns) > 1 else []):
        killed, total = results.ratio(column)
        target = results.targets.get(column)
        ratio = f"{killed / total:.1%}" if total else "-"
        verdict = "" if target is None or not total else (" (met)" if killed / total >= target else " (missed)")
        rows.append([column, f"{killed}/{total}", ratio, f"{target:.0%}{verdict}" if target is not None else "-"])
    lines += _table(["column", "killed", "ratio", "target"], rows)
    survivors = [
        m.name for m in counted if not all(v.killed or v.not_applicable for v in results.verdicts[m.name].values())
    ]
    if survivors:
        lines += ["", "Survivors (in at least one column): " + ", ".join(f"`{s}`" for s in survivors) + "."]
    lines += ["", f"Wall time: {_duration(results.wall_seconds)}."]
    return lines


def progress_line(index: int, total: int, mutant: Mutant, verdicts: dict[str, Verdict], seconds: float) -> str:
    parts = []
    for column, verdict in verdicts.items():
        text = cell(verdict, short=not verdict.by or verdict.killed)
        if verdict.killed and not verdict.timed_out:
            by = short_test(verdict.by)
            text = (f"killed ({by})" if by.startswith(("crashed", "exit status")) else f"killed by {by}") + (
                f" (via {verdict.via})" if verdict.via else ""
            )
        parts.append(f"{column}: {text}")
    width = len(str(total))
    return f"[{index:{width}}/{total}] {mutant.name} ... {'; '.join(parts)} ({seconds:.1f}s)"


def update_between_markers(path, text: str) -> None:
    """Replace what lies between the mutation-table markers of ``path`` with ``text``."""
    content = path.read_text(encoding="utf-8")
    start, end = content.index(BEGIN) + len(BEGIN), content.index(END)
    path.write_text(content[:start] + "\n" + text.strip() + "\n" + content[end:], encoding="utf-8")


def has_markers(path) -> bool:
    content = path.read_text(encoding="utf-8")
    return BEGIN in content and END in content and content.index(BEGIN) < content.index(END)
