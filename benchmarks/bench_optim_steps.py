"""Per-parameter vs per-group optimizer step counts (issue 38 item 2) on the GPT decoder step.

The model, batch and optimizer of ``bench_models``' ported GPT case (examples/gpt.py: nanoGPT's
decoder, 4 layers, n_embd 128, 4 heads, 16 copy-task sequences of 32 tokens, AdamW with two
parameter groups, ``clip_grad_norm_(1.0)``), built twice from one seed: one AdamW keeping a
step count per parameter (PyTorch's bookkeeping, the default), one with
``step_per_group=True``. For each, compiled with ``xla_trace``:

- XLA's optimized HLO (``executable.hlo_text()``), entry computation: fusions, kernels (every
  instruction but parameters, constants, tuples, get-tuple-element and bitcasts), how many of
  those produce a single ``f32[]``, and the ``f32[]`` outputs of the program;
- the first call (record + lower + passes + compile + one step; ``first_call="compiled"``, the
  compile cache off), ``--rounds`` times each, alternating which goes first;
- the steady step, both interleaved in one process (``benchmarks.common.compare``);
- the parameters after 3 steps of each, compared (max abs difference; 0 = bitwise equal: XLA
  compiles two different programs, so expect float32 rounding differences, amplified where
  Adam divides by a tiny second moment).

    .venv/bin/python -m benchmarks.bench_optim_steps [--repeat N] [--rounds N] [--layers N]
"""

from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("HLOTRACE_CACHE_DIR", "off")  # every first call compiles (before hlotrace reads it)

import numpy as np

from benchmarks.bench_models import GPT_BETAS, GPT_LR, GPT_WD, load_example
from benchmarks.common import compare, fmt_time, int_option, main_args, paired_ratio, print_header, print_table

REPEAT = 9
ROUNDS = 3
LOOP_SECONDS = 0.3
_NOT_KERNELS = {"parameter", "constant", "tuple", "get-tuple-element", "bitcast"}


def hlo_counts(hlo_text: str) -> dict[str, int]:
    """Counts over the entry computation of an optimized HLO module (see the module docstring)."""
    from hlotrace.runtime import hlo_parse

    module = hlo_parse.parse(hlo_text)
    entry = module.computations[module.entry]
    kernels = [i for i in entry if i.opcode not in _NOT_KERNELS]
    scalar = [i for i in kernels if hlo_parse.shapes(i.shape) == [("f32", ())]]
    root = entry[-1]
    outputs = hlo_parse.shapes(root.shape) if root.opcode == "tuple" else []
    return {
        "fusions": sum(i.opcode == "fusion" for i in kernels),
        "kernels": len(kernels),
        "f32[] kernels": len(scalar),
        "f32[] fusions": sum(i.opcode == "fusion" for i in scalar),
        "f32[] outputs": sum(1 for t, dims in outputs if t == "f32" and dims == ()),
        "outputs": len(outputs),
    }


def _case(gpt, layers: int, step_per_group: bool):
    import hlotrace as ht
    from hlotrace.autodiff import GradManager

    ht.random.seed(0)
    k = 16
    model = gpt.gpt(n_layer=layers, n_embd=128, n_head=4, block_size=2 * k + 1, vocab_size=gpt.VOCAB)
    params = list(model.parameters())
    groups = [  # examples/gpt.py's configure_optimizers: decay on matrices and embeddings only
        {"params": [p for p in params if p.ndim >= 2], "weight_decay": GPT_WD},
        {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0},
    ]
    opt = gpt.torch.optim.AdamW(groups, lr=GPT_LR, betas=GPT_BETAS, step_per_group=step_per_group)
    gm = GradManager().attach(model.parameters())
    x, y = gpt.batch(np.random.default_rng(0), 16, k)
    return model, opt, gm, [ht.tensor(x), ht.tensor(y)]


def main(argv: list[str] | None = None) -> dict:
    argv = main_args(argv)
    repeat, rounds = int_option(argv, "--repeat", REPEAT), int_option(argv, "--rounds", ROUNDS)
    layers = int_option(argv, "--layers", 4)
    print_header("Per-parameter vs per-group optimizer step counts (GPT decoder)", "benchmarks.bench_optim_steps", argv)
    import hlotrace as ht

    gpt = load_example("gpt")
    modes = {"per parameter": False, "per group": True}
    cases = {name: _case(gpt, layers, flag) for name, flag in modes.items()}
    print(f"GPT: {layers} layers, {len(list(cases['per parameter'][0].parameters()))} parameter tensors")

    def caller(name, traced):
        model, opt, gm, batch = cases[name]
        return lambda: traced(*batch, model=model, opt=opt, gm=gm)

    first: dict[str, list[float]] = {name: [] for name in modes}
    traced = {}
    for r in range(rounds):  # a fresh xla_trace each round: record, lower, passes, compile, one step
        order = list(modes) if r % 2 == 0 else list(reversed(modes))
        for name in order:
            fn = ht.xla_trace(gpt.train_step, first_call="compiled")
            call = caller(name, fn)
            start = time.perf_counter()
            call().block_until_ready()
            first[name].append(time.perf_counter() - start)
            traced[name] = fn
    # Same trajectory check: fresh models, 3 steps each on the traced functions' programs.
    fresh = {name: _case(gpt, layers, flag) for name, flag in modes.items()}
    for name in modes:
        model, opt, gm, batch = fresh[name]
        fn = ht.xla_trace(gpt.train_step, first_call="compiled")
        for _ in range(3):
            fn(*batch, model=model, opt=opt, gm=gm)
    pairs = zip(fresh["per parameter"][0].parameters(), fresh["per group"][0].parameters(), strict=True)
    worst = max(float(np.max(np.abs(a.numpy() - b.numpy()))) for a, b in pairs)
    print(f"parameters after 3 compiled steps, per group vs per parameter: max abs difference {worst:.3g}")

    counts = {name: hlo_counts(traced[name].executable.hlo_text()) for name in modes}
    columns = list(counts["per parameter"])
    print_table(
        ["optimized HLO (entry)", *modes],
        [[c, *(counts[name][c] for name in modes)] for c in columns],
        title="XLA's optimized program",
    )
    calls = {name: caller(name, traced[name]) for name in modes}
    timings = compare(
        {name: (lambda call=call: call().block_until_ready()) for name, call in calls.items()},
        repeat=repeat,
        warmup=2,
        min_loop_seconds=LOOP_SECONDS,
    )
    rows = []
    for name in modes:
        t = timings[name]
        rows.append(
            [name, fmt_time(t.best), fmt_time(t.median), f"{min(first[name]):.2f} s", f"{max(first[name]):.2f} s"]
        )
    print_table(
        ["step counts", "step best", "step median", "first call min", "first call max"],
        rows,
        title=f"steady step ({repeat} interleaved loops each) and first call ({rounds} each, alternating)",
    )
    a, b = timings["per group"], timings["per parameter"]
    print(
        f"per group / per parameter: step best {a.best / b.best:.3f}, median {a.median / b.median:.3f}, "
        f"paired (median of loop ratios) {paired_ratio(a, b):.3f}; "
        f"first call min {min(first['per group']) / min(first['per parameter']):.3f}"
    )
    return {"counts": counts, "first": first, "best": {n: timings[n].best for n in modes}, "max_abs": worst}


if __name__ == "__main__":
    main(sys.argv[1:])
