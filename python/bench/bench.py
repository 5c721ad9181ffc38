"""Benchmarks of the Python client against a real agentsessionsd (echo harness, offline echo
model, SQLite journal): one session of N turns (p50, p99), S concurrent sessions of T turns
(aggregate turns/s), and reading a long session (ReadRecords pages vs the Replay stream) plus
verifying it in Python.

    python bench/bench.py --bin-dir target/release            # starts its own daemon
    python bench/bench.py --server 127.0.0.1:8080              # or uses a running one
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from agentsessions import Client, verify_records


def percentile(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def start_daemon(bin_dir: Path, journal: Path) -> tuple[subprocess.Popen[str], str]:
    daemon = subprocess.Popen(
        [str(bin_dir / "agentsessionsd"), "--addr", "127.0.0.1:0", "--journal", str(journal)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert daemon.stdout is not None
    line = daemon.stdout.readline().strip()
    prefix = "agentsessionsd listening on "
    if not line.startswith(prefix):
        daemon.kill()
        raise SystemExit(f"agentsessionsd said {line!r}")
    return daemon, line[len(prefix) :]


def one_session(client: Client, turns: int) -> None:
    uid = client.create_session(harness="echo").metadata.uid
    client.run("warm up", session=uid)
    samples = []
    for i in range(turns):
        started = time.perf_counter()
        client.run(f"turn {i}", session=uid)
        samples.append(time.perf_counter() - started)
    total = sum(samples)
    print(
        f"one session, {turns} turns: p50 {ms(statistics.median(samples))}, p99 {ms(percentile(samples, 99))}"
        f" ({turns / total:.0f} turns/s)"
    )


def many_sessions(addr: str, sessions: int, turns: int) -> None:
    latencies: list[float] = []
    lock = threading.Lock()
    with Client(addr) as setup:
        uids = [setup.create_session(harness="echo").metadata.uid for _ in range(sessions)]
    barrier = threading.Barrier(sessions + 1)

    def worker(uid: str) -> None:
        mine = []
        with Client(addr) as client:
            barrier.wait()
            for i in range(turns):
                started = time.perf_counter()
                client.run(f"turn {i}", session=uid)
                mine.append(time.perf_counter() - started)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=worker, args=(uid,)) for uid in uids]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    print(
        f"{sessions} sessions x {turns} turns: {sessions * turns / elapsed:.0f} turns/s"
        f" (p50 {ms(statistics.median(latencies))}, p99 {ms(percentile(latencies, 99))})"
    )


def long_session(client: Client, turns: int, repeats: int) -> None:
    uid = client.create_session(harness="echo").metadata.uid
    for i in range(turns):
        client.run(f"turn {i}", session=uid)
    records = client.read_records(uid)
    paged, streamed, verified = [], [], []
    for _ in range(repeats):
        started = time.perf_counter()
        records = client.read_records(uid)
        paged.append(time.perf_counter() - started)
        started = time.perf_counter()
        replayed = list(client.replay(uid))
        streamed.append(time.perf_counter() - started)
        started = time.perf_counter()
        report = verify_records(records)
        verified.append(time.perf_counter() - started)
        assert report.ok and len(replayed) == len(records)
    print(
        f"read a {turns}-turn session ({len(records)} records): ReadRecords median {ms(statistics.median(paged))},"
        f" replay() (paged ReadRecords) median {ms(statistics.median(streamed))}, Python verify median"
        f" {ms(statistics.median(verified))}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", help="a running daemon's Sessions address")
    parser.add_argument("--bin-dir", type=Path, default=Path("target/release"), help="where agentsessionsd is")
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--session-turns", type=int, default=50)
    parser.add_argument("--long-turns", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    daemon = None
    with tempfile.TemporaryDirectory() as tmp:
        addr = args.server
        if addr is None:
            daemon, addr = start_daemon(args.bin_dir, Path(tmp) / "bench.db")
            print(f"daemon: {args.bin_dir / 'agentsessionsd'} on {addr}")
        try:
            with Client(addr) as client:
                one_session(client, args.turns)
                many_sessions(addr, args.sessions, args.session_turns)
                long_session(client, args.long_turns, args.repeats)
        finally:
            if daemon is not None:
                daemon.kill()
                daemon.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
