"""Declarative rewrite rules over StableHLO ops: the API for writing a pass in a few lines.

A :class:`RuleSet` is a table of patterns keyed by the root op's kind. A pattern receives a
:class:`Match` around one op of ``@main`` and returns the values that replace the op's
results (built at the op's position, with its location), or None when it does not apply::

    from hlotrace import passes
    from hlotrace.passes.rewrite import RuleSet

    rules = RuleSet("drop-x-times-one")

    @rules.pattern("stablehlo.multiply")
    def times_one(m):
        '''x * 1 -> x'''
        x, one = m.operands
        return x if m.splat(one) == 1 else None

    passes.register_pass("drop-x-times-one")(rules.as_pass())

``RuleSet.apply(module)`` rewrites greedily until no pattern applies, then removes the ops
left without users; it returns how often each pattern fired. It runs MLIR's own greedy
driver through jaxlib's (private) rewrite bindings, behind ``runtime/jaxlib_compat.py``,
with MLIR's folding and constant CSE off; a pattern's Python exception is re-raised after
the driver returns. Where a jaxlib lacks those bindings (or with
``$HLOTRACE_REWRITE_DRIVER=python``) a Python driver sweeps @main in program order instead
(at most ``max_rounds`` sweeps); the tests run both.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import hlotrace.runtime.jaxlib_compat as jaxlib_compat
from hlotrace import config
from hlotrace.passes.ir_helpers import main_function
from hlotrace.runtime.jaxlib_compat import func, ir, stablehlo

_composite_ids = itertools.count()
DRIVER_ENV = "HLOTRACE_REWRITE_DRIVER"
DRIVERS = ("native", "python")


def _op(value):
    """The op defining ``value`` (None for a block argument)."""
    owner = value.owner
    return owner.operation if isinstance(owner, ir.Operation | ir.OpView) else None


class Match:
    """One op under a pattern: its operands, and helpers to look at their producers."""

    def __init__(self, op, module):
        self.op = op.operation
        self.module = module

    @property
    def operands(self) -> list:
        return list(self.op.operands)

    @property
    def results(self) -> list:
        return list(self.op.results)

    @property
    def kind(self) -> str:
        return self.op.name

    def attr(self, name: str):
        return self.op.attributes[name]

    @staticmethod
    def producer(value):
        """The op that computes ``value`` (None for a function argument)."""
        return _op(value)

    @staticmethod
    def produced_by(value, kind: str) -> bool:
        op = _op(value)
        return op is not None and op.name == kind

    @staticmethod
    def splat(value):
        """The element of a splat constant ``value`` (bool, int or float), else None."""
        return jaxlib_compat.splat_constant(value)

    @staticmethod
    def uses(value) -> list:
        """The ops that use ``value``."""
        return [use.owner for use in value.uses]

    @staticmethod
    def element_type(value) -> ir.Type:
        return ir.RankedTensorType(value.type).element_type

    @staticmethod
    def shape(value) -> tuple[int, ...]:
        return tuple(ir.RankedTensorType(value.type).shape)

    def composite(self, name: str, operands, body: Callable, attributes: dict | None = None, version: int = 0):
        """Replace the root op by a ``stablehlo.composite`` named ``name`` over ``operands``,
        whose decomposition (a private function added to the module) ``body(*arguments)``
        builds; returns the composite's results. XLA inlines the decomposition."""
        result_types = [r.type for r in self.op.results]
        callee = f"{name.replace('.', '_')}_{next(_composite_ids)}"
        with ir.InsertionPoint(self.module.body), self.op.location:
            fn = func.FuncOp(callee, ir.FunctionType.get([v.type for v in operands], result_types))
            fn.attributes["sym_visibility"] = ir.StringAttr.get("private")
            block = fn.add_entry_block()
            with ir.InsertionPoint(block):
                outs = body(*block.arguments)
                func.ReturnOp(list(outs) if isinstance(outs, list | tuple) else [outs])
        with ir.InsertionPoint(self.op), self.op.location:
            op = jaxlib_compat.composite_op(result_types, list(operands), name, callee, attributes or {}, version)
        return list(op.results)


Pattern = Callable[[Match], object]


