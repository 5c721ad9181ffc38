#!/usr/bin/env bash
# The long reliability runs whose figures RELIABILITY.md reports: the crash soak on SQLite and on
# Postgres (plain, with pg_terminate_backend of the daemon's connections, and with the
# PostgreSQL server restarted under the daemon), and the long fuzz run.
#
#   scripts/soak.sh [kills] [fuzz-cases]     defaults: 1000 kills, 20000 cases per target
#
# SOAK_RUNS picks runs (default: "sqlite postgres pg-terminate pg-restart fuzz").
# SOAK_PG_SECS caps each Postgres run at that many seconds (fewer kills if the time runs out).
# Postgres: AGENTSESSIONS_TEST_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/test).
# pg-restart restarts the local cluster with pg_ctlcluster (needs root) and so disturbs
# anything else using that server: run it on a machine of your own.
# Each figure line is printed with the load it was measured under.
set -euo pipefail
cd "$(dirname "$0")/.."
kills="${1:-1000}"
cases="${2:-20000}"
runs="${SOAK_RUNS:-sqlite postgres pg-terminate pg-restart fuzz}"
pg_secs="${SOAK_PG_SECS:-0}"
export CARGO_INCREMENTAL=0
failed=0
cargo build -p agentsessions-mcp --bin mcp-fixture-server
cargo build -p agentsessions-cli --bins
# The whole output of each run is kept in target/soak-<run>.log.
run_soak() {
  local log="target/soak-$1.log"
  shift
  echo "== crash soak: $* (load: $(cut -d' ' -f1-3 /proc/loadavg); log: $log)"
  env "$@" AGENTSESSIONS_SOAK_KILLS="$kills" \
    cargo test -p agentsessions-cli --test crash_soak -- --nocapture >"$log" 2>&1 || failed=1
  grep -E -A3 "soak|test result|panicked" "$log"
  echo "== (load after: $(cut -d' ' -f1-3 /proc/loadavg))"
}
for run in $runs; do
  case "$run" in
    sqlite) run_soak sqlite AGENTSESSIONS_SOAK_JOURNAL=sqlite ;;
    postgres) run_soak postgres AGENTSESSIONS_SOAK_JOURNAL=postgres AGENTSESSIONS_SOAK_SECS="$pg_secs" ;;
    pg-terminate)
      run_soak pg-terminate AGENTSESSIONS_SOAK_JOURNAL=postgres AGENTSESSIONS_SOAK_SECS="$pg_secs" \
        AGENTSESSIONS_SOAK_PG_TERMINATE=1 ;;
    pg-restart)
      run_soak pg-restart AGENTSESSIONS_SOAK_JOURNAL=postgres AGENTSESSIONS_SOAK_SECS="$pg_secs" \
        AGENTSESSIONS_SOAK_PG_RESTART=1 ;;
    fuzz)
      echo "== fuzz: $cases cases per target (load: $(cut -d' ' -f1-3 /proc/loadavg))"
      rm -f target/fuzz-tally.tsv
      AGENTSESSIONS_FUZZ_CASES="$cases" cargo test -p agentsessions-fuzz 2>&1 | grep -E "test result|FAILED"
      sort target/fuzz-tally.tsv ;;
    *) echo "unknown run: $run" >&2; exit 2 ;;
  esac
done
exit "$failed"
