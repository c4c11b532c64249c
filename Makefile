# Fresh machine: `make demo` and `make test` create .venv and install on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: install demo demo-softmax demo-cnn demo-transformer demo-resnet demo-gpt demo-unet demo-multiprocess demo-spmd test test-thorough test-seeds test-gpu test-device mutation lint format bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/train_mlp.py

# The first demo: a fused softmax recorded, lowered, compiled and timed against jax.jit.
demo-softmax: $(STAMP)
	$(BIN)/python examples/softmax_demo.py

# A ConvNet with batch norm on the digits images, and a causal transformer on a copy task.
demo-cnn: $(STAMP)
	$(BIN)/python examples/train_cnn.py

demo-transformer: $(STAMP)
	$(BIN)/python examples/train_transformer.py

# Ported PyTorch models (imports swapped): torchvision's ResNet-18 (width 16 on 16x16 digits;
# ARGS="--width 64 --size 32" for CIFAR-shaped, --arch resnet50), nanoGPT's GPT on a copy task,
# and a small UNet on a toy segmentation. Each is a compiled step; ARGS passes more flags.
demo-resnet: $(STAMP)
	$(BIN)/python examples/resnet.py $(ARGS)

demo-gpt: $(STAMP)
	$(BIN)/python examples/gpt.py $(ARGS)

demo-unet: $(STAMP)
	$(BIN)/python examples/unet.py $(ARGS)

# Data-parallel training over 2 processes x 4 CPU devices (hlotrace.distributed.launch).
demo-multiprocess: $(STAMP)
	$(BIN)/python -m hlotrace.distributed.launch --nproc 2 --cpu-devices 4 examples/train_multiprocess.py

# The MLP data-parallel and FSDP-style on 8 CPU devices (XLA's SPMD partitioner).
demo-spmd: $(STAMP)
	HLOTRACE_CPU_DEVICES=8 $(BIN)/python examples/train_spmd.py

# Test workers (pytest-xdist): one per core by default; TEST_JOBS=0 runs in one process.
TEST_JOBS ?= auto

test: $(STAMP)
	$(BIN)/python -m pytest -n $(TEST_JOBS)

test-thorough: $(STAMP)
	HLOTRACE_HYPOTHESIS_PROFILE=thorough $(BIN)/python -m pytest tests/test_op_properties.py tests/test_sample_contract.py

# The generated property and gradient tests under SEEDS random base seeds, ci's example
# budget (not part of `make test`; TESTING.md, "Issue 24"). Extra options: SEEDS_ARGS="--profile dev -k divide".
SEEDS ?= 10
test-seeds: $(STAMP)
	$(BIN)/python -m hlotrace.testing.seeds --seeds $(SEEDS) --jobs $(TEST_JOBS) $(SEEDS_ARGS)

# The generated property and gradient tests on the default platform (CUDA when present;
# the CPU, HLOTRACE_PLATFORM=cpu, without nvidia-smi): 10 examples, one case per dtype kind.
test-gpu: $(STAMP)
	HLOTRACE_HYPOTHESIS_PROFILE=gpu $(if $(shell command -v nvidia-smi 2>/dev/null),,HLOTRACE_PLATFORM=cpu) \
	$(BIN)/python -m pytest -n $(TEST_JOBS) --one-dtype-per-kind tests/test_op_properties.py tests/test_gradients.py

# The suites users' code paths go through, with every eager op on the device engine
# (HLOTRACE_EAGER=device; `make test` runs the NumPy engine plus the engine column): calling
# conventions, fault paths, autodiff, optimizers, nn, losses, random draws, first calls,
# partial_trace, seeds, the SPMD conventions (TESTING.md, "Issue 35").
DEVICE_SUITES = tests/test_calling_conventions.py tests/test_fault_paths.py tests/test_autodiff.py \
	tests/test_train_step.py tests/test_optim.py tests/test_nn.py tests/test_nn_modules.py \
	tests/test_nn_containers.py tests/test_losses.py tests/test_random.py tests/test_first_call.py \
	tests/test_closure_step.py tests/test_silent_failures.py tests/test_gradient_identity.py \
	tests/test_ported_models.py tests/test_control_flow.py tests/distributed/test_spmd_conventions.py
test-device: $(STAMP)
	HLOTRACE_EAGER=device $(BIN)/python -m pytest -n $(TEST_JOBS) $(DEVICE_SUITES)

# Mutation testing of the lowering rules (not part of `make test`; see TESTING.md).
# Extra options: make mutation ARGS="--only reduction --jobs 1"
mutation: $(STAMP)
	$(BIN)/python -m hlotrace.testing.mutation $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check hlotrace tests benchmarks examples
	$(BIN)/ruff format --check hlotrace tests benchmarks examples

format: $(STAMP)
	$(BIN)/ruff format hlotrace tests benchmarks examples

bench: $(STAMP)
	$(BIN)/python -m benchmarks.run_all

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .ruff_cache *.egg-info
