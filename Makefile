# mxc — top-level build.
#
#   make                  library (build/lib/libmxc.a, libmxc.so), tools, examples, benchmarks
#   make test             build and run every Check suite (tests/check_*.c)
#   make check            make test in the normal, address(+undefined)- and thread-sanitizer builds
#                         (GCC), then in clang's undefined-behaviour build
#   make bench            build and run the benchmarks
#   make fuzz             the libFuzzer targets of tests/fuzz/, each FUZZ_SECONDS (see below)
#   make train            README's main job: LeNet on Fashion-MNIST (TRAIN_ARGS=--resume)
#   make demo             the engine demonstration
#   make install PREFIX=/usr/local
#
# Switches: USE_CUDA=1 USE_CUDNN=1 USE_MPI=0 (MPI is on by default) DEBUG=1
#           SANITIZE=address|undefined|thread CUDA_ARCH="sm_80 sm_90" (the default; a list)
# A sanitizer build lives in its own folder (build-address, ...) beside the normal one, and a
# clang build in its own too (CC=clang: build-clang, build-undefined-clang, ...).

USE_CUDA   ?= 0
USE_CUDNN  ?= 0
USE_MPI    ?= 1
DEBUG      ?= 0
SANITIZE   ?=
CUDA_ARCH  ?= sm_80 sm_90
CUDA_HOME  ?= /usr/local/cuda
PREFIX     ?= /usr/local

# clang and GCC objects never share a folder: each compiler's sanitizer runtime and flags
# differ, and `make check` builds with both. CC=clang is recognised by its name too, so a
# fresh machine, where scripts/deps.sh has yet to install clang, picks the right folder.
IS_CLANG := $(if $(findstring clang,$(CC) $(shell $(CC) --version 2>/dev/null | head -n 1)),1)
# A build without MPI has its folder too (build-nompi): its objects differ (dist_mpi.c).
BUILD := build$(if $(SANITIZE),-$(SANITIZE))$(if $(IS_CLANG),-clang)$(if $(filter 1,$(USE_CUDA)),-cuda)$(if $(filter 1,$(USE_MPI)),,-nompi)
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
# libjpeg-turbo and libpng decode the images of RecordIO files (io/image.c)
LDLIBS  := -pthread -lm -lopenblas -lz -ljpeg -lpng

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

# machine code for each CUDA_ARCH (A100 and H100 by default) plus its PTX, so newer GPUs
# still run the kernels through the driver's JIT; --extended-lambda for the device
# lambdas of common/launch.cuh
NVCCFLAGS := -O2 -std=c++17 --extended-lambda -Xcompiler -fPIC,-fvisibility=hidden -Iinclude -I. $(foreach a,$(CUDA_ARCH),-gencode \
             arch=compute_$(subst sm_,,$(a)),code=[$(a),compute_$(subst sm_,,$(a))])
ifeq ($(USE_CUDA),1)
  CFLAGS    += -DMXC_USE_CUDA -I$(CUDA_HOME)/include
  NVCCFLAGS += -DMXC_USE_CUDA
  # -lstdc++: the .cu objects are C++ (kernel registration uses its runtime)
  LDLIBS  += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublas -lcudart -lstdc++
  ifeq ($(USE_CUDNN),1)
    CFLAGS    += -DMXC_USE_CUDNN
    NVCCFLAGS += -DMXC_USE_CUDNN
    LDLIBS += -lcudnn
  endif
endif

# MPI (OpenMPI, installed by scripts/deps.sh) for the dist_sync store (docs/kvstore_mpi.md);
# USE_MPI=0 builds without it: dist_sync then refuses with what to do. The flags come from
# pkg-config, else from the wrapper compiler; on a fresh machine neither answers before
# scripts/deps.sh ran, so they fall back to Debian's paths.
ifeq ($(USE_MPI),1)
  MPI_CFLAGS := $(shell pkg-config --cflags ompi-c 2>/dev/null || mpicc --showme:compile 2>/dev/null \
                  || echo -I/usr/lib/x86_64-linux-gnu/openmpi/include)
  MPI_LIBS   := $(shell pkg-config --libs ompi-c 2>/dev/null || mpicc --showme:link 2>/dev/null \
                  || echo -L/usr/lib/x86_64-linux-gnu/openmpi/lib -lmpi)
  CFLAGS += -DMXC_USE_MPI $(MPI_CFLAGS)
  LDLIBS += $(MPI_LIBS)
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
        clean features deps format fashion-rec
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
	$(Q)$(NVCC) $(NVCCFLAGS) -MMD -MP -MF $(@:.o=.d) -DMXC_BUILDING_LIBRARY -c $< -o $@

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
	$(Q)$(CC) $(CFLAGS) -fopenmp $(filter %.c,$^) -o $@ $(LDFLAGS) $(LIB)/libmxc.a $(LDLIBS) -fopenmp
