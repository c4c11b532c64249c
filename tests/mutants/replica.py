"""Mutants of the check that replicated inputs are equal across processes (issue 33, item 3).

hlotrace/distributed/replicas.py (fingerprints, the exchange, which tensors are compared),
hlotrace/distributed/compile.py (where a step calls it) and global_data.py (make_global).
Killed by tests/distributed/test_replica_check.py; run with
``make mutation ARGS="--only replica --columns suite"``.
"""

from hlotrace.testing.mutation import Mutant

REPLICAS = "hlotrace/distributed/replicas.py"
COMPILE = "hlotrace/distributed/compile.py"
GLOBAL_DATA = "hlotrace/distributed/global_data.py"

MUTANTS = [
    Mutant(
        id="shapes-only",
        file=REPLICAS,
        find='    return f"{array.dtype.str}{list(array.shape)}:{digest}"\n',
        replace='    return f"{array.dtype.str}{list(array.shape)}"\n',
        why="the fingerprint is the dtype and shape: replicas of other values pass as equal",
    ),
    Mutant(
        id="process-0-only",
        file=REPLICAS,
        find="    for other in range(state.num_processes):\n",
        replace="    for other in range(1):\n",
        why="every process compares with process 0's table only (process 0 with itself): no real exchange",
    ),
    Mutant(
        id="parameters-only",
        file=REPLICAS,
        find="        if whole_in_every_process(s, t.ndim):\n            named.append((name, t))\n",
        replace=(
            '        if whole_in_every_process(s, t.ndim) and type(t).__name__ == "Parameter":\n'
            "            named.append((name, t))\n"
        ),
        why="only parameters are compared: optimizer state (moments, hyper-parameters) may differ unseen",
    ),
    Mutant(
        id="checked-on-first-call-only",
        file=REPLICAS,
        find=(
            "    if last is not None and last[0] == seen and all(r() is t for r, t in zip(last[1], whole, "
            "strict=True)):\n"
        ),
        replace="    if last is not None:\n",
        why="a step proven once is never checked again, though called with other objects (another model)",
    ),
    Mutant(
        id="batch-identity-in-proof",
        file=REPLICAS,
        find="    seen = (mesh, tuple(own), tuple(grads), tuple(map(id, whole)))\n",
        replace="    seen = (mesh, tuple(own), tuple(grads), tuple(map(id, inputs)))\n",
        why="what was proven includes the batch split over the processes, a new object per call: checked every call",
    ),
    Mutant(
        id="structure-not-in-proof",
        file=REPLICAS,
        find="        if last[2] == structure:\n            return\n",
        replace="        return\n",
        why="a new signature of the same objects (eval, new optimizer state) is not checked again",
    ),
    Mutant(
        id="random-key-unchecked",
        file=COMPILE,
        find="        replicas.check_late_key(mesh)\n",
        replace="        pass\n",
        why="a step's late inputs (the default random key, replicated) are not compared",
    ),
    Mutant(
        id="make-global-unchecked",
        file=GLOBAL_DATA,
        find="    _check_replicated(local, sharding)\n",
        replace="",
        why="dist.make_global takes each process's copy of a replicated value without comparing them",
    ),
]
