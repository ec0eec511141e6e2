# Two commands a new user needs: `make demo` and `make test`. Each creates the virtual
# environment on first use, installing exactly the versions pinned in constraints.txt
# (torch 2.13.0 CPU build; other torch versions would pull a multi-GB CUDA build).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench zoo venv clean lock api

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet -c constraints.txt torch==2.13.0
	$(BIN)/pip install --quiet -c constraints.txt -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/interp-rand demo --out demo-output

# The suite runs on every core (pytest-xdist); an idle worker takes tests from a busy one's
# queue (worksteal: 326 s against 341 s for one worker per file, 2 cores). Bytecode is written
# even where the environment sets PYTHONDONTWRITEBYTECODE (this workplace does): without the
# cache every worker, CLI subprocess, forked demo step and Ray actor recompiled the project and
# re-rewrote the test modules' asserts (2026-12-06, 2 cores, a fresh clone's empty caches:
# 315.9 s -> 261.8 s, 488 -> 405 user CPU-s).
test: $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -n auto --dist worksteal --durations=20

# Rebuild the zoo of trained models shipped in interp_rand/zoo/models (about 18 minutes).
zoo: $(STAMP)
	$(BIN)/interp-rand --threads 1 zoo build

bench: $(STAMP)
	$(BIN)/python bench/train_time.py
	$(BIN)/python bench/throughput.py
	$(BIN)/python bench/recall_training.py
	$(BIN)/python bench/seeded_eval.py
	$(BIN)/python bench/circuits_bench.py
	$(BIN)/python bench/probes_bench.py
	$(BIN)/python bench/gridworld_population.py
	$(BIN)/python bench/startup.py
	$(BIN)/python bench/threads.py

# The API reference, generated from the docstrings (pdoc), in docs/api/ (git-ignored): open
# docs/api/index.html. Every module of interp_rand, circuits and probes, each given by name (a
# package's __all__ would otherwise hide its submodules); about 25 s and 28 MB.
API_DIR := docs/api
api: $(STAMP)
	rm -rf $(API_DIR)
	$(BIN)/python -c "$$API_BUILD" $(API_DIR)

define API_BUILD
import importlib, pkgutil, sys, warnings
import pdoc, pdoc.render
warnings.filterwarnings('ignore', message='The module specification')
warnings.filterwarnings('ignore', message='Error parsing type annotation')
modules = []
for name in ('interp_rand', 'circuits', 'probes'):
    package = importlib.import_module(name)
    modules += [name] + [m.name for m in pkgutil.walk_packages(package.__path__, name + '.') if not m.name.endswith('__main__')]
pdoc.render.configure(docformat='restructuredtext', show_source=False)
pdoc.pdoc(*modules, output_directory=__import__('pathlib').Path(sys.argv[1]))
print(f'{len(modules)} modules: open {sys.argv[1]}/index.html')
endef
export API_BUILD

# Re-pin constraints.txt from the current environment (after changing dependencies).
lock: $(STAMP)
	$(BIN)/pip freeze --exclude-editable > constraints.txt

clean:
	rm -rf $(VENV) demo-output .pytest_cache
