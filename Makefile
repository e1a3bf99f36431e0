# mxc — top-level build.
#
#   make                  library (build/lib/libmxc.a, libmxc.so), tools, examples, benchmarks
#   make test             build and run every Check suite (tests/check_*.c)
#   make check            make test in the normal, address(+undefined)- and thread-sanitizer builds
#                         (GCC), then in clang's undefined-behaviour build
#   make bench            build and run the benchmarks
#   make train            README's main job: LeNet on Fashion-MNIST (TRAIN_ARGS=--resume)
#   make demo             the engine demonstration
#   make install PREFIX=/usr/local
#
# Switches: USE_CUDA=1 USE_CUDNN=1 USE_MPI=1 DEBUG=1
#           SANITIZE=address|undefined|thread CUDA_ARCH=sm_80 (space-separated list allowed)
# A sanitizer build lives in its own folder (build-address, ...) beside the normal one, and a
# clang build in its own too (CC=clang: build-clang, build-undefined-clang, ...).

USE_CUDA   ?= 0
USE_CUDNN  ?= 0
USE_MPI    ?= 0
DEBUG      ?= 0
SANITIZE   ?=
CUDA_ARCH  ?= sm_80
CUDA_HOME  ?= /usr/local/cuda
PREFIX     ?= /usr/local

# clang and GCC objects never share a folder: each compiler's sanitizer runtime and flags
# differ, and `make check` builds with both. CC=clang is recognised by its name too, so a
# fresh machine, where scripts/deps.sh has yet to install clang, picks the right folder.
IS_CLANG := $(if $(findstring clang,$(CC) $(shell $(CC) --version 2>/dev/null | head -n 1)),1)
BUILD := build$(if $(SANITIZE),-$(SANITIZE))$(if $(IS_CLANG),-clang)$(if $(filter 1,$(USE_CUDA)),-cuda)
# V=1 prints whole command lines.
Q := $(if $(filter 1,$(V)),,@)
OBJ   := $(BUILD)/obj
LIB   := $(BUILD)/lib
BIN   := $(BUILD)/bin

# Library modules, bottom layer first (DESIGN.md section 1). A module folder is picked up
# as soon as it exists; adding a source file needs no Makefile edit.
MODULES := common engine storage resource ndarray operator symbol executor kvstore io model

CC      ?= cc
NVCC    ?= $(CUDA_HOME)/bin/nvcc
CSTD    := -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE
WARN    := -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter
CFLAGS  := $(CSTD) $(WARN) -fPIC -pthread -Iinclude -I. -MMD -MP
LDLIBS  := -pthread -lm -lopenblas -lz

# -O3 and -fno-trapping-math let the element-wise selects vectorise (GCC 12 leaves them
# branchy scalar loops at -O2); -ffp-contract=fast lets the x86-64-v3 clones of the hot
# kernels (operator/op.h) fuse multiply-adds, which -std=c11 alone forbids (the baseline
# x86-64 has no FMA, so nothing else changes); sanitizer builds use -O1, the usual speed
# for them.
ifeq ($(DEBUG),1)
  CFLAGS += -O0 -g3
else ifneq ($(SANITIZE),)
  CFLAGS += -O1 -fno-trapping-math -ffp-contract=fast -g
else
  CFLAGS += -O3 -fno-trapping-math -ffp-contract=fast -g
endif

ifneq ($(SANITIZE),)
  ifeq ($(filter $(SANITIZE),address undefined thread),)
    $(error SANITIZE must be address, undefined or thread)
  endif
  SANFLAGS := -fsanitize=$(SANITIZE) -fno-omit-frame-pointer
  # the address build also checks undefined behaviour, so `make check`'s two sanitizer
  # builds cover all three; any undefined behaviour fails the test
  ifneq ($(filter $(SANITIZE),address undefined),)
    SANFLAGS += -fsanitize=undefined -fno-sanitize-recover=undefined
  endif
  # clang's UBSan sees what GCC's does not: pointer arithmetic on NULL, even of 0 bytes
  # (pointer-overflow), and NULL passed where a _Nonnull parameter is declared
  # (nullability); local-bounds checks indexing of local arrays it can size.
  ifeq ($(IS_CLANG),1)
    ifneq ($(filter $(SANITIZE),address undefined),)
      SANFLAGS += -fsanitize=nullability,local-bounds -fno-sanitize-recover=all
    endif
  endif
  CFLAGS  += $(SANFLAGS)
  LDFLAGS += $(SANFLAGS)
