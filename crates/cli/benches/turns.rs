//! The "flat cost per turn" workload (BENCHMARKS.md, "Flat cost per turn") through gRPC (a bench
//! binary, not a timed test): client SDK → Sessions service over loopback TCP → echo harness →
//! offline echo model → durable SQLite, the service being the daemon's own assembly
//! (`host::build_service`) served in this process on a runtime like the daemon's, the client on a
//! runtime of its own (as in its own process). Inputs are 100 characters.
//!
//! 0. the raw `write + fdatasync` rate of the disk the journal is on, measured in the same run;
//! 1. one session × 500 turns: p50 / p99, and the first 10 % against the last 10 %;
//! 2. one session × 10,000 turns (`BENCH_LONG_TURNS`): first 10 % against last 10 %, then a
//!    Suspend and a Resume of that session;
//! 3. 64 sessions × 50 turns at once: aggregate turns/s;
//! 4. reading a 1,000-turn session back (Replay stream, ReadRecords pages, and GetSession);
//! 5. fork at turn 500 of a 1,000-turn session into 16 children: one call per child, and all 16
//!    in one call.
//!
//! 6. memory per idle session: the state a host keeps of that 1,000-turn session, measured with
//!    a counting allocator, beside the estimate the state budget uses.
//!
//! Rows 1 and 3 also print the CPU the process spent per turn (client and server together), a
//! figure that moves less than latency with the state of a virtual machine's host.
//!
//! Run with `cargo bench -p agentsessions-cli --bench turns`; `BENCH_QUICK=1` for a smoke run
//! (1,000 turns instead of 10,000 in row 2). `BENCH_ONLY=0123456` picks rows.
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::cast_precision_loss)]
// Row 6 counts allocations with a global allocator, which is `unsafe` to implement; the bench
// binary only, never a library.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};
use std::time::{Duration, Instant};

use agentsessions_cli::config::HostConfig;
use agentsessions_cli::host::{build_service, open_journal};
use agentsessions_client::{Client, ExecOptions, ForkOptions};
use agentsessions_placement::SessionState;
use mimalloc::MiMalloc;

/// The daemon's allocator (`agentsessionsd`), counting the bytes allocated and not yet freed
/// while row 6 measures; otherwise it only forwards, so the other rows pay what the daemon pays.
/// Built with `BENCH_SYSTEM_ALLOCATOR=1` in the environment it forwards to the system allocator
/// instead, to measure what mimalloc is worth.
struct Counting;

const SYSTEM_ALLOCATOR: bool = option_env!("BENCH_SYSTEM_ALLOCATOR").is_some();

static COUNTING: AtomicBool = AtomicBool::new(false);
static HELD: AtomicIsize = AtomicIsize::new(0);

fn count(bytes: usize, sign: isize) {
    if COUNTING.load(Ordering::Relaxed) {
        HELD.fetch_add(
            sign * isize::try_from(bytes).unwrap_or(isize::MAX),
            Ordering::Relaxed,
        );
    }
}

