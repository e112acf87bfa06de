# Every target creates .venv itself when it is missing: torch first (the CPU build where that is at hand),
# then the project with its [dev] extras.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
TORCH ?= torch==2.13.0

.PHONY: demo test check lint docs bench clean

$(STAMP): setup.cfg pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH)" || $(PY) -m pip install -q "torch>=2.6"
	$(PY) -m pip install -q -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/latentcode demo

test: $(STAMP)
	MPLBACKEND=agg LATENTCODE_PRESET=$${LATENTCODE_PRESET:-tiny} $(PY) -m pytest -q --durations=15

lint: $(STAMP)
	$(VENV)/bin/ruff check .

docs: $(STAMP)
	$(VENV)/bin/mkdocs build --strict --site-dir site

check: lint test docs

bench: $(STAMP)
	for script in bench/bench_tasks.py bench/bench_model.py bench/bench_extract.py bench/bench_probes.py bench/train_throughput.py; do $(PY) $$script || exit 1; done

clean:
	rm -rf $(VENV) site build *.egg-info