# bench_train --ctx gpu's hand-written cuBLAS / cuDNN baseline is a second source file
$(BIN)/bench_train: bench/gpu_baseline.c

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
# The sanitizer builds run the stress loops at a tenth of their length (MXC_TEST_QUICK=1:
# every path still runs thousands of times under the sanitizer, and the normal build runs
# the loops in full); under ThreadSanitizer check_engine took 218 s in full, 24 s so, out
# of a CI run of about 45 minutes on 2 cores.
check:
	$(MAKE) -j2 test
	MXC_TEST_QUICK=1 $(MAKE) -j2 test SANITIZE=address
	MXC_TEST_QUICK=1 $(MAKE) -j2 test SANITIZE=thread
	MXC_TEST_QUICK=1 $(MAKE) -j2 test SANITIZE=undefined CC=clang

# bench-deps: the benchmarks' baselines (PyTorch for bench_train), installed when missing.
bench-deps:
	@bash scripts/deps.sh --bench

bench: features bench-deps $(BENCH_BINS)
	@for b in $(filter-out $(BIN)/bench_io,$(BENCH_BINS)); do \
	    echo "== $$b"; $$b $(BENCH_ARGS) || exit 1; done
	@echo "== $(BIN)/bench_io against MXNet 1.9.1 (scripts/bench_io_mxnet.sh)"
	@bash scripts/bench_io_mxnet.sh $(BENCH_ARGS)

# README's main job: LeNet on Fashion-MNIST for 3 epochs with progress, then the test
# accuracy and the checkpoint (build/lenet-*).
# TRAIN_ARGS="--resume" continues from the last checkpoint instead of starting over.
train: features $(BUILD)/.deps-ok $(BIN)/mxc
	$(BIN)/mxc train --network lenet \
	    --data fashion-mnist --epochs 3 --prefix build/lenet $(TRAIN_ARGS)

# Fashion-MNIST as image records (scripts/make_fashion_rec.py: class folders, then
# mxc im2rec upscaling to 224x224 RGB JPEGs) in build/fashion-rec, then a short ResNet-18
# training on them at 32x32 (docs/io.md). Not run in CI. FASHION_REC_ARGS picks a subset
# (default 6,000 training and 1,000 test images; "" for all 70,000, about 370 MB);
# FASHION_TRAIN_ARGS adds to the training command.
FASHION_REC_ARGS ?= --train 6000 --test 1000
fashion-rec: features $(BUILD)/.deps-ok $(BIN)/mxc
	python3 scripts/make_fashion_rec.py build/fashion-rec --mxc $(BIN)/mxc $(FASHION_REC_ARGS)
	$(BIN)/mxc train --network resnet \
	    --data rec:build/fashion-rec/train.rec,build/fashion-rec/test.rec \
	    --data-shape 3,32,32 --resize 36 --threads 2 --epochs 1 --batch-size 50 \
	    --prefix build/fashion-rec/resnet $(FASHION_TRAIN_ARGS)

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
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|0.1.0|' -e 's|@LIBS_PRIVATE@|$(strip $(LDLIBS))|' \
	    scripts/mxc.pc.in > $(PREFIX)/lib/pkgconfig/mxc.pc

clean:
	rm -rf build build-address build-undefined build-thread build-cuda build-*-cuda build-clang \
	    build-*-clang build-nompi build-*-nompi

