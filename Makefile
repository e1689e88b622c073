# make run   - set up .venv and start the daemon on its built-in default config
# make test  - set up .venv and run the whole test suite
# make bench - run the benchmarks (bench/) and write bench/results/
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test bench lint clean venv

venv: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/gatewayd run

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

bench: $(STAMP)
	# Byte-compile like an installed wheel is, even where PYTHONDONTWRITEBYTECODE is set:
	# otherwise every daemon start in the benchmarks recompiles the package (~70 ms).
	$(BIN)/python -m compileall -q gatewayd
	$(BIN)/python -m bench

lint: $(STAMP)
	$(BIN)/ruff check gatewayd hooks tests bench
	$(BIN)/mypy

clean:
	rm -rf $(VENV) dist build .pytest_cache .mypy_cache .ruff_cache
