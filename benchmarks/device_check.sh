#!/usr/bin/env bash
# The GPU checks of a session lent a device machine, in one call (BENCHMARKS.md, TESTING.md):
# run from the repo root on the GPU machine, where jax with the CUDA PJRT plugin is installed
# and nothing can be downloaded (hlotrace runs from the checkout, PYTHONPATH=.).
#
#   bash benchmarks/device_check.sh [part ...]
#   parts: env mesh models profile train ops firstcall hlo demo (default: the first six)
#   OPS_ARGS="-k cumsum" narrows the ops part.
#
# Each part has its own time limit and log (in $OUT when set, else ./device-logs); a part
# that fails does not stop the others. The summary at the end lists each part's exit status.
set -u
cd "$(dirname "$0")/.."
LOGS=${OUT:-device-logs}
mkdir -p "$LOGS"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
# Several pytest workers share the GPU: no worker may take most of its memory up front.
export XLA_PYTHON_CLIENT_PREALLOCATE=false
PY=${PYTHON:-python3}
PARTS=${*:-env mesh models profile train ops}
SUMMARY=()

part() {  # part NAME SECONDS COMMAND...
    local name=$1 limit=$2
    shift 2
    local start=$SECONDS
    echo "== $name (limit ${limit}s): $*"
    timeout "$limit" "$@" >"$LOGS/$name.log" 2>&1
    local rc=$?
    tail -n 25 "$LOGS/$name.log"
    SUMMARY+=("$name rc=$rc $((SECONDS - start))s")
}

for p in $PARTS; do
    case $p in
    env)
        part env 60 bash -c "nvidia-smi -L; $PY -c 'import sys, jax, jaxlib, numpy, ml_dtypes, hypothesis; print(sys.version); print(\"jax\", jax.__version__, \"jaxlib\", jaxlib.__version__, \"numpy\", numpy.__version__, \"ml_dtypes\", ml_dtypes.__version__, \"hypothesis\", hypothesis.__version__); print(jax.devices())'; $PY -c 'import hlotrace.distributed as dist; from hlotrace import runtime; print(\"hlotrace platform:\", runtime.platform_name(), dist.devices())'; $PY -m benchmarks.device_paths"
        ;;
    models) # issue 20: the CNN and transformer steps vs jax.jit (target <= 1.1x)
        part models 200 "$PY" -m benchmarks.bench_models --repeat 5
        ;;
    profile) # host time per call (enqueue) vs jax.jit, and hlotrace's Python profile
        part profile 120 "$PY" -m benchmarks.profile_models --repeat 5 --calls 200
        ;;
    mesh) # issue 19: one-device CUDA meshes (every op, training steps, inspection, checkpoints)
        part mesh 240 "$PY" -m pytest -q -p no:cacheprovider -n 4 -k cuda tests/distributed/test_platform_mesh.py
        ;;
    train) # the MLP step and the dispatch chain vs jax.jit
        part train 150 bash -c "$PY -m benchmarks.bench_train --repeat 3 && $PY -m benchmarks.bench_overhead"
        ;;
    ops) # the generated property and gradient tests on CUDA (make test-gpu)
        part ops 300 env HLOTRACE_HYPOTHESIS_PROFILE=gpu "$PY" -m pytest -q -p no:cacheprovider -n 6 \
            --one-dtype-per-kind tests/test_op_properties.py tests/test_gradients.py ${OPS_ARGS:-}
        ;;
    firstcall) # first_call="compiled" against the eager recording, every op, on CUDA
        part firstcall 200 "$PY" -m pytest -q -p no:cacheprovider -n 6 tests/test_first_call.py
        ;;
    hlo) # the transformer step's optimized HLO, hlotrace's and jax.jit's, in one tarball
        part hlo 150 bash -c "rm -rf /tmp/hlo && HLOTRACE_CACHE_DIR=off XLA_FLAGS='--xla_dump_to=/tmp/hlo --xla_dump_hlo_as_text' $PY -c 'from benchmarks.bench_models import model_cases, setup_pair; setup_pair(*model_cases()[1])' && tar czf $LOGS/hlo.tar.gz -C /tmp hlo && ls /tmp/hlo | wc -l"
        ;;
    demo) # the MLP demo end to end (make demo)
        part demo 120 "$PY" examples/train_mlp.py
        ;;
    *) echo "unknown part $p" ;;
    esac
done
echo "== summary"
printf '%s\n' "${SUMMARY[@]}"
