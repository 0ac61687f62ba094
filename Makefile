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

test: deps
	$(GO) vet $(PACKAGES)
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