class RuleSet:
    """A table of rewrite patterns keyed by the root op's kind (``"stablehlo.add"``)."""

    def __init__(self, name: str):
        self.name = name
        self.patterns: dict[str, list[tuple[str, Pattern]]] = {}

    def pattern(self, root: str, name: str | None = None):
        """Decorator: ``fn(match) -> replacement value(s) or None`` for ops of kind ``root``."""

        def add(fn: Pattern) -> Pattern:
            self.patterns.setdefault(root, []).append((name or fn.__name__, fn))
            return fn

        return add

    def describe(self) -> list[tuple[str, str]]:
        """(pattern name, first docstring line) of every pattern, in table order."""
        return [
            (name, (fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else "")
            for patterns in self.patterns.values()
            for name, fn in patterns
        ]

    def apply(self, module, max_rounds: int = 8, driver: str | None = None) -> dict[str, int]:
        """Rewrite ``module``'s @main to a fixed point; return {pattern name: times fired}.

        ``driver``: ``"native"`` (MLIR's greedy driver through jaxlib's rewrite bindings),
        ``"python"`` (a sweep over @main in program order), or None: native where this
        jaxlib has the bindings, else python ($HLOTRACE_REWRITE_DRIVER overrides).
        """
        if driver is None:
            driver = config.get(DRIVER_ENV)  # a ConfigError names a value that is neither
        driver = driver or ("native" if jaxlib_compat.native_rewrite_module() else "python")
        if driver == "native":
            return self._apply_native(module, max_rounds)
        if driver != "python":
            raise ValueError(f"unknown rewrite driver {driver!r} (native or python)")
        fired: dict[str, int] = {}
        block = main_function(module).regions[0].blocks[0]
        for _ in range(max_rounds):
            changed = False
            for op in list(block.operations):
                op = op.operation
                for name, fn in self.patterns.get(op.name, ()):
                    with ir.InsertionPoint(op), op.location:
                        replacement = fn(Match(op, module))
                    if replacement is None:
                        continue
                    values = _checked(name, op, replacement)
                    for old, new in zip(op.results, values, strict=True):
                        old.replace_all_uses_with(new)
                    op.erase()
                    fired[name] = fired.get(name, 0) + 1
                    changed = True
                    break
            if not changed:
                break
        if fired:
            remove_dead_ops(block)
        return fired

    def _apply_native(self, module, max_rounds: int) -> dict[str, int]:
        fired: dict[str, int] = {}
        errors: list[BaseException] = []
        main = main_function(module)

        def callback_for(name, fn):
            def callback(op, rewriter):
                if errors:
                    return True
                op = op.operation
                try:
                    with rewriter.ip, op.location:
                        replacement = fn(Match(op, module))
                    if replacement is None:
                        return True  # no match
                    values = _checked(name, op, replacement)
                except BaseException as exc:  # surfaced after the driver returns
                    errors.append(exc)
                    return True
                rewriter.replace_op(op, values)
                fired[name] = fired.get(name, 0) + 1
                return False

            return callback

        patterns = [(root, callback_for(name, fn)) for root, entries in self.patterns.items() for name, fn in entries]
        jaxlib_compat.apply_native_patterns(main.operation, patterns, max_rounds)
        if errors:
            raise errors[0]
        if fired:
            remove_dead_ops(main.regions[0].blocks[0])
        return fired

    def as_pass(self) -> Callable:
        """A pass function ``fn(module, options)`` applying this table (for register_pass)."""

        def run(module, options) -> None:
            self.apply(module)

        run.__doc__ = f"Apply the rewrite rules of {self.name!r}."
        run.__name__ = self.name.replace("-", "_")
        return run


def _checked(name: str, op, replacement) -> list:
    """The replacement values as a list, one per result of ``op`` and of its type."""
    values = list(replacement) if isinstance(replacement, list | tuple) else [replacement]
    if len(values) != len(op.results):
        raise ValueError(f"pattern {name!r} returned {len(values)} values for {len(op.results)} results")
    for old, new in zip(op.results, values, strict=True):
        if new.type != old.type:
            raise ValueError(f"pattern {name!r} replaced a {old.type} by a {new.type}")
    return values


def remove_dead_ops(block) -> int:
    """Erase ops of ``block`` whose results are all unused (StableHLO ops have no side
    effects, except the ones listed); returns how many were erased."""
    erased = 0
    for op in reversed(list(block.operations)):
        op = op.operation
        if op.name in _KEEP or not op.results:
            continue
        if all(not list(r.uses) for r in op.results):
            op.erase()
            erased += 1
    return erased


# Ops with effects beyond their results: never removed for being unused.
_KEEP = ("func.return", "stablehlo.return", "stablehlo.custom_call", "stablehlo.outfeed", "stablehlo.send")


def transpose(value, permutation) -> ir.Value:
    """``stablehlo.transpose`` of ``value`` (a helper for patterns)."""
    return stablehlo.TransposeOp(value, list(permutation)).result
