# TraceLake developer entry points. `make demo` and `make test` work on a fresh machine.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
SAMPLE := tests/data/traces/h100/gaunernst_bert-small-uncased__1016001.json.gz
SAMPLE_MI300X := tests/data/traces/mi300/gaunernst_bert-small-uncased__1016001.json.gz
DEMO_WAREHOUSE := demo_output/warehouse
export DO_NOT_TRACK := 1

.PHONY: setup browser postgres demo lint test bench clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e '.[test,dbt]'
	$(BIN)/python -m compileall -q core ingest tracelake analyzers agents reports
	touch $@

setup: $(BIN)/.installed

demo: setup
	rm -rf demo_output
	$(BIN)/tracelake analyze $(SAMPLE) --warehouse $(DEMO_WAREHOUSE) --out demo_output/report
	$(BIN)/tracelake traces --warehouse $(DEMO_WAREHOUSE)
	$(BIN)/tracelake sql "select computation_time_percent, idle_time_percent, busy_time_ms, total_time_ms from gpu_timeline" --warehouse $(DEMO_WAREHOUSE)
	$(BIN)/tracelake sql "select name, perf_params->>'$$.M' as m, perf_params->>'$$.N' as n, perf_params->>'$$.K' as k, operation_count, round(kernel_time_sum_us, 1) as kernel_us, round(pct_roofline_mean, 1) as pct_roofline, roofline_bound, platform from gemm_ops order by kernel_us desc" --warehouse $(DEMO_WAREHOUSE)
	$(BIN)/tracelake sql "select check_name, verdict, detail from trace_quality order by check_name" --warehouse $(DEMO_WAREHOUSE)
	$(BIN)/tracelake analyze $(SAMPLE) --compare $(SAMPLE_MI300X) --warehouse $(DEMO_WAREHOUSE) --out demo_output/compare
	$(BIN)/tracelake dashboard --warehouse $(DEMO_WAREHOUSE) --out demo_output/dashboard
	@echo
	@echo "HTML report: $(CURDIR)/demo_output/report/analysis.html"
	@echo "Dashboard:   $(CURDIR)/demo_output/dashboard/index.html"

# Headless Chromium for the dashboard tests (tests/reports/test_dashboard.py): apt-get installs it
# when missing (as root, else through sudo).
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
browser:
	@command -v chromium >/dev/null || ($(SUDO) apt-get update && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium)

# Debian's PostgreSQL for the lakehouse catalog tests (tests/lake/pg_server.py starts a server of its
# own on 127.0.0.1 and stops it): apt-get installs it when missing, as for Chromium.
PG_INITDB := /usr/lib/postgresql/15/bin/initdb
postgres:
	@test -x $(PG_INITDB) || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || ($(SUDO) apt-get update && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql)

# ruff and mypy as configured in pyproject.toml. mypy reads the package through .typecheck/tracelake,
# a tree of links that lays the stage folders out as their import names (it cannot follow setuptools'
# package-dir mapping of an editable install).
lint: setup
	$(BIN)/ruff check .
	rm -rf .typecheck && mkdir -p .typecheck/tracelake
	for entry in tracelake/*; do ln -s ../../$$entry .typecheck/tracelake/; done
	for stage in core ingest analyzers agents reports; do ln -s ../../$$stage .typecheck/tracelake/$$stage; done
	$(BIN)/mypy

test: setup browser postgres lint
	$(BIN)/python -m pytest

bench: setup
	$(BIN)/python bench/analyze.py --scale 55

clean:
	rm -rf demo_output .pytest_cache
