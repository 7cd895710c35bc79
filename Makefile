# queengo developer commands. `make` or `make help` lists them.
#
# Every target that needs PostgreSQL gets its URL from .ci/ensure-postgres.sh:
# $DATABASE_URL if set, else a server on 127.0.0.1:5432 with trust auth, else a
# local cluster it creates and starts under .data/pg (port 54329).

.DEFAULT_GOAL := help

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

# Go may live in /usr/local/go/bin without being on PATH on a fresh machine.
export PATH := /usr/local/go/bin:$(PATH)

ENSURE_PG := bash .ci/ensure-postgres.sh
PKG       ?= ./...
# bench/ is a module of its own (the clients of its peers stay out of the
# broker's go.mod), which ./... at the root does not reach: test, vet and
# build run in each module of MODULES. That is both with PKG=./... and the
# broker's alone with a PKG of your own (whose paths are the broker's);
# MODULES=bench runs bench's alone.
MODULES   ?= $(if $(filter ./...,$(PKG)),. bench,.)
TESTFLAGS ?=
FUZZTIME  ?= 20s

.PHONY: help
help: ## Show this list of targets
	@awk 'BEGIN { FS = ":.*## " } /^[a-zA-Z0-9_-]+:.*## / { printf "  %-12s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)
	@echo
	@echo "  PostgreSQL: DATABASE_URL if set, else 127.0.0.1:5432, else a local cluster in .data/pg."
	@echo "  Variables: PKG=$(PKG) MODULES=$(MODULES) TESTFLAGS=$(TESTFLAGS) FUZZTIME=$(FUZZTIME)"

.PHONY: run
run: ## Run the broker on PORT (default 6632), with PostgreSQL set up first
	@DATABASE_URL="$$($(ENSURE_PG))"; export DATABASE_URL; \
	echo "make run: DATABASE_URL=$$DATABASE_URL"; \
	exec go run ./cmd/queengo

# -p 1: one package at a time. The black-box packages start brokers of their
# own and share the cores with PostgreSQL; two at once on a 2-core machine
# pushed the long-poll and window tests past their margins.
.PHONY: test
test: ## Run all tests with -race; they get PostgreSQL in QUEENGO_TEST_DATABASE_URL, Chromium in QUEENGO_CHROMIUM
	@QUEENGO_TEST_DATABASE_URL="$$(DATABASE_URL="$${QUEENGO_TEST_DATABASE_URL:-$${DATABASE_URL:-}}" $(ENSURE_PG))"; \
	export QUEENGO_TEST_DATABASE_URL; \
	QUEENGO_CHROMIUM="$$(bash .ci/ensure-chromium.sh)"; export QUEENGO_CHROMIUM; \
	echo "make test: QUEENGO_TEST_DATABASE_URL=$$QUEENGO_TEST_DATABASE_URL"; \
	for m in $(MODULES); do \
		echo "make test: go -C $$m test -race -count=1 -p 1 -timeout 30m $(TESTFLAGS) $(PKG)"; \
		go -C $$m test -race -count=1 -p 1 -timeout 30m $(TESTFLAGS) $(PKG); \
	done

.PHONY: sdk-admin
sdk-admin: ## Call every method of the Queen SDKs' admin objects (the kit's copies in QUEEN_SDK_WORK, /tmp/queen-sdk)
	@QUEENGO_TEST_DATABASE_URL="$$(DATABASE_URL="$${QUEENGO_TEST_DATABASE_URL:-$${DATABASE_URL:-}}" $(ENSURE_PG))"; \
	export QUEENGO_TEST_DATABASE_URL; \
	go test -count=1 -v -run TestSDKAdmin ./http/e2e/sdktest/

.PHONY: vet
vet: ## Run go vet, and fail if any file needs gofmt or a go.mod needs tidying
	@for m in $(MODULES); do echo "go -C $$m vet $(PKG)"; go -C $$m vet $(PKG); done
	@for m in $(MODULES); do echo "go -C $$m mod tidy -diff"; go -C $$m mod tidy -diff; done
	@unformatted="$$(find . \( -name .git -o -name .data -o -name vendor -o -name testdata \) -prune \
		-o -type f -name '*.go' -print | xargs -r gofmt -l)"; \
	if [ -n "$$unformatted" ]; then \
		echo "these files need gofmt (run: gofmt -w <file>):"; echo "$$unformatted"; exit 1; \
	fi; \
	echo "gofmt: all files formatted"

.PHONY: build
# -o /dev/null: in bench/, ./... is one main package, which go build would
# write as bench/bench.
build: ## Compile every package
	@for m in $(MODULES); do echo "go -C $$m build -o /dev/null ./..."; go -C $$m build -o /dev/null ./...; done

.PHONY: migrate
migrate: ## Apply the broker's schema migrations to DATABASE_URL
	@DATABASE_URL="$$($(ENSURE_PG))"; export DATABASE_URL; \
	echo "make migrate: DATABASE_URL=$$DATABASE_URL"; \
	go run ./cmd/queengo migrate

.PHONY: fuzz
fuzz: ## Run each Fuzz target for FUZZTIME (default 20s), one after another
	@QUEENGO_TEST_DATABASE_URL="$$(DATABASE_URL="$${QUEENGO_TEST_DATABASE_URL:-$${DATABASE_URL:-}}" $(ENSURE_PG))"; \
	export QUEENGO_TEST_DATABASE_URL; \
	listing="$$(go test -list '^Fuzz' $(PKG))"; \
	targets="$$(awk '/^Fuzz/ { names[n++] = $$1; next } \
		/^ok / { for (i = 0; i < n; i++) print $$2, names[i]; n = 0 }' <<<"$$listing")"; \
	if [ -z "$$targets" ]; then echo "make fuzz: no Fuzz targets found in $(PKG)"; exit 0; fi; \
	while read -r pkg name; do \
		echo "make fuzz: go test -run '^$$' -fuzz '^$$name$$' -fuzztime $(FUZZTIME) $$pkg"; \
		go test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) "$$pkg" </dev/null; \
	done <<<"$$targets"

.PHONY: citus-up
citus-up: ## Start a local Citus cluster (coordinator 55432, workers 55433-55434, .data/citus) and print its URL; installs Citus first if missing
	@bash .ci/citus-cluster.sh start

.PHONY: citus-down
citus-down: ## Stop the local Citus cluster (its data stays in .data/citus)
	@bash .ci/citus-cluster.sh stop

# The black-box suites that pass on the Citus cluster (docs/scaling.md,
# "What runs on Citus"); CITUS_PKG widens or narrows the set.
CITUS_PKG ?= ./http/e2e/pushtest/ ./http/e2e/poptest/ ./http/e2e/acktest/

.PHONY: test-citus
test-citus: ## Start the local Citus cluster (installing Citus if missing) and run CITUS_PKG's black-box suites on it
	@QUEENGO_TEST_DATABASE_URL="$$(bash .ci/citus-cluster.sh start)"; export QUEENGO_TEST_DATABASE_URL; \
	echo "make test-citus: QUEENGO_TEST_DATABASE_URL=$$QUEENGO_TEST_DATABASE_URL"; \
	go test -race -count=1 -p 1 -timeout 30m $(TESTFLAGS) $(CITUS_PKG)
