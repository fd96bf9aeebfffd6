# casestudy: `make` builds the CLI and the engine; `make test` is what CI runs.
GO        ?= go
BUILD     ?= build
ENGINE_LIB = $(BUILD)/engine/libcasestudy_engine.so
JOBS      ?= $(shell nproc)
PYFLAKES  ?= /usr/bin/python3 -m pyflakes # Debian's python3-pyflakes (scripts/install-deps.sh)
export CASESTUDY_ENGINE_LIB ?= $(abspath $(ENGINE_LIB))

.PHONY: all cli engine engine-tests deps run test lint fmt gpu-tests gpu-carry predict-check install install-check clean cudnn-fusion-probe kernel-probe

all: cli engine

COMMIT    := $(shell git rev-parse --short=12 HEAD 2>/dev/null)$(shell git diff --quiet HEAD 2>/dev/null || echo +dirty)
# The commit, and the engine library this binary is built with: it finds the
# library there from any folder (after --engine-lib, $$CASESTUDY_ENGINE_LIB and
# ../lib next to the binary; engine/discover.go).
LDFLAGS   := -X github.com/casestudy/casestudy/internal/version.commit=$(COMMIT) \
             -X github.com/casestudy/casestudy/engine.builtLibrary=$(abspath $(ENGINE_LIB))
export CGO_CFLAGS ?= -O2 -Wno-deprecated-declarations

cli:
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/casestudy ./cmd/casestudy

# The native engine, against whatever libtorch this machine has (pip torch or
# Debian's libtorch-dev); see engine/native/CMakeLists.txt.
engine: $(ENGINE_LIB)
$(ENGINE_LIB): $(shell find engine/native -type f -not -path '*/third_party/*')
	cmake -S engine/native -B $(BUILD)/engine -DCMAKE_BUILD_TYPE=Release -DCS_BUILD_TESTS=ON $(CMAKE_FLAGS)
	cmake --build $(BUILD)/engine -j $(JOBS)

# Binary and library together: PREFIX/bin/casestudy finds PREFIX/lib/$(notdir $(ENGINE_LIB)).
PREFIX ?= /usr/local
install: cli engine
	install -D -m 0755 bin/casestudy $(DESTDIR)$(PREFIX)/bin/casestudy
	install -D -m 0644 $(ENGINE_LIB) $(DESTDIR)$(PREFIX)/lib/$(notdir $(ENGINE_LIB))

