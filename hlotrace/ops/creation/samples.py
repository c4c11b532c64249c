"""The creation family's sample strategies (``s`` is hlotrace.testing.strategies, passed in)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from hlotrace import dtypes as dt


def fill_sample(s, name):
    @s.st.composite
    def sample(draw):
        dtype = draw(s.dtypes(s.ALL))
        rng = s.generator(draw)
        shape = s.random_shape(rng)
        if rng.random() < 1 / 6:
            shape = list(shape)  # lists and plain ints are accepted too
        elif rng.random() < 1 / 6 and len(shape) == 1:
            shape = shape[0]
        attrs = {"shape": shape, "dtype": dtype}
        if name == "full":
            # Boundary and special values (-0.0, NaN, subnormals, integer extremes) and
            # values of another kind than the dtype (an int filling a float tensor).
            kind = dtype if rng.random() < 3 / 4 else (dt.int32, dt.float32, dt.bool_)[rng.integers(0, 3)]
            if dtype in dt.INTEGER and kind not in (dt.bool_, dt.int32):
                kind = dtype  # a float (or too large an int) cannot fill an integer tensor
            attrs["value"] = s.values(kind).scalar(rng)
            if rng.random() < 1 / 8 and dtype == dt.promote(dt.Weak(type(attrs["value"]))):
                del attrs["dtype"]  # the default: the value's own dtype
        elif rng.random() < 1 / 8 and dtype == dt.float32:
            del attrs["dtype"]
        return s.OpSample((), attrs)

    return sample()


def arange_sample(s):
    @s.st.composite
    def sample(draw):
        rng = s.generator(draw)
        dtype = draw(s.dtypes(s.NUMERIC))
        n = int(rng.choice([0, 1, 2, 5, 17, 64, 128])) if rng.random() < 1 / 2 else int(rng.integers(0, 40))
        if dtype in dt.INTEGER:
            info = np.iinfo(dtype)
            step = int(rng.integers(1, 6)) * int(rng.choice([-1, 1]))
            if rng.random() < 1 / 6:
                step *= 1000003
            start = int(rng.integers(-20, 21))
            if rng.random() < 1 / 6:  # near the ends of the dtype's range
                start = int(info.max) - int(rng.integers(0, 3)) if step < 0 else int(info.min) + int(rng.integers(0, 3))
                n = min(n, 40)
            if rng.random() < 1 / 10:
                # A step beyond the dtype's range: one value, or two from one end to the other.
                start, step, n = int(info.min), 2 ** (8 * dtype.itemsize) - 1, int(rng.integers(1, 3))
            shortfall = int(rng.integers(0, min(abs(step), 2**31)))
            stop = start + n * step - (1 if step > 0 else -1) * shortfall  # length n
            kwargs = {"start": start, "stop": stop, "step": step}
        elif rng.random() < 2 / 3:
            # Multiples of 1/16: every value is exact in float32, so rounding cannot differ.
            start = int(rng.integers(-256, 257)) / 16
            step = int(rng.integers(1, 65)) / 16 * float(rng.choice([-1, 1]))
            stop = start + n * step - float(rng.uniform(0, abs(step))) * float(np.sign(step))
            kwargs = {"start": start, "stop": stop, "step": step}
        else:
            # General floats. For float32 and float64, start and step of one sign, so that
            # start + i * step never nearly cancels (where a fused multiply-add rounds
            # differently from two roundings); float16/bfloat16 results absorb that float32
            # rounding, so there the terms may cancel (where rounding step to the result
            # dtype first shows).
            sign = float(rng.choice([-1, 1]))
            start = sign * float(rng.uniform(0, 10)) if rng.random() < 3 / 4 else 0.0
            if dtype.itemsize == 2 and rng.random() < 1 / 2:
                start = -start
            step = sign * float(rng.uniform(0.01, 3))
            stop = start + step * n * float(rng.uniform(0.9, 1.0))
            kwargs = {"start": start, "stop": stop, "step": step}
        if kwargs["start"] == 0 and rng.random() < 1 / 2 and kwargs["step"] == 1:
            kwargs = {"start": kwargs["stop"]}  # arange(stop)
        if rng.random() < 3 / 4 or dtype != dt.promote(*(dt.Weak(type(v)) for v in kwargs.values())):
            kwargs["dtype"] = dtype
        return s.OpSample((), kwargs)

    return sample()


def eye_sample(s):
    @s.st.composite
    def sample(draw):
        dtype, rng = draw(s.dtypes(s.ALL)), s.generator(draw)
        n = int(rng.integers(0, 7))
        attrs = {"n": n, "dtype": dtype}
        if rng.random() < 0.7:
            attrs["m"] = int(rng.integers(0, 7))
        m = attrs.get("m", n)
        if rng.random() < 0.8:
            attrs["k"] = int(rng.integers(-n - 1, m + 2)) if rng.random() < 0.85 else int(rng.choice([-(2**40), 2**40]))
        if dtype == dt.float32 and rng.random() < 0.2:
            del attrs["dtype"]
        return s.OpSample((), attrs)

    return sample()


def linspace_sample(s):
    @s.st.composite
    def sample(draw):
        dtype, rng = draw(s.dtypes(s.ALL)), s.generator(draw)
        num = int(rng.choice([0, 1, 2, 3, 5, 17, 50])) if rng.random() < 0.4 else int(rng.integers(0, 41))
        pick = rng.random()
        if pick < 0.15:
            # A long ramp (XLA:CPU fuses multiply and add in long loops) through 0 and other
            # integers, with step r / q rounded to the side where a fused multiply-add lands
            # just short of them: NumPy's two roundings give them exactly, one rounding does not.
            q, r, t = int(rng.choice([3, 7, 9, 11, 13])), int(rng.choice([1, 2, 4, 5])), int(rng.integers(5, 31))
            m = int(rng.integers(max(2 * t, 1000 // q), 3000 // q))
            sign = 1 if Fraction(r / q) < Fraction(r, q) else -1
            start, num = -sign * r * t, m * q + 1
            stop = start + sign * m * r
        elif pick < 0.3:
            # An endpoint that i * step + start misses: stop -0.0 (where start + (num - 1) *
            # step gives +0.0 or a tiny value), or for integers and bools a stop just above
            # the computed value (it floors lower) or 0 where the computed value is not.
            stop = -0.0 if dtype in dt.FLOATING else 0.0 if dtype == dt.bool_ else float(rng.integers(-3, 4))
            for _ in range(50):
                start, num = float(rng.uniform(-10, 10)), int(rng.integers(2, 41))
                last = (num - 1) * ((stop - start) / (num - 1)) + start
                if dtype in dt.FLOATING or (last != 0 if dtype == dt.bool_ else math.floor(last) != stop):
                    break
        elif pick < 0.55 or (dtype in dt.INTEGER and rng.random() < 0.5):
            # Integer ends (for integer dtypes, NumPy floors values just below an integer).
            start, stop = (int(v) for v in rng.integers(-30, 31, 2))
        elif pick < 0.65:
            start = stop = float(rng.choice([0.0, -0.0, 1.5]))  # a zero step
            stop = float(rng.choice([stop, 0.0, -0.0]))
        else:  # values whose floor needs care, cancelling ends, larger magnitudes
            scale = 10.0 ** int(rng.integers(0, 4 if dtype != dt.float16 else 3))
            start, stop = (float(v) for v in rng.uniform(-scale, scale, 2))
            if rng.random() < 0.3:
                stop = -start
        if pick >= 0.3 and rng.random() < 0.1:
            start = float(rng.choice([0.0, -0.0]))  # 0 * (negative step) + 0.0 is +0.0
        attrs = {"start": start, "stop": stop, "num": num, "dtype": dtype}
        if rng.random() < 0.5:
            attrs["endpoint"] = pick < 0.3 or bool(rng.random() < 0.4)
        if dtype == dt.float32 and rng.random() < 0.2:
            del attrs["dtype"]
        return s.OpSample((), attrs)

    return sample()
