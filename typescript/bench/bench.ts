/**
 * Benchmarks of the TypeScript client against a real agentsessionsd (echo harness, offline
 * echo model, SQLite journal): one session of N turns (p50, p99), S concurrent sessions of T
 * turns (aggregate turns/s), and reading a 1,000-turn session (5,000 records) through
 * `ReadRecords` and the streamed `Replay`, plus verifying it in TypeScript.
 *
 *     node dist/bench/bench.js --bin-dir ../target/release     # starts its own daemon
 *     node dist/bench/bench.js --server 127.0.0.1:8080         # or uses a running one
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";
import { Client } from "../src/client.js";
import { verifyRecords } from "../src/canonical.js";

const { values } = parseArgs({
  options: {
    "bin-dir": { type: "string" },
    server: { type: "string" },
    turns: { type: "string", default: "500" },
    sessions: { type: "string", default: "64" },
    "session-turns": { type: "string", default: "50" },
    "read-turns": { type: "string", default: "1000" },
    reads: { type: "string", default: "20" },
  },
});

function percentile(samples: number[], p: number): number {
  const ordered = [...samples].sort((a, b) => a - b);
  return ordered[Math.min(ordered.length - 1, Math.floor((p / 100) * ordered.length))] ?? 0;
}

const median = (samples: number[]) => percentile(samples, 50);
const ms = (value: number) => `${value.toFixed(2)} ms`;

async function startDaemon(binDir: string): Promise<{ process: ChildProcess; addr: string }> {
  const journal = join(mkdtempSync(join(tmpdir(), "agentsessions-ts-bench-")), "bench.db");
  const child = spawn(join(binDir, "agentsessionsd"), ["--addr", "127.0.0.1:0", "--journal", journal], { stdio: ["ignore", "pipe", "ignore"] });
  const line = await createInterface({ input: child.stdout! })[Symbol.asyncIterator]().next();
  const prefix = "agentsessionsd listening on ";
  if (line.done === true || !line.value.startsWith(prefix)) {
    child.kill("SIGKILL");
    throw new Error(`agentsessionsd said ${JSON.stringify(line.value)}`);
  }
  return { process: child, addr: line.value.slice(prefix.length) };
}

async function oneSession(client: Client, turns: number): Promise<void> {
  const uid = (await client.createSession({ harness: "echo" })).metadata!.uid;
  await client.run("warm up", { session: uid });
  const samples: number[] = [];
  for (let i = 0; i < turns; i++) {
    const started = performance.now();
    await client.run(`turn ${i}`, { session: uid });
    samples.push(performance.now() - started);
  }
  const total = samples.reduce((a, b) => a + b, 0);
  console.log(`one session, ${turns} turns: p50 ${ms(median(samples))}, p99 ${ms(percentile(samples, 99))} (${((turns * 1000) / total).toFixed(0)} turns/s)`);
}

async function manySessions(addr: string, sessions: number, turns: number): Promise<void> {
  const setup = new Client(addr);
  const uids = await Promise.all(Array.from({ length: sessions }, async () => (await setup.createSession({ harness: "echo" })).metadata!.uid));
  setup.close();
  const clients = uids.map(() => new Client(addr));
  const latencies: number[] = [];
  const started = performance.now();
  await Promise.all(
    uids.map(async (uid, index) => {
      const client = clients[index]!;
      for (let i = 0; i < turns; i++) {
        const begun = performance.now();
        await client.run(`turn ${i}`, { session: uid });
        latencies.push(performance.now() - begun);
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  for (const client of clients) client.close();
  console.log(
    `${sessions} sessions x ${turns} turns: ${((sessions * turns) / elapsed).toFixed(0)} turns/s (p50 ${ms(median(latencies))}, p99 ${ms(percentile(latencies, 99))})`,
  );
}

async function reading(client: Client, turns: number, reads: number): Promise<void> {
  const uid = (await client.createSession({ harness: "echo" })).metadata!.uid;
  for (let i = 0; i < turns; i++) await client.run(`turn ${i}`, { session: uid });
  const paged: number[] = [];
  const streamed: number[] = [];
  const verified: number[] = [];
  let records = 0;
  for (let i = 0; i < reads; i++) {
    let started = performance.now();
    const all = await client.readRecords(uid);
    paged.push(performance.now() - started);
    records = all.length;
    started = performance.now();
    let count = 0;
    for await (const _ of client.replay(uid)) count += 1;
    streamed.push(performance.now() - started);
    if (count !== records) throw new Error(`Replay gave ${count} records, ReadRecords ${records}`);
    started = performance.now();
    const report = await verifyRecords(all);
    verified.push(performance.now() - started);
    if (!report.ok) throw new Error(`verify failed: ${JSON.stringify(report.failures.slice(0, 3))}`);
  }
  console.log(
    `read a ${turns}-turn session (${records} records), median of ${reads}: ReadRecords ${ms(median(paged))}, Replay ${ms(median(streamed))}, verify in TypeScript ${ms(median(verified))}`,
  );
}

let daemon: ChildProcess | undefined;
let addr = values.server ?? "";
if (addr === "") {
  const started = await startDaemon(values["bin-dir"] ?? join(process.cwd(), "..", "target", "release"));
  daemon = started.process;
  addr = started.addr;
}
const client = new Client(addr);
try {
  await oneSession(client, Number(values.turns));
  await manySessions(addr, Number(values.sessions), Number(values["session-turns"]));
  await reading(client, Number(values["read-turns"]), Number(values.reads));
} finally {
  client.close();
  daemon?.kill("SIGKILL");
}
