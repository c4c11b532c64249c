"""Model training steps: the examples' CNN and transformer steps, hlotrace compiled vs the
same math in jax.jit vs hlotrace eager.

- CNN: examples/train_cnn.py's ConvNet (conv3x3 BN ReLU maxpool ×2, linear) on a batch of
  64 1×8×8 images, cross-entropy, backward, AdamW, batch-norm running statistics updated.
- transformer: examples/train_transformer.py's 2-layer causal LM (d=64, 4 heads, GELU MLP)
  on a batch of 32 sequences of 17 tokens, cross-entropy over the copy half, AdamW.

The jax peers are written in jax.numpy/lax from the same formulas (PyTorch's AdamW, biased
batch variance for normalization and the unbiased one for the running statistics with
MegEngine's momentum 0.9, exact GELU), jitted with parameters, optimizer state and buffers
donated and the learning rate as an argument. Both start from the hlotrace model's initial
weights and are checked against each other for three steps before timing.

Issue target: compiled / jax.jit <= 1.1 for both steps.

The ported PyTorch models (issue 36; examples/resnet.py, examples/gpt.py), each vs a jax.jit
peer written from the same formulas and checked against it for three steps first:

- ResNet-18: torchvision's layout, CIFAR-shaped (3x32x32 images, 3x3 stem, no max pool, width
  64 as torchvision), batch 32, cross-entropy, SGD (momentum 0.9, weight decay 5e-4: PyTorch's
  formula), batch-norm running statistics updated;
- GPT: nanoGPT's decoder, 4 layers, n_embd 128, 4 heads, on 16 copy-task sequences of 32
  tokens (``ignore_index=-1`` before the copy), causal attention (nanoGPT's flash branch,
  ``scaled_dot_product_attention(..., is_causal=True)``; the peer masks with its own ``tril``), exact GELU, tied head, ``clip_grad_norm_(1.0)``, AdamW with two parameter groups
  (decay 0.1 on matrices and embeddings only, betas (0.9, 0.95), a step count per parameter).

Those two are not run eagerly (issue 36 measured 27 s for a NumPy-engine ResNet-18 step). ``--ported-only`` runs
just them; ``--skip-ported`` the CNN and transformer only; ``--resnet-batch N``,
``--resnet-width N`` and ``--gpt-layers N`` change their sizes; ``--small`` (run_all's) runs a
width-16 ResNet-18 on 8 images and a 2-layer GPT. ``--passes PIPELINE`` adds a candidate to the CNN,
ResNet-18 and GPT tables: hlotrace's step compiled with that pass pipeline (``<default>`` in it stands
for the common default, ``hlotrace.passes.DEFAULT_PIPELINE``, e.g. ``--passes '<default>,layout'``), from
the same initial weights, its losses checked against the default pipeline's, timed interleaved with the
others. The table's own hlotrace row runs xla_trace's default for the platform, which on the CPU already
ends with ``layout``: there compare ``--passes '<default>'`` with it, or use ``--ahead``.

``--ahead`` (issue 38 item 4) runs :mod:`benchmarks.bench_ahead` instead: ResNet-18, the CNN,
the GPT and bench_train's MLP, hlotrace with the default pipeline and with ``<default>,layout``
against jax.jit of the same program and against the program written NHWC/HWIO (the convnets),
"ahead" marking every ratio below 1, and the layout pipeline's compile time against the
default's (its options and sizes: that module's docstring).

The code: the jax peers in :mod:`benchmarks.model_peers`, the CNN and transformer comparison in
:mod:`benchmarks.model_steps`, the ported models' in :mod:`benchmarks.ported_steps`.

    .venv/bin/python -m benchmarks.bench_models [--repeat N] [--ported-only | --skip-ported] [--passes P]
    .venv/bin/python -m benchmarks.bench_models --ahead [--small] [--repeat N] [--resnet-batch N] ...
    .venv/bin/python -m benchmarks.bench_models [--ahead] --help
"""

from __future__ import annotations

import sys

from benchmarks.common import int_option, main_args, print_header, small_requested

# Re-exported: the names other benchmarks, device_check.sh and BENCHMARKS.md's commands import from here.
from benchmarks.model_peers import (  # noqa: F401
    BETAS,
    EPS,
    GPT_BETAS,
    GPT_LR,
    GPT_WD,
    LR,
    SGD_LR,
    WD,
    load_example,
)
from benchmarks.model_steps import TARGET, compare_steps, example_net_copy, model_cases, setup_pair  # noqa: F401
from benchmarks.ported_steps import compare_ported, ported_cases

REPEAT = 7


def main(argv: list[str] | None = None) -> dict:
    argv = main_args(argv)
    if "--ahead" in argv:
        from benchmarks import bench_ahead

        return bench_ahead.main([a for a in argv if a != "--ahead"])
    if "--help" in argv or "-h" in argv:
        print(__doc__)
        return {}
    repeat = int_option(argv, "--repeat", REPEAT)
    ported_only, skip_ported = "--ported-only" in argv, "--skip-ported" in argv
    pipeline = argv[argv.index("--passes") + 1] if "--passes" in argv else None
    if pipeline is not None:
        from hlotrace import passes

        pipeline = pipeline.replace("<default>", passes.DEFAULT_PIPELINE)
    print_header(
        "model training steps: CNN (digits) and causal transformer (copy task), AdamW; ported ResNet-18 and GPT",
        "benchmarks.bench_models",
        argv,
    )
    result: dict = {"bench": "models", "target": TARGET}
    if not ported_only:
        (cnn, lm) = model_cases()
        r_cnn = compare_steps(*cnn, repeat, pipeline)
        r_lm = compare_steps(*lm, repeat)
        worst = max(r_cnn["ratio"], r_lm["ratio"])
        result.update(cnn=r_cnn, transformer=r_lm, hlotrace_s=r_cnn["hlotrace_s"], jax_s=r_cnn["jax_s"], ratio=worst)
    if not skip_ported:
        small = small_requested(argv)  # run_all --small: a width-16 ResNet-18 on 8 images, 2 GPT layers
        cases = ported_cases(
            resnet_batch=int_option(argv, "--resnet-batch", 8 if small else 32),
            resnet_width=int_option(argv, "--resnet-width", 16 if small else 64),
            gpt_layers=int_option(argv, "--gpt-layers", 2 if small else 4),
        )
        ported = {
            key: compare_ported(*case[:9], repeat, twin=case[9], pipeline=pipeline)
            for key, case in zip(("resnet18", "gpt"), cases, strict=True)
        }
        result.update(ported)
        result["ported_ratio"] = max(r["ratio"] for r in ported.values())
        if ported_only:
            result.update(hlotrace_s=ported["resnet18"]["hlotrace_s"], jax_s=ported["resnet18"]["jax_s"])
            result["ratio"] = result["ported_ratio"]
    result["met"] = result["ratio"] <= TARGET
    return result


if __name__ == "__main__":
    main()
    sys.exit(0)
