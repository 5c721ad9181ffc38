/** The README's client and harness (typescript/examples) work as written against the daemon
 * with the offline directive model. */
import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { test } from "node:test";
import { promisify } from "node:util";
import { Client } from "../src/client.js";
import { EventKind } from "../src/gen/common_pb.js";
import { Daemon, OFFLINE, tempDir } from "./support/daemon.js";
import { repoPath } from "./support/paths.js";

const example = (name: string) => repoPath("typescript", "dist", "examples", `${name}.js`);

test("the README shows the examples as they are", () => {
  const readme = readFileSync(repoPath("README.md"), "utf8");
  for (const name of ["client", "harness"]) {
    const source = readFileSync(repoPath("typescript", "examples", `${name}.ts`), "utf8");
    assert.ok(readme.includes("```ts\n" + source + "```"), `README.md's ${name} differs from typescript/examples/${name}.ts`);
  }
});

test("the README's client and harness", async () => {
  const harness = spawn(process.execPath, [example("harness"), "127.0.0.1:0"], { stdio: ["ignore", "pipe", "inherit"] });
  try {
    const line = await createInterface({ input: harness.stdout })[Symbol.asyncIterator]().next();
    const prefix = "harness listening on ";
    assert.ok(line.done !== true && line.value.startsWith(prefix), String(line.value));
    const daemon = await Daemon.start(tempDir(), [...OFFLINE, `--harness=notes=${line.value.slice(prefix.length)}`]);
    try {
      const { stdout } = await promisify(execFile)(process.execPath, [example("client"), daemon.addr]);
      const lines = stdout.trim().split("\n");
      assert.equal(lines[0], "session");
      assert.ok(lines.includes("record") && lines.includes("delta"), stdout);
      assert.deepEqual(lines.slice(-2), ["echo:hello", "verified"]);

      const client = new Client(daemon.addr);
      const result = await client.run("remember the milk", { harness: "notes" });
      assert.equal(result.output.endsWith("noted"), true, result.output);
      assert.equal(result.records.at(-1)?.event?.kind, EventKind.EVENT_END);
      assert.equal((await client.verify(result.session.metadata!.uid)).ok, true);
      client.close();
    } finally {
      await daemon.kill();
    }
  } finally {
    harness.kill("SIGTERM");
  }
});
