"""The layout ops (flip, roll, pad, tile, repeat, tril, triu), their composites (stack,
split, moveaxis, swapaxes, flatten) and eye/linspace beyond the generated property tests:
NumPy agreement on the raw (not yet canonical) attribute forms, canonical attributes
accepted again unchanged, exact gradients of reflect/edge padding, linspace's float64
values bit for bit (where XLA's fused multiply-add would differ), error messages, and the
trace file round trip of the attributes."""

import itertools

import numpy as np
import pytest

import hlotrace as ht
import hlotrace.functional as F
from hlotrace.autodiff import grad
from hlotrace.errors import OpError
from hlotrace.jit import xla_trace
from hlotrace.ops import get_op
from hlotrace.ops.registry import Aval
from hlotrace.testing.check import CI_BASE_SEED, STRATEGY_EXAMPLES, property_test
from hlotrace.trace import Trace


def _t(values, dtype="float32"):
    return ht.tensor(np.asarray(values, dtype=dtype))


def _x(*shape, dtype="float32"):
    return ht.tensor(np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape))


def _compiled(fn, *args):
    traced = xla_trace(fn)
    traced(*args)
    return traced(*args).numpy(), traced


def test_roll_follows_numpy_for_every_shift_and_axis_form():
    x = _x(2, 3, 4)
    cases = [
        (5, None),
        (-7, None),
        ((1, 2), None),  # summed
        (1, 0),
        (-9, -1),
        (100, 2),
        ((1, -2), (0, 2)),
        (3, (1, 2)),  # one shift for both axes
        ((1, 1, 2), 1),  # one axis, shifts add up
        ((2, 5), (1, 1)),  # a repeated axis
        ((), ()),
    ]
    for shift, axis in cases:
        expected = np.roll(x.numpy(), shift, axis) if axis != () else x.numpy()
        np.testing.assert_array_equal(F.roll(x, shift, axis).numpy(), expected, err_msg=f"{shift} {axis}")
        got, _ = _compiled(lambda v, s=shift, a=axis: F.roll(v, s, a), x)
        np.testing.assert_array_equal(got, expected, err_msg=f"{shift} {axis}")
    assert F.roll(_x(0, 3), 5, 0).shape == (0, 3)
    assert F.roll(_t(2.0), 3).numpy() == 2.0


def test_pad_follows_numpy_for_every_width_form_and_mode():
    x = _x(3, 4)
    for mode, width in itertools.product(
        ("constant", "reflect", "edge"), (2, (3,), (1, 2), ((1, 2),), ((0, 3), (5, 1)), ((7, 9), (11, 4)))
    ):
        expected = np.pad(x.numpy(), width, mode=mode)
        np.testing.assert_array_equal(F.pad(x, width, mode).numpy(), expected, err_msg=f"{mode} {width}")
        got, _ = _compiled(lambda v, w=width, m=mode: F.pad(v, w, m), x)
        np.testing.assert_array_equal(got, expected, err_msg=f"{mode} {width}")


def test_reflect_keeps_reflecting_past_the_size_and_repeats_a_single_element():
    for n, before, after in [(2, 5, 6), (3, 9, 2), (1, 3, 4), (4, 0, 13)]:
        x = _x(n)
        expected = np.pad(x.numpy(), (before, after), mode="reflect")
        np.testing.assert_array_equal(F.pad(x, (before, after), "reflect").numpy(), expected)
        np.testing.assert_array_equal(
            _compiled(lambda v, b=before, a=after: F.pad(v, (b, a), "reflect"), x)[0], expected
        )


def test_pad_constant_value_is_converted_like_full():
    out = F.pad(_t([1.0]), 1, value=float("nan")).numpy()
    assert np.isnan(out[0]) and np.isnan(out[2])
    assert np.signbit(F.pad(_t([1.0]), 1, value=-0.0).numpy()[0])
    assert F.pad(_t([True], "bool"), 1, value=2).numpy().tolist() == [True, True, True]
    assert F.pad(_t([1], "int32"), (0, 1), value=7).numpy().tolist() == [1, 7]
    assert F.pad(_t([1.0], "float16"), (1, 0), value=1e10).numpy()[0] == np.inf


