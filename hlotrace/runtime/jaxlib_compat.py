"""Every jaxlib/jax call whose name or signature changes between versions lives here.

Checked against jax/jaxlib 0.10.x (CPU) and 0.11.2 (CUDA 13 plugin on an H100: the
generated property and gradient suites, one-device CUDA meshes, the model benchmarks).
The rest of hlotrace imports MLIR bindings and PJRT entry points from this module only.
Importing it loads jaxlib's MLIR bindings (no ``import jax``); PJRT functions import jax
on first use.
"""

from __future__ import annotations

import os
import threading

# XLA logs every client creation at INFO level to stderr; keep warnings and errors only
# unless the user asked for more.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import chlo, func, stablehlo  # noqa: F401  (re-exported)

# ---------------------------------------------------------------------------------------
# MLIR context
# ---------------------------------------------------------------------------------------


def _register_jax_dialects(registry) -> None:
    from jaxlib.mlir._mlir_libs import _jax_mlir_ext

    register = getattr(_jax_mlir_ext, "register_dialects", None) or _jax_mlir_ext.register_jax_dialects
    register(registry)


def make_context() -> ir.Context:
    """A fresh MLIR context that knows func, stablehlo, chlo and sdy (~0.2 s; reuse it)."""
    ctx = ir.Context()
    registry = ir.DialectRegistry()
    _register_jax_dialects(registry)
    ctx.append_dialect_registry(registry)
    ctx.load_all_available_dialects()
    stablehlo.register_dialect(ctx)
    chlo.register_dialect(ctx)
    # Shardy (SPMD annotations, hlotrace.distributed): building sdy attributes in a context
    # that lacks the dialect segfaults.
    from jaxlib.mlir.dialects import sdy

    sdy.register_dialect(ctx)
    return ctx


_thread_state = threading.local()


def shared_context() -> ir.Context:
    """One MLIR context per thread, made on first use."""
    ctx = getattr(_thread_state, "context", None)
    if ctx is None:
        ctx = _thread_state.context = make_context()
    return ctx


def dense_elements(array: np.ndarray, element_type: ir.Type, shaped_type: ir.Type) -> ir.Attribute:
    """DenseElementsAttr of ``array`` (any supported dtype) with type ``shaped_type``.

    Arrays whose elements are all bitwise equal become splats (one stored element), so
    -0.0 and 0.0 stay distinct. bfloat16 goes in as its uint16 bits.
    """
    flat = np.ascontiguousarray(array).reshape(-1)
    if flat.size:
        bits = flat.view(f"u{flat.dtype.itemsize}") if flat.dtype != np.bool_ else flat
        if bool(np.all(bits == bits[0])):
            return ir.DenseElementsAttr.get_splat(shaped_type, _scalar_attr(flat[0], element_type))
    if array.dtype.name == "bfloat16":
        return ir.DenseElementsAttr.get(flat.view(np.uint16), type=element_type, shape=list(array.shape))
    if array.dtype == np.bool_:
        return ir.DenseElementsAttr.get(np.ascontiguousarray(array), type=element_type, shape=list(array.shape))
    return ir.DenseElementsAttr.get(np.ascontiguousarray(array), type=shaped_type)


def splat_constant(value: ir.Value):
    """The element of the ``stablehlo.constant`` splat that defines ``value`` (a Python bool,
    int or float), or None when ``value`` is not a splat constant."""
    owner = value.owner
    if not isinstance(owner, ir.Operation | ir.OpView) or owner.operation.name != "stablehlo.constant":
        return None
    attr = ir.DenseElementsAttr(owner.attributes["value"])
    if not attr.is_splat:
        return None
    element = attr.get_splat_value()
    for kind in (ir.FloatAttr, ir.BoolAttr, ir.IntegerAttr):
        if isinstance(element, kind):
            return element.value
    return None


