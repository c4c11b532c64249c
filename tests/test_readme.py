"""Every ```python block of README.md runs as a reader would paste it, and its shown output holds.

The runner is ``hlotrace.testing.readme`` (its docstring is the reference). The convention, in
short -- an HTML comment right above a fence, invisible once rendered:

    <!-- readme-test: continues -->                 after the previous Python block of its section
    <!-- readme-test: continues Training -->        after the last Python block of section "Training"
    <!-- readme-test: env HLOTRACE_CPU_DEVICES=8 --> this environment for the block's process
    <!-- readme-test: launch --nproc 2 --cpu-devices 2 -->  run under hlotrace.distributed.launch
    (several at once: <!-- readme-test: continues Training; env A=1 -->)

Without one, a block runs alone in a fresh namespace. The blocks of one section share one
subprocess (one test below per section); a working directory of its own takes the files
they write. ``expr  # -> shown`` checks ``repr(expr)`` (or what it printed) against
``shown`` (``...``: any text); a block starting with ``>>>`` is a doctest. Bash blocks are not
run: the ``make`` targets, ``hlotrace`` command lines (parsed by the CLI's own parser) and
``python -m`` modules they name must exist. Figures the README states about the code itself
(the op count, the trace schema version) are compared with the code.

Run one section: ``.venv/bin/python -m hlotrace.testing.readme --only training``.
"""

import importlib.util
import re
import shlex
from pathlib import Path

import pytest

from hlotrace.testing import readme

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BLOCKS = readme.parse(README.read_text())
GROUPS = readme.plan(BLOCKS)


def _tail(text: str, lines: int = 60) -> str:
    return "\n".join(text.splitlines()[-lines:])


@pytest.mark.parametrize("group", GROUPS, ids=[g.name for g in GROUPS])
def test_readme_section_runs(group):
    result = readme.run_group(group, README, timeout=300)
    lines = ", ".join(str(b.line) for b in group.blocks())
    assert result.returncode == 0, f"README.md blocks at lines {lines} failed:\n{_tail(result.stdout)}"


def test_every_python_fence_is_run():
    fences = [i + 2 for i, line in enumerate(README.read_text().splitlines()) if line.strip() == "```python"]
    run = {b.line for g in GROUPS for b in g.blocks()}
    assert fences and sorted(fences) == sorted(b.line for b in readme.python_blocks(BLOCKS))
    assert set(fences) <= run


# -- the runner itself: a broken block, a wrong shown value, a continued namespace -----------


def _run(tmp_path, text: str, **kwargs):
    path = tmp_path / "README.md"
    path.write_text(text)
    groups = readme.plan(readme.parse(text))
    return [readme.run_group(g, path, **kwargs) for g in groups]


GOOD = """\
# Demo

```python
import os

x = [1, 2] + [3]
len(x)  # -> 3
os.environ.get("HLOTRACE_CPU_DEVICES")  # -> None
print("a", "b")  # -> a b
{"k": 1.5, "other": 2}  # -> {'k': 1.5, ...}
```

## Next

<!-- readme-test: continues Demo; env READMETEST_VALUE=7 -->
```python
import os

x.append(int(os.environ["READMETEST_VALUE"]))
x  # -> [1, 2, 3, 7]
```

<!-- readme-test: continues -->
  ```python
  x[-1]  # -> 7
  ```

```python
>>> 2 + 2
4
```
"""


def test_the_runner_passes_a_good_readme(tmp_path, monkeypatch):
    monkeypatch.setenv("HLOTRACE_CPU_DEVICES", "8")  # the test session's setting, not a reader's
    results = _run(tmp_path, GOOD)
    assert [r.returncode for r in results] == [0, 0, 0], "\n".join(r.stdout for r in results)


@pytest.mark.parametrize(
    "good, bad, message",
    [
        ("len(x)  # -> 3", "len(x)  # -> 4", "shows -> 4"),
        ("x = [1, 2] + [3]", "x = [1, 2] + [y]", "NameError"),
        ("x[-1]  # -> 7", "x[-1]  # -> 8", "shows -> 8"),
        (">>> 2 + 2\n4", ">>> 2 + 2\n5", "doctest example(s) failed"),
        ("x  # -> [1, 2, 3, 7]\n", "x = 1  # -> 1\n", "must end an expression statement"),
    ],
    ids=["wrong-shown-value", "name-error", "wrong-value-in-continued-block", "doctest", "check-on-assignment"],
)
def test_the_runner_fails_a_broken_block(tmp_path, good, bad, message):
    assert GOOD.count(good) == 1
    results = _run(tmp_path, GOOD.replace(good, bad))
    failed = [r for r in results if r.returncode != 0]
    assert failed and message in failed[0].stdout, "\n".join(r.stdout for r in results)
    assert "README.md:" in failed[0].stdout  # the block's place in the file is named


def test_a_fresh_block_does_not_see_another_blocks_names(tmp_path):
    text = "# A\n\n```python\nx = 1\n```\n\n```python\nx  # -> 1\n```\n"
    (first,) = _run(tmp_path, text)
    assert first.returncode != 0 and "NameError" in first.stdout


@pytest.mark.parametrize(
    "text, message",
    [
        ("<!-- readme-test: repeat 3 -->\n```python\n```\n", "unknown readme-test: directive"),
        ("<!-- readme-test: continues -->\n```python\n```\n", "there is none"),
        ("<!-- readme-test: continues Nowhere -->\n```python\n```\n", "'Nowhere'"),
        ("<!-- readme-test: env X -->\n```python\n```\n", "NAME=VALUE"),
        ("<!-- readme-test: env X=1 -->\n\ntext\n```python\n```\n", "right above a fence"),
    ],
)
def test_directive_mistakes_are_errors(text, message):
    with pytest.raises(readme.ReadmeError, match=re.escape(message)):
        readme.plan(readme.parse(text))


# -- bash blocks and stated figures ----------------------------------------------------------


def _make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    return {m.group(1) for m in re.finditer(r"^([\w-]+):", text, re.M)}


def test_the_commands_of_the_bash_blocks_exist():
    from hlotrace.tools.cli import build_parser

    commands = readme.bash_commands(BLOCKS)
    assert commands
    targets, parser, checked = _make_targets(), build_parser(), 0
    for line, words in commands:
        where = f"README.md:{line}: {shlex.join(words)}"
        if words[0] == "make":
            assert set(words[1:]) <= targets, where
        elif words[0] == "hlotrace" and "--help" not in words:
            try:
                parser.parse_args(words[1:])
            except SystemExit as exc:
                pytest.fail(f"{where}: hlotrace's parser refuses it (exit {exc.code})")
        elif words[0].endswith("python") and words[1:2] == ["-m"]:
            assert importlib.util.find_spec(words[2]) is not None, where
        else:
            continue
        checked += 1
    assert checked >= len(commands) - 1


def test_figures_the_readme_states_about_the_code():
    from hlotrace.ops import OPS
    from hlotrace.trace import SCHEMA_VERSION

    text = " ".join(README.read_text().split())
    counts = re.findall(r"(\d+) registered ops", text)
    assert counts and all(int(n) == len(OPS) for n in counts), (counts, len(OPS))
    versions = re.findall(r"schema `hlotrace\.trace`, version (\d+)", text)
    assert versions and all(int(v) == SCHEMA_VERSION for v in versions), (versions, SCHEMA_VERSION)