# ---- Fuzzing (libFuzzer; tests/fuzz/, docs/testing.md) ---------------------------------
#   make fuzz                          build every target and run each for FUZZ_SECONDS (60)
#   make fuzz FUZZ_SECONDS=3600 FUZZ_TARGETS=nd_list
#   make fuzz-build                    build only: build-fuzz/bin/fuzz_<target>
# The library is built again with clang, AddressSanitizer, UndefinedBehaviorSanitizer and
# libFuzzer's coverage instrumentation in build-fuzz/ (serial: no OpenMP), and each
# tests/fuzz/<target>.c is linked against it with libFuzzer's main. A target starts from
# its committed seeds (tests/fuzz/corpus/<target>, only read) and keeps what it discovers
# in build-fuzz/corpus/<target>; the run stops, failing make, at the first crash, leak,
# sanitizer report, time-out (FUZZ_TIMEOUT seconds for one input) or memory over
# FUZZ_RSS_MB, with the input in build-fuzz/artifacts/. Targets run one after another
# on the naive engine (inline at push: fast, deterministic).
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_TIMEOUT ?= 10
FUZZ_RSS_MB  ?= 2048
FUZZ_ARGS    ?=
FUZZ_BUILD   := build-fuzz
FUZZ_SRCS    := $(filter-out tests/fuzz/fuzz_util.c,$(wildcard tests/fuzz/*.c))
FUZZ_TARGETS ?= $(FUZZ_SRCS:tests/fuzz/%.c=%)
# the longest input each target reads: a few KiB holds every seed and keeps runs fast
FUZZ_MAX_LEN_nd_list     := 4096
FUZZ_MAX_LEN_symbol_json := 8192
FUZZ_MAX_LEN_idx         := 4096
FUZZ_MAX_LEN_csv         := 2048
FUZZ_MAX_LEN_op_params   := 512
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined \
                -fno-omit-frame-pointer
FUZZ_CFLAGS  := $(CSTD) $(WARN) -pthread -Iinclude -I. -MMD -MP -O1 -g -fno-trapping-math \
                $(FUZZ_SAN)
FUZZ_LIB     := $(FUZZ_BUILD)/lib/libmxc.a
FUZZ_OBJS    := $(LIB_SRCS:%.c=$(FUZZ_BUILD)/obj/%.o)
FUZZ_BINS    := $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/bin/fuzz_%)

.PHONY: fuzz fuzz-build fuzz-clean
fuzz-build: $(FUZZ_BINS)
clean: fuzz-clean
fuzz-clean:
	rm -rf $(FUZZ_BUILD)
-include $(wildcard $(FUZZ_BUILD)/obj/*/*.d)

# the build's dependencies and clang's (scripts/deps.sh --fuzz)
$(FUZZ_BUILD)/.deps-ok: scripts/deps.sh
	@bash scripts/deps.sh --fuzz
	@mkdir -p $(@D) && touch $@

$(FUZZ_BUILD)/obj/%.o: %.c | $(FUZZ_BUILD)/.deps-ok
	@mkdir -p $(@D)
	@echo "  CC      $< (fuzz)"
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -DMXC_BUILDING_LIBRARY -c $< -o $@

$(FUZZ_LIB): $(FUZZ_OBJS)
	@mkdir -p $(@D)
	@rm -f $@
	@echo "  AR      $@"
	$(Q)ar rcs $@ $^

$(FUZZ_BUILD)/bin/fuzz_%: tests/fuzz/%.c tests/fuzz/fuzz_util.c tests/fuzz/fuzz_util.h $(FUZZ_LIB)
	@mkdir -p $(@D)
	@echo "  CCLD    $@"
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $< tests/fuzz/fuzz_util.c -o $@ $(FUZZ_LIB) \
	    $(filter-out -fopenmp,$(LDLIBS))

# One target's run; $(1) is its name.
define fuzz_run
	@echo "== fuzz $(1): $(FUZZ_SECONDS) s"
	@mkdir -p $(FUZZ_BUILD)/corpus/$(1) $(FUZZ_BUILD)/artifacts
	$(Q)MXC_ENGINE_TYPE=naive ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	    $(FUZZ_BUILD)/bin/fuzz_$(1) -max_total_time=$(FUZZ_SECONDS) \
	    -max_len=$(or $(FUZZ_MAX_LEN_$(1)),4096) -timeout=$(FUZZ_TIMEOUT) \
	    -rss_limit_mb=$(FUZZ_RSS_MB) -print_final_stats=1 \
	    -artifact_prefix=$(FUZZ_BUILD)/artifacts/$(1)- $(FUZZ_ARGS) \
	    $(FUZZ_BUILD)/corpus/$(1) tests/fuzz/corpus/$(1)

endef

fuzz: $(FUZZ_BINS)
	$(foreach t,$(FUZZ_TARGETS),$(call fuzz_run,$(t)))

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
