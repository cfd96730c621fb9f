# spanprobe build. `make` builds build/spanprobe (CPU backend, plus CUDA where nvcc is on the PATH)
# and build/spanprobe-f64 (the same CLI in float64, CPU only: reference reports for `compare`);
# `make test` runs the suite, `make test-asan` the same under AddressSanitizer + UBSan.
# Every library source is compiled twice: float32 (the tool) and float64 (-DSP_DOUBLE, used by the
# gradient and Jacobian checks and spanprobe-f64). See docs/build.md.

BUILD ?= build
SAN ?= 0
NVCC ?= nvcc
CUDA ?= $(if $(shell command -v $(NVCC) 2>/dev/null),1,0)

PKGS := hdf5 libcjson openblas lapacke libpcre2-8 icu-uc libcrypto
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

CC ?= cc
# -fPIC: the same objects make libspanprobe.a and libspanprobe.so (make install); without semantic
# interposition, calls inside the library stay as direct (and inlinable) as in a PIE.
CFLAGS := -std=c11 -D_POSIX_C_SOURCE=200809L -O2 -g -Wall -Wextra -Werror -fopenmp -fPIC -fno-semantic-interposition \
          -I. -Iinclude $(PKG_CFLAGS) $(EXTRA_CFLAGS)
LDLIBS := $(PKG_LIBS) -lm -fopenmp
ifeq ($(SAN),1)
  CFLAGS += -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
  LDLIBS += -fsanitize=address,undefined
  CUDA := 0
endif

# MPI (docs/scaling.md): Open MPI's mpicc compiles everything where it is on the PATH, unless the
# compiler is chosen on the command line (the fuzzing build's clang) or the sanitizers are on
# (Open MPI's own allocations would fill the leak reports). `make MPI=0` builds without it; the
# program is then the same minus `mpirun` support.
MPICC ?= mpicc
ifndef MPI
  MPI := $(if $(filter command line,$(origin CC))$(filter 1,$(SAN)),0,$(if $(shell command -v $(MPICC) 2>/dev/null),1,0))
endif
ifeq ($(MPI),1)
  CC := $(MPICC)
  CFLAGS += -DSP_HAVE_MPI
  MPI_LINK := $(shell $(MPICC) --showme:link 2>/dev/null) # for spanprobe.pc's static link line
endif

