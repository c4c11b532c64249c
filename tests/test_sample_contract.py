"""Every sample an op's strategy draws satisfies that op's own contract (issue 24).

The property and gradient tests call an op on what its ``sample`` strategy draws; a sample
the op refuses (clip's strategy drew a bound as a bfloat16 scalar, which clip refused) fails
those tests under some seeds only. Here each op's strategy is drawn from ``SAMPLES_PER_SEED``
times (50; 200 under the thorough profile) under base seed 0 and under a fresh random base
seed (printed on failure), and each sample goes through ``apply`` (operand conversion, weak
scalars, the op's canonicalization and inference) with the NumPy reference replaced by zeros of the inferred shape: nothing is
computed or compiled, so a contract error is the only way to fail.
"""

import dataclasses
import os
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings

from hlotrace.avals import Aval
from hlotrace.dispatch import apply
from hlotrace.ops import OPS
from hlotrace.tensor import Tensor
from hlotrace.testing import strategies
from hlotrace.testing.check import example_seed

# Per op and base seed (two base seeds); `make test-thorough`'s profile draws more.
SAMPLES_PER_SEED = 200 if os.environ.get("HLOTRACE_HYPOTHESIS_PROFILE") == "thorough" else 50
RANDOM_BASE = int.from_bytes(os.urandom(4), "little")
SAMPLED = sorted(name for name, op in OPS.items() if op.sample is not None)


def _unevaluated(op):
    """``op`` with its reference replaced by zeros of the shape and dtype inference gives
    (inferred again from the operands: ``apply`` memoizes inference, so the reference cannot
    count on an inference call just before it)."""

    def reference(*arrays, **attrs):
        aval = op.infer(*(Aval(a.shape, a.dtype) for a in arrays), **attrs)
        return np.zeros(aval.shape, aval.dtype)

    return dataclasses.replace(op, reference=reference)


def _operand(value):
    return Tensor._from_array(np.array(value)) if isinstance(value, np.ndarray) else value


def check_samples(name: str, base: int, count: int = SAMPLES_PER_SEED) -> None:
    op = OPS[name]
    quiet = _unevaluated(op)

    @settings(
        max_examples=count,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @seed(example_seed(f"contract:{name}", base))
    @given(op.sample(strategies))
    def accepts(sample):
        try:
            apply(quiet, *[_operand(a) for a in sample.args], **sample.attrs)
        except Exception as exc:
            exc.add_note(f"op {name}: its sample strategy drew {sample!r}, which the op refuses (base seed {base})")
            raise

    accepts()


@pytest.mark.parametrize("base", [0, RANDOM_BASE], ids=["seed0", "random"])
def test_every_sample_satisfies_its_ops_contract(base):
    start = time.monotonic()
    failures = []
    for name in SAMPLED:
        try:
            check_samples(name, base)
        except Exception as exc:  # collect all, not just the first op
            failures.append(f"{name}: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
    assert not failures, f"base seed {base}: samples their op refuses:\n" + "\n".join(failures)
    print(f"{len(SAMPLED)} ops x {SAMPLES_PER_SEED} samples, base seed {base}: {time.monotonic() - start:.1f}s")


def test_the_contract_check_catches_a_refused_sample():
    """A strategy that draws what its op refuses fails the check (clip's old bfloat16 bound:
    here a string bound, which clip will always refuse)."""
    clip = OPS["clip"]

    def bad_sample(s):
        return s.st.builds(lambda: s.OpSample((np.zeros(2, np.float32),), {"min": "0", "max": None}))

    OPS["clip-with-bad-sample"] = dataclasses.replace(clip, name="clip-with-bad-sample", sample=bad_sample)
    try:
        with pytest.raises(Exception, match="must be a Python number"):
            check_samples("clip-with-bad-sample", 0, count=5)
    finally:
        del OPS["clip-with-bad-sample"]
