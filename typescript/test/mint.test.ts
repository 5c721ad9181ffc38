/** A Node harness asks the host for a delegated token (`sink.mint`) on a daemon with
 * `[identity]`: the token is a JWT for the asked audience, and it is never journaled. */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { Client } from "../src/client.js";
import { descriptor, serve, type Sink, type Start } from "../src/harness.js";
import { Daemon, OFFLINE, tempDir } from "./support/daemon.js";

const AUDIENCE = "https://tools.example";

class Minting {
  describe() {
    return descriptor("minting", { version: "1" });
  }

  async run(start: Start, sink: Sink): Promise<void> {
    const token = await sink.mint([AUDIENCE]);
    const claims = JSON.parse(Buffer.from(token.split(".")[1] ?? "", "base64url").toString("utf8")) as { aud?: unknown };
    // Only the audience goes to the journal, never the token.
    await sink.output(`may mint: ${start.identity?.canMintTokens === true}; token for ${JSON.stringify(claims.aud)}`);
    this.token = token;
  }

  token = "";
}

test("a harness mints a delegated token through the host", async () => {
  const dir = tempDir();
  execFileSync("openssl", ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", join(dir, "mint.key.pem")]);
  const config = join(dir, "identity.toml");
  writeFileSync(config, `[identity]\nissuer = "https://agents.test"\nsigning_key = "mint.key.pem"\naudiences = ["${AUDIENCE}"]\n`);
  const harness = new Minting();
  const server = await serve(harness);
  const daemon = await Daemon.start(dir, [...OFFLINE, "--config", config, `--harness=minting=${server.address}`]);
  const client = new Client(daemon.addr);
  try {
    const session = await client.createSession({ harness: "minting", identity: { principal: "agent://minting" } });
    const result = await client.run("a token please", { session: session.metadata!.uid });
    assert.match(result.output, /may mint: true; token for "https:\/\/tools\.example"/);
    assert.ok(harness.token.split(".").length === 3);
    const journal = JSON.stringify((await client.readRecords(result.session.metadata!.uid)).map((r) => r.event?.body.value), (_k, v: unknown) => (typeof v === "bigint" ? v.toString() : v));
    assert.ok(!journal.includes(harness.token), "the token is never journaled");
    assert.equal((await client.verify(result.session.metadata!.uid)).ok, true);
  } finally {
    client.close();
    await daemon.kill();
    await server.close(0);
  }
});
