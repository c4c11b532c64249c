"""The mutant catalog stays in sync with the code: every mutant's ``find`` text occurs
exactly once in its file (a refactoring that breaks one shows up here, not in the next
hour-long `make mutation` run)."""

from pathlib import Path

from hlotrace.testing.mutation.catalog import load_catalog

ROOT = Path(__file__).resolve().parent.parent


def test_every_mutant_applies_exactly_once():
    problems = []
    for mutant in load_catalog(ROOT / "tests" / "mutants"):
        path = ROOT / mutant.file
        count = path.read_text(encoding="utf-8").count(mutant.find) if path.is_file() else -1
        if count != 1:
            problems.append(f"{mutant.name}: 'find' occurs {count} times in {mutant.file}")
    assert not problems, "\n".join(problems)
