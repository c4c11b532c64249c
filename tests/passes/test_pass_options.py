"""Pass options are checked once, the same way for `hlotrace passes --check` and for a
pipeline the manager runs: an unknown option or a bad value is a PassError naming the pass,
the option, the value and the valid ones (generated over every registered pass)."""

from __future__ import annotations

import numpy as np
import pytest

import hlotrace as ht
from hlotrace import functional as F
from hlotrace import passes
from hlotrace.errors import PassError
from hlotrace.jit import xla_trace
from hlotrace.passes.options import check_options
from hlotrace.passes.registry import PASSES, PassDef
from hlotrace.tools.cli import main

passes.parse_pipeline("")  # registers hlotrace's own passes

# (pipeline, what the message must say) -- the ones `passes --check` used to accept.
BAD = [
    ("remat{policy=wrong}", ["remat", "policy='wrong'", "none, every, sqrt, budget"]),
    ("cse{foo=1}", ["'cse'", "'foo'", "foo=1", "its options: none"]),
    ("remat{every=abc}", ["remat", "every='abc'", "K >= 1"]),
    ("remat{every=0}", ["remat", "every=0", ">= 1"]),
    ("remat{budget=12parsecs}", ["remat", "budget='12parsecs'", "200MB"]),
    ("canonicalize{max-iterations=abc}", ["'canonicalize'", "max-iterations='abc'", "integer"]),
    ("canonicalize{top-down=yes}", ["'canonicalize'", "top-down='yes'", "true, false"]),
    ("fuse-elementwise{x=1}", ["'fuse-elementwise'", "'x'", "x=1"]),
]


@pytest.fixture(scope="module")
def lowered():
    traced = xla_trace(lambda x: F.tanh(x) * 2.0, passes="")
    traced(ht.tensor(np.ones(3, np.float32)))
    return traced.lowered


@pytest.mark.parametrize("pipeline, parts", BAD)
def test_the_check_and_the_manager_refuse_alike(pipeline, parts, lowered, capsys):
    assert main(["passes", "--check", pipeline]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("hlotrace: error: "), err
    for part in parts:
        assert part in err[0], (part, err[0])
    with pytest.raises(PassError) as raised:
        passes.run(lowered, pipeline)
    assert err[0] == f"hlotrace: error: {' '.join(str(raised.value).split())}"


@pytest.mark.parametrize("pipeline", ["remat{policy=sqrt}", "remat{every=2},cse", "canonicalize{max-iterations=3}"])
def test_good_options_pass_the_check_and_run(pipeline, lowered, capsys):
    assert main(["passes", "--check", pipeline]) == 0
    assert capsys.readouterr().out.strip() == pipeline
    passes.run(lowered, pipeline)


@pytest.mark.parametrize("name", sorted(PASSES))
def test_every_pass_refuses_an_unknown_option_and_names_bad_values(name):
    definition = PASSES[name]
    with pytest.raises(PassError, match=rf"pass '{name}' has no option 'no-such-option' \(its options: "):
        check_options(definition, {"no-such-option": "1"})
    for option in definition.options:
        try:
            check_options(definition, {option: "@@bad@@"})
        except PassError as exc:
            message = str(exc)
            assert name in message and option in message and "@@bad@@" in message, message
            continue
        # Accepted: a free-text option (a pattern name), which MLIR's parser took too.


def test_mlir_has_the_last_word_on_its_passes_options():
    # Declared here but unknown to MLIR: running it would fail, so the check does.
    fake = PassDef("cse", None, "cse", {"bogus": "not an MLIR option"}, builtin=True, module="mlir")
    with pytest.raises(PassError, match=r"pass 'cse': MLIR refuses bogus=1: .*no such option bogus"):
        check_options(fake, {"bogus": "1"})


def test_a_user_pass_validates_its_options():
    def validate(options):
        if options.get("size", "1") not in ("1", "2"):
            raise PassError(f"pass 'sized': size={options['size']!r} is not one of 1, 2")

    passes.register_pass("sized", options={"size": "1 | 2"}, validate=validate, description="a test pass")(
        lambda module, options: None
    )
    try:
        assert passes.pipeline_text(passes.parse_pipeline("sized{size=2}")) == "sized{size=2}"
        with pytest.raises(PassError, match="size='3' is not one of 1, 2"):
            passes.parse_pipeline("sized{size=3}")
    finally:
        passes.unregister_pass("sized")