def _accumulated(x_shape, width, mode, w):
    """NumPy's transpose of pad: every output element's weight added to the input element
    it copies (found by padding the input's flat indices)."""
    index = np.arange(int(np.prod(x_shape))).reshape(x_shape)
    source = np.pad(index, width, mode=mode)
    out = np.zeros(index.size)
    np.add.at(out, source.ravel(), w.ravel())
    return out.reshape(x_shape)


@pytest.mark.parametrize("mode", ["reflect", "edge"])
def test_reflect_and_edge_gradients_sum_every_copy(mode):
    rng = np.random.default_rng(0)
    for shape, width in [((3, 4), ((4, 7), (2, 5))), ((1, 2), ((3, 2), (0, 4))), ((5,), ((1, 0),))]:
        x = ht.tensor(rng.standard_normal(shape))
        w = rng.standard_normal(np.pad(np.zeros(shape), width).shape)
        g = grad(lambda v, _w=width: (F.pad(v, _w, mode) * ht.tensor(w)).sum())(x).numpy()
        np.testing.assert_allclose(g, _accumulated(shape, width, mode, w), rtol=1e-13, atol=1e-13)


def test_tile_repeat_flip_and_triangles_follow_numpy():
    x = _x(2, 3)
    for reps in (2, (2, 1), (0, 3), (2, 1, 1, 2), ()):
        np.testing.assert_array_equal(F.tile(x, reps).numpy(), np.tile(x.numpy(), reps), err_msg=str(reps))
    for repeats, axis in [(2, None), (0, 1), ([3], 0), ([1, 0, 2], 1), ((2, 2), 0), (3, -1)]:
        expected = np.repeat(x.numpy(), repeats, axis)
        np.testing.assert_array_equal(F.repeat(x, repeats, axis).numpy(), expected, err_msg=f"{repeats} {axis}")
        got, _ = _compiled(lambda v, r=repeats, a=axis: F.repeat(v, r, a), x)
        np.testing.assert_array_equal(got, expected)
    # A 0-d tensor repeats as a 1-d one, also with axis 0 or -1 (NumPy).
    assert F.repeat(_t(3.0), 2, axis=-1).numpy().tolist() == [3.0, 3.0]
    for axis in (None, 0, -1, (0, 1)):
        np.testing.assert_array_equal(F.flip(x, axis).numpy(), np.flip(x.numpy(), axis))
    y = _x(2, 3, 4)
    for k in (-5, -1, 0, 2, 10**15):
        np.testing.assert_array_equal(F.tril(y, k).numpy(), np.tril(y.numpy(), k))
        np.testing.assert_array_equal(F.triu(y, k).numpy(), np.triu(y.numpy(), k))


def test_eye_and_linspace_follow_numpy():
    for n, m, k in [(3, None, 0), (2, 5, 1), (4, 2, -3), (3, 3, 7), (0, 2, 0)]:
        np.testing.assert_array_equal(F.eye(n, m, k).numpy(), np.eye(n, m, k, dtype=np.float32))
    assert F.eye(2).dtype == np.float32 and F.eye(2, dtype="bool").numpy().tolist() == [[True, False], [False, True]]
    for start, stop, num, endpoint in [(0, 1, 5, True), (-2, 1, 10, False), (2.5, -7.25, 13, True), (1, 1, 4, True)]:
        for dtype in ("float64", "float32", "int32", "int64"):
            expected = np.linspace(start, stop, num, endpoint=endpoint, dtype=dtype)
            got = F.linspace(start, stop, num, endpoint, dtype)
            np.testing.assert_array_equal(got.numpy(), expected)
    assert F.linspace(0, 1, 3).dtype == np.float32 and F.linspace(0, 1, 0).shape == (0,)


