#!/usr/bin/env bash
# make bench-postgres: the embedded store, PostgreSQL, and two nodes on
# PostgreSQL behind a round-robin balancer, measured side by side in one
# run on this machine. Each configuration runs real `ctxd serve` processes
# and `ctxd-bench bench --server` against them: ingest of MESSAGES messages
# over 100 sessions, then DURATION of mixed load (search, context, writes).
# The database is a PostgreSQL started here from Debian's binaries with its
# defaults (fsync on) and pg_stat_statements; its CPU time (every backend's
# utime+stime from /proc) is read before and after each phase. Then the
# start-up of a new node with an empty data dir, and the agent replay and
# LoCoMo evaluations against a node of each store (their figures must be
# equal: the same windows and recall). NEWNODE_ONLY=1 stops after the
# new node's start-up (the ingest into PostgreSQL, then the new node).
set -euo pipefail
BIN=${BIN:-bin/ctxd}
BENCH_BIN=${BENCH_BIN:-bin/ctxd-bench}
MESSAGES=${MESSAGES:-100000}
DURATION=${DURATION:-30s}
CLIENTS=${CLIENTS:-8}
AGENT_RUNS=${AGENT_RUNS:?}
AGENT_LIMIT=${AGENT_LIMIT:-4}
BENCH_DIR=${BENCH_DIR:?}
OUT=${OUT:-/tmp/ctxd-bench-postgres}
rm -rf "$OUT" && mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
say() { echo "bench-postgres: $*" >&2; }

# PostgreSQL: initdb into $OUT/pg; as root it runs as the postgres user.
PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
AS=()
if [ "$(id -u)" -eq 0 ]; then AS=(runuser -u postgres --); chown postgres "$OUT"; fi
PGPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"${AS[@]}" "$PGBIN/initdb" -D "$OUT/pg" -U postgres -A trust -E UTF8 --no-instructions >/dev/null
"${AS[@]}" "$PGBIN/pg_ctl" -D "$OUT/pg" -l "$OUT/pg.log" -w -o "-p $PGPORT -k $OUT -c listen_addresses=127.0.0.1 -c shared_preload_libraries=pg_stat_statements -c max_connections=200" start >/dev/null
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  "${AS[@]}" "$PGBIN/pg_ctl" -D "$OUT/pg" -m fast -w stop >/dev/null 2>&1 || true
}
trap cleanup EXIT
PGMAIN=$(head -1 "$OUT/pg/postmaster.pid")
psql() { "$PGBIN/psql" -h 127.0.0.1 -p "$PGPORT" -U postgres -v ON_ERROR_STOP=1 -Atq "$@"; }
psql -c 'CREATE EXTENSION pg_stat_statements'
TICK=$(getconf CLK_TCK)
# pgcpu: CPU seconds the database's processes have used (live ones; a
# backend that exited took its time with it, so the nodes keep theirs open).
pgcpu() {
  local t=0 p
  for p in $PGMAIN $(pgrep -P "$PGMAIN"); do
    [ -r /proc/$p/stat ] && t=$((t + $(awk '{print $14+$15}' /proc/$p/stat 2>/dev/null || echo 0)))
  done
  echo "scale=3; $t / $TICK" | bc
}

# node NAME DIR [STORE]: starts ctxd serve; sets URL and PID.
node() {
  local log="$OUT/$1.log"
  local args=(serve --addr 127.0.0.1:0 --data-dir "$2")
  [ -n "${3:-}" ] && args+=(--store "$3")
  "$BIN" "${args[@]}" 2>"$log" &
  PID=$!
  PIDS+=("$PID")
  local t0=$(date +%s.%N)
  URL=""
  for _ in $(seq 1 6000); do
    URL=$(grep -o 'ctxd listening.* addr=[^ ]*' "$log" | sed 's/.*addr=//' | head -1 || true)
    if [ -n "$URL" ] && curl -fsS -o /dev/null "http://$URL/readyz"; then break; fi
    kill -0 "$PID" 2>/dev/null || { cat "$log" >&2; exit 1; }
    sleep 0.1
  done
  URL="http://$URL"
  READY_S=$(echo "$(date +%s.%N) - $t0" | bc)
}

