# Developer shortcuts against an in-place build. The canonical test run, against an
# installed wheel, is scripts/test.sh; CI is .ci/run.
#
# The current environment needs the build requirements (setuptools>=77, Cython>=3.1,<4)
# and the test extra:  $(PYTHON) -m pip install "setuptools>=77" "Cython>=3.1,<4" -e ".[test]"
# (or `make deps`).

PYTHON ?= python3
PYTEST = $(PYTHON) -m pytest

.PHONY: deps build debug annotate test test-ext test-pure test-pure-all mutate bench asv-quick docs clean

deps:
	$(PYTHON) -m pip install "setuptools>=77" "Cython>=3.1,<4"
	$(PYTHON) -m pip install -e ".[test,bench,docs,mutate]"

# Release build: compiled kernels next to their .pyx (kafkastore/_ext/*.so).
build:
	$(PYTHON) setup.py build_ext --inplace

# Bounds/wraparound checks, line tracing, KS_DEBUG asserts, -O0 -g.
debug:
	KAFKASTORE_DEBUG=1 $(PYTHON) setup.py build_ext --inplace --force

# Writes kafkastore/_ext/<kernel>.html: yellow lines call into the Python C-API.
annotate:
	KAFKASTORE_ANNOTATE=1 $(PYTHON) setup.py build_ext --inplace --force

# Both backends (style rule 2), selected as scripts/test.sh selects them: every test on the
# compiled backend; on the pure one the tests whose outcome the kernels can decide
# (--kernel-tests-only deselects the same_python families of tests/_selection.py, counted in
# pytest's summary). `make test-pure-all` runs every test on the pure backend.
test: build test-ext test-pure

test-ext:
	KAFKASTORE_EXPECT_BACKEND=cython $(PYTEST) $(PYTEST_ARGS)

test-pure:
	KAFKASTORE_NO_EXTENSIONS=1 KAFKASTORE_EXPECT_BACKEND=python $(PYTEST) --kernel-tests-only $(PYTEST_ARGS)

test-pure-all:
	KAFKASTORE_NO_EXTENSIONS=1 KAFKASTORE_EXPECT_BACKEND=python $(PYTEST) $(PYTEST_ARGS)

# Mutation testing (the mutate extra): each module's mutants against that module's tests,
# pure backend, one module at a time; MODULE=retention runs one (scripts/mutate.py --list
# shows the map). Results and survivors' diffs go to build/mutate/<module>/.
MODULE ?=
mutate:
	nice -n 10 $(PYTHON) scripts/mutate.py $(MODULE)

# pytest-benchmark micro-benchmarks (deselected in the default run), _pure vs _ext per group.
bench: build
	$(PYTEST) tests/benchmarks -m benchmark --benchmark-only --benchmark-group-by=group $(PYTEST_ARGS)

# asv in the current environment against the in-place build (asv drops PYTHONPATH and
# honours ASV_PYTHONPATH): a smoke run, one repeat each.
asv-quick: build
	cd asv_bench && ASV_PYTHONPATH=$(CURDIR) $(PYTHON) -m asv run --python=same --quick --show-stderr

docs:
	$(PYTHON) -m sphinx -W --keep-going -b html docs docs/_build/html

clean:
	rm -rf build dist *.egg-info .asv asv_bench/.asv docs/_build .pytest_cache .hypothesis .benchmarks
	rm -f kafkastore/_ext/*.c kafkastore/_ext/*.html kafkastore/_ext/*.so kafkastore/_ext/*.pyd
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
