# Two entry points: `make demo` and `make test`. Both build the environment first.
PYTHON312 := $(shell tools/find-python312)
VENV := .venv
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: demo test bench install clean

$(STAMP): pyproject.toml tools/install-system-deps
	@test -n "$(PYTHON312)" || { echo "Python 3.12 not found" >&2; exit 1; }
	tools/install-system-deps
	test -x $(VENV)/bin/python || $(PYTHON312) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --upgrade pip setuptools wheel
	$(VENV)/bin/python -m pip install -q -e '.[train,test,bench]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/groupscore demo

test: $(STAMP)
	$(VENV)/bin/python -m pytest -q -p no:cacheprovider

bench: $(STAMP)
	$(VENV)/bin/python bench/run_all.py

clean:
	rm -rf $(VENV) build *.egg-info