// SAFETY: every call is forwarded unchanged to one allocator, fixed at build time; only a
// counter is added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size(), 1);
        // SAFETY: the caller's contract is the inner allocator's.
        unsafe {
            if SYSTEM_ALLOCATOR {
                System.alloc(layout)
            } else {
                MiMalloc.alloc(layout)
            }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(layout.size(), -1);
        // SAFETY: as above.
        unsafe {
            if SYSTEM_ALLOCATOR {
                System.dealloc(ptr, layout)
            } else {
                MiMalloc.dealloc(ptr, layout)
            }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(layout.size(), -1);
        count(new_size, 1);
        // SAFETY: as above.
        unsafe {
            if SYSTEM_ALLOCATOR {
                System.realloc(ptr, layout, new_size)
            } else {
                MiMalloc.realloc(ptr, layout, new_size)
            }
        }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// A 100-character user input (the turn shape), numbered so no two are equal.
fn input(turn: usize) -> String {
    let mut text = format!("turn {turn:06}: ");
    while text.len() < 100 {
        text.push_str("how is the weather today? ");
    }
    text.truncate(100);
    text
}

fn percentile(sorted: &[Duration], per_mille: usize) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[(sorted.len() - 1) * per_mille / 1000]
}

fn sorted(mut latencies: Vec<Duration>) -> Vec<Duration> {
    latencies.sort_unstable();
    latencies
}

fn report(name: &str, latencies: &[Duration], elapsed: Duration) {
    let all = sorted(latencies.to_vec());
    println!(
        "{name:<48} {:>6} ops {:>8.0} ops/s   p50 {:>9.3?}  p99 {:>9.3?}",
        all.len(),
        all.len() as f64 / elapsed.as_secs_f64(),
        percentile(&all, 500),
        percentile(&all, 990),
    );
}

/// The first and last tenth of a run of turns, as p50 and mean each.
fn report_tenths(name: &str, latencies: &[Duration]) {
    let tenth = (latencies.len() / 10).max(1);
    let first = sorted(latencies[..tenth].to_vec());
    let last = sorted(latencies[latencies.len() - tenth..].to_vec());
    let mean = |v: &[Duration]| v.iter().sum::<Duration>() / u32::try_from(v.len()).unwrap();
    let first_p50 = percentile(&first, 500);
    let last_p50 = percentile(&last, 500);
    println!(
        "{name:<48} first 10 %: p50 {first_p50:>9.3?} mean {:>9.3?}   last 10 %: p50 \
         {last_p50:>9.3?} mean {:>9.3?}   last/first p50 {:.2}",
        mean(&first),
        mean(&last),
        last_p50.as_secs_f64() / first_p50.as_secs_f64(),
    );
}

/// CPU time this process has used so far (user and system, every thread, living or exited),
/// from `/proc/self/stat` in ticks of 10 ms (`USER_HZ` is 100 on Linux); `None` without procfs.
/// Unlike latency, it does not move with how fast this VM's host wakes an idle virtual CPU.
fn process_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name start at field 3 (state); utime and stime are 14 and 15.
    let fields: Vec<&str> = stat.rsplit_once(") ")?.1.split_whitespace().collect();
    let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

/// The CPU the process spent per turn since `before` (client and server together: both run here).
fn report_cpu(name: &str, before: Option<Duration>, turns: usize) {
    if let (Some(before), Some(after)) = (before, process_cpu()) {
        let per_turn = (after - before) / u32::try_from(turns.max(1)).unwrap_or(u32::MAX);
        println!("{name:<48} CPU per turn (client and server) {per_turn:>9.3?}");
    }
}

/// 128-byte `write + fdatasync` in a loop, in the journal's directory.
fn raw_fsync(dir: &std::path::Path, n: usize) {
    let path = dir.join("fsync.probe");
    let mut file = std::fs::File::create(&path).unwrap();
    let block = [7u8; 128];
    let mut latencies = Vec::with_capacity(n);
    let started = Instant::now();
    for _ in 0..n {
        let t = Instant::now();
        file.write_all(&block).unwrap();
        file.sync_data().unwrap();
        latencies.push(t.elapsed());
    }
    report(
        "0. raw write+fdatasync (128 bytes)",
        &latencies,
        started.elapsed(),
    );
    drop(std::fs::remove_file(path));
}

/// Runs `turns` turns on `session` (a new one when empty); returns the uid and each latency.
async fn turns_on(
    mut client: Client,
    mut session: String,
    turns: usize,
) -> (String, Vec<Duration>) {
    let mut latencies = Vec::with_capacity(turns);
    for t in 0..turns {
        let begun = Instant::now();
        let result = client
            .exec(ExecOptions::new(input(t)).on(&session), |_| {})
            .await
            .unwrap();
        latencies.push(begun.elapsed());
        if session.is_empty() {
            session = result.session_uid();
        }
    }
    (session, latencies)
}

fn wanted(row: char) -> bool {
    std::env::var("BENCH_ONLY").map_or(true, |only| only.contains(row))
}

fn main() {
    let quick = std::env::var_os("BENCH_QUICK").is_some();
    let long_turns: usize = std::env::var("BENCH_LONG_TURNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if quick { 1_000 } else { 10_000 });
    // The daemon's runtime (`#[tokio::main]`: one worker per core, two here) serves; the client
    // has a runtime of its own, as it would in its own process, so its connection tasks do not
    // run on the daemon's workers.
    let server = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let client_runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    if wanted('0') {
        raw_fsync(dir.path(), if quick { 500 } else { 3_000 });
    }
    let path = dir.path().join("bench.db");
    let addr = server.block_on(async {
        let journal = open_journal(path.to_str().unwrap(), "").await.unwrap();
        let assembled = build_service(journal, &HostConfig::default()).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(agentsessions_server::serve_tcp(
            listener,
            assembled.service,
            std::future::pending(),
        ));
        addr
    });
    client_runtime.block_on(async {
        let client = Client::dial(&addr).unwrap();
        // Warm the connection and the host.
        turns_on(client.clone(), String::new(), 5).await;

        if wanted('1') {
            let cpu = process_cpu();
            let started = Instant::now();
            let (_, latencies) = turns_on(client.clone(), String::new(), 500).await;
            report("1. one session x 500 turns", &latencies, started.elapsed());
            report_tenths("1. one session x 500 turns", &latencies);
            report_cpu("1. one session x 500 turns", cpu, latencies.len());
        }

        if wanted('2') {
            let started = Instant::now();
            let (uid, latencies) = turns_on(client.clone(), String::new(), long_turns).await;
            let name = format!("2. one session x {long_turns} turns");
            report(&name, &latencies, started.elapsed());
            report_tenths(&name, &latencies);
            // Five cycles, reported as the median and the slowest: one sample alone is at the
            // mercy of a WAL checkpoint or the VM's host.
            let mut c = client.clone();
            let (mut suspends, mut resumes) = (Vec::new(), Vec::new());
            let mut records = 0;
            for _ in 0..5 {
                let begun = Instant::now();
                records = c.suspend(&uid).await.unwrap().last_seq;
                suspends.push(begun.elapsed());
                let begun = Instant::now();
                c.resume(&uid).await.unwrap();
                resumes.push(begun.elapsed());
            }
            let (suspends, resumes) = (sorted(suspends), sorted(resumes));
            println!(
                "2. suspend / resume of that session ({records} records), 5 cycles: median \
                 {:.3?} / {:.3?}, slowest {:.3?} / {:.3?}",
                percentile(&suspends, 500),
                percentile(&resumes, 500),
                percentile(&suspends, 1000),
                percentile(&resumes, 1000),
            );
        }

        if wanted('3') {
            let cpu = process_cpu();
            let started = Instant::now();
            let tasks: Vec<_> = (0..64)
                .map(|_| tokio::spawn(turns_on(client.clone(), String::new(), 50)))
                .collect();
            let mut latencies = Vec::new();
            for task in tasks {
                latencies.extend(task.await.unwrap().1);
            }
            report(
                "3. 64 sessions x 50 turns, aggregate",
                &latencies,
                started.elapsed(),
            );
            report_cpu("3. 64 sessions x 50 turns", cpu, latencies.len());
        }

        if wanted('4') || wanted('5') || wanted('6') {
            let (uid, _) = turns_on(client.clone(), String::new(), 1_000).await;
            if wanted('6') {
                let reader = open_journal(path.to_str().unwrap(), "").await.unwrap();
                HELD.store(0, Ordering::Relaxed);
                COUNTING.store(true, Ordering::Relaxed);
                let records = reader.read(&uid, 1, 0).await.unwrap();
                let count = records.len();
                let state = SessionState::load(&uid, records);
                COUNTING.store(false, Ordering::Relaxed);
                let held = usize::try_from(HELD.load(Ordering::Relaxed)).unwrap_or(0);
                println!(
                    "6. memory per idle session, 1,000 turns ({count} records): {held} bytes \
                     measured ({} per record), {} estimated",
                    held / count.max(1),
                    state.bytes()
                );
                drop(state);
            }
            let mut c = client.clone();
            if wanted('4') {
                let mut reads = Vec::new();
                let mut count = 0;
                for _ in 0..20 {
                    let begun = Instant::now();
                    count = c.replay(&uid, 0, 0).await.unwrap().len();
                    reads.push(begun.elapsed());
                }
                report(
                    &format!("4. read a 1,000-turn session ({count} records), Replay"),
                    &reads,
                    reads.iter().sum(),
                );
                let mut pages = Vec::new();
                for _ in 0..20 {
                    let begun = Instant::now();
                    count = c.read_records(&uid, 0, 0).await.unwrap().len();
                    pages.push(begun.elapsed());
                }
                report(
                    &format!("4. read a 1,000-turn session ({count} records), ReadRecords"),
                    &pages,
                    pages.iter().sum(),
                );
                let mut gets = Vec::new();
                for _ in 0..200 {
                    let begun = Instant::now();
                    c.get(&uid).await.unwrap();
                    gets.push(begun.elapsed());
                }
                report("4. GetSession on that session", &gets, gets.iter().sum());
            }
            if wanted('5') {
                let at = c.get(&uid).await.unwrap().last_seq / 2;
                let mut singles = Vec::new();
                for _ in 0..16 {
                    let begun = Instant::now();
                    let children = c
                        .fork(
                            &uid,
                            ForkOptions {
                                at_seq: at,
                                count: 1,
                                ..ForkOptions::default()
                            },
                        )
                        .await
                        .unwrap();
                    singles.push(begun.elapsed());
                    assert_eq!(children.len(), 1);
                }
                report(
                    "5. fork at turn 500 of 1,000, one call per child",
                    &singles,
                    singles.iter().sum(),
                );
                let begun = Instant::now();
                let children = c
                    .fork(
                        &uid,
                        ForkOptions {
                            at_seq: at,
                            count: 16,
                            ..ForkOptions::default()
                        },
                    )
                    .await
                    .unwrap();
                let all = begun.elapsed();
                assert_eq!(children.len(), 16);
                println!(
                    "5. fork at turn 500 of 1,000, 16 children in one call: {all:.3?} ({:.3?} \
                     per child)",
                    all / 16
                );
            }
        }
    });
}
