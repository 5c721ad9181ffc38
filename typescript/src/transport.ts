/** Connection settings shared by the client: the target's URL, TLS and mutual TLS, the bearer
 * token and the HTTP/2 session a client owns. */
import { readFileSync } from "node:fs";
import type { SecureClientSessionOptions } from "node:http2";
import type { Interceptor, Transport } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";

/** A PEM value: its text or bytes, or the path of a file holding it. */
export type Pem = string | Uint8Array;

/** TLS settings: the CA that signed the server (unset: the system roots), and a client
 * certificate and key for mutual TLS. `serverName` overrides the name checked against the
 * server's certificate. */
export interface Tls {
  ca?: Pem;
  cert?: Pem;
  key?: Pem;
  serverName?: string;
}

/** A Start frame or a page of records can be large; the server bounds pages at ~3 MiB. */
export const MAX_MESSAGE_BYTES = 64 * 1024 * 1024;

/** The HTTP/2 stream window the client offers (the default, 64 KiB, takes a round trip per
 * 64 KiB of a large page). */
export const WINDOW_BYTES = 8 * 1024 * 1024;

function pem(value: Pem | undefined): Buffer | undefined {
  if (value === undefined) {
    return undefined;
  }
  if (typeof value !== "string") {
    return Buffer.from(value);
  }
  return value.includes("-----BEGIN") ? Buffer.from(value) : readFileSync(value);
}

/** The base URL of `target`: `host:port` (cleartext, or https with `tls`) or a full URL. */
export function baseUrl(target: string, tls: Tls | undefined): string {
  if (/^https?:\/\//.test(target)) {
    return target;
  }
  return `${tls === undefined ? "http" : "https"}://${target}`;
}

/** A gRPC transport to `target` over one HTTP/2 session, which `session.abort()` closes. */
export function grpcTransport(target: string, tls: Tls | undefined, token: string | undefined): { transport: Transport; session: Http2SessionManager } {
  const url = baseUrl(target, tls);
  // Large initial windows: a 1 MB page of records arrives without waiting on window updates.
  const nodeOptions: SecureClientSessionOptions = { settings: { initialWindowSize: WINDOW_BYTES } };
  if (tls !== undefined) {
    const ca = pem(tls.ca);
    const cert = pem(tls.cert);
    const key = pem(tls.key);
    if (ca !== undefined) nodeOptions.ca = ca;
    if (cert !== undefined) nodeOptions.cert = cert;
    if (key !== undefined) nodeOptions.key = key;
    if (tls.serverName !== undefined) nodeOptions.servername = tls.serverName;
  }
  const session = new Http2SessionManager(url, { idleConnectionTimeoutMs: 60_000 }, nodeOptions);
  const interceptors: Interceptor[] = token === undefined ? [] : [bearer(token)];
  const transport = createGrpcTransport({
    baseUrl: url,
    sessionManager: session,
    interceptors,
    readMaxBytes: MAX_MESSAGE_BYTES,
    writeMaxBytes: MAX_MESSAGE_BYTES,
  });
  return { transport, session };
}

/** Sends the bearer token on every call (over TLS and, for tests, cleartext). */
function bearer(token: string): Interceptor {
  return (next) => async (request) => {
    request.header.set("authorization", `Bearer ${token}`);
    return next(request);
  };
}
