"""Run the README's Python blocks as a reader would paste them (``tests/test_readme.py``).

    python -m hlotrace.testing.readme [README.md] [--list] [--only SECTION]

Every fenced ```` ```python ```` block of the README runs, each in a fresh namespace, one
subprocess per section (its working directory a temporary one, so files a block writes go
there). A block says how it runs with an HTML comment on the line(s) right above its fence
(invisible once rendered); several directives share one comment, separated by ``;``:

``<!-- readme-test: continues -->``
    the block runs after the previous Python block of its section, in its namespace.
``<!-- readme-test: continues Training -->``
    the block runs after the last Python block of the section titled ``Training`` (and what
    that one continues), in their namespace; they are run again in this block's process.
``<!-- readme-test: env HLOTRACE_CPU_DEVICES=8 -->``
    the process runs with these environment variables (``NAME=VALUE`` words).
``<!-- readme-test: launch --nproc 2 --cpu-devices 2 -->``
    the process is ``python -m hlotrace.distributed.launch`` with these options: the block
    runs in every process of the job.

A block continuing another takes that one's ``env`` and ``launch`` too. Shown output is
checked where a comment says ``# -> EXPECTED`` after an expression statement (its last
line): the value's ``repr`` (or, for a call that returns None after printing, what it
printed) must match EXPECTED, where ``...`` stands for any text and runs of whitespace for
one space. A block whose first line starts with ``>>>`` is run as a doctest (ELLIPSIS,
NORMALIZE_WHITESPACE). ```` ```bash ```` blocks are not run; ``bash_commands()`` lists
their ``make``, ``hlotrace`` and ``python -m`` commands for the test to check.

A block's process inherits the caller's environment except its ``HLOTRACE_*`` settings
other than the compile cache's and the platform's (a reader's shell has none of the test
session's, such as tests/distributed's 8 CPU devices). This module imports nothing of
hlotrace's own: the child (``_run_steps``) imports what the blocks import.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import io
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import textwrap
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

DIRECTIVE = "readme-test:"
_FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[\w+-]*)[^`]*$")  # an info string may follow
_HEADING = re.compile(r"^(#{1,6})\s+(?P<title>.+?)\s*#*\s*$")
_COMMENT = re.compile(r"^\s*<!--\s*(?P<body>.*?)\s*-->\s*$")
_CHECK = re.compile(r"^#\s*->\s?(?P<expected>.*)$")
_LAUNCHER = "hlotrace.distributed.launch"
# The HLOTRACE_* variables a block's process inherits: where compiled programs go and which
# platform runs them. Others are the caller's settings a reader's shell would not have
# (tests/distributed's HLOTRACE_CPU_DEVICES=8, a first-call mode); a block asks with ``env``.
_INHERITED = {"HLOTRACE_CACHE_DIR", "HLOTRACE_CACHE_MAX_BYTES", "HLOTRACE_PLATFORM", "HLOTRACE_PJRT_PLUGIN"}


class ReadmeError(Exception):
    """The README breaks the block convention (an unknown directive, a dangling continues)."""


@dataclass(frozen=True)
class Block:
    """One fenced block: ``line`` is its first code line in the file (1-based)."""

    line: int
    section: str
    language: str
    code: str
    continues: str | None = None  # None: fresh; "": the previous block of its section; else a section
    env: tuple[tuple[str, str], ...] = ()
    launch: tuple[str, ...] = ()


@dataclass
class Group:
    """One subprocess: ``steps`` are (block, namespace number) in the order they run."""

    name: str
    env: dict[str, str]
    launch: tuple[str, ...]
    steps: list[tuple[Block, int]] = field(default_factory=list)

    def blocks(self) -> list[Block]:
        return [block for block, _ in self.steps]


def parse(text: str) -> list[Block]:
    """Every fenced block of a Markdown text, with its section and directives."""
    lines = text.splitlines()
    blocks, section, pending, i = [], "", [], 0
    while i < len(lines):
        line = lines[i]
        heading = _HEADING.match(line)
        fence = _FENCE.match(line)
        comment = _COMMENT.match(line)
        if heading and not line.startswith(" "):
            section, pending = heading.group("title"), []
        elif comment and comment.group("body").startswith(DIRECTIVE):
            pending.append((i + 1, comment.group("body")[len(DIRECTIVE) :]))
        elif fence:
            indent, language = fence.group("indent"), fence.group("lang")
            end = i + 1
            while end < len(lines) and lines[end].strip() != "```":
                end += 1
            if end == len(lines):
                raise ReadmeError(f"line {i + 1}: the fence opened here is never closed")
            body = [ln[len(indent) :] if ln.startswith(indent) else ln.lstrip() for ln in lines[i + 1 : end]]
            options = _directives(pending)
            blocks.append(Block(i + 2, section, language, textwrap.dedent("\n".join(body)) + "\n", **options))
            pending, i = [], end
        elif line.strip():
            if pending:
                raise ReadmeError(f"line {pending[0][0]}: a {DIRECTIVE} comment must sit right above a fence")
        i += 1
    return blocks


def _directives(pending: list[tuple[int, str]]) -> dict:
    options: dict = {}
    for line, body in pending:
        for part in filter(None, (p.strip() for p in body.split(";"))):
            word, _, rest = part.partition(" ")
            rest = rest.strip()
            if word == "continues":
                options["continues"] = rest
            elif word == "env":
                pairs = [w.partition("=") for w in shlex.split(rest)]
                if not pairs or any(not sep or not name for name, sep, _ in pairs):
                    raise ReadmeError(f"line {line}: env takes NAME=VALUE words, got {rest!r}")
                options["env"] = tuple((name, value) for name, _, value in pairs)
            elif word == "launch":
                options["launch"] = tuple(shlex.split(rest))
            else:
                raise ReadmeError(f"line {line}: unknown {DIRECTIVE} directive {word!r} (continues, env, launch)")
    return options


def python_blocks(blocks: list[Block]) -> list[Block]:
    return [b for b in blocks if b.language == "python"]


def chain(block: Block, blocks: list[Block]) -> list[Block]:
    """The blocks ``block`` runs after, then itself."""
    if block.continues is None:
        return [block]
    if block.continues == "":
        earlier = [b for b in blocks if b.section == block.section and b.line < block.line]
        where = f"the previous Python block of section {block.section!r}"
    else:
        earlier = [b for b in blocks if b.section == block.continues]
        where = f"a Python block of section {block.continues!r}"
    if not earlier:
        raise ReadmeError(f"line {block.line}: 'continues' needs {where}, and there is none")
    return [*chain(earlier[-1], blocks), block]


def plan(blocks: list[Block]) -> list[Group]:
    """One group per section and (env, launch): the section's Python blocks in order, a
    continued block's predecessors run again only where they ran in another process."""
    code = python_blocks(blocks)
    groups: dict[tuple, Group] = {}
    for block in code:
        steps = chain(block, code)
        env = {name: value for b in steps for name, value in b.env}
        launch = next((b.launch for b in reversed(steps) if b.launch), ())
        key = (block.section, tuple(sorted(env.items())), launch)
        if key not in groups:
            name = _slug(block.section)
            if name in {g.name for g in groups.values()}:
                name += f"-{block.line}"
            groups[key] = Group(name, env, launch)
        group = groups[key]
        last_in = {}  # namespace -> the block that ran last in it
        for b, namespace in group.steps:
            last_in[namespace] = b
        before = steps[-2] if len(steps) > 1 else None
        namespace = next((n for n, b in last_in.items() if before is not None and b is before), None)
        if namespace is None:
            namespace = len(last_in)
            group.steps.extend((b, namespace) for b in steps)
        else:
            group.steps.append((block, namespace))
    return list(groups.values())


