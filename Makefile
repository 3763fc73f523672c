# Two commands for a fresh machine with only Python and make:
#   make run   — set up .venv if needed and run the default (offline) scenario
#   make test  — same venv, run the test suite
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
SCENARIO ?= scenarios/quickstart.yaml

.PHONY: run test install clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev,ray]'  # ray: the flower-engine tests run, not skip
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(PY) -m fedgc.simulate $(SCENARIO)

test: $(STAMP)
	$(PY) -m pytest -q

clean:
	rm -rf $(VENV) runs .pytest_cache
