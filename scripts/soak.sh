#!/usr/bin/env bash
# The long reliability runs of issue 19 (RELIABILITY.md): the crash soak on SQLite and on
# Postgres (with pg_terminate_backend of the daemon's connections), and the long fuzz run.
#
#   scripts/soak.sh [kills] [fuzz-cases]     defaults: 1000 kills, 20000 cases per target
#
# Postgres: AGENTSESSIONS_TEST_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/test).
# Each figure line is printed with the load it was measured under.
set -euo pipefail
cd "$(dirname "$0")/.."
kills="${1:-1000}"
cases="${2:-20000}"
export CARGO_INCREMENTAL=0
cargo build -p agentsessions-mcp --bin mcp-fixture-server
cargo build -p agentsessions-cli --bins
run_soak() {
  echo "== crash soak: $* (load: $(cut -d' ' -f1-3 /proc/loadavg))"
  env "$@" AGENTSESSIONS_SOAK_KILLS="$kills" \
    cargo test -p agentsessions-cli --test crash_soak -- --nocapture 2>&1 | grep -E "soak|test result"
}
run_soak AGENTSESSIONS_SOAK_JOURNAL=sqlite
run_soak AGENTSESSIONS_SOAK_JOURNAL=postgres
run_soak AGENTSESSIONS_SOAK_JOURNAL=postgres AGENTSESSIONS_SOAK_PG_TERMINATE=1
echo "== fuzz: $cases cases per target (load: $(cut -d' ' -f1-3 /proc/loadavg))"
rm -f target/fuzz-tally.tsv
AGENTSESSIONS_FUZZ_CASES="$cases" cargo test -p agentsessions-fuzz 2>&1 | grep -E "test result|FAILED"
sort target/fuzz-tally.tsv
