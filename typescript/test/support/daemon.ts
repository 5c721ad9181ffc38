/** The real `agentsessionsd` started on 127.0.0.1 with an ephemeral port (from
 * `$AGENTSESSIONS_BIN_DIR`, default target/debug), killed when the test ends. */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { setTimeout as sleep } from "node:timers/promises";
import { repoPath } from "./paths.js";

/** The flags of the offline model: the daemon answers from directives, no provider. */
export const OFFLINE = ["--model", "directive", "--model-provider", "directive"];

/** Where the cargo-built binaries are. */
export function binDir(): string {
  const dir = process.env.AGENTSESSIONS_BIN_DIR ?? repoPath("target", "debug");
  if (!existsSync(join(dir, "agentsessionsd"))) {
    throw new Error(`no agentsessionsd in ${dir}: run \`cargo build -p agentsessions-cli\` first`);
  }
  return dir;
}

const made: string[] = [];
// The daemons are SIGKILLed by then; their journals and logs go with the test process.
process.once("exit", () => {
  for (const dir of made) rmSync(dir, { recursive: true, force: true });
});

/** A fresh temporary directory, removed when the test process exits. */
export function tempDir(prefix = "agentsessions-ts-"): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}

/** A running daemon. */
export class Daemon {
  addr = "";
  registry = "";
  readonly log: string;
  private constructor(
    readonly process: ChildProcess,
    log: string,
  ) {
    this.log = log;
  }

  /** Starts `agentsessionsd --addr 127.0.0.1:0 --journal DIR/journal.db ARGS` and waits for
   * its listening line. */
  static async start(dir: string, args: string[], options: { registry?: boolean; env?: Record<string, string>; journal?: string } = {}): Promise<Daemon> {
    const journal = options.journal ?? join(dir, "journal.db");
    const command = ["--addr", "127.0.0.1:0", "--journal", journal, ...args];
    if (options.registry === true) command.push("--registry-addr", "127.0.0.1:0");
    const env: Record<string, string | undefined> = { ...process.env, ...options.env };
    delete env.MODEL_API_KEY;
    delete env.OPENAI_API_KEY;
    const log = join(dir, `agentsessionsd-${Date.now()}-${Math.random().toString(16).slice(2)}.log`);
    const child = spawn(join(binDir(), "agentsessionsd"), command, { cwd: dir, env, stdio: ["ignore", "pipe", openSync(log, "w")] });
    const daemon = new Daemon(child, log);
    if (child.stdout === null) throw new Error("agentsessionsd has no stdout");
    const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
    daemon.addr = await expectLine(lines, "agentsessionsd listening on ", daemon);
    if (options.registry === true) daemon.registry = await expectLine(lines, "agentsessionsd registry on ", daemon);
    return daemon;
  }

  /** SIGKILLs the daemon and waits for it to exit. */
  async kill(): Promise<void> {
    if (this.process.exitCode !== null || this.process.signalCode !== null) return;
    const exited = new Promise((resolve) => this.process.once("exit", resolve));
    this.process.kill("SIGKILL");
    await exited;
  }
}

async function expectLine(lines: AsyncIterator<string>, prefix: string, daemon: Daemon): Promise<string> {
  const next = await lines.next();
  const line = next.done === true ? "" : next.value.trim();
  if (!line.startsWith(prefix)) {
    await daemon.kill();
    throw new Error(`agentsessionsd said ${JSON.stringify(line)}, expected ${JSON.stringify(prefix)} (log: ${daemon.log})`);
  }
  return line.slice(prefix.length);
}

/** A daemon config in `dir` with mcp-fixture-server as the MCP server `counter` (tools
 * `counter__count`, `counter__add`, …), counting its `count` calls in `countFile`. */
export function counterConfig(dir: string, countFile: string): string {
  const config = join(dir, "agentsessionsd.toml");
  writeFileSync(
    config,
    `[[mcp_servers]]\nname = "counter"\ncommand = ${JSON.stringify(join(binDir(), "mcp-fixture-server"))}\nenv = { MCP_FIXTURE_COUNT_FILE = ${JSON.stringify(countFile)} }\n`,
  );
  return config;
}

/** The calls `count` counted. */
export function counted(countFile: string): number {
  return existsSync(countFile) ? Number(readFileSync(countFile, "utf8").trim() || "0") : 0;
}

/** Waits until the daemon (started with RUST_LOG=info) says its MCP server is up. */
export async function mcpUp(daemon: Daemon): Promise<void> {
  for (let i = 0; i < 300; i++) {
    if (readFileSync(daemon.log, "utf8").includes("MCP server up")) return;
    await sleep(50);
  }
  throw new Error(`the MCP server never came up (log: ${daemon.log})`);
}
