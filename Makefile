# The two commands a fresh machine needs: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

# Debian packages: pilots run every job in a bubblewrap sandbox (the demo's
# too); the backend tests start a one-node Slurm and an sshd of their own;
# the console's tests (tests/web) drive Chromium; the ARC tests start an
# A-REX of their own (tests/arc.py).
DEMO_PACKAGES := bubblewrap
ARC_PACKAGES  := nordugrid-arc-arex nordugrid-arc-plugins-arcrest nordugrid-arc-arcctl nordugrid-arc-client
TEST_PACKAGES := $(DEMO_PACKAGES) slurm-wlm munge openssh-server openssh-client chromium chromium-driver $(ARC_PACKAGES)

.PHONY: demo test install clean bench fuzz test-packages demo-packages reference

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

# Two workers (pytest-xdist): most tests wait on real processes, so two
# keep a 2-core machine busy without crowding it; TEST_WORKERS=0 runs in one.
TEST_WORKERS ?= 2
test: $(STAMP) test-packages
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

# Installs what is missing when root on Debian; otherwise says what is missing
# (those tests then skip, or fail under CI=true).
test-packages:
	@$(MAKE) --no-print-directory packages PACKAGES="$(TEST_PACKAGES)" \
		WHY="needed by the sandboxed pilots, the Slurm, ssh, ARC and console tests"

demo-packages:
	@$(MAKE) --no-print-directory packages PACKAGES="$(DEMO_PACKAGES)" WHY="the pilots' sandbox"

packages:
	@missing=""; for p in $(PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	else \
		echo "not installed:$$missing ($(WHY); run 'make test-packages' as root)"; \
	fi

demo: $(STAMP) demo-packages
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/python -m wms.demo

# The property-based tests (tests/fuzz), the hostile-input tests against
# real servers (tests/hostile) and schemathesis on /openapi.json (every phase
# for every role, a new seed each run) with fifty times the examples of `make test`.
fuzz: $(STAMP)
	WMS_HYPOTHESIS_PROFILE=fuzz $(BIN)/pytest -p no:cacheprovider --hypothesis-show-statistics \
		tests/fuzz tests/hostile tests/api/test_openapi_schemathesis.py $(PYTEST_ARGS)

# docs/commands.md and deploy/wms-completion.bash, from the commands' parsers
# (tests/test_command_reference.py fails when they are stale).
reference: $(STAMP)
	$(BIN)/python -m wms.command_reference

bench: $(STAMP)
	$(BIN)/wms bench submit

clean:
	rm -rf $(VENV) var build *.egg-info
