"""The pass manager: pipeline parsing, options, failures named and dumped, timing, dumps,
user passes, xla_trace(passes=...) / $HLOTRACE_PASSES and cache keys, `hlotrace passes`."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import hlotrace as ht
from hlotrace import functional as F
from hlotrace import passes
from hlotrace.errors import PassError
from hlotrace.jit import xla_trace
from hlotrace.passes.locations import record_location
from hlotrace.runtime.jaxlib_compat import ir, stablehlo
from hlotrace.testing.differential import assert_bitwise_equal, run_lowered
from hlotrace.tools.cli import main


def _body(module):
    return list(passes.main_function(module).regions[0].blocks[0].operations)


def _kinds(lowered) -> list[str]:
    return [op.operation.name for op in _body(lowered.module)]


@pytest.fixture
def user_pass():
    """Register passes for one test, and remove them after it."""
    names = []

    def register(name, **kwargs):
        def wrap(fn):
            passes.register_pass(name, **kwargs)(fn)
            names.append(name)
            return fn

        return wrap

    yield register
    for name in names:
        passes.unregister_pass(name)


def _lowered(fn=None, *shapes):
    fn = fn or (lambda x: F.exp(x) + F.exp(x))
    traced = xla_trace(fn, passes="")
    arrays = [np.linspace(-2, 2, int(np.prod(s)), dtype=np.float32).reshape(s) for s in (shapes or [(3, 4)])]
    traced(*[ht.tensor(a) for a in arrays])
    return traced.lowered, arrays


# -- parsing ---------------------------------------------------------------------------------


def test_parse_pipeline_names_options_and_canonical_text(user_pass):
    @user_pass("opt-pass", options={"policy": "p", "every": "k"})
    def _pass(module, options):
        """A pass with options."""

    specs = passes.parse_pipeline(" cse , opt-pass{policy=every every=2},canonicalize{max-iterations=3} ")
    assert [s.name for s in specs] == ["cse", "opt-pass", "canonicalize"]
    assert specs[1].option_dict == {"policy": "every", "every": "2"}
    assert passes.pipeline_text(specs) == "cse,opt-pass{policy=every every=2},canonicalize{max-iterations=3}"
    assert passes.parse_pipeline("opt-pass{policy=sqrt,every=3}")[0].option_dict == {"policy": "sqrt", "every": "3"}
    assert passes.parse_pipeline("") == () and passes.parse_pipeline(None) == ()


@pytest.mark.parametrize(
    "pipeline, message",
    [
        ("cse,no-such-pass", "unknown pass 'no-such-pass'"),
        ("cse,,cse", "expected a pass name"),
        ("cse,", "ends with ','"),
        ("cse{", "no closing"),
        ("cse canonicalize", "expected ','"),
        ("cse{novalue}", "is not key=value"),
    ],
)
def test_malformed_pipelines_are_refused_clearly(pipeline, message):
    with pytest.raises(PassError, match=message) as info:
        passes.parse_pipeline(pipeline)
    if "unknown pass" in message:
        assert "cse" in str(info.value) and "canonicalize" in str(info.value)  # the known ones are listed


def test_unknown_option_names_the_accepted_ones(user_pass):
    @user_pass("opt-pass2", options={"policy": "p"})
    def _pass(module, options):
        """A pass with one option."""

    with pytest.raises(PassError, match=r"pass 'opt-pass2' has no option 'every' \(its options: policy\)"):
        passes.parse_pipeline("opt-pass2{every=2}")


def test_registering_twice_or_a_bad_name_is_refused(user_pass):
    @user_pass("dup-pass")
    def _pass(module, options):
        """Does nothing."""

    with pytest.raises(ValueError, match="already registered"):
        passes.register_pass("dup-pass")(_pass)
    with pytest.raises(ValueError, match="already registered"):
        passes.register_pass("cse")(_pass)
    with pytest.raises(ValueError, match="must be non-empty"):
        passes.register_pass("a,b")(_pass)
    with pytest.raises(ValueError, match="needs a description"):
        passes.register_pass("undocumented")(lambda module, options: None)


# -- running -----------------------------------------------------------------------------------


def test_run_copies_times_and_counts_and_leaves_the_input_alone():
    lowered, arrays = _lowered()
    before = lowered.text()
    out = passes.run(lowered, "cse")
    assert lowered.text() == before  # the input module is not modified
    assert _kinds(lowered).count("stablehlo.exponential") == 2
    assert _kinds(out).count("stablehlo.exponential") == 1
    (timing,) = out.pass_timings
    assert timing.name == "cse" and timing.seconds >= 0 and timing.ops_after < timing.ops_before
    assert_bitwise_equal(run_lowered(out, arrays), run_lowered(lowered, arrays), "cse")


def test_user_pass_runs_with_its_options_and_dumps_every_stage(tmp_path, user_pass):
    seen = {}

    @user_pass("exp-to-log", options={"note": "recorded by the test"})
    def exp_to_log(module, options):
        """Replace every exponential by a log (a wrong but visible rewrite)."""
        seen.update(options)
        for op in _body(module):
            if op.operation.name == "stablehlo.exponential":
                with ir.InsertionPoint(op), op.location:
                    new = stablehlo.LogOp(op.operands[0]).result
                op.results[0].replace_all_uses_with(new)
                op.erase()

    lowered, _ = _lowered()
    out = passes.run(lowered, "exp-to-log{note=hi},cse", dump_to=str(tmp_path))
    assert seen == {"note": "hi"}
    assert "stablehlo.exponential" not in _kinds(out) and _kinds(out).count("stablehlo.log") == 1
    assert sorted(os.listdir(tmp_path)) == ["00.input.mlir", "01.exp-to-log.mlir", "02.cse.mlir"]
    assert "stablehlo.log" in (tmp_path / "01.exp-to-log.mlir").read_text()
    # The replacement kept the location of the op it replaced: the source line survives.
    logs = [op for op in _body(out.module) if op.operation.name == "stablehlo.log"]
    assert record_location(logs[0]).op == "exp"


def test_a_pass_that_breaks_the_module_is_named_and_dumped(tmp_path, user_pass):
    @user_pass("breaker")
    def breaker(module, options):
        """Make @main return a value of the wrong type."""
        body = _body(module)
        ret = body[-1]
        with ir.InsertionPoint(ret), ret.location:
            wrong = stablehlo.ConvertOp(ir.RankedTensorType.get([3, 4], ir.F64Type.get()), ret.operands[0]).result
        ret.operation.operands[0] = wrong

    lowered, _ = _lowered()
    with pytest.raises(PassError) as info:
        passes.run(lowered, "cse,breaker", dump_to=str(tmp_path))
    message = str(info.value)
    assert "pass 'breaker' (#2 of 'cse,breaker') broke" in message and "does not verify" in message
    assert (tmp_path / "02.breaker.before.mlir").exists() and (tmp_path / "02.breaker.after.mlir").exists()
    assert "f64" in (tmp_path / "02.breaker.after.mlir").read_text()
    assert "f64" not in (tmp_path / "02.breaker.before.mlir").read_text()


def test_a_pass_that_changes_the_signature_or_raises_is_named(tmp_path, monkeypatch, user_pass):
    @user_pass("raiser")
    def raiser(module, options):
        """Raise."""
        raise RuntimeError("boom")

    @user_pass("arg-adder")
    def arg_adder(module, options):
        """Give @main a second argument (the compiled signature would no longer match)."""
        main_fn = passes.main_function(module)
        block = main_fn.regions[0].blocks[0]
        block.add_argument(ir.F32Type.get(), ir.Location.unknown())
        inputs = [*main_fn.type.inputs, ir.F32Type.get()]
        main_fn.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs, main_fn.type.results))
        main_fn.attributes.__delitem__("arg_attrs") if "arg_attrs" in main_fn.attributes else None

    lowered, _ = _lowered()
    monkeypatch.setenv("HLOTRACE_DUMP_TO", str(tmp_path))  # no dump_to: the environment's directory
    with pytest.raises(PassError, match=r"pass 'raiser' \(#1 of 'raiser'\) failed on .*RuntimeError: boom"):
        passes.run(lowered, "raiser")
    assert (tmp_path / "01.raiser.before.mlir").exists()
    with pytest.raises(PassError, match="signature changed"):
        passes.run(lowered, "arg-adder")


# -- xla_trace integration -----------------------------------------------------------------------


def test_xla_trace_runs_the_pipeline_and_keys_the_cache_on_it(monkeypatch, user_pass):
    calls = []

    @user_pass("counting")
    def counting(module, options):
        """Count how often it runs (does not change the module)."""
        calls.append(1)

    def f(x):
        return F.exp(x) + F.exp(x)

    monkeypatch.delenv("HLOTRACE_PASSES", raising=False)
    traced = xla_trace(f)
    x = ht.tensor(np.arange(4, dtype=np.float32))
    expected = np.exp(np.arange(4, dtype=np.float32)) * 2
    np.testing.assert_array_equal(traced(x).numpy(), expected)
    monkeypatch.setenv("HLOTRACE_PASSES", "counting,cse")
    np.testing.assert_array_equal(traced(x).numpy(), expected)  # another pipeline: recompiled
    assert traced.cache_size == 2 and calls == [1]
    assert _kinds(traced.optimized).count("stablehlo.exponential") == 1
    assert _kinds(traced.lowered).count("stablehlo.exponential") == 2
    assert [t.name for t in traced.optimized.pass_timings] == ["counting", "cse"]
    traced(x)  # same pipeline, same signature: the cached executable (hot path)
    assert traced.cache_size == 2 and calls == [1]
    explicit = xla_trace(f, passes="")  # passes= wins over the environment
    explicit(x)
    assert explicit.optimized.pass_timings == () and calls == [1]


def test_xla_trace_refuses_a_bad_pipeline_at_decoration():
    with pytest.raises(PassError, match="unknown pass 'fuse-everything'"):
        xla_trace(lambda x: x, passes="fuse-everything")


def test_dump_env_writes_each_pass_stage(tmp_path, monkeypatch):
    monkeypatch.setenv("HLOTRACE_DUMP_TO", str(tmp_path))

    @xla_trace(passes="cse")
    def dumped(x):
        return F.tanh(x) * F.tanh(x)

    dumped(ht.tensor(np.ones(3, np.float32)))
    names = sorted(os.listdir(tmp_path))
    assert "dumped.1.optimized.mlir" in names and "dumped.1.stablehlo.mlir" in names
    assert sorted(os.listdir(tmp_path / "dumped.1.passes")) == ["00.input.mlir", "01.cse.mlir"]


def test_memory_stats_come_from_xla():
    traced = xla_trace(lambda x: F.tanh(x @ x) @ x, passes="")
    traced(ht.tensor(np.ones((64, 64), np.float32)))
    stats = traced.memory_stats()
    assert set(stats) >= {"temp", "argument", "output", "alias"}
    assert stats["argument"] == 64 * 64 * 4 and stats["output"] == 64 * 64 * 4


# -- the command line --------------------------------------------------------------------------


def test_cli_lists_every_pass_and_checks_pipelines(capsys, user_pass):
    @user_pass("listed-pass", options={"k": "a knob"})
    def listed(module, options):
        """A user pass shows up in the listing."""

    assert main(["passes"]) == 0
    out = capsys.readouterr().out
    for name in passes.PASSES:
        assert name in out
    assert "A user pass shows up in the listing." in out and "{k=...}  a knob" in out
    assert main(["passes", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {p["name"] for p in doc["passes"]} == set(passes.PASSES)
    assert main(["passes", "--check", "cse , listed-pass{k=1}"]) == 0
    assert capsys.readouterr().out.strip() == "cse,listed-pass{k=1}"
    assert main(["passes", "--check", "cse,nope"]) == 2
    assert "unknown pass 'nope'" in capsys.readouterr().err


def test_cli_show_runs_a_pipeline_with_dumps(tmp_path, capsys):
    traced = xla_trace(lambda x: F.exp(x) + F.exp(x), passes="")
    traced(ht.tensor(np.ones(3, np.float32)))
    path = str(tmp_path / "t.trace.json")
    traced.trace.save(path)
    assert main(["show", path, "--lower", "--passes", "cse", "--dump-passes", str(tmp_path / "st")]) == 0
    captured = capsys.readouterr()
    assert captured.out.count("stablehlo.exponential") == 1 and "cse:" in captured.err
    assert os.path.exists(tmp_path / "st" / "01.cse.mlir")
    assert main(["show", path, "--passes", "cse"]) == 2
    assert "need --lower" in capsys.readouterr().err
