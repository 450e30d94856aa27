# The two commands a fresh machine needs: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test install clean bench

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(BIN)/pytest $(PYTEST_ARGS)

demo: $(STAMP)
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/python -m wms.demo

bench: $(STAMP)
	$(BIN)/wms bench submit

clean:
	rm -rf $(VENV) var build *.egg-info