# run NAME URL PID: ingest, then the mixed load, DB CPU around each.
run() {
  local c0 c1 c2
  c0=$(pgcpu)
  "$BENCH_BIN" bench --server "$2" --server-pid "$3" --messages "$MESSAGES" --sessions 100 --clients "$CLIENTS" --duration 0 --json >"$OUT/$1-ingest.json"
  c1=$(pgcpu)
  "$BENCH_BIN" bench --server "$2" --server-pid "$3" --messages "$MESSAGES" --sessions 100 --clients "$CLIENTS" --duration "$DURATION" --skip-ingest --json >"$OUT/$1-mixed.json"
  c2=$(pgcpu)
  echo "$(echo "$c1 - $c0" | bc) $(echo "$c2 - $c1" | bc)" >"$OUT/$1-dbcpu"
}

DSN1="postgres://postgres@127.0.0.1:$PGPORT/postgres?sslmode=disable"
psql -c 'CREATE DATABASE two'
DSN2="postgres://postgres@127.0.0.1:$PGPORT/two?sslmode=disable"

if [ -z "${EVAL_ONLY:-}" ]; then
if [ -z "${NEWNODE_ONLY:-}" ]; then
say "embedded: $MESSAGES messages"
node embedded "$OUT/embedded"; EURL=$URL; EPID=$PID
run embedded "$EURL" "$EPID"
fi
say "PostgreSQL: $MESSAGES messages"
node pg "$OUT/pg-node" "$DSN1"; PURL=$URL; PPID_=$PID
run pg "$PURL" "$PPID_"
say "a new node with an empty data dir on the database of $MESSAGES messages"
node newnode "$OUT/new-node" "$DSN1"; echo "$READY_S" >"$OUT/newnode-ready-s"; NPID=$PID
# It answers before its index is built (sessions are indexed on demand);
# the build's own time is in its log.
until grep -q 'index built\|index ready' "$OUT/newnode.log"; do kill -0 "$NPID" || break; sleep 0.5; done
grep -o 'msg="index \(built\|ready\)".*took=[^ ]*' "$OUT/newnode.log" | sed 's/.*took=//' >"$OUT/newnode-built"
kill "$NPID"; wait "$NPID" 2>/dev/null || true
if [ -n "${NEWNODE_ONLY:-}" ]; then
  echo "new node, empty data dir, on $MESSAGES messages: /readyz after $(cat "$OUT/newnode-ready-s") s; its index built in the background in $(cat "$OUT/newnode-built")" | tee "$OUT/report.md"
  exit 0
fi
say "two nodes on PostgreSQL behind a round-robin balancer: $MESSAGES messages"
node two-a "$OUT/two-a" "$DSN2"; A=$URL
node two-b "$OUT/two-b" "$DSN2"; B=$URL
"$BENCH_BIN" balance --listen 127.0.0.1:0 "$A" "$B" >"$OUT/balance.out" &
PIDS+=("$!")
for _ in $(seq 1 100); do grep -q balancing "$OUT/balance.out" 2>/dev/null && break; sleep 0.1; done
LB=$(sed -n 's/balancing \(http:[^ ]*\) .*/\1/p' "$OUT/balance.out")
run two "$LB" "$PID"
fi

# The evaluations run on nodes of their own, empty: on the bench's nodes
# the mixed load's writes (a different count on each) moved BM25's
# document frequencies, and with them a few rankings.
psql -c 'CREATE DATABASE evals'
node eval-embedded "$OUT/eval-embedded"; EURL=$URL
node eval-pg "$OUT/eval-pg" "postgres://postgres@127.0.0.1:$PGPORT/evals?sslmode=disable"; PURL=$URL; PPID_=$PID

