# The two set-up commands of the README, and the developer's shortcuts.
#
#   make demo     install what is missing, build, run the demo
#   make test     install what is missing, build, run the whole test suite
#   make test SANITIZE=address,undefined   the same under sanitizers (in build-sanitize/)
#   make install [PREFIX=/usr/local]       CLI, libraries, headers, CMake package, pkg-config, man page
#   make package                           build/cohort_<version>_amd64.deb (CPack)
#   make format | make lint                clang-format the tree | clang-tidy the sources
#   make fuzz [FUZZ_SECONDS=60]            libFuzzer on every parser of outside input (build-fuzz/)
#
# JOBS sets build parallelism (default 2, this project's CI machine).
# WERROR=ON makes compiler warnings errors (.ci/run sets it; a user's build
# never needs it). STRICT=ON (.ci/run sets it too) makes every optional part
# required at configure and fails `make test` when any test was skipped, but
# those in tests/needs-hardware; without it skips are summed up in one line.
# CTEST_ARGS narrows or changes the ctest run (e.g. CTEST_ARGS='-L unit').
# Under SANITIZE, LeakSanitizer takes tests/fuzz/lsan-suppressions.txt, as
# the fuzz runs do.
# ccache, when installed (scripts/install-deps installs it), caches compiles.

JOBS ?= 2
# Seconds per fuzz harness: `make fuzz` (a real campaign) and the short run
# that ends `make test` (and so CI).
FUZZ_SECONDS ?= 60
TEST_FUZZ_SECONDS ?= 6
SANITIZE ?=
PREFIX ?= /usr/local
CMAKE_ARGS ?=
WERROR ?=
STRICT ?=
CTEST_ARGS ?=
CCACHE ?= $(shell command -v ccache 2>/dev/null)
strict := $(filter ON on 1 YES yes TRUE true,$(STRICT))

ifeq ($(strip $(SANITIZE)),)
BUILD_DIR ?= build
else
BUILD_DIR ?= build-sanitize
endif

GENERATOR := $(shell command -v ninja >/dev/null 2>&1 && echo Ninja || echo "Unix Makefiles")
SOURCES = $(shell find include src tests examples bench -name '*.cpp' -o -name '*.hpp' 2>/dev/null)

.PHONY: all build configure demo test fuzz install package format lint clean \
	deps-build deps-demo deps-test deps-package

all: build

deps-build deps-demo deps-test deps-package: deps-%:
	scripts/install-deps $*

# Configures on every call (cheap when nothing changed) so that SANITIZE,
# WERROR and CMAKE_ARGS always take effect, and an optional part whose
# package was installed since (make demo, then make test) is turned on.
configure:
	cmake -S . -B $(BUILD_DIR) -G "$(GENERATOR)" -DCOHORT_SANITIZE="$(SANITIZE)" \
	  $(if $(WERROR),-DCOHORT_WERROR=$(WERROR)) -DCOHORT_REQUIRE_ALL_PARTS=$(if $(strict),ON,OFF) \
	  $(if $(CCACHE),-DCMAKE_CXX_COMPILER_LAUNCHER=$(CCACHE)) $(CMAKE_ARGS)

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

# Only what scripts/demo runs: the CLI and two examples.
demo: deps-demo
	$(MAKE) configure
	cmake --build $(BUILD_DIR) -j $(JOBS) --target cohort_cli hello reduction
	scripts/demo $(BUILD_DIR)

# ctest's verdict and then what was skipped (tests/tools/skip-report): one
# line on a user's machine, a failure with the list under STRICT=ON.
test: deps-test
	$(MAKE) build
	status=0; \
	$(if $(strip $(SANITIZE)),LSAN_OPTIONS=suppressions=$(CURDIR)/tests/fuzz/lsan-suppressions.txt) \
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS) \
	  --output-junit $(abspath $(BUILD_DIR))/test-results.xml $(CTEST_ARGS) || status=$$?; \
	tests/tools/skip-report $(BUILD_DIR)/test-results.xml $(if $(strict),--strict) \
	  --list $(BUILD_DIR)/skipped-tests.txt || status=1; \
	exit $$status
	JOBS=$(JOBS) CCACHE=$(CCACHE) STRICT=$(strict) scripts/fuzz $(TEST_FUZZ_SECONDS)

fuzz: deps-test
	JOBS=$(JOBS) CCACHE=$(CCACHE) scripts/fuzz $(FUZZ_SECONDS)

install: build
	cmake --install $(BUILD_DIR) --prefix $(PREFIX)

package: deps-package
	$(MAKE) build
	cd $(BUILD_DIR) && cpack
	@ls $(BUILD_DIR)/cohort_*.deb

format:
	clang-format -i $(SOURCES)

lint: build
	clang-tidy -p $(BUILD_DIR) --quiet $(filter src/%.cpp,$(SOURCES))

clean:
	rm -rf build build-sanitize build-fuzz
