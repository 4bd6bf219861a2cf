# The two commands in README.md: `make demo` (the main job, the simulator on the embedded default scenario,
# koordpy vs the baseline, figures and pictures in sim-out/) and `make test` (every test).
# Both bootstrap .venv from pyproject.toml on first use, so a fresh clone needs nothing else.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint unit bench clean

$(STAMP): pyproject.toml scripts/bootstrap.sh
	bash scripts/bootstrap.sh $(PYTHON) $(VENV)
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/koordpy simulate --compare baseline --out sim-out

lint: $(STAMP)
	$(BIN)/ruff check src tests bench scripts
	$(BIN)/ruff format --check src tests bench scripts
	$(BIN)/mypy
	$(BIN)/lint-imports

test: lint
	bash scripts/run-tests.sh $(BIN)

bench: $(STAMP)
	$(BIN)/python bench/extender.py

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
