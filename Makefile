# The two set-up commands of the README, and the developer's shortcuts.
#
#   make demo     install what is missing, build, run the demo
#   make test     install what is missing, build, run the whole test suite
#   make test SANITIZE=address,undefined   the same under sanitizers (in build-sanitize/)
#   make install [PREFIX=/usr/local]       CLI, libraries, headers, CMake package
#   make format | make lint                clang-format the tree | clang-tidy the sources
#   make fuzz [FUZZ_SECONDS=60]            libFuzzer on every parser of outside input (build-fuzz/)
#
# JOBS sets build parallelism (default 2, this project's CI machine).

JOBS ?= 2
# Seconds per fuzz harness: `make fuzz` (a real campaign) and the short run
# that ends `make test` (and so CI).
FUZZ_SECONDS ?= 60
TEST_FUZZ_SECONDS ?= 10
SANITIZE ?=
PREFIX ?= /usr/local
CMAKE_ARGS ?=

ifeq ($(strip $(SANITIZE)),)
BUILD_DIR ?= build
else
BUILD_DIR ?= build-sanitize
endif

GENERATOR := $(shell command -v ninja >/dev/null 2>&1 && echo Ninja || echo "Unix Makefiles")
SOURCES = $(shell find include src tests examples bench -name '*.cpp' -o -name '*.hpp' 2>/dev/null)

.PHONY: all build demo test fuzz install format lint clean deps-build deps-demo deps-test

all: build

deps-build deps-demo deps-test: deps-%:
	scripts/install-deps $*

# Configures on every call (cheap when nothing changed) so that SANITIZE and
# CMAKE_ARGS always take effect.
build:
	cmake -S . -B $(BUILD_DIR) -G "$(GENERATOR)" -DCOHORT_SANITIZE="$(SANITIZE)" $(CMAKE_ARGS)
	cmake --build $(BUILD_DIR) -j $(JOBS)

demo: deps-demo
	$(MAKE) build
	scripts/demo $(BUILD_DIR)

test: deps-test
	$(MAKE) build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS)
	JOBS=$(JOBS) scripts/fuzz $(TEST_FUZZ_SECONDS)

fuzz: deps-test
	JOBS=$(JOBS) scripts/fuzz $(FUZZ_SECONDS)

install: build
	cmake --install $(BUILD_DIR) --prefix $(PREFIX)

format:
	clang-format -i $(SOURCES)

lint: build
	clang-tidy -p $(BUILD_DIR) --quiet $(filter src/%.cpp,$(SOURCES))

clean:
	rm -rf build build-sanitize build-fuzz
