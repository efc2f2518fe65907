# The two commands a new user needs: `make demo` and `make test`. Each installs missing Debian
# packages (scripts/install-deps), configures and builds into build/, then runs.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_ARGS ?=

.PHONY: all deps configure build demo test check bench clean

all: build

deps:
	@scripts/install-deps

configure: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS) > $(BUILD).configure.log 2>&1 || { cat $(BUILD).configure.log; exit 1; }

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	@scripts/demo $(BUILD)/aoc

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The quick tier while working on the libraries (ctest label unit, tests/CMakeLists.txt); make test
# runs everything.
check: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -L unit

bench: build
	@$(BUILD)/aoc bench

clean:
	rm -rf $(BUILD) $(BUILD).configure.log