def _slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-") or "top"


def run_group(group: Group, readme: str | os.PathLike, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run one group in a fresh process (or launched job) in a temporary directory; the
    result's stdout holds stdout and stderr together."""
    readme = os.path.abspath(readme)
    root = os.path.dirname(readme)
    with tempfile.TemporaryDirectory(prefix="readme-test-") as work:
        steps = [
            {"line": b.line, "section": b.section, "code": b.code, "namespace": n, "readme": readme}
            for b, n in group.steps
        ]
        steps_file = os.path.join(work, "steps.json")
        with open(steps_file, "w") as f:
            json.dump(steps, f)
        script = os.path.join(work, "run_readme_steps.py")
        with open(script, "w") as f:
            f.write("import sys\nfrom hlotrace.testing.readme import _run_steps\nsys.exit(_run_steps(sys.argv[1]))\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith("HLOTRACE_") or k in _INHERITED}
        env.update(group.env)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH", "")]))
        command = [sys.executable, script, steps_file]
        if group.launch:
            command = [sys.executable, "-m", _LAUNCHER, *group.launch, script, steps_file]
        try:
            return subprocess.run(
                command, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout
            )
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
            return subprocess.CompletedProcess(command, 124, out + f"\nreadme-test: timed out after {timeout} s\n")


# ---- in the child process ---------------------------------------------------------------


def _run_steps(steps_file: str) -> int:
    with open(steps_file) as f:
        steps = json.load(f)
    namespaces: dict[int, dict] = {}
    for step in steps:
        where = f"{os.path.basename(step['readme'])}:{step['line']} ({step['section']})"
        print(f"--- readme-test: {where}", flush=True)
        namespace = namespaces.setdefault(step["namespace"], {"__name__": "__main__", "__readme_check__": _check})
        try:
            if step["code"].lstrip().startswith(">>>"):
                failed = _run_doctest(step, namespace)
            else:
                exec(_compile_block(step["code"], step["readme"], step["line"]), namespace)
                failed = 0
        except BaseException:
            import traceback

            traceback.print_exc()
            print(f"readme-test: the block at {where} failed", flush=True)
            return 1
        if failed:
            print(f"readme-test: {failed} doctest example(s) failed in the block at {where}", flush=True)
            return 1
    sys.stdout.flush()
    return 0


def _compile_block(code: str, filename: str, first_line: int):
    """The block compiled with its README line numbers; every ``expr  # -> expected``
    becomes a call of ``__readme_check__``."""
    checks = {}
    for token in tokenize.generate_tokens(io.StringIO(code).readline):
        match = _CHECK.match(token.string) if token.type == tokenize.COMMENT else None
        if match:
            checks[token.start[0]] = match.group("expected").strip()
    tree = ast.parse(code, filename)
    found = set()

    class Checks(ast.NodeTransformer):
        def visit_Expr(self, node):
            if node.end_lineno not in checks:
                return node
            found.add(node.end_lineno)
            thunk = ast.Lambda(ast.arguments([], [], None, [], [], None, []), node.value)
            args = [thunk, ast.Constant(checks[node.end_lineno]), ast.Constant(node.end_lineno + first_line - 1)]
            call = ast.Call(ast.Name("__readme_check__", ast.Load()), args, [])
            return ast.copy_location(ast.Expr(ast.copy_location(call, node)), node)

    tree = ast.fix_missing_locations(Checks().visit(tree))
    stray = sorted(set(checks) - found)
    if stray:
        raise ReadmeError(
            f"{filename}:{stray[0] + first_line - 1}: a '# ->' comment must end an expression statement "
            f"(its value is what is checked)"
        )
    ast.increment_lineno(tree, first_line - 1)
    return compile(tree, filename, "exec")


def matches(expected: str, actual: str) -> bool:
    """``actual`` fits ``expected``: ``...`` is any text, whitespace runs are one space."""
    pieces = [re.escape(" ".join(p.split())) for p in expected.split("...")]
    return re.fullmatch(".*?".join(pieces), " ".join(actual.split()), re.DOTALL) is not None


def _check(thunk, expected: str, line: int):
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        value = thunk()
    sys.stdout.write(printed.getvalue())
    actual = printed.getvalue().rstrip("\n") if value is None and printed.getvalue() else repr(value)
    if not matches(expected, actual):
        raise AssertionError(f"README line {line} shows -> {expected}\nbut the block gives    {actual}")
    return value


def _run_doctest(step: dict, namespace: dict) -> int:
    import doctest

    parser = doctest.DocTestParser()
    test = parser.get_doctest(step["code"], namespace, step["section"], step["readme"], step["line"] - 1)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    return runner.run(test, clear_globs=False).failed


# ---- bash blocks --------------------------------------------------------------------------


def bash_commands(blocks: list[Block]) -> list[tuple[int, list[str]]]:
    """``(line, words)`` of each command line of the bash blocks (comments dropped)."""
    out = []
    for block in blocks:
        if block.language not in ("bash", "sh", "shell", "console"):
            continue
        for offset, text in enumerate(block.code.splitlines()):
            words = shlex.split(text, comments=True)
            if words:
                out.append((block.line + offset, words))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Run the README's Python blocks, one process per section.")
    parser.add_argument("readme", nargs="?", default="README.md")
    parser.add_argument("--list", action="store_true", help="print the groups and their blocks, run nothing")
    parser.add_argument("--only", default=None, help="run the groups whose name contains this")
    options = parser.parse_args(argv)
    groups = plan(parse(Path(options.readme).read_text()))
    status = 0
    for group in groups:
        if options.only and options.only not in group.name:
            continue
        lines = ", ".join(f"{b.line}" + (f"@ns{n}" if n else "") for b, n in group.steps)
        print(
            f"{group.name}: lines {lines}"
            + (f" env {group.env}" if group.env else "")
            + (f" launch {' '.join(group.launch)}" if group.launch else "")
        )
        if options.list:
            continue
        result = run_group(group, options.readme)
        print(textwrap.indent(result.stdout, "    "))
        status = status or result.returncode
    return status


if __name__ == "__main__":
    sys.exit(main())
