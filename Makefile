# `make demo` and `make test` each do all set-up on a fresh machine: a venv with napilab
# installed and, when run as root, the Debian packages the testbed and workloads need.
SHELL := /bin/bash
# Python writes the bytecode of what it imports (the venv's packages are installed
# --no-compile; napilab's own modules live in this tree, __pycache__ ignored by git).
# With PYTHONDONTWRITEBYTECODE=1 in the environment (this project's machines set it)
# every Python process compiled pandas, scipy and napilab from source again: `napilab
# check` took 3.4 s instead of 1.4 s, and every test that starts napilab paid it.
unexport PYTHONDONTWRITEBYTECODE
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEBS := iproute2 iputils-ping iperf3 sockperf ethtool openssh-server procps util-linux \
	linux-perf kmod dpdk-dev librte-net-af-xdp23 bpftrace
# the VM testbed: QEMU, the static busybox of virtme-ng's initramfs, kmod (depmod, and
# modprobe inside the guests)
VM_DEBS := qemu-system-x86 busybox-static kmod
TEST_DEBS := chromium
# `tools`: patchelf points sid's netperf at sid's libc
TOOLS_DEBS := patchelf

.PHONY: demo test acceptance test-setup check lint debs test-debs vm-debs tools-debs kernels tools clean

demo: $(VENV)/.runtime debs
	$(BIN)/napilab demo

# `make test`: every part timed against its budget in tests/budgets.toml (the times and
# budgets are printed at the end; a part over 1.5 x its budget fails the run).
# The unit and browser tests are independent: they run on one more worker than CPUs
# (pytest-xdist). The integration tests run three at a time, each worker with a netns
# testbed and a /var/tmp/napilab of its own (tests/conftest.py), the VM tests
# (tests/integration/vm: Debian kernels in QEMU guests) on two VM testbeds, one per
# worker (groups vm and vm-2), the third worker on netns tests (they mostly wait on
# their hosts: the CPUs were 79% busy at two workers); then the
# tests marked `serial` alone (verdicts measured on the testbed, the machine's own state).
# `kernels` fetches the kernels when root (the VM tests skip, saying why, where that or
# QEMU is not possible). `tools` installs netperf and netserver (sid's) when root.
TIMED := $(PYTHON) tests/timed.py
INTEGRATION_WORKERS ?= 3
# one more worker than CPUs: the browser tests wait on Chromium and some unit tests on
# the processes they start (2,072 tests here: 151 s on 3 workers, 170 s on 2)
UNIT_WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))

test:
	@$(TIMED) start
	@$(TIMED) run setup -- $(MAKE) --no-print-directory test-setup
	@$(TIMED) run lint -- $(MAKE) --no-print-directory lint
	@$(TIMED) run unit -- $(BIN)/pytest -q -n $(UNIT_WORKERS) --durations=10 tests/unit \
	  tests/browser
	@$(TIMED) run integration -- $(BIN)/pytest -q -n $(INTEGRATION_WORKERS) --dist loadgroup \
	  -m "not serial and not acceptance" --durations=40 tests/integration
	@$(TIMED) run serial -- $(BIN)/pytest -q -m "serial and not acceptance" --durations=10 \
	  tests/integration
	@$(TIMED) report

test-setup: $(VENV)/.test debs test-debs vm-debs kernels tools

# The acceptance-scale tests `make test` leaves out for its budget (marked `acceptance`):
# `napilab bisect` over 8 commits in the VM lab with a kernel that does not boot and a
# SIGKILL mid-step (403 s alone here, about 8 guest boots). As root.
acceptance: test-setup
	$(BIN)/pytest -q -m acceptance --durations=10 tests/integration

# The quick loop while changing code: lint, mypy and the unit tests (no browser, no
# root, no host); `make test` before a commit that lands.
check: $(VENV)/.test
	@$(MAKE) --no-print-directory lint
	$(BIN)/pytest -q -n $(UNIT_WORKERS) tests/unit

lint: $(VENV)/.test
	$(BIN)/ruff check $(wildcard napilab harness runners reports tests benchmarks)
	$(BIN)/mypy

# uv installs the venv's packages (pip installs uv): a fresh venv with the test extras
# took 20 s instead of pip's 68 s with cold caches here, 13 s instead of 55 s warm;
# pip installs them where uv cannot be had or fails.
define venv_install
{ $(BIN)/pip install -q --disable-pip-version-check uv >/dev/null 2>&1 \
  && $(BIN)/uv pip install -q --python $(BIN)/python $(1); } \
|| $(BIN)/pip install -q --no-compile --disable-pip-version-check $(1)
endef

$(VENV)/.runtime: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(call venv_install,-e .)
	touch $@

$(VENV)/.test: pyproject.toml $(VENV)/.runtime
	$(call venv_install,-e '.[test]')
	touch $@

# Installs what is missing when root; otherwise says what is missing and goes on
# (tests that need the packages skip with that reason).
debs:
	@$(call install_debs,$(DEBS))

test-debs:
	@$(call install_debs,$(TEST_DEBS))

vm-debs:
	@$(call install_debs,$(VM_DEBS))

tools-debs:
	@$(call install_debs,$(TOOLS_DEBS))

# Debian's generic and PREEMPT_RT kernels of the default suite and of sid, unpacked
# under /var/lib/napilab/kernels (nothing installed into the boot path); as root only.
kernels: $(VENV)/.runtime vm-debs
	@if [ "$$(id -u)" = 0 ]; then $(BIN)/napilab testbed kernels --fetch \
	  || echo "napilab: no kernels fetched: the VM tests will skip"; \
	else echo "napilab: not root, not fetching kernels (the VM tests skip)"; fi

# netperf and netserver, which Debian 12 lacks: sid's netperf and libc6 unpacked under
# /var/lib/napilab/tools, run on that libc (patchelf: interpreter and RUNPATH), linked
# into /usr/local/bin unless a working netperf is on PATH; as root only. Once done it
# needs no apt and no network.
tools: $(VENV)/.runtime tools-debs
	@if [ "$$(id -u)" = 0 ]; then $(BIN)/napilab testbed tools --fetch \
	  || echo "napilab: no netperf fetched: the netperf tests will skip"; \
	else echo "napilab: not root, not fetching netperf (the netperf tests skip)"; fi

define install_debs
missing=$$(for p in $(1); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
if [ -z "$$missing" ]; then exit 0; fi; \
if [ "$$(id -u)" != 0 ]; then echo "napilab: not root, not installing Debian packages:" $$missing; exit 0; fi; \
echo "napilab: installing Debian packages:" $$missing; \
export DEBIAN_FRONTEND=noninteractive; \
apt-get install -y -q --no-install-recommends $$missing >/dev/null \
  || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends $$missing >/dev/null; }
endef

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .ruff_cache .pytest_cache
