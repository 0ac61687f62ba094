# The two commands a newcomer runs: `make demo` and `make test`.
GO ?= go
PACKAGES ?= ./...

.PHONY: build install test demo deps proto bench vet

build:
	$(GO) build -o bin/ ./cmd/...

install:
	$(GO) install ./cmd/...

deps:
	@scripts/deps.sh test

# The platforms every binary builds for (DESIGN.md "Platforms"). vet
# type-checks each package and its tests for each, so a call one of them
# lacks fails here the day it is written (docs/architecture.md).
PLATFORMS ?= linux/amd64 linux/arm64 darwin/arm64 darwin/amd64 windows/amd64

vet:
	@for p in $(PLATFORMS); do \
		echo "go vet $$p"; \
		GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) vet $(PACKAGES) || exit 1; \
	done

test: deps vet
	$(GO) test -count=1 -timeout 15m $(PACKAGES)

demo: build
	@scripts/deps.sh demo
	@scripts/demo.sh

# Regenerates proto/cocoonbox/control/v1/*.pb.go with Debian's protoc and the
# plugins pinned in go.mod's tool block.
proto:
	@command -v protoc >/dev/null || scripts/deps.sh demo protobuf-compiler
	$(GO) generate ./proto/...

bench: build
	$(GO) test -run '^$$' -bench . -benchtime 3x ./cli/
