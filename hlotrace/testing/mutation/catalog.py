"""The mutant catalog: ``tests/mutants/<family>.py`` files, each defining ``MUTANTS = [Mutant(...)]``."""

from __future__ import annotations

import dataclasses
import importlib.util
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Mutant:
    """One realistic mistake: ``find`` (exactly once in ``file``) becomes ``replace``."""

    id: str  # unique across the catalog; the family (catalog file name) is prefixed on output
    file: str  # repository-relative path of the file to change
    find: str  # exact text; must occur exactly once in the file
    replace: str  # what a rule author wrote instead
    why: str  # one line: what the author got wrong
    ops: tuple[str, ...] = ()  # ops whose property tests run first (ordering only)
    equivalent: str | None = None  # why no result can change on this backend (listed, not counted)
    family: str = ""  # set by load_catalog from the catalog file's name

    @property
    def name(self) -> str:
        return f"{self.family}/{self.id}" if self.family else self.id

    def apply(self, text: str) -> str:
        return text.replace(self.find, self.replace, 1)

    def line(self, text: str) -> int:
        """1-based line of the first character the mutant changes in ``text``."""
        pairs = zip(self.find, self.replace, strict=False)
        same = next((i for i, (a, b) in enumerate(pairs) if a != b), min(len(self.find), len(self.replace)))
        offset = text.index(self.find) + same
        return text.count("\n", 0, offset) + 1


class CatalogError(Exception):
    """The catalog is malformed or out of sync with the code; the message names each mutant."""


def load_catalog(directory: Path) -> list[Mutant]:
    """Every mutant of every ``*.py`` in ``directory`` (files starting with ``_`` are skipped)."""
    mutants: list[Mutant] = []
    problems: list[str] = []
    paths = sorted(p for p in Path(directory).glob("*.py") if not p.name.startswith("_"))
    if not paths:
        raise CatalogError(f"no catalog files in {directory}")
    for path in paths:
        spec = importlib.util.spec_from_file_location(f"hlotrace_mutants_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        entries = getattr(module, "MUTANTS", None)
        if not isinstance(entries, list | tuple):
            problems.append(f"{path}: defines no MUTANTS list")
            continue
        for entry in entries:
            if not isinstance(entry, Mutant):
                problems.append(f"{path}: {entry!r} is not a Mutant")
                continue
            mutants.append(dataclasses.replace(entry, family=path.stem, ops=tuple(entry.ops)))
    if problems:
        raise CatalogError("\n".join(problems))
    return mutants


class SourceTree:
    """Reads repository files from the working tree, or from a git revision when ``rev`` is set."""

    def __init__(self, root: Path, rev: str | None = None):
        self.root, self.rev = Path(root), rev
        self._cache: dict[str, str | None] = {}

    def read(self, path: str) -> str | None:
        if path not in self._cache:
            if self.rev is None:
                file = self.root / path
                self._cache[path] = file.read_text(encoding="utf-8") if file.is_file() else None
            else:
                proc = subprocess.run(
                    ["git", "show", f"{self.rev}:{path}"], cwd=self.root, capture_output=True, text=True
                )
                self._cache[path] = proc.stdout if proc.returncode == 0 else None
        return self._cache[path]


def validate(mutants: list[Mutant], source: SourceTree, selected: list[Mutant] | None = None) -> list[str]:
    """Problems that make the catalog unusable against ``source``, each naming its mutant.

    Ids and descriptions are checked for every mutant, the code for the ``selected`` ones
    (default: all), so that ``--only`` can still measure an older revision.
    """
    problems = []
    seen: dict[str, str] = {}
    checked = {m.name for m in (mutants if selected is None else selected)}
    for m in mutants:
        where = f"mutant {m.name}"
        if not m.id or any(c.isspace() or c == "/" for c in m.id):
            problems.append(f"{where}: the id must be non-empty, without spaces or '/'")
        if m.id in seen:
            problems.append(f"{where}: duplicate id (also in {seen[m.id]})")
        seen.setdefault(m.id, m.family)
        if not m.why.strip() or "\n" in m.why:
            problems.append(f"{where}: 'why' must be one non-empty line")
        if m.equivalent is not None and not m.equivalent.strip():
            problems.append(f"{where}: 'equivalent' must give the reason")
        if m.find == m.replace:
            problems.append(f"{where}: replace is the same as find")
        if m.name not in checked:
            continue
        text = source.read(m.file)
        if text is None:
            problems.append(f"{where}: file {m.file} does not exist")
            continue
        count = text.count(m.find) if m.find else 0
        if count != 1:
            found = "not found" if count == 0 else f"found {count} times"
            problems.append(f"{where}: find text {found} in {m.file} (it must occur exactly once): {m.find!r}")
            continue
        try:
            compile(m.apply(text), m.file, "exec")
        except SyntaxError as exc:
            problems.append(f"{where}: the mutated {m.file} does not parse: {exc}")
    return problems
