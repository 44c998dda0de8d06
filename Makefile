# preflight — see README.md. `make` builds bin/preflight; `make test` runs every test.
CC      ?= cc
VERSION := 0.1.0
GIT     := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)

WARN    := -Wall -Wextra -Wshadow -Wformat=2 -Wmissing-prototypes -Wstrict-prototypes \
           -Wwrite-strings -Wvla
CSTD    := -std=c11
OPT     ?= -O2 -g
DEFS    := -DPF_VERSION='"$(VERSION)"' -DPF_GIT='"$(GIT)"' -D_FORTIFY_SOURCE=2
CFLAGS_ALL = $(CSTD) $(OPT) $(WARN) $(DEFS) -fno-strict-aliasing -MMD -MP
LDLIBS_ALL = -Wl,-Bstatic -lyaml -ljansson -lsodium -Wl,-Bdynamic -ldl -lpthread -lm

ifeq ($(ASAN),1)
  CFLAGS_ALL += -fsanitize=address -fno-omit-frame-pointer
  LDFLAGS    += -fsanitize=address
endif
ifeq ($(UBSAN),1)
  CFLAGS_ALL += -fsanitize=undefined -fno-sanitize-recover=all
  LDFLAGS    += -fsanitize=undefined
endif
ifeq ($(WERROR),1)
  CFLAGS_ALL += -Werror
endif
ifneq ($(CI),)
  CFLAGS_ALL += -Werror
endif

