"""Mutants of the per-group step counts (issue 38 item 2, ``step_per_group=True``): a count
advanced for a parameter without a gradient, one ``step`` written per group, loaded counts
averaged, a split program replayed after the counts merge.

hlotrace/optim/steps.py (advance, split, load), hlotrace/optim/optimizer.py (state_dict, the
static key). Killed by tests/test_optim_step_groups.py (each was checked by hand against that
file alone); run with ``make mutation ARGS="--only optim_steps --columns suite"``.
"""

from hlotrace.testing.mutation import Mutant

STEPS = "hlotrace/optim/steps.py"
OPTIMIZER = "hlotrace/optim/optimizer.py"

MUTANTS = [
    Mutant(
        id="skipped-parameter-count-advances",
        file=STEPS,
        find="        if skipped:\n            _split_off(opt, group, count, skipped)\n",
        replace="",
        why="a parameter whose grad is None keeps sharing its group's count, which advances without it",
    ),
    Mutant(
        id="state-dict-one-step-per-group",
        file=OPTIMIZER,
        find="state[index] = {name: np.array(t.numpy(), copy=True) for name, t in st.items()}",
        replace=(
            "state[index] = {name: np.array(t.numpy(), copy=True) for name, t in st.items()"
            ' if name != "step" or index == entry["params"][0]}'
        ),
        why="state_dict() writes the shared count once per group (at its first parameter), not PyTorch's layout",
    ),
    Mutant(
        id="load-averages-unequal-steps",
        file=STEPS,
        find="        for value, members in by_value.items():\n",
        replace=(
            "        everyone = [p for ms in by_value.values() for p in ms]\n"
            "        mean = sum(v * len(ms) for v, ms in by_value.items()) / max(len(everyone), 1)\n"
            "        for value, members in ([(mean, everyone)] if everyone else []):\n"
        ),
        why="load_state_dict() makes one count per group from unequal per-parameter steps (their mean)",
    ),
    Mutant(
        id="split-program-replayed",
        file=OPTIMIZER,
        find='("step_per_group", self._step_splits)',
        replace='("step_per_group", 0)',
        why="the static key lacks the split counter: the program that split is replayed after a load merged the counts",
    ),
]
