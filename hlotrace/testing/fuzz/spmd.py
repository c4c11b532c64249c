"""The ``spmd`` oracle: a program's inputs laid out at random across a mesh, the program
compiled for the mesh through hlotrace's own SPMD path (``dist.shard``, the plan's Shardy
annotations, XLA's partitioner, the per-device layout check before execution), and its
results compared with the one-device compiled run of the same module.

A :class:`Layout` is drawn per program (``hlotrace fuzz --devices N``): a mesh of the N
devices, 1 or 2 axes (``"data"``, ``"model"``; every factorization of N), its devices taken
at random (order included) from those the client has, and per input a spec that puts one
axis (or, on a 2-axis mesh, both) on a dimension it divides, or nothing (replicated, one
input in four). A finding saves its layout in the program (``meta["spmd"]``, by input var id):
the shrinker keeps it (an input whose shrunk shape it no longer fits is replicated), and
``hlotrace replay`` runs the saved file on that layout again.

The comparison follows README "Many devices (SPMD)", "Tests.": an output computed only by
elementwise ops must be bitwise equal (the sign of zero included); any other is compared
within the output's tolerance (hlotrace.testing.fuzz.compare) without the sign of zero: the
partitioner computes many ops on a split operand as masked pieces summed over the devices,
and -0.0 + 0.0 is +0.0. Elementwise ops whose last bits depend on XLA:CPU's vector or scalar
path (the per-device shape picks it) are compared within the tolerance too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hlotrace.errors import BackendError, HlotraceError
from hlotrace.ops.registry import OPS
from hlotrace.tensor import Tensor

AXES = ("data", "model")
# Elementwise families: bitwise equal on a mesh (README "Many devices (SPMD)", "Tests.").
BITWISE_FAMILIES = frozenset({"elementwise", "math", "math_binary", "bitwise"})
# ... except these, whose last bits follow XLA:CPU's vector or scalar path.
VECTOR_PATH_DEPENDENT = frozenset(
    {
        "exp", "log", "tanh", "sin", "cos", "rsqrt", "power", "log1p", "expm1", "erf", "tan", "arctan",
        "sinh", "cosh", "atan2",
    }
)  # fmt: skip
REPLICATED_ODDS = 4  # one input in REPLICATED_ODDS stays whole (when it could be split)


@dataclass(frozen=True)
class Layout:
    """Where one program runs: ``mesh_shape`` over ``axis_names``, on the devices at
    ``device_order`` (indices into the device pool, see :func:`device_pool`), and per input
    var id the mesh axes splitting each dimension (absent: replicated)."""

    mesh_shape: tuple[int, ...]
    axis_names: tuple[str, ...]
    device_order: tuple[int, ...]
    inputs: dict  # var id -> tuple (per dimension) of tuples of axis names

    @property
    def size(self) -> int:
        return math.prod(self.mesh_shape)

    def to_json(self) -> dict:
        return {
            "mesh": list(self.mesh_shape),
            "axes": list(self.axis_names),
            "devices": list(self.device_order),
            "inputs": {str(v): [list(axes) for axes in dims] for v, dims in self.inputs.items()},
        }

    @classmethod
    def from_json(cls, doc: dict) -> Layout:
        inputs = {int(v): tuple(tuple(axes) for axes in dims) for v, dims in doc.get("inputs", {}).items()}
        return cls(tuple(doc["mesh"]), tuple(doc["axes"]), tuple(doc["devices"]), inputs)

    def renumbered(self, renumber: dict) -> Layout:
        """The layout after the program's vars were renumbered (``old id -> new id``)."""
        inputs = {renumber[v]: dims for v, dims in self.inputs.items() if v in renumber}
        return Layout(self.mesh_shape, self.axis_names, self.device_order, inputs)

    def describe(self, program) -> str:
        mesh = ", ".join(f"{a}={n}" for a, n in zip(self.axis_names, self.mesh_shape, strict=True))
        specs = ", ".join(_spec_text(self.fitted(program, v)) for v in program.trace.inputs)
        return f"mesh [{mesh}] on devices {list(self.device_order)}, inputs placed ({specs})"

    def fitted(self, program, var_id: int) -> tuple:
        """The dims of input ``var_id`` if they still fit its shape (the shrinker cuts shapes),
        else replicated."""
        dims = self.inputs.get(var_id, ())
        shape = program.trace.vars[var_id].shape
        sizes = dict(zip(self.axis_names, self.mesh_shape, strict=True))
        if len(dims) > len(shape) or any(a not in sizes for axes in dims for a in axes):
            return ()
        for n, axes in zip(shape, dims, strict=False):
            if n % math.prod(sizes[a] for a in axes):
                return ()
        return dims