endif

# machine code for each CUDA_ARCH plus its PTX, so newer GPUs (an H100 with the default
# sm_80) still run the kernels through the driver's JIT
NVCCFLAGS := -O2 -Xcompiler -fPIC -Iinclude -I. $(foreach a,$(CUDA_ARCH),-gencode \
             arch=compute_$(subst sm_,,$(a)),code=[$(a),compute_$(subst sm_,,$(a))])
ifeq ($(USE_CUDA),1)
  CFLAGS  += -DMXC_USE_CUDA -I$(CUDA_HOME)/include
  # -lstdc++: the .cu objects are C++ (kernel registration uses its runtime)
  LDLIBS  += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart -lstdc++
  ifeq ($(USE_CUDNN),1)
    CFLAGS += -DMXC_USE_CUDNN
    LDLIBS += -lcudnn
  endif
endif

LIB_SRCS  := $(foreach m,$(MODULES),$(wildcard $(m)/*.c))
CUDA_SRCS := $(if $(filter 1,$(USE_CUDA)),$(foreach m,$(MODULES),$(wildcard $(m)/*.cu)))
LIB_OBJS  := $(LIB_SRCS:%.c=$(OBJ)/%.o) $(CUDA_SRCS:%.cu=$(OBJ)/%.cu.o)

TEST_SRCS  := $(wildcard tests/check_*.c)
TEST_BINS  := $(TEST_SRCS:tests/%.c=$(BIN)/%)
TEST_UTIL  := $(wildcard tests/util/*.c)
BENCH_SRCS := $(wildcard bench/bench_*.c)
BENCH_BINS := $(BENCH_SRCS:bench/%.c=$(BIN)/%)
EX_SRCS    := $(wildcard examples/*.c)
EX_BINS    := $(EX_SRCS:examples/%.c=$(BIN)/example_%)
TOOL_SRCS  := $(wildcard tools/*.c)
TOOL_BINS  := $(TOOL_SRCS:tools/%.c=$(BIN)/%)

CHECK_CFLAGS := $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS   := $(shell pkg-config --libs check 2>/dev/null || echo -lcheck -lsubunit -lrt -lm)

.PHONY: all lib tests benches examples tools test check bench bench-deps demo train install \
        clean features deps format
all: features lib tools examples benches tests

features:
	@echo "mxc build: dir=$(BUILD) cc=$(CC)$(if $(IS_CLANG), (clang)) debug=$(DEBUG) sanitize=$(or $(SANITIZE),none) cuda=$(USE_CUDA)$(if $(filter 1,$(USE_CUDA)), (arch $(CUDA_ARCH))) cudnn=$(USE_CUDNN) mpi=$(USE_MPI)"

# Installs (as root, with apt-get) the Debian packages the build and tests need.
deps: $(BUILD)/.deps-ok
$(BUILD)/.deps-ok: scripts/deps.sh
	@bash scripts/deps.sh
	@mkdir -p $(BUILD) && touch $@

lib: $(LIB)/libmxc.a $(LIB)/libmxc.so

$(LIB)/libmxc.a: $(LIB_OBJS)
	@mkdir -p $(@D)
	@rm -f $@
	@echo "  AR      $@"
	$(Q)ar rcs $@ $^

$(LIB)/libmxc.so: $(LIB_OBJS)
	@mkdir -p $(@D)
	@echo "  LD      $@"
	$(Q)$(CC) -shared -o $@ $^ $(LDFLAGS) $(LDLIBS)

# Every object waits for the dependency install (order-only), so a fresh machine's first
# parallel build never compiles against headers that are not there yet.
$(OBJ)/%.o: %.c | $(BUILD)/.deps-ok
	@mkdir -p $(@D)
	@echo "  CC      $<"
	$(Q)$(CC) $(CFLAGS) -DMXC_BUILDING_LIBRARY -fvisibility=hidden -c $< -o $@

$(OBJ)/%.cu.o: %.cu | $(BUILD)/.deps-ok
	@mkdir -p $(@D)
	@echo "  NVCC    $<"
	$(Q)$(NVCC) $(NVCCFLAGS) -DMXC_BUILDING_LIBRARY -c $< -o $@

# Tests, benchmarks, examples and tools link the static library, so tests can reach the
# internal (mxc__) functions they check.
tests: $(TEST_BINS)
$(BIN)/check_%: tests/check_%.c $(TEST_UTIL) $(LIB)/libmxc.a $(BUILD)/.deps-ok
	@mkdir -p $(@D)
	@echo "  CCLD    $@"
	$(Q)$(CC) $(CFLAGS) $(CHECK_CFLAGS) $< $(TEST_UTIL) -o $@ $(LDFLAGS) $(LIB)/libmxc.a $(CHECK_LIBS) $(LDLIBS)

benches: $(BENCH_BINS)
$(BIN)/bench_%: bench/bench_%.c $(LIB)/libmxc.a
	@mkdir -p $(@D)
	@echo "  CCLD    $@"
	$(Q)$(CC) $(CFLAGS) -fopenmp $< -o $@ $(LDFLAGS) $(LIB)/libmxc.a $(LDLIBS) -fopenmp

examples: $(EX_BINS)
$(BIN)/example_%: examples/%.c $(LIB)/libmxc.a
	@mkdir -p $(@D)
	@echo "  CCLD    $@"
	$(Q)$(CC) $(CFLAGS) $< -o $@ $(LDFLAGS) $(LIB)/libmxc.a $(LDLIBS)

tools: $(TOOL_BINS)
$(BIN)/%: tools/%.c $(LIB)/libmxc.a
	@mkdir -p $(@D)
	@echo "  CCLD    $@"
	$(Q)$(CC) $(CFLAGS) $< -o $@ $(LDFLAGS) $(LIB)/libmxc.a $(LDLIBS)

# TESTS=engine limits the run to check_engine; extra runner flags via TEST_ARGS.
# check_cli runs the mxc tool of the same build
test: features $(TEST_BINS) $(TOOL_BINS)
	@bash scripts/run_tests.sh $(BIN) $(TESTS)

# README's test command: the suites in the normal build, then under AddressSanitizer and
# ThreadSanitizer (the engine must be clean under both), then clang's undefined-behaviour
# build, which also stops on what GCC's UBSan lets through (NULL + 0, see SANFLAGS).
check:
	$(MAKE) -j2 test
	$(MAKE) -j2 test SANITIZE=address
	$(MAKE) -j2 test SANITIZE=thread
	$(MAKE) -j2 test SANITIZE=undefined CC=clang

# bench-deps: the benchmarks' baselines (PyTorch for bench_train), installed when missing.
bench-deps:
	@bash scripts/deps.sh --bench

bench: features bench-deps $(BENCH_BINS)
	@for b in $(BENCH_BINS); do echo "== $$b"; $$b $(BENCH_ARGS) || exit 1; done

# README's main job: LeNet on Fashion-MNIST for 3 epochs with progress, then the test
# accuracy and the checkpoint (build/lenet-*).
# TRAIN_ARGS="--resume" continues from the last checkpoint instead of starting over.
train: features $(BUILD)/.deps-ok $(BIN)/mxc
	$(BIN)/mxc train --network lenet \
	    --data fashion-mnist --epochs 3 --prefix build/lenet $(TRAIN_ARGS)

# Rewrites every C source and header in the .clang-format style; CI runs
# scripts/check_format.sh, which fails on any file that differs.
format:
	clang-format -i $$(git ls-files '*.c' '*.h' '*.cu' ':!tests/data')

demo: features $(BIN)/bench_engine $(BIN)/example_engine_demo
	$(BIN)/example_engine_demo
	$(BIN)/bench_engine --quick

install: lib
	install -d $(PREFIX)/lib $(PREFIX)/include/mxc $(PREFIX)/lib/pkgconfig
	install -m 644 $(LIB)/libmxc.a $(LIB)/libmxc.so $(PREFIX)/lib/
	install -m 644 include/mxc/*.h $(PREFIX)/include/mxc/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|0.1.0|' scripts/mxc.pc.in > $(PREFIX)/lib/pkgconfig/mxc.pc

clean:
	rm -rf build build-address build-undefined build-thread build-cuda build-*-cuda build-clang \
	    build-*-clang

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