say "agent replay (--limit $AGENT_LIMIT) and LoCoMo against the embedded node and the PostgreSQL node"
# The agent loop's cost on each side: the database's CPU and the node's
# (its process's utime+stime) over the replay's calls.
proccpu() { echo "scale=3; $(awk '{print $14+$15}' /proc/$1/stat) / $TICK" | bc; }
c0=$(pgcpu); n0=$(proccpu "$PPID_")
"$BENCH_BIN" eval --agent "$AGENT_RUNS" --limit "$AGENT_LIMIT" --server "$PURL" --out "$OUT/agent-pg.json" >"$OUT/agent-pg.txt"
c1=$(pgcpu); n1=$(proccpu "$PPID_")
echo "$(echo "$c1 - $c0" | bc) $(echo "$n1 - $n0" | bc)" >"$OUT/agent-cpu"
"$BENCH_BIN" eval --agent "$AGENT_RUNS" --limit "$AGENT_LIMIT" --server "$EURL" --out "$OUT/agent-embedded.json" >"$OUT/agent-embedded.txt"
"$BENCH_BIN" eval --turns "$BENCH_DIR/turns.jsonl" --questions "$BENCH_DIR/questions.jsonl" --server "$PURL" --out "$OUT/locomo-pg.jsonl" >"$OUT/locomo-pg.txt"
"$BENCH_BIN" eval --turns "$BENCH_DIR/turns.jsonl" --questions "$BENCH_DIR/questions.jsonl" --server "$EURL" --out "$OUT/locomo-embedded.jsonl" >"$OUT/locomo-embedded.txt"

# The report.
row() { # name file jq
  printf '| %s |' "$1"
  for c in embedded pg two; do printf ' %s |' "$(jq -r "$3" "$OUT/$c-$2.json")"; done
  echo
}
{
  if [ -z "${EVAL_ONLY:-}" ]; then
  echo "| $MESSAGES messages, 100 sessions, $CLIENTS clients | embedded | PostgreSQL | two nodes on PostgreSQL |"
  echo "|---|---|---|---|"
  row "ingest, batches of 100 (msg/s)" ingest '.ingest.messages_per_sec'
  row "ingest batch p50 / p99 (ms)" ingest '"\(.ingest.batch_latency.p50_ms) / \(.ingest.batch_latency.p99_ms)"'
  for op in search_all search_session context write; do
    row "$op p50 / p99 (ms)" mixed "\"\\(.mixed.ops.$op.p50_ms) / \\(.mixed.ops.$op.p99_ms)\""
  done
  row "mixed ops/s" mixed '.mixed.total_per_sec'
  row "errors" mixed '.errors'
  for c in pg two; do
    read -r ci cm <"$OUT/$c-dbcpu"
    n=$(jq '.ingest.messages' "$OUT/$c-ingest.json"); ops=$(jq '[.mixed.ops[].count] | add' "$OUT/$c-mixed.json")
    echo "DB CPU ($c): ingest ${ci}s = $(echo "scale=3; $ci * 1000 / $n" | bc) ms/message; mixed ${cm}s over $ops ops = $(echo "scale=3; $cm * 1000 / $ops" | bc) ms/op"
  done
  echo "new node, empty data dir, to /readyz: $(cat "$OUT/newnode-ready-s") s; its index built in the background in $(cat "$OUT/newnode-built")"
  fi
  read -r adb anode <"$OUT/agent-cpu"
  calls=$(jq '.context_calls + .writes' "$OUT/agent-pg.json")
  echo "agent replay on PostgreSQL: $calls calls (context + writes); DB CPU ${adb}s = $(echo "scale=3; $adb * 1000 / $calls" | bc) ms/call;" \
    "node CPU ${anode}s = $(echo "scale=3; $anode * 1000 / $calls" | bc) ms/call; one DB core carries $(echo "scale=1; $anode / $adb" | bc) node cores"
  echo "--- agent replay, PostgreSQL:"; cat "$OUT/agent-pg.txt"
  echo "--- agent replay, embedded, where it differs (latencies apart):"
  diff <(grep -v '_ms_\|latency' "$OUT/agent-pg.txt") <(grep -v '_ms_\|latency' "$OUT/agent-embedded.txt") && echo "(nowhere)" || true
  echo "--- LoCoMo, PostgreSQL:"; tail -n 15 "$OUT/locomo-pg.txt"
  echo "--- LoCoMo, embedded, where it differs (latencies apart):"
  diff <(grep -v 'latency' "$OUT/locomo-pg.txt" | tail -n 15) <(grep -v 'latency' "$OUT/locomo-embedded.txt" | tail -n 15) && echo "(nowhere)" || true
} | tee "$OUT/report.md"
