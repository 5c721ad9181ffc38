#!/usr/bin/env bash
# The tracing budget, "tracing on adds <= 5 % to turn p50": runs the gRPC turn bench with tracing
# off (BENCH_TRACING=logs, the daemon's default) and on (otlp: every span exported over OTLP/HTTP)
# in alternation, so slow drifts of a shared machine fall on both modes alike, and prints the paired
# ratio of the one-client p50 (median, mean, and a bootstrap 95 % interval of the median).
#
#   scripts/bench-tracing.sh [rounds]     default 40 rounds (one run of each mode per round)
#
# MODES (default "logs otlp") picks the modes; "off logs otlp" adds no subscriber at all.
# Builds the release bench first. Each run's two rows are kept in target/bench-tracing.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-40}"
modes="${MODES:-logs otlp}"
cargo bench -p agentsessions-cli --bench grpc --no-run 2>&1 | tail -n 1
bin=$(ls -t target/release/deps/grpc-* | grep -v '\.d$' | head -n 1)
out=target/bench-tracing.txt
: >"$out"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq 1 "$rounds"); do
  for mode in $modes; do
    rows=$(cd crates/cli && BENCH_POSTGRES=off BENCH_TRACING="$mode" "../../$bin" --bench 2>/dev/null)
    one=$(grep "one client" <<<"$rows")
    many=$(grep "64 concurrent" <<<"$rows")
    echo "$round $mode | $one | $many" >>"$out"
  done
  printf '.'
done
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$out" <<'PY'
import random, re, statistics, sys
rounds = {}
for line in open(sys.argv[1]):
    n, mode = line.split()[:2]
    p50 = float(re.search(r"one client.*?p50\s+([\d.]+)ms", line).group(1))
    tps = int(re.search(r"64 concurrent sessions\s+\d+ turns\s+(\d+) turns/s", line).group(1))
    rounds.setdefault(n, {})[mode] = (p50, tps)
modes = list(next(iter(rounds.values())))
for mode in modes:
    p50s = [r[mode][0] for r in rounds.values()]
    tps = [r[mode][1] for r in rounds.values()]
    print(f"{mode:5} one client p50: median {statistics.median(p50s):.3f} ms, "
          f"lowest {min(p50s):.3f} ms; 64 concurrent: median {statistics.median(tps):.0f} turns/s")
base = "logs" if "logs" in modes else modes[0]
random.seed(1)
for mode in modes:
    if mode == base:
        continue
    ratios = [r[mode][0] / r[base][0] for r in rounds.values()]
    boot = sorted(statistics.median(random.choices(ratios, k=len(ratios))) for _ in range(4000))
    print(f"{mode}/{base} paired p50 ratio over {len(ratios)} rounds: median {statistics.median(ratios):.3f}, "
          f"mean {statistics.mean(ratios):.3f}, 95 % interval of the median {boot[100]:.3f}..{boot[3900]:.3f}")
PY
