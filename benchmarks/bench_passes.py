"""The passes' measured effects, in one run: softmax and layer norm (fuse-reductions,
elide-guards), composites (fuse-elementwise), the remat memory/time table, and what the
passes cost per 1,000 ops. Each section is its own module and can run alone.

    .venv/bin/python -m benchmarks.bench_passes [--small] [--repeat N]
"""

from __future__ import annotations

import sys

from benchmarks import passes_composites, passes_pipeline, passes_reductions, passes_remat
from benchmarks.common import main_args

SECTIONS = (passes_reductions, passes_composites, passes_remat, passes_pipeline)


def main(argv: list[str] | None = None) -> dict:
    argv = main_args(argv)
    results = {section.__name__.rsplit(".", 1)[-1]: section.main(argv) for section in SECTIONS}
    softmax, remat = results["passes_reductions"], results["passes_remat"]
    composites = results["passes_composites"]
    return {
        "bench": "passes",
        "sections": results,
        "ratio": softmax["ratio"],
        "target": softmax["target"],
        "met": softmax["met"] and remat["met"] and remat["beats_jax_checkpoint"] and composites["met"],
    }


if __name__ == "__main__":
    main()
    sys.exit(0)