@pytest.mark.parametrize("dtype", ["float64", "int32"])
def test_compiled_linspace_is_numpys_bit_for_bit(dtype):
    # XLA:CPU fuses a product and a sum into one fused multiply-add in long loops: with
    # i * step computed as one product, a third of these float64 values differ in their
    # last bit, and 6 int32 values of each of the first two floor to the other integer.
    for start, stop, num in [(7, -10, 2993), (-12, 33, 1459), (0.1, 977.3, 100_000), (-3.3, 3.3, 4_097)]:
        expected = np.linspace(start, stop, num, dtype=dtype)
        got, _ = _compiled(lambda s=start, e=stop, n=num: F.linspace(s, e, n, dtype=dtype))
        np.testing.assert_array_equal(got, expected)
        assert np.array_equal(np.signbit(got), np.signbit(expected))


def test_linspace_signed_zeros_follow_numpy():
    for start, stop, num in [(0.0, -4.0, 3), (-0.0, -4.0, 3), (-0.0, 4.0, 3), (0.0, -0.0, 3), (-0.0, -0.0, 2)]:
        expected = np.linspace(start, stop, num)
        got, _ = _compiled(lambda s=start, e=stop, n=num: F.linspace(s, e, n, dtype="float64"))
        np.testing.assert_array_equal(np.signbit(got), np.signbit(expected), err_msg=f"{start} {stop}")


def test_composites_follow_numpy_and_record_primitives():
    x = _x(2, 3, 4)
    a, b = _x(2, 3), _x(2, 3, dtype="int32")
    np.testing.assert_array_equal(F.stack([a, b], axis=-1).numpy(), np.stack([a.numpy(), b.numpy()], -1))
    for sections, axis in [(2, 0), ([1, 3], 2), ([2, -1, 9], 1), (1, 1)]:
        parts = F.split(x, sections, axis)
        expected = np.split(x.numpy(), sections, axis)
        assert len(parts) == len(expected)
        for p, e in zip(parts, expected, strict=True):
            np.testing.assert_array_equal(p.numpy(), e)
    np.testing.assert_array_equal(F.moveaxis(x, [0, 1], [-1, 0]).numpy(), np.moveaxis(x.numpy(), [0, 1], [-1, 0]))
    np.testing.assert_array_equal(F.swapaxes(x, 0, -1).numpy(), np.swapaxes(x.numpy(), 0, -1))
    assert F.flatten(x).shape == (24,)
    assert F.flatten(x, 1).shape == (2, 12)
    assert F.flatten(x, 0, -2).shape == (6, 4)
    assert F.flatten(_t(5.0)).shape == (1,)  # torch.flatten of a 0-d tensor

    got, traced = _compiled(lambda v: F.stack(F.split(v, 2, 2), 0), x)
    np.testing.assert_array_equal(got, np.stack(np.split(x.numpy(), 2, 2), 0))
    assert {r.op for r in traced.trace.records} == {"getitem", "expand_dims", "concat"}


def test_composite_gradients():
    x = _x(2, 3, dtype="float64")
    g = grad(lambda v: (F.stack([v, v * 2.0], 1) * ht.tensor(np.arange(12.0).reshape(2, 2, 3))).sum())(x).numpy()
    expected = np.arange(12.0).reshape(2, 2, 3)
    np.testing.assert_array_equal(g, expected[:, 0] + 2 * expected[:, 1])
    g = grad(lambda v: F.split(v, [1], 1)[1].sum() + F.flatten(F.swapaxes(v, 0, 1))[0])(x).numpy()
    np.testing.assert_array_equal(g, [[1.0, 1.0, 1.0], [0.0, 1.0, 1.0]])


def test_canonical_attributes_are_accepted_again_unchanged():
    cases = [
        ("flip", (2, 0, 3), {"axis": (-1, 0)}),
        ("roll", (2, 3), {"shift": (4, -1, 2), "axis": (1, 0, 1)}),
        ("roll", (2, 3), {"shift": -8}),
        ("roll", (), {"shift": 3}),
        ("pad", (2, 3), {"pad_width": 1, "mode": "reflect"}),
        ("pad", (), {"pad_width": 2, "value": 1.5}),
        ("tile", (2,), {"reps": (3, 2)}),
        ("repeat", (2, 3), {"repeats": [1, 0, 2], "axis": -1}),
        ("repeat", (), {"repeats": [2], "axis": 0}),
        ("tril", (3, 4), {"k": -100}),
        ("eye", None, {"n": 3, "m": 2, "k": 9}),
        ("linspace", None, {"start": 1, "stop": 0, "num": 4, "endpoint": False, "dtype": "int32"}),
    ]
    for name, shape, attrs in cases:
        op = get_op(name)
        avals = () if shape is None else (Aval(shape, np.dtype("float32")),)
        once = op.canonicalize(avals, dict(attrs))
        assert op.canonicalize(avals, dict(once)) == once, (name, attrs, once)


