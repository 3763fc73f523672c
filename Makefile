# Commands for a fresh machine with only Python and make:
#   make run   — set up .venv with what running needs and run the default (offline) scenario beside
#                its baselines (no compression; both directions compressed): a comparison table
#   make test  — the same venv plus the test, Ray and datasets extras, run the test suite (all of it, as CI does)
#   make test-fast — the same minus the tests marked deployment, ray, jvm, netns, notebook or slow
#   make lint  — ruff and mypy (a step of test and test-fast)
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
RUN_STAMP := $(VENV)/.installed-run
SCENARIO ?= scenarios/quickstart.yaml

.PHONY: run test test-fast lint install clean jvm jvm-proto

$(RUN_STAMP): pyproject.toml constraints.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "installing fedgc, Flower and PyTorch (CPU) into $(VENV): about 1-3 minutes, once"
	@$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	@PYTHONWARNINGS=ignore $(PY) -m pip install --quiet --disable-pip-version-check -c constraints.txt -e .  # no build-backend banners
	@touch $(RUN_STAMP)

$(STAMP): $(RUN_STAMP)
	@echo "installing the test tools and Ray into $(VENV): about 1-2 minutes, once"
	@PYTHONWARNINGS=ignore $(PY) -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev,ray,datasets]'  # ray: the flower-engine tests run, not skip; datasets: flwr-datasets' partitioners
	@touch $(STAMP)

install: $(STAMP)

run: $(RUN_STAMP)
	$(PY) -m fedgc run $(SCENARIO) --baseline

# pytest-xdist workers (times in README.md). make test: 3 on 2 cores (its test phase keeps both cores 96-98 % busy;
# docs/performance.md); 4 were no faster. tests/conftest.py keeps the
# netns and the ray tests on one worker each (xdist_group) and runs the netns tests at nice -10.
# make test-fast: 2. Serially: make test XDIST= / make test-fast XDIST_FAST=
XDIST ?= -n 3 --dist loadgroup
XDIST_FAST ?= -n 2 --dist loadgroup

# The style (docs/contributing.md): ruff's rules and mypy, strict on the packages pyproject.toml's
# [tool.mypy] lists (cached in .mypy_cache: a rerun takes seconds). A step of test and test-fast.
lint: $(STAMP)
	$(PY) -m ruff check --quiet .
	$(PY) -m mypy

test: $(STAMP) lint
	$(PY) -m pytest -q $(XDIST) --durations=25  # the 25 slowest tests, for whoever speeds the suite up

# Markers: pyproject.toml [tool.pytest.ini_options]. Extra pytest arguments: make test-fast ARGS='-x'
FAST_SELECTION := not deployment and not ray and not jvm and not netns and not notebook and not slow

test-fast: $(STAMP) lint
	$(PY) -m pytest -q $(XDIST_FAST) -m "$(FAST_SELECTION)" $(ARGS)

# The JVM/Android SuperNode (clients/jvm/README.md): needs a JDK, protoc and protobuf-java (Debian:
# openjdk-17-jdk-headless protobuf-compiler libprotobuf-java), not the venv. jvm-proto rewrites the
# committed Flower schema from the installed flwr (after a flwr upgrade).
JVM_JAR := clients/jvm/build/fedgc-client.jar
JVM_INPUTS := $(shell find clients/jvm/src -name '*.java' 2>/dev/null) clients/jvm/proto/flwr-proto.desc \
	clients/jvm/proto/FLWR_VERSION clients/jvm/build.sh

jvm: $(JVM_JAR)

$(JVM_JAR): $(JVM_INPUTS)
	clients/jvm/build.sh

jvm-proto: $(STAMP)
	$(PY) clients/jvm/gen_proto.py

clean:
	rm -rf $(VENV) runs .pytest_cache .mypy_cache
