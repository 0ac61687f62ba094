# The two commands a newcomer runs: `make demo` and `make test`.
GO ?= go
PACKAGES ?= ./...
# VERSION is what --version prints on every binary: a tag, or git describe's
# TAG-N-gHASH / HASH with -dirty for uncommitted changes. A plain `go build`
# or `go install` falls back to the module's build information.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)
LDFLAGS = -X github.com/cocoonbox/cocoonbox/internal/version.stamp=$(VERSION)

.PHONY: build install man test demo deps proto bench vet dist dist-check dist-smoke deb-smoke

# cocoonbox-session starts on every resumable command: static, as the
# release builds every binary (CGO_ENABLED=0), it starts about 1 ms sooner
# than linked to libc (docs/benchmarks.md "Resumable sessions").
build:
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/ ./cmd/...
	CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o bin/ ./cmd/cocoonbox-session

# Man pages go where man finds them from PATH: beside $(go env GOPATH)/bin.
PREFIX ?= $(shell $(GO) env GOPATH)
MANDIR ?= $(PREFIX)/share/man/man1

install: man
	$(GO) install -ldflags '$(LDFLAGS)' ./cmd/...
	install -d $(DESTDIR)$(MANDIR)
	install -m 644 man/man1/*.1 $(DESTDIR)$(MANDIR)

# The five binaries' man pages, generated from the text of their --help.
man:
	rm -rf man/man1
	$(GO) run ./cmd/cocoonbox __man man/man1

deps:
	@echo "scripts/deps.sh test"
	@scripts/deps.sh test

# The platforms every binary builds for (DESIGN.md "Platforms"). vet runs
# every analyzer over every package and its tests for this machine's
# platform; for each other platform it builds every package (so a call that
# platform lacks fails, in any package) and vets, tests included, the
# packages whose files differ there (build constraints, _GOOS and _GOARCH
# names): the only ones whose code the host's vet has not checked
# (docs/architecture.md "Platforms"). The platforms go in parallel, each
# step's line first.
PLATFORMS ?= linux/amd64 linux/arm64 darwin/arm64 darwin/amd64 windows/amd64
HOST_PLATFORM := $(shell $(GO) env GOOS)/$(shell $(GO) env GOARCH)

vet:
	@echo "go vet $(PACKAGES) ($(HOST_PLATFORM))"
	@$(GO) vet $(PACKAGES)
	@scripts/vet-platforms.sh $(filter-out $(HOST_PLATFORM),$(PLATFORMS))

test: deps vet
	@echo "go test -count=1 -timeout 15m $(PACKAGES)"
	@$(GO) test -count=1 -timeout 15m $(PACKAGES)

# demo.sh checks (and as root installs) what its steps run before the first.
demo: build
	@scripts/demo.sh

# GoReleaser (.goreleaser.yaml), at the version scripts/deps.sh pins and
# installs with go install. make dist is a snapshot of this commit in dist/:
# cocoonbox_VERSION_OS_ARCH.tar.gz (.zip for Windows) for each target, the
# .deb and .rpm packages, SHA256SUMS and homebrew/Formula/cocoonbox.rb (see
# docs/install.md). Its binaries carry git describe's version, the same
# stamp as LDFLAGS above.
GORELEASER ?= $(shell $(GO) env GOPATH)/bin/goreleaser
# GoReleaser reads the commit (its hash, time and describe) through git, and
# in a checkout with no remote (a local clone's worktree) it drops all of it
# for its failed ls-remote --get-url: there it gets the project's URL for
# its run only, in the environment, and the repository stays as it is.
DIST_GIT_ENV = $(if $(shell git remote 2>/dev/null),,GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=remote.origin.url GIT_CONFIG_VALUE_0=https://github.com/cocoonbox/cocoonbox.git)
dist:
	@scripts/deps.sh dist
	$(DIST_GIT_ENV) $(GORELEASER) release --snapshot --clean

# goreleaser check: .goreleaser.yaml is valid (its one deprecation warning,
# brews, is kept on purpose: docs/install.md says why).
dist-check:
	@scripts/deps.sh dist
	$(GORELEASER) check

# Unpacks this machine's archive from dist/ into a temporary prefix and runs
# its binaries from there against a local box; checks the formula against
# the archives and SHA256SUMS.
dist-smoke: dist
	@VERSION='$(VERSION)' scripts/dist-smoke.sh

# As root on Debian: installs dist/'s .deb for this machine with apt-get,
# runs it from /usr/bin against a local box, removes it and what it pulled
# in, and reads the .rpm's files and requirements with rpm.
deb-smoke:
	@VERSION='$(VERSION)' scripts/deb-smoke.sh

# Regenerates proto/cocoonbox/control/v1/*.pb.go with Debian's protoc and the
# plugins pinned in go.mod's tool block.
proto:
	@command -v protoc >/dev/null || scripts/deps.sh demo protobuf-compiler
	$(GO) generate ./proto/...

bench: build
	$(GO) test -run '^$$' -bench . -benchtime 3x ./cli/