def _scalar_attr(value, element_type: ir.Type) -> ir.Attribute:
    if isinstance(value, np.bool_):
        return ir.BoolAttr.get(bool(value))
    if np.issubdtype(type(value), np.integer):
        return ir.IntegerAttr.get(element_type, int(value))
    return ir.FloatAttr.get(element_type, float(value))


def alias_arguments(main, num_args: int, donate: dict[int, int]) -> None:
    """Mark arguments of ``main`` as donated to outputs (``tf.aliasing_output = N``): XLA
    writes output N into argument i's buffer and PJRT deletes the argument after the call."""
    attrs = []
    for i in range(num_args):
        entry = {}
        if i in donate:
            entry["tf.aliasing_output"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(32), donate[i])
        attrs.append(ir.DictAttr.get(entry))
    main.arg_attrs = ir.ArrayAttr.get(attrs)


def run_mlir_pass(module: ir.Module, pipeline: str) -> None:
    """Run MLIR passes named in textual form (``"cse"``, ``"canonicalize{max-iterations=2}"``)
    over ``module`` in place. Raises ``ir.MLIRError`` when a pass fails."""
    from jaxlib.mlir.passmanager import PassManager

    with module.context:
        PassManager.parse(f"builtin.module({pipeline})").run(module.operation)


# ---------------------------------------------------------------------------------------
# PJRT
# ---------------------------------------------------------------------------------------


def get_client(platform: str):
    """The PJRT client for ``"cuda"`` or ``"cpu"``; RuntimeError when it does not exist."""
    import jax.extend.backend as backend

    return backend.get_backend(platform)


def plugin_client(name: str, path: str):
    """Load (once) and initialize the PJRT C-API plugin at ``path``; its client."""
    from jaxlib import xla_client

    if not xla_client.pjrt_plugin_loaded(name):
        xla_client.load_pjrt_plugin_dynamically(name, path)
    if not xla_client.pjrt_plugin_initialized(name):
        xla_client.initialize_pjrt_plugin(name)
    return xla_client.make_c_api_client(name)


def client_platform(client) -> str:
    return client.platform


def client_devices(client):
    return client.local_devices()


def platform_version(client) -> str:
    return getattr(client, "platform_version", "")


# XLA:CPU options for a quickly compiled executable (hlotrace.runtime.tiered): LLVM at -O0
# and the older loop emitters instead of the MLIR fusion emitters. Measured on this jaxlib
# (0.10.2) with the CNN step of benchmarks/bench_first_call.py: 0.23 s to compile instead of
# 1.27 s, 0.29 s to run instead of 0.11 s, results within 1.4e-7 of the optimized ones (the
# vectorized loops sum in another order). XLA rejects an option it no longer has ("No such
# compile option"): tiered.compile_first then compiles once, optimized.
FAST_CPU_OPTIONS = (("xla_backend_optimization_level", 0), ("xla_cpu_use_fusion_emitters", False))


def compile_options(disabled_xla_passes: tuple[str, ...] = (), fast: bool = False):
    from jax._src.lib import xla_client as xc

    options = xc.CompileOptions()
    overrides = list(FAST_CPU_OPTIONS) if fast else []
    if disabled_xla_passes:
        overrides.append(("xla_disable_hlo_passes", ",".join(disabled_xla_passes)))
    if overrides:
        options.env_option_overrides = overrides
    return options


def is_unknown_option_error(exc: BaseException) -> bool:
    """Whether XLA refused compile options it does not know (another jaxlib's names)."""
    text = str(exc)
    return "No such compile option" in text or "is not a valid" in text


def compile_module(client, module_text: str, device, disabled_xla_passes: tuple[str, ...] = (), fast: bool = False):
    """Compile StableHLO text for one device and load it; ``fast``: with FAST_CPU_OPTIONS
    (XLA:CPU only)."""
    from jax._src.lib import xla_client as xc

    options = compile_options(disabled_xla_passes, fast)
    device_list = xc.DeviceList((device,))
    if hasattr(client, "compile_and_load"):  # jaxlib >= 0.6.1
        return client.compile_and_load(module_text, device_list, options)
    return client.compile(module_text.encode(), options)  # pragma: no cover (old jaxlib)