# What the build needs from the system (scripts/deps.sh build installs it), looked for with
# make's own wildcard so that a build that has everything pays nothing: the compiler, and the
# headers and static libraries of libyaml, jansson and libsodium.
NEED_LIBS    := yaml jansson sodium
NEED_MISSING := $(if $(shell command -v $(CC)),,$(CC)) \
    $(foreach l,$(NEED_LIBS),$(if $(wildcard /usr/include/$(l).h /usr/local/include/$(l).h),,$(l).h) \
      $(if $(wildcard /usr/lib/*/lib$(l).a /usr/lib/lib$(l).a /usr/local/lib/lib$(l).a),,lib$(l).a))
NEED_MISSING := $(strip $(NEED_MISSING))
BUILD_PKGS    = $(shell sed -n 's/^build_pkgs="\(.*\)"/\1/p' scripts/deps.sh)

# Build folder per variant, so sanitizer objects never mix with release ones.
VARIANT := $(if $(filter 1,$(ASAN) $(UBSAN)),san,rel)
B       := build/$(VARIANT)

PKG_SRCS  := $(sort $(wildcard pkg/*/*.c))
PKG_OBJS  := $(PKG_SRCS:%.c=$(B)/%.o)
MAIN_SRCS := $(sort $(wildcard cmd/preflight/*.c))
MAIN_OBJ  := $(MAIN_SRCS:%.c=$(B)/%.o)
# tests/unit/<module>/test_*.c, one binary each (build/<variant>/tests/<module>/test_*); the
# shared harness in tests/unit/helpers/ is linked into every one
UNIT_SRCS := $(sort $(wildcard tests/unit/test_*.c tests/unit/*/test_*.c))
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(B)/tests/%)
UNIT_HELPER_SRCS := $(sort $(wildcard tests/unit/helpers/*.c))
UNIT_HELPER_OBJS := $(UNIT_HELPER_SRCS:%.c=$(B)/%.o)
FUZZ_SRCS := $(sort $(wildcard tests/fuzz/fuzz_*.c))

.PHONY: deps-check all static dist test check-layers unit unit-build e2e fuzz-build demo bench fuzz fuzz-regress format format-check clean deps \
        deps-test help
all: bin/preflight

help:
	@echo "make            build bin/preflight"
	@echo "make static     build bin/preflight-static (musl, no dlopen; installs musl-tools)"
	@echo "make dist       bin/dist/preflight: bin/preflight stripped, as the image ships it"
	@echo "make demo       install the demo's deps, build, run a local multi-pod preflight"
	@echo "make test       install test deps, build with ASan/UBSan, run every test"
	@echo "make bench      install test deps, benchmarks (wall time, peak RSS, bandwidth)"
	@echo "                (scripts/deps.sh says what it installs; Debian 12, as root)"
	@echo "make fuzz       run every fuzz target for FUZZ_SECONDS (default 30)"
	@echo "make format     clang-format the tree"

# Before the first compile: what is missing, and the packages that bring it (as root, they are
# installed and the build goes on).
deps-check:
ifneq ($(NEED_MISSING),)
	@echo "make: this machine lacks $(NEED_MISSING); run scripts/deps.sh build (installs: $(BUILD_PKGS))" >&2
	@if [ "$$(id -u)" -eq 0 ]; then scripts/deps.sh build; else exit 1; fi
endif

$(B)/%.o: %.c | deps-check
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(CFLAGS) -c $< -o $@

# the explain module embeds docs/checks.md
$(B)/pkg/explain/explain.o: docs/checks.md

$(B)/preflight: $(MAIN_OBJ) $(PKG_OBJS)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS_ALL)

bin/preflight: $(B)/preflight
	@mkdir -p bin
	cp $< $@

# ---- what the image ships (Dockerfile): a binary stripped of its symbols and debug sections
# (strip --strip-all), which stay beside it in bin/dist/NAME.debug, named by the stripped
# file's .gnu_debuglink, so a core or a stack from the image can still be read with them.
dist: bin/dist/preflight
bin/dist/%: bin/%
	@mkdir -p bin/dist
	objcopy --only-keep-debug $< $@.debug
	strip --strip-all -o $@ $<
	objcopy --add-gnu-debuglink=$@.debug $@

# CFLAGS_<test>: flags of one unit test, by its file name. test_dl_abi compiles pkg/dl/dl.h
# against the real nccl.h and cuda.h where they are installed (CUDA_HOME); without them its
# checks skip.
# The headers come from NVIDIA's PyPI wheels (scripts/nvidia-pypi.sh, fetched by `make test`)
# and, where one is installed, from a CUDA toolkit; neither is needed to build preflight.
CUDA_HOME ?= /usr/local/cuda
# (recursive: the script runs only when test_dl_abi is compiled, not at every make)
NVIDIA_INCLUDE = $(shell scripts/nvidia-pypi.sh cflags 2>/dev/null)
# NVIDIA's nvml.h from the nvidia-nvml-dev-cu12 wheel, fetched by the same script (never
# committed; without it the nvml.h checks skip)
NVML_INCLUDE ?= $(shell scripts/nvidia-pypi.sh nvml 2>/dev/null)
CFLAGS_test_dl_abi = $(NVIDIA_INCLUDE) $(if $(wildcard $(CUDA_HOME)/include/cuda.h),-isystem $(CUDA_HOME)/include) \
    $(if $(wildcard $(NVML_INCLUDE)/nvml.h),-isystem $(NVML_INCLUDE))

$(B)/tests/%: tests/unit/%.c $(PKG_OBJS) $(UNIT_HELPER_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(CFLAGS) $(CFLAGS_$(notdir $*)) -D_GNU_SOURCE -Wno-missing-prototypes $(LDFLAGS) -o $@ $(filter %.c %.o,$^) $(LDLIBS_ALL) -lcmocka

# ---- fully static variant (musl; libyaml built for musl from Debian's source package)
static: bin/preflight-static
bin/preflight-static: $(PKG_SRCS) $(MAIN_SRCS) docs/checks.md scripts/build-static.sh
	scripts/build-static.sh

# ---- tests
deps:
	scripts/deps.sh build
deps-test:
	scripts/deps.sh test

test: deps-test
	bash scripts/check-layers.sh
	$(MAKE) ASAN=1 UBSAN=1 unit-build
	$(MAKE) bin/preflight
	$(MAKE) static
	@# the test control plane (tests/k8s/cluster), built once per source into a cache folder
	@# before the tests' own time limits run (a cold build compiles Kubernetes: about 10
	@# minutes on 2 cores); without Go >= 1.26 its tests skip and say why; PREFLIGHT_K8S=0
	@# leaves them out
	@# and the JobSet and Kueue controllers (tests/k8s/controllers), the same way; the two
	@# builds share one bound, PREFLIGHT_K8S_BUILD_S (default 2400 s): the controllers get what
	@# the control plane's build left of it (past it their timed-out marker makes their test
	@# skip), so a cold machine spends at most that long building before the tests
	-@if [ "$${PREFLIGHT_K8S:-}" != 0 ]; then \
	    t0=$$(date +%s); tests/k8s/cluster/build.sh >/dev/null; \
	    left=$$(( $${PREFLIGHT_K8S_BUILD_S:-2400} - ($$(date +%s) - t0) )); \
	    [ "$$left" -ge 1 ] || left=1; \
	    PREFLIGHT_K8S_BUILD_S=$$left tests/k8s/controllers/build.sh >/dev/null; fi
	tests/run.sh

unit-build: $(B)/preflight $(UNIT_BINS) $(UNIT_HELPER_OBJS)

unit: 
	$(MAKE) ASAN=1 UBSAN=1 unit-build
	tests/run.sh unit

e2e:
	$(MAKE) ASAN=1 UBSAN=1 unit-build
	tests/run.sh e2e

demo:
	scripts/deps.sh demo
	$(MAKE) bin/preflight
	scripts/demo.sh

bench: deps-test
	$(MAKE) bin/preflight
	tests/bench/run.sh

# ---- fuzzing (clang libFuzzer); fuzz-regress replays the seed corpora only
FUZZ_SECONDS ?= 30
FUZZ_B := build/fuzz
FUZZ_SAN := address,undefined -fno-sanitize-recover=all
FUZZ_CFLAGS := $(CSTD) -g -O1 $(DEFS) -MMD -MP -fsanitize=fuzzer-no-link,$(FUZZ_SAN)
FUZZ_OBJS := $(PKG_SRCS:%.c=$(FUZZ_B)/obj/%.o)
# the sources are compiled once, instrumented; each target links them with libFuzzer's main
$(FUZZ_B)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -c $< -o $@
$(FUZZ_B)/obj/pkg/explain/explain.o: docs/checks.md
$(FUZZ_B)/%: tests/fuzz/%.c $(FUZZ_OBJS)
	@mkdir -p $(FUZZ_B)
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_OBJS) $(LDLIBS_ALL)
fuzz-build: $(FUZZ_SRCS:tests/fuzz/%.c=$(FUZZ_B)/%)
fuzz: fuzz-build
	tests/fuzz/run.sh $(FUZZ_SECONDS)
fuzz-regress: fuzz-build
	tests/fuzz/run.sh 0

# ---- style
format:
	clang-format -i $$(git ls-files '*.c' '*.h')
format-check:
	@clang-format --dry-run --Werror $$(git ls-files '*.c' '*.h')

# the module edges pkg/README.md allows (also run by `make test` and .ci/run)
check-layers:
	bash scripts/check-layers.sh

clean:
	rm -rf build bin

-include $(shell find build -name '*.d' 2>/dev/null)

# ---- docs: docs/checks.md is generated from docs/checks/*.md (and committed)
docs/checks.md: $(sort $(wildcard docs/checks/*.md))
	scripts/gen-checks-md.sh $^ > $@.tmp && mv $@.tmp $@
