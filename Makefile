# Two commands a new user needs: `make demo` and `make test`. Each creates the virtual
# environment on first use, installing exactly the versions pinned in constraints.txt
# (torch 2.13.0 CPU build; other torch versions would pull a multi-GB CUDA build).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench zoo venv clean lock

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet -c constraints.txt torch==2.13.0
	$(BIN)/pip install --quiet -c constraints.txt -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/interp-rand demo --out demo-output

# The suite runs on every core (pytest-xdist); an idle worker takes tests from a busy one's
# queue (worksteal: 326 s against 341 s for one worker per file, 2 cores).
test: $(STAMP)
	$(BIN)/python -m pytest -q -n auto --dist worksteal --durations=20

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

# Re-pin constraints.txt from the current environment (after changing dependencies).
lock: $(STAMP)
	$(BIN)/pip freeze --exclude-editable > constraints.txt

clean:
	rm -rf $(VENV) demo-output .pytest_cache