# The installed binary, and bin/casestudy, find their library from another
# folder with nothing pointing at it (doctor --json names the library found).
install-check: cli engine
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	$(MAKE) --no-print-directory install PREFIX="$$tmp" >/dev/null && \
	cd / && \
	env -u CASESTUDY_ENGINE_LIB "$$tmp/bin/casestudy" doctor --json --out "$$tmp" > "$$tmp/installed.json" && \
	grep -q "\"detail\": \"$$tmp/lib/$(notdir $(ENGINE_LIB))\"" "$$tmp/installed.json" && \
	env -u CASESTUDY_ENGINE_LIB $(abspath bin/casestudy) doctor --json --out "$$tmp" > "$$tmp/built.json" && \
	grep -q "\"detail\": \"$(abspath $(ENGINE_LIB))\"" "$$tmp/built.json" && \
	echo "install-check: the installed and the built binary find their engine library from /" || \
	{ echo "install-check: a binary did not find its engine library:"; cat "$$tmp"/*.json; exit 1; }

# The engine's C++ unit tests (engine/native/tests), in the engine's build folder.
engine-tests: $(ENGINE_LIB)
	cmake --build $(BUILD)/engine --target cs_native_tests -j $(JOBS)
	$(BUILD)/engine/cs_native_tests

# The main job: build, then run a study end to end. Default: the GPT headline
# study where a GPU is visible, its CPU smoke variant elsewhere.
STUDY ?= $(shell if nvidia-smi -L 2>/dev/null | grep -q GPU; then echo studies/gpt.yaml; else echo studies/gpt/smoke.yaml; fi)
run: deps all
	bin/casestudy run $(STUDY)

# System packages the engine and the browser tests need (installs as root, or
# prints the apt-get line to run).
deps:
	scripts/install-deps.sh

# The packages that speak C: the engine binding, NVML, and the command that
# loads them. Everything else builds with cgo off (a pure-Go core).
CGO_PACKAGES = /engine/binding$$|/provenance/nvmlgpu$$|/cmd/casestudy$$

lint:
	@out=$$(gofmt -s -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) mod tidy -diff
	@# The core builds with cgo off: under CGO_ENABLED=0 its packages and their
	@# non-standard dependencies have the same Go files as with cgo, none of
	@# them cgo, so what vet type-checked and go test compiles is what a cgo-off
	@# build compiles. (A cgo-off build of it recompiled every package above
	@# net and os/user a second time; a core package that imports a cgo one, or
	@# has cgo files, fails here.)
	@core=$$($(GO) list ./... | grep -Ev '$(CGO_PACKAGES)') && \
	f='{{if not .Standard}}{{.ImportPath}} {{.GoFiles}} {{.CgoFiles}}{{end}}' && \
	on=$$($(GO) list -deps -f "$$f" $$core) && off=$$(CGO_ENABLED=0 $(GO) list -deps -f "$$f" $$core) && \
	if [ "$$on" != "$$off" ]; then echo "lint: the core's files differ without cgo (with, then without):"; \
	echo "$$on" | grep -vxF "$$off"; echo "$$off" | grep -vxF "$$on"; exit 1; fi
	@# Every Gloo collective of the engine through GlooGroup and its issue lock
	@# (engine/native/src/gloo_group.h, issue 39): no other file names a c10d
	@# process group.
	bash scripts/lint-gloo.sh

fmt:
	gofmt -w $$(git ls-files '*.go')

# OMP_WAIT_POLICY=PASSIVE: go test runs two packages at once on CI's 2 cores,
# each training on the CPU with up to 2 intra-op threads; libtorch's OpenMP
# threads spin at every barrier by default, and oversubscribed they spin
# through each other's time slices: TestTinyFamiliesLearn took 150-330 s
# spinning and 11-17 s passive on a loaded 2-core host. It changes no result.
test: deps lint engine engine-tests cli install-check
	CI=$${CI:-} OMP_WAIT_POLICY=PASSIVE $(GO) test -count=1 -timeout 15m ./...
	# The PyTorch reference scripts and cs_bench.py (they run on GPU machines
	# only): pyflakes finds undefined names and unused imports, and their shared
	# timing code is tested against a stand-in for CUDA events.
	$(PYFLAKES) bench/reference/*.py engine/native/tools/cs_bench.py engine/native/tools/losscurve.py engine/native/tools/cudnn_table.py engine/native/tools/fp8_diag.py engine/native/tools/losswindow.py scripts/predict-decompose.py
	cd bench/reference && python3 -m py_compile *.py && python3 -m unittest discover -p 'test_*.py'
	rm -rf bench/reference/__pycache__ engine/native/tools/__pycache__

# The CPU check of the multi-GPU prediction (docs/predict.md): a timing test,
# so alone, after the engine is built; the full 2- and 4-rank version is
# scripts/predict-validate.sh.
predict-check: engine
	CASESTUDY_PREDICT_CHECK=1 $(GO) test -count=1 -timeout 15m -run 'TestPredictCPUGloo' -v ./cmd/casestudy

# What scripts/gpu-check.sh needs from here (no Go on the GPU machine): the
# engine's Go test binary, the CLI and the commit they were built from. Carry
# build/gpu and bin.
gpu-tests: cli
	rm -rf $(BUILD)/gpu && mkdir -p $(BUILD)/gpu
	$(GO) test -c -o $(BUILD)/gpu/engine.test ./engine/binding
	$(GO) test -c -o $(BUILD)/gpu/nvmlgpu.test ./provenance/nvmlgpu
	echo "$(shell git rev-parse HEAD)$(shell git diff --quiet HEAD 2>/dev/null || echo ' (dirty)')" > $(BUILD)/gpu/COMMIT

# The same, stripped, with Debian's Gloo headers (.gloo: the GPU machine's
# torch wheel ships none), in one archive: the device tool carries at most
# 64 MiB with the tracked tree (38 MB since 2026-12-07i), which bin, build/gpu
# and .gloo as they are (32 MB) exceed. Carry build/gpu-carry.tar.xz (~9 MB)
# and start the command with `tar xJf build/gpu-carry.tar.xz &&`
# (scripts/gpu-next/README.md).
gpu-carry: gpu-tests
	rm -rf $(BUILD)/carry && mkdir -p $(BUILD)/carry/bin $(BUILD)/carry/$(BUILD) $(BUILD)/carry/.gloo/include
	cp bin/casestudy $(BUILD)/carry/bin/ && cp -r $(BUILD)/gpu $(BUILD)/carry/$(BUILD)/
	strip $(BUILD)/carry/bin/casestudy $(BUILD)/carry/$(BUILD)/gpu/*.test
	cp -r /usr/include/gloo $(BUILD)/carry/.gloo/include/
	tar cJf $(BUILD)/gpu-carry.tar.xz -C $(BUILD)/carry bin $(BUILD) .gloo

# Issue 41's probe of cuDNN's ConvBNfprop fusion (docs/resnet-fusion.md): a
# standalone program against cuDNN 9's backend API, never linked into the
# engine; needs nvcc and cuDNN 9 (build.sh says where it looks).
cudnn-fusion-probe:
	engine/native/tools/cudnn_fusion/build.sh $(BUILD)/cudnn-fusion

kernel-probe:
	engine/native/tools/kernel_probe/build.sh $(BUILD)/kernel-probe

clean:
	rm -rf bin $(BUILD)