def test_layout_attributes_round_trip_through_trace_files(tmp_path):
    @xla_trace
    def f(x):
        y = F.pad(F.roll(x, (1, 2), (0, 1)), ((1, 0), (2, 1)), value=float("nan")) + 1.0
        z = F.repeat(F.tile(F.flip(x), (2, 1)), [1, 2, 0], 1)
        return y.sum() + z.sum() + F.tril(x, -1).sum() + F.eye(2, 3, 1).sum() + F.linspace(0, 1, 3).sum()

    x = _x(2, 3)
    f(x)
    f.trace.save(tmp_path / "f.trace.json")
    loaded = Trace.load(tmp_path / "f.trace.json")
    ops = [r.op for r in loaded.records]
    assert {"pad", "roll", "repeat", "tile", "flip", "tril", "eye", "linspace"} <= set(ops)
    for saved, original in zip(loaded.records, f.trace.records, strict=True):
        if saved.op == "pad":
            assert np.isnan(saved.attrs["value"]) and saved.attrs["pad_width"] == ((1, 0), (2, 1))
        else:
            assert saved == original


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: F.pad(_x(2), 1, "wrap"), "mode must be one of"),
        (lambda: F.pad(_x(2), -1), "negative width"),
        (lambda: F.pad(_x(2, 2), ((1, 2), (1, 2), (1, 2))), "one (before, after) pair per axis"),
        (lambda: F.pad(_x(2), 1.5), "must be an int"),
        (lambda: F.pad(_x(0, 2), 1, "reflect"), "cannot extend the empty axis 0"),
        (lambda: F.pad(_x(2), 1, "edge", value=3), "only applies to mode 'constant'"),
        (lambda: F.pad(_x(2, dtype="int32"), 1, value=2.5), "not an integer"),
        (lambda: F.pad(_x(2), 1, value="a"), "value must be a Python number"),
        (lambda: F.roll(_x(2, 3), (1, 2, 3), (0, 1)), "do not broadcast together"),
        (lambda: F.roll(_x(2, 3), 1, 2), "out of bounds"),
        (lambda: F.flip(_x(2, 3), (0, -2)), "repeated axis"),
        (lambda: F.tile(_x(2), (2, -1)), "negative count"),
        (lambda: F.repeat(_x(3), [1, 2]), "2 repeat counts for an axis of 3 elements"),
        (lambda: F.repeat(_x(3), -1), "negative count"),
        (lambda: F.tril(_x(3), 0), "rank >= 2"),
        (lambda: F.triu(_x(3, 3), 0.5), "k must be an int"),
        (lambda: F.eye(-1), "negative dimension"),
        (lambda: F.linspace(0, 1, -1), "num must lie in"),
        (lambda: F.linspace(0, float("inf"), 3), "finite"),
        (lambda: F.linspace(-1e308, 1e308, 3), "finite"),
        (lambda: F.linspace(0, 1e-300, 2**20), "too small"),
        (lambda: F.linspace(0, 3e9, 3, dtype="int32"), "do not fit in int32"),
        (lambda: F.stack([]), "at least one tensor"),
        (lambda: F.stack([_x(2), _x(3)]), "same shape"),
        (lambda: F.split(_x(5), 2), "do not divide axis 0 of size 5"),
        (lambda: F.moveaxis(_x(2, 3), [0, 0], [0, 1]), "repeated axis"),
        (lambda: F.moveaxis(_x(2, 3), [0], [0, 1]), "differ in length"),
        (lambda: F.flatten(_x(2, 3, 4), 2, 1), "comes after"),
        (lambda: F.swapaxes(_x(2, 3), 0, 2), "out of bounds"),
    ],
)
def test_bad_attributes_give_clear_errors(call, message):
    with pytest.raises(OpError, match=None) as info:
        call()
    assert message in str(info.value)
    assert "test_layout_ops.py" in str(info.value)  # the user's line