def serialize_executable(executable) -> bytes:
    """The loaded executable as bytes (what jax's persistent cache stores): valid only for
    the same jaxlib/XLA version, platform and device kind."""
    if hasattr(executable, "serialize"):
        return bytes(executable.serialize())
    return bytes(executable.client.serialize_executable(executable))  # pragma: no cover (old jaxlib)


def deserialize_executable(client, data: bytes, device, disabled_xla_passes: tuple[str, ...] = (), fast: bool = False):
    """Load bytes from :func:`serialize_executable` onto ``device``; raises (jaxlib's
    error) when XLA refuses them."""
    from jax._src.lib import xla_client as xc

    options = compile_options(disabled_xla_passes, fast)
    return client.deserialize_executable(data, xc.DeviceList((device,)), options)


def device_kind(device) -> str:
    """The device model (``"NVIDIA H100 80GB HBM3"``, ``"cpu"``)."""
    return str(getattr(device, "device_kind", "") or getattr(device, "platform", ""))


def library_versions() -> dict[str, str]:
    """The jax and jaxlib versions (for cache keys)."""
    import jax
    import jaxlib

    return {"jax": str(jax.__version__), "jaxlib": str(getattr(jaxlib, "__version__", "unknown"))}


def compile_options_fingerprint(disabled_xla_passes: tuple[str, ...] = (), fast: bool = False) -> str:
    """SHA-256 of the serialized compile options :func:`compile_module` uses (their repr
    where they cannot be serialized)."""
    import hashlib

    options = compile_options(disabled_xla_passes, fast)
    try:
        data = options.SerializeAsString()
    except Exception:  # pragma: no cover (jaxlib without it)
        data = repr((type(options).__name__, disabled_xla_passes, fast)).encode()
    return hashlib.sha256(data).hexdigest()


def compiled_hlo_text(executable) -> str:
    return executable.hlo_modules()[0].to_string()


def compiled_memory_stats(executable) -> dict[str, int]:
    """XLA's memory plan of a compiled executable, in bytes: temp (scratch buffers),
    argument, output, alias (outputs written into donated arguments), generated code."""
    stats = executable.get_compiled_memory_stats()
    return {
        "temp": int(stats.temp_size_in_bytes),
        "argument": int(stats.argument_size_in_bytes),
        "output": int(stats.output_size_in_bytes),
        "alias": int(stats.alias_size_in_bytes),
        "generated_code": int(stats.generated_code_size_in_bytes),
    }


def cost_analysis(executable) -> dict:
    cost = executable.cost_analysis()
    if isinstance(cost, list):  # old jaxlib returned one dict per module
        cost = cost[0] if cost else {}
    return dict(cost)


# ---------------------------------------------------------------------------------------
# Composites (hlotrace.passes.rewrite.Match.composite)
# ---------------------------------------------------------------------------------------


def composite_op(result_types, operands, name: str, decomposition: str, attributes: dict, version: int = 0):
    """A ``stablehlo.composite`` named ``name`` calling the private function
    ``decomposition``; ``attributes`` maps names to str/int/float/bool values."""
    attrs = {}
    for key, value in attributes.items():
        if isinstance(value, bool):
            attrs[key] = ir.BoolAttr.get(value)
        elif isinstance(value, int):
            attrs[key] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)
        elif isinstance(value, float):
            attrs[key] = ir.FloatAttr.get(ir.F32Type.get(), value)
        else:
            attrs[key] = ir.StringAttr.get(str(value))
    return stablehlo.CompositeOp(
        list(result_types),
        list(operands),
        name=ir.StringAttr.get(name),
        decomposition=ir.FlatSymbolRefAttr.get(decomposition),
        composite_attributes=ir.DictAttr.get(attrs),
        version=ir.IntegerAttr.get(ir.IntegerType.get_signless(32), version),
    )


