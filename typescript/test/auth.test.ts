/** Connecting with mutual TLS and with a bearer token, against a daemon that requires them. */
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { Client } from "../src/client.js";
import { AgentSessionsError, StatusCode, Unauthenticated } from "../src/errors.js";
import { Ca } from "./support/certs.js";
import { Daemon, tempDir } from "./support/daemon.js";

const ISSUER = "https://idp.test";
const AUDIENCE = "agentsessions";

test("mutual TLS", async () => {
  const dir = tempDir();
  const ca = new Ca(dir, "ca");
  ca.issue("server", "IP:127.0.0.1,DNS:localhost", true);
  const trusted = ca.issue("client", "URI:spiffe://example/ts", false);
  const stranger = new Ca(dir, "other").issue("intruder", "URI:spiffe://example/intruder", false);
  const config = join(dir, "mtls.toml");
  writeFileSync(config, '[auth]\nrequire_authentication = true\n[auth.tls]\ncert = "server.pem"\nkey = "server.key"\nclient_ca = "ca.pem"\n');
  const daemon = await Daemon.start(dir, ["--config", config]);
  try {
    const client = new Client(daemon.addr, { tls: { ca: ca.pem, cert: trusted.cert, key: trusted.key } });
    const result = await client.run("over mtls", { harness: "echo" });
    assert.equal(result.output, "echo:over mtls");
    assert.equal((await client.verify(result.session.metadata!.uid)).ok, true);
    client.close();
    for (const tls of [{ ca: ca.pem, cert: stranger.cert, key: stranger.key }, { ca: ca.pem }]) {
      const refused = new Client(daemon.addr, { tls, timeoutMs: 10_000 });
      const error = await refused.createSession({ harness: "echo" }).catch((e: unknown) => e);
      assert.ok(error instanceof AgentSessionsError, String(error));
      assert.ok(([StatusCode.UNAVAILABLE, StatusCode.UNAUTHENTICATED, StatusCode.INTERNAL] as number[]).includes(error.code), error.message);
      refused.close();
    }
  } finally {
    await daemon.kill();
  }
});

function hs256(claims: Record<string, unknown>, secret: string): string {
  const part = (value: object) => Buffer.from(JSON.stringify(value)).toString("base64url");
  const body = `${part({ alg: "HS256", typ: "JWT" })}.${part(claims)}`;
  return `${body}.${createHmac("sha256", secret).update(body).digest("base64url")}`;
}

test("bearer token", async () => {
  const dir = tempDir();
  const secret = "ts-test-secret-ts-test-secret-32";
  writeFileSync(join(dir, "secret"), secret);
  const config = join(dir, "jwt.toml");
  writeFileSync(
    config,
    `[auth]\nrequire_authentication = true\n[auth.jwt]\nissuers = ["${ISSUER}"]\naudience = "${AUDIENCE}"\n[[auth.jwt.hmac_keys]]\nsecret_file = "secret"\nalgorithm = "HS256"\n`,
  );
  const daemon = await Daemon.start(dir, ["--config", config]);
  try {
    const now = Math.floor(Date.now() / 1000);
    const claims = { iss: ISSUER, sub: "alice", aud: AUDIENCE, iat: now, nbf: now - 5, exp: now + 600 };
    const client = new Client(daemon.addr, { token: hs256(claims, secret) });
    const result = await client.run("with a token", { harness: "echo" });
    assert.equal(result.output, "echo:with a token");
    assert.equal((await client.verify(result.session.metadata!.uid)).ok, true);
    client.close();
    const anonymous = new Client(daemon.addr);
    await assert.rejects(anonymous.createSession({ harness: "echo" }), Unauthenticated);
    anonymous.close();
    const forged = new Client(daemon.addr, { token: hs256(claims, "another-secret-another-secret-32") });
    await assert.rejects(forged.listSessions().toArray(), Unauthenticated);
    forged.close();
  } finally {
    await daemon.kill();
  }
});