def _drawn(name, dtype="float32"):
    drawn = []
    checker = lambda op, sample: drawn.append(sample)  # noqa: E731
    property_test(get_op(name), CI_BASE_SEED, dtype, checker=checker, max_examples=STRATEGY_EXAMPLES)()
    return drawn


def test_strategies_draw_the_attribute_space():
    """Over the first 100 examples of the ci seed (nothing compiled), each strategy reaches
    the attribute forms and edge cases its rule could get wrong."""
    flips = [s.attrs.get("axis") for s in _drawn("flip")]
    assert None in flips and any(isinstance(a, tuple) and len(a) > 1 for a in flips)
    assert any(isinstance(a, int) and a < 0 for a in flips)

    rolls = _drawn("roll")
    assert any("axis" not in s.attrs for s in rolls)  # the flattened tensor
    sized = [
        (s.attrs["shift"], s.args[0].shape[s.attrs["axis"]]) for s in rolls if isinstance(s.attrs.get("axis"), int)
    ]
    assert any(shift < 0 for shift, _ in sized) and any(shift > n > 0 for shift, n in sized)
    assert any(
        isinstance(s.attrs.get("axis"), tuple) and len(set(s.attrs["axis"])) < len(s.attrs["axis"]) for s in rolls
    )

    pads = [s for dtype in ("float16", "bfloat16", "float32") for s in _drawn("pad", dtype)]
    canonical = [get_op("pad").canonicalize((Aval(s.args[0].shape, s.args[0].dtype),), dict(s.attrs)) for s in pads]
    modes = {c["mode"] for c in canonical}
    assert modes == {"constant", "reflect", "edge"}
    assert any(
        c["mode"] == "reflect" and any(max(w) >= d > 1 for d, w in zip(s.args[0].shape, c["pad_width"], strict=True))
        for s, c in zip(pads, canonical, strict=True)
    )  # reflecting more than once
    assert any(any(b != a for b, a in c["pad_width"]) for c in canonical)
    values = [c["value"] for c in canonical if c["mode"] == "constant"]
    assert any(np.isnan(v) for v in values) and any(v == 0 and np.signbit(v) for v in values)
    assert any(not isinstance(s.attrs["pad_width"], tuple) or len(s.attrs["pad_width"]) != s.args[0].ndim for s in pads)

    tiles = [(s.args[0].ndim, np.atleast_1d(s.attrs["reps"])) for s in _drawn("tile")]
    assert any(0 in reps for _, reps in tiles) and any(len(reps) > rank for rank, reps in tiles)
    repeats = [s.attrs["repeats"] for s in _drawn("repeat")]
    assert 0 in repeats and any(isinstance(r, list | tuple) and len(set(r)) > 1 for r in repeats)

    triangles = [(s.attrs.get("k", 0), s.args[0].shape[-2:]) for s in _drawn("tril")]
    assert any(k > cols for k, (_, cols) in triangles) and any(k < -rows for k, (rows, _) in triangles)
    assert any(len(s.args[0].shape) > 2 for s in _drawn("triu"))

    eyes = [s.attrs for s in _drawn("eye")]
    assert any(a.get("m", a["n"]) != a["n"] for a in eyes) and any(abs(a.get("k", 0)) > 6 for a in eyes)
    spaces = [s.attrs for s in _drawn("linspace", "int32")] + [s.attrs for s in _drawn("linspace")]
    nums = {a["num"] for a in spaces}
    assert {0, 1} <= nums and max(nums) > 1000
    assert any(a.get("endpoint") is False for a in spaces) and any(a["start"] == a["stop"] for a in spaces)
    assert any(isinstance(a["start"], float) and a["start"] != int(a["start"]) for a in spaces[:100])  # floored