LIB_DIRS := core kernels kernels/cpu model io analyzers train check plots study api
LIB_SRCS := $(foreach d,$(LIB_DIRS),$(wildcard $(d)/*.c))
# The gnuplot templates plots/*.gp are compiled into the library as C strings (plots/README.md), so
# the tool needs no installed data and draws from any working directory.
PLOT_TEMPLATES := $(sort $(wildcard plots/*.gp))
PLOT_TEMPLATES_C := $(BUILD)/gen/plot_templates.c
CLI_SRCS := $(wildcard cli/*.c)
TEST_SUPPORT := $(wildcard tests/support/*.c)
TEST_SRCS := $(wildcard tests/test_*.c)
TEST_F64_SRCS := $(filter %_f64.c,$(TEST_SRCS))
TEST_F32_SRCS := $(filter-out %_f64.c,$(TEST_SRCS))

OBJ32 := $(LIB_SRCS:%.c=$(BUILD)/f32/%.o) $(BUILD)/f32/gen/plot_templates.o
OBJ64 := $(LIB_SRCS:%.c=$(BUILD)/f64/%.o) $(BUILD)/f64/gen/plot_templates.o
CLI_OBJ := $(CLI_SRCS:%.c=$(BUILD)/f32/%.o)
CLI_OBJ64 := $(CLI_SRCS:%.c=$(BUILD)/f64/%.o)
LIB32 := $(BUILD)/libspanprobe.a
LIB64 := $(BUILD)/libspanprobe_f64.a
BIN := $(BUILD)/spanprobe
# The same command line on the float64 library (CPU only): fp64 reference reports for `compare`.
BIN64 := $(BUILD)/spanprobe-f64
TESTS := $(TEST_F32_SRCS:tests/%.c=$(BUILD)/tests/%) $(TEST_F64_SRCS:tests/%.c=$(BUILD)/tests/%)
BENCHES := $(patsubst bench/%.c,$(BUILD)/bench/%,$(wildcard bench/*.c))

ifeq ($(CUDA),1)
  CU_SRCS := $(wildcard kernels/cuda/*.cu)
  CU_OBJ := $(CU_SRCS:%.cu=$(BUILD)/cuda/%.o)
  CUDA_HOME ?= $(patsubst %/bin/,%,$(dir $(shell command -v $(NVCC))))
  # Hopper machine code (sm_90) plus compute_90 PTX that newer GPUs compile at load; warnings are
  # errors for both nvcc and the host compiler.
  NVCCFLAGS := -O2 -std=c++17 -I. -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90 \
               -Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror,-fPIC
  CFLAGS_CUDA := -DSP_HAVE_CUDA
  LDLIBS += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublas -lcusolver -lcudart -lstdc++
  # NCCL (docs/scaling.md): sums over MPI ranks go GPU to GPU where its header sits beside CUDA's and
  # the build has MPI; `make NCCL=0` sends them through host memory and MPI instead.
  ifndef NCCL
    NCCL := $(if $(filter 1,$(MPI)),$(if $(wildcard $(CUDA_HOME)/include/nccl.h),1,0),0)
  endif
  ifeq ($(NCCL),1)
    NVCCFLAGS += -DSP_HAVE_NCCL
    LDLIBS += -lnccl
  endif
else
  CU_OBJ :=
  CFLAGS_CUDA :=
endif

.PHONY: all tests test test-asan deps data test-data clean bench main fuzz shared install uninstall
all: $(BIN) $(BIN64) cuda-note

cuda-note:
ifeq ($(MPI),0)
	@echo "note: MPI skipped ($(if $(filter 1,$(SAN)),sanitizer build,mpicc not found, CC chosen or MPI=0)); mpirun runs N separate processes"
endif
ifeq ($(CUDA),0)
	@echo "note: CUDA backend skipped ($(if $(filter 1,$(SAN)),sanitizer build,nvcc not found or CUDA=0)); building the CPU backend only"
endif
.PHONY: cuda-note

# The CPU kernels' inline exp (kernels/cpu/cpu_math.h) clamps its argument; GCC turns that clamp
# into a branch-free select, so the loops around it vectorize, only when FP ops may not trap. No
# value changes (it is clang's default).
$(BUILD)/f32/kernels/cpu/%.o $(BUILD)/f64/kernels/cpu/%.o: CFLAGS += -fno-trapping-math

# Importing a Hugging Face model converts, checks and transposes every weight in loops of unknown
# trip count, which -O2's very-cheap vectorizer cost model leaves scalar (bench/bench_hf_open.c:
# about 20% of the load time). A GCC option: clang (make fuzz) goes without it.
IMPORT_LOOPS := io/safetensors_read io/hf_dir
$(foreach f,$(IMPORT_LOOPS),$(BUILD)/f32/$(f).o $(BUILD)/f64/$(f).o): CFLAGS += $(if $(findstring clang,$(CC)),,-fvect-cost-model=dynamic)

$(BUILD)/f32/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(CFLAGS_CUDA) -MMD -MP -c $< -o $@

$(BUILD)/f64/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DSP_DOUBLE -MMD -MP -c $< -o $@

$(PLOT_TEMPLATES_C): $(PLOT_TEMPLATES) plots/embed_templates.sh
	@mkdir -p $(dir $@)
	sh plots/embed_templates.sh $(PLOT_TEMPLATES) > $@.tmp && mv $@.tmp $@

$(BUILD)/f32/gen/plot_templates.o $(BUILD)/f64/gen/plot_templates.o: $(PLOT_TEMPLATES_C)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/cuda/%.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -MMD -MP -c $< -o $@

$(LIB32): $(OBJ32) $(CU_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(LIB64): $(OBJ64)
	@rm -f $@
	ar rcs $@ $^

$(BIN): $(CLI_OBJ) $(LIB32)
	$(CC) $(CFLAGS) -o $@ $(CLI_OBJ) $(LIB32) $(LDLIBS)

$(BIN64): $(CLI_OBJ64) $(LIB64)
	$(CC) $(CFLAGS) -o $@ $(CLI_OBJ64) $(LIB64) $(LDLIBS)

# The tests' shared support code, compiled once per precision (not once per test binary).
SUPPORT32 := $(BUILD)/libtestsupport.a
SUPPORT64 := $(BUILD)/libtestsupport_f64.a
$(SUPPORT32): $(TEST_SUPPORT:%.c=$(BUILD)/f32/%.o)
	@rm -f $@
	ar rcs $@ $^

$(SUPPORT64): $(TEST_SUPPORT:%.c=$(BUILD)/f64/%.o)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/tests/%_f64: tests/%_f64.c $(SUPPORT64) $(LIB64)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DSP_DOUBLE -MMD -MP -o $@ $< $(SUPPORT64) $(LIB64) $(LDLIBS) -lcmocka

$(BUILD)/tests/%: tests/%.c $(SUPPORT32) $(LIB32)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(CFLAGS_CUDA) -MMD -MP -o $@ $< $(SUPPORT32) $(LIB32) $(LDLIBS) -lcmocka

$(BUILD)/bench/%: bench/%.c $(LIB32)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -o $@ $< $(LIB32) $(LDLIBS)

bench: $(BENCHES)

# The default job (README): fetch the default corpus, train pre, post and span at 8 layers, analyze
# them and draw every figure (docs/figures/README.md). Resumable: run it again after an interruption.
main: $(BIN)
	@tools/fetch_data.sh data
	$(BIN) study --preset quick --out out/quick
	@echo "figures: out/quick/figures/ (one .png, .gp and .dat per figure); summary: out/quick/summary.md"

# Test fixtures made by the tool itself go to $(BUILD)/fixtures (fixtures/build.sh), never committed; those
# made by Python reference generators (fixtures/hf, fixtures/tokenizers, ...: tools/) are committed.
fixtures: $(BIN)
	@SPANPROBE_BIN=$(abspath $(BIN)) BUILD_DIR=$(abspath $(BUILD)) fixtures/build.sh

# The real data of the tests: Moby Dick and the model SmolLM2-135M-Instruct in GGUF
# (tools/fetch_smollm2.sh). Never fails: where they cannot be fetched, the tests that need them skip
# with one line.
test-data:
	@tools/fetch_data.sh data || echo "note: the tests on data/mobydick.txt will be skipped"
	@tools/fetch_smollm2.sh data/models || echo "note: the SmolLM2 tests will be skipped"

# Every test binary, built and not run (the GPU session runs some of them alone first).
tests: $(BIN) $(BIN64) $(TESTS)

# The test runner builds the fixtures through the tool itself, then runs every test binary
# (TEST_JOBS=N: N at a time).
test: $(BIN) $(BIN64) $(TESTS) fixtures test-data
	@SPANPROBE_BIN=$(abspath $(BIN)) BUILD_DIR=$(abspath $(BUILD)) SPANPROBE_SAN=$(SAN) tests/run_tests.sh $(TESTS)

test-asan:
	$(MAKE) BUILD=build-asan SAN=1 test

deps:
	@tools/install_deps.sh

# ---- fuzzing (fuzz/README.md) ----
# `make fuzz FUZZ_SECONDS=N`: builds every fuzz/fuzz_*.c harness with clang's libFuzzer, ASan and
# UBSan against a float32 library compiled by the rules above into $(FUZZ_BUILD) (a second make with
# BUILD, CC and EXTRA_CFLAGS set: -fsanitize=fuzzer-no-link instruments it, the gnuplot templates
# are generated there like in any build), then runs each harness N seconds (fuzz/run.sh: new inputs
# go to $(FUZZ_BUILD)/corpus/, crashing ones to $(FUZZ_BUILD)/crashes/; non-zero exit on any).
# FUZZ_ONLY="dump gguf" picks harnesses; FUZZ_TOTALS=fuzz/totals.txt adds each run to the totals.
FUZZ_BUILD ?= build-fuzz
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 10
# (-Wno-pass-failed: instrumented `omp simd` loops do not vectorize, which clang reports as a warning)
FUZZ_CFLAGS := -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer \
               -Wno-pass-failed
FUZZ_HARNESSES := $(patsubst fuzz/fuzz_%.c,%,$(wildcard fuzz/fuzz_*.c))
FUZZ_ONLY ?= $(FUZZ_HARNESSES)

fuzz:
	$(MAKE) BUILD=$(FUZZ_BUILD) CC=$(FUZZ_CC) CUDA=0 MPI=0 EXTRA_CFLAGS="$(FUZZ_CFLAGS)" \
		$(FUZZ_ONLY:%=$(FUZZ_BUILD)/fuzz/fuzz_%)
	FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_BUILD=$(FUZZ_BUILD) FUZZ_TOTALS=$(FUZZ_TOTALS) fuzz/run.sh $(FUZZ_ONLY)

# (inside that second make) one binary per harness, linked with the harnesses' helpers (fuzz/*.c)
FUZZ_HELPERS := $(patsubst %.c,$(BUILD)/f32/%.o,$(filter-out fuzz/fuzz_%.c,$(wildcard fuzz/*.c)))
$(BUILD)/fuzz/fuzz_%: fuzz/fuzz_%.c $(FUZZ_HELPERS) $(LIB32)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fsanitize=fuzzer -MMD -MP -o $@ $< $(FUZZ_HELPERS) $(LIB32) $(LDLIBS)

data:
	@tools/fetch_data.sh data
	@tools/fetch_smollm2.sh data/models || echo "note: the SmolLM2 tests will be skipped"

# ---- install (docs/install.md) ----
# `make install PREFIX=/usr/local DESTDIR=`: the programs, libspanprobe.so (soname
# libspanprobe.so.SO_MAJOR) and .a, the C API spanprobe/spanprobe.h and the modules' headers under
# include/spanprobe/, spanprobe.pc, man pages
# (help2man) and the bash completion, every path listed in share/spanprobe/installed.txt, which
# `make uninstall` removes exactly (tools/install.sh).
PREFIX ?= /usr/local
SO_MAJOR := 0
VERSION := $(shell sed -n 's/^\#define SP_VERSION "\(.*\)"/\1/p' core/common.h)
SHLIB := $(BUILD)/libspanprobe.so.$(VERSION)
LIB_HEADERS := $(foreach d,$(LIB_DIRS),$(wildcard $(d)/*.h))

$(SHLIB): $(OBJ32) $(CU_OBJ)
	$(CC) -shared -Wl,-soname,libspanprobe.so.$(SO_MAJOR) -o $@ $^ $(LDLIBS)

shared: $(SHLIB)

install: $(BIN) $(BIN64) $(LIB32) $(SHLIB)
	@DESTDIR="$(DESTDIR)" PREFIX="$(PREFIX)" BUILD="$(BUILD)" VERSION="$(VERSION)" SO_MAJOR="$(SO_MAJOR)" \
		API_HEADER=include/spanprobe/spanprobe.h HEADERS="$(LIB_HEADERS)" PC_CFLAGS="$(PKG_CFLAGS)" \
		PC_LIBS_PRIVATE="$(LDLIBS) $(MPI_LINK)" tools/install.sh install

uninstall:
	@DESTDIR="$(DESTDIR)" PREFIX="$(PREFIX)" tools/install.sh uninstall

clean:
	rm -rf build build-asan $(FUZZ_BUILD)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