# ---------------------------------------------------------------------------------------
# Portable artifacts (hlotrace export)
# ---------------------------------------------------------------------------------------


def stablehlo_versions() -> tuple[str, str]:
    """(minimum, current) StableHLO versions this jaxlib can write portable artifacts for."""
    return stablehlo.get_minimum_version(), stablehlo.get_current_version()


def serialize_portable_artifact(module: ir.Module, target: str) -> bytes:
    """VHLO bytecode of ``module`` readable by StableHLO ``target`` and later."""
    return stablehlo.serialize_portable_artifact(module, target)


def deserialize_portable_artifact(context: ir.Context, artifact: bytes) -> ir.Module:
    return stablehlo.deserialize_portable_artifact(context, artifact)


def legalize_chlo(module: ir.Module) -> None:
    """Rewrite ``chlo.*`` ops (erf, erfc, ...) into StableHLO in place: VHLO has no CHLO, so a
    portable artifact cannot carry them. The pass is registered by a private jaxlib module."""
    from jaxlib.mlir._mlir_libs import _stablehlo

    _stablehlo.register_stablehlo_passes()
    run_mlir_pass(module, "func.func(chlo-legalize-to-stablehlo)")


def eval_module(module: ir.Module, arguments: list) -> list:
    """Run ``module``'s @main in the StableHLO reference interpreter on DenseElementsAttr
    arguments; return its results as DenseElementsAttrs. It aborts the process on ops it
    cannot run (rng_bit_generator, custom_call, raw CHLO, integer division by zero): call it
    in a subprocess (hlotrace.testing.fuzz.interpreter)."""
    return list(stablehlo.eval_module(module, arguments))


# ---------------------------------------------------------------------------------------
# Native greedy pattern rewriting (hlotrace.passes.rewrite.RuleSet)
# ---------------------------------------------------------------------------------------


def native_rewrite_module():
    """jaxlib's (private) pattern-rewrite bindings, or None where this jaxlib lacks them."""
    try:
        from jaxlib.mlir._mlir_libs._mlir import rewrite
    except ImportError:
        return None
    needed = ("RewritePatternSet", "GreedyRewriteConfig", "apply_patterns_and_fold_greedily")
    return rewrite if all(hasattr(rewrite, n) for n in needed) else None


def apply_native_patterns(operation, patterns, max_iterations: int) -> None:
    """MLIR's greedy driver over ``operation`` with ``patterns`` = [(op name, fn(op,
    rewriter) -> falsy when it rewrote)]; MLIR's own folding and constant CSE are off (they
    would change what the rules alone decide)."""
    rewrite = native_rewrite_module()
    with operation.context:
        pattern_set = rewrite.RewritePatternSet()
        for root, fn in patterns:
            pattern_set.add(root, fn)
        config = rewrite.GreedyRewriteConfig()
        config.enable_folding = False
        config.enable_constant_cse = False
        config.max_iterations = max_iterations
        rewrite.apply_patterns_and_fold_greedily(operation, pattern_set.freeze(), config)


# ---------------------------------------------------------------------------------------
# DLPack (hlotrace.interop)
# ---------------------------------------------------------------------------------------


def array_from_dlpack(obj):
    """A jax Array viewing ``obj``'s device memory (any ``__dlpack__`` producer)."""
    import jax.dlpack

    return jax.dlpack.from_dlpack(obj)


def buffer_platform(buffer) -> str:
    """'cpu', 'cuda', ... for a device buffer (a jax Array)."""
    return next(iter(buffer.devices())).platform


# The per-call entry points (host-to-device puts, the executor) live in jaxlib_execute.py;
# re-exported here, the one module the rest of hlotrace imports jaxlib calls from.
from hlotrace.runtime.jaxlib_execute import (  # noqa: E402, F401
    buffer_aval,
    buffer_is_deleted,
    make_executor,
    make_host_to_device,
)