def _spec_text(dims) -> str:
    entries = ["None" if not axes else (repr(axes[0]) if len(axes) == 1 else repr(tuple(axes))) for axes in dims]
    while entries and entries[-1] == "None":
        entries.pop()
    return f"P({', '.join(entries)})"


def constraint_axes(program) -> set[str]:
    """Mesh axes the program's ``sharding_constraint`` records name."""
    names: set[str] = set()
    for record in program.trace.records:
        if record.op == "sharding_constraint":
            names.update(a for axes in record.attrs.get("spec", ()) for a in axes)
    return names


def mesh_shapes(devices: int, axes_needed: int = 1) -> list[tuple[int, ...]]:
    """Every 1- and 2-axis factorization of ``devices`` with at least ``axes_needed`` axes
    (a 2-axis mesh may have an axis of 1 only when no other 2-axis shape exists)."""
    shapes = [(devices,)] if axes_needed <= 1 else []
    pairs = [(a, devices // a) for a in range(2, devices) if devices % a == 0]
    shapes += pairs or ([(devices, 1)] if axes_needed > 1 else [])
    return shapes


def _options(shape, mesh_shape, axis_names) -> list[tuple]:
    sizes = dict(zip(axis_names, mesh_shape, strict=True))
    groups = [(a,) for a in axis_names] + ([tuple(axis_names)] if len(axis_names) > 1 else [])
    options = []
    for axes in groups:
        parts = math.prod(sizes[a] for a in axes)
        for d, n in enumerate(shape):
            if parts > 1 and n % parts == 0:
                options.append(((),) * d + (axes,))
    return options


def draw_layout(program, devices: int, pool_size: int, seed: int) -> Layout | None:
    """A random layout of ``program`` on ``devices`` of the ``pool_size`` devices (None: the
    program constrains to axes no mesh of that size can have)."""
    needed = constraint_axes(program)
    if not needed <= set(AXES):
        return None
    rng = np.random.default_rng([seed & 0xFFFFFFFF, devices])
    shapes = mesh_shapes(devices, 2 if "model" in needed else 1)
    mesh_shape = shapes[int(rng.integers(len(shapes)))]
    axis_names = AXES[: len(mesh_shape)]
    order = tuple(int(i) for i in rng.choice(pool_size, devices, replace=False))
    inputs = {}
    for var_id in program.trace.inputs:
        options = _options(program.trace.vars[var_id].shape, mesh_shape, axis_names)
        if options and rng.integers(REPLICATED_ODDS) != 0:
            inputs[var_id] = options[int(rng.integers(len(options)))]
    return Layout(mesh_shape, axis_names, order, inputs)


def device_pool(count: int, platform: str) -> list:
    """At least ``count`` devices of ``platform``: the client's own, or on the CPU a separate
    client of ``count`` devices when hlotrace's has fewer (HLOTRACE_CPU_DEVICES unset)."""
    import hlotrace.distributed as dist  # lazy: loads distributed (15 modules)
    from hlotrace import runtime  # lazy: loads runtime (7 modules)

    own = dist.devices(platform)
    if len(own) >= count:
        return own
    if platform != "cpu":
        raise HlotraceError(f"the spmd oracle needs {count} {platform} devices, the client has {len(own)}")
    return list(runtime.cpu_client(count).local_devices())


def run_on_mesh(program, layout: Layout, platform: str) -> list[np.ndarray]:
    """``program`` compiled for ``layout``'s mesh (inputs placed by ``dist.shard``, the plan
    of hlotrace.distributed.compile, the lowering's Shardy annotations and XLA's partitioner)
    and run there; the results gathered to the host."""
    import hlotrace.distributed as dist  # lazy: loads distributed (15 modules)
    from hlotrace import runtime  # lazy: loads runtime (7 modules)
    from hlotrace.distributed.compile import plan as make_plan  # lazy: loads jax
    from hlotrace.distributed.compile import prepare  # lazy: loads jax
    from hlotrace.distributed.mesh import spec_from_dims  # lazy: loads distributed.mesh (15 modules)
    from hlotrace.lowering import lower_trace  # lazy: loads jax

    pool = device_pool(max(layout.size, max(layout.device_order) + 1), platform)
    mesh = dist.Mesh(layout.mesh_shape, layout.axis_names, devices=[pool[i] for i in layout.device_order])
    trace = program.trace
    tensors = []
    for var_id, value in zip(trace.inputs, program.inputs, strict=True):
        spec = spec_from_dims(layout.fitted(program, var_id))
        tensors.append(dist.shard(Tensor._from_array(np.array(value), checked=True), mesh, spec))
    spmd = make_plan(trace, prepare(tensors), None, len(trace.outputs))
    lowered = lower_trace(trace, spmd=spmd, platform=platform)
    exe = runtime.compile(lowered.text(), lowered.in_avals, lowered.out_avals, spmd=spmd)
    return [np.asarray(b) for b in exe.run([t._device for t in tensors])]


def bitwise_output(program, var_id: int) -> bool:
    """Whether only elementwise ops (bitwise equal on a mesh) compute output ``var_id``."""
    from hlotrace.testing.fuzz.compare import path_records  # lazy: loads testing.fuzz.compare (5 modules)

    for i in path_records(program, var_id):
        op = program.trace.records[i].op
        if OPS[op].family not in BITWISE_FAMILIES or op in VECTOR_PATH_DEPENDENT:
            return False
    return True


def layout_of(program, oracles) -> tuple[Layout | None, str | None]:
    """The layout to check ``program`` on: the one saved with it (a repro), else a random one
    when ``oracles.devices`` asks for the oracle; or (None, why it does not run)."""
    saved = program.meta.get("spmd") if program.meta else None
    if saved:
        return Layout.from_json(saved), None
    if not oracles.devices:
        return None, "not asked for (--devices)"
    if not program.trace.inputs:
        return None, "the program has no inputs to place"
    platform = spmd_platform(oracles)
    pool = device_pool(oracles.devices, platform)
    layout = draw_layout(program, oracles.devices, len(pool), program.seed or 0)
    if layout is None:
        return None, f"the program constrains to mesh axes other than {AXES}"
    return layout, None


def spmd_platform(oracles) -> str:
    """The mesh's platform: the oracles' (CUDA with enough GPUs), else the CPU."""
    from hlotrace import runtime  # lazy: loads runtime (7 modules)

    platform = runtime.platform_name(oracles.platform)
    if platform != "cpu" and len(runtime.client(oracles.platform).local_devices()) < (oracles.devices or 2):
        return "cpu"
    return platform


def check_spmd(run, lowered, base, base_bad) -> None:
    """The spmd oracle on ``run`` (an oracles._Run whose one-device results are ``base``):
    findings of class ``spmd bug`` (oracle ``spmd``) are added to its verdict, the layout
    they were found on to ``run.verdict.layout``."""
    from hlotrace.testing.differential import run_lowered  # lazy: loads testing.differential (1 module)
    from hlotrace.testing.fuzz.compare import (  # lazy: loads testing.fuzz.compare (5 modules)
        bit_differences,
        first_diff,
        only_subnormals,
    )
    from hlotrace.testing.fuzz.oracles import (  # cycle: testing.fuzz.oracles imports this module
        SPMD_BUG,
        UNDEFINED_INPUT,
        XLA_DISAGREEMENT,
        domain_violation,
    )

    program, verdict = run.program, run.verdict
    try:
        layout, why = layout_of(program, run.oracles)
    except Exception as exc:  # no devices to run on: the session says so up front
        verdict.skipped["spmd"] = f"{type(exc).__name__}: {exc}"
        return
    if layout is None:
        verdict.skipped["spmd"] = why
        return
    if any(v in program.trace.constants for v in program.trace.outputs):
        verdict.skipped["spmd"] = "an output is a constant"
        return
    where = layout.describe(program)
    platform = spmd_platform(run.oracles)
    reference = base
    from hlotrace import runtime  # lazy: loads runtime (7 modules)

    if platform != runtime.platform_name(run.oracles.platform):  # compare on the same platform
        reference = run_lowered(lowered, program.inputs, platform=platform)
        verdict.compiles += 1
    try:
        results = run_on_mesh(program, layout, platform)
        verdict.compiles += 1
    except BackendError as exc:
        if "crashes the process" in str(exc):  # refused before XLA could die on it (runtime/spmd.py)
            verdict.skipped["spmd"] = "a module XLA's partitioner is known to crash on"
            return
        run.add(SPMD_BUG, "spmd", None, f"{where}: {type(exc).__name__}: {exc}")
        verdict.layout = layout.to_json()
        return
    except Exception as exc:  # an error, or a raw exception out of the bindings
        run.add(SPMD_BUG, "spmd", None, f"{where}: {type(exc).__name__}: {exc}")
        verdict.layout = layout.to_json()
        return
    for k, (actual, expected) in enumerate(zip(results, reference, strict=True)):
        if base_bad[k]:
            continue  # the one-device module is wrong here already (XLA's wrong results may vary)
        var_id = program.trace.outputs[k]
        exact = bitwise_output(program, var_id)
        bad = bit_differences(actual, expected) if exact else _spmd_bad(run, k, actual, expected)
        if not bad.any():
            continue
        diff = first_diff(actual, expected, bad).replace(", eager ", ", one device ")
        evidence = f"{diff} ({'bitwise' if exact else 'within the tolerance'}); {where}"
        verdict.layout = layout.to_json()
        if np.shape(actual) != np.shape(expected):
            run.add(SPMD_BUG, "spmd", k, f"shape {np.shape(actual)}, one device {np.shape(expected)}; {where}")
        elif reason := domain_violation(program, var_id):
            run.add(UNDEFINED_INPUT, "spmd", k, f"{evidence}; {reason}")
        elif exact and only_subnormals(actual, expected, bad):
            run.add(XLA_DISAGREEMENT, "spmd", k, f"{evidence}; only subnormals and zeros differ (XLA:CPU flushes)")
        else:
            run.add(SPMD_BUG, "spmd", k, evidence)


def _spmd_bad(run, k: int, actual, expected) -> np.ndarray:
    """Elements of the mesh's output ``k`` outside its tolerance around the one-device result
    (no sign of zero), widened where the program carries the table's per-op errors further;
    ill-conditioned elements are not checked (as for the compiled oracle)."""
    from hlotrace.testing.fuzz.compare import (  # lazy: loads testing.fuzz.compare (5 modules)
        JUDGE_WIDENING,
        mismatches_or_shape,
    )
    from hlotrace.testing.fuzz.evaluate import is_float  # lazy: loads testing.fuzz.evaluate (2 modules)

    actual, expected = np.asarray(actual), np.asarray(expected)
    bad = mismatches_or_shape(actual, expected, run.tolerances[k]._replace(signed_zeros=False))
    if not bad.any() or actual.shape != expected.shape:
        return bad
    if is_float(expected.dtype):
        with np.errstate(all="ignore"):
            eager = np.asarray(run.eager[k], np.float64)
            slack = np.abs(eager - np.asarray(run.perturbed[k], np.float64))
            slack = JUDGE_WIDENING * np.where(np.isfinite(slack), slack, 0.0)
            a, e = actual.astype(np.float64), expected.astype(np.float64)
            bad &= ~((np.abs(a - e) <= slack) & np.isfinite(a) & np.isfinite(e))
    if bad.any():
        bad &= ~run.ill_conditioned(k)
    return bad
