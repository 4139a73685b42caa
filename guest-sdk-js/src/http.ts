/**
 * Outbound HTTP through the host's `wasi:http/outgoing-handler`; failures throw `HttpError`s.
 *
 * The host sends a request only to an origin (`scheme://host:port`) listed in the plugin's
 * manifest `allowed-outbound-hosts` (and inside its tenant's ceiling); anything else throws a
 * `denied` HttpError before any connection. Redirects are not followed: a `3xx` comes back as
 * the `Response`. `timeoutMs` bounds connecting and each wait for bytes; the event's deadline
 * bounds the whole call, whatever `timeoutMs` says. Calls are synchronous, like the rest of the
 * SDK: the plugin waits in a WASI poll, so `fetch` and promises are not needed.
 *
 * ```ts
 * const r = http.postJson("https://hooks.example.com/x", { text: "hello" }, { timeoutMs: 2000 });
 * if (!r.ok) throw new Retry(`webhook answered ${r.status}`);
 * ```
 *
 * In tests the `Harness` records each request (`harness.http.requests`) and answers from canned
 * responses (`harness.http.respond(url, status, body)`); a request with none throws, as there is
 * no host to send it through.
 */
import { backend } from "./backend.js";
import { HttpError } from "./errors.js";

export { HttpError };

/** Milliseconds `send` waits to connect and for each chunk of the answer unless told otherwise. */
export const DEFAULT_TIMEOUT_MS = 30_000;

/** Header fields: an object or a list of name/value pairs. */
export type Headers = Record<string, string> | Array<[string, string]>;

const utf8 = new TextEncoder();

/** One request, as the SDK hands it to the host (and as the test harness records it). */
export class Request {
  /** `http` or `https`. */
  readonly scheme: "http" | "https";
  /** `host[:port]` as written in the URL. */
  readonly authority: string;
  /** The path and query (`/` when the URL has none). */
  readonly pathWithQuery: string;
  constructor(
    readonly method: string,
    readonly url: string,
    readonly headers: Array<[string, string]>,
    readonly body: Uint8Array,
    /** See `send`. */
    readonly timeoutMs: number,
  ) {
    [this.scheme, this.authority, this.pathWithQuery] = splitUrl(url);
  }
  /** The body as UTF-8 text. */
  text(): string {
    return new TextDecoder().decode(this.body);
  }
  /** The body parsed as JSON. */
  json(): any {
    return JSON.parse(this.text());
  }
}

/** An HTTP response: its status, headers and whole body. */
export class Response {
  constructor(
    /** The status code (a redirect's `3xx` included: redirects are not followed). */
    readonly status: number,
    /** The header fields as received (names lowercase), in order. */
    readonly headers: Array<[string, string]>,
    /** The body, read to its end. */
    readonly body: Uint8Array,
  ) {}
  /** Whether the status is 2xx. */
  get ok(): boolean {
    return this.status >= 200 && this.status < 300;
  }
  /** The first value of header `name` (any case). */
  header(name: string): string | undefined {
    const n = name.toLowerCase();
    return this.headers.find(([k]) => k.toLowerCase() === n)?.[1];
  }
  /** The body decoded as UTF-8 (invalid bytes replaced). */
  text(): string {
    return new TextDecoder().decode(this.body);
  }
  /** The body parsed as JSON. */
  json(): any {
    return JSON.parse(this.text());
  }
}

/**
 * `[scheme, authority, pathWithQuery]` of an absolute http(s) URL, as `wasi:http` wants them;
 * throws an `invalid` HttpError otherwise. The host checks the authority.
 */
export function splitUrl(url: string): ["http" | "https", string, string] {
  const at = url.indexOf("://");
  if (at < 0) throw new HttpError("invalid", `\`${url}\` is not an absolute http(s) URL`);
  const scheme = url.slice(0, at).toLowerCase();
  if (scheme !== "http" && scheme !== "https") {
    throw new HttpError("invalid", `\`${url}\`: only http and https are supported`);
  }
  const rest = url.slice(at + 3);
  const cut = [rest.indexOf("/"), rest.indexOf("?")].filter((i) => i >= 0);
  const end = cut.length ? Math.min(...cut) : rest.length;
  const authority = rest.slice(0, end);
  if (!authority) throw new HttpError("invalid", `\`${url}\` names no host`);
  return [scheme, authority, rest.slice(end) || "/"];
}

// The wasi:http error codes that mean a wait ran out.
const TIMEOUTS = new Set([
  "dns-timeout",
  "connection-timeout",
  "connection-read-timeout",
  "connection-write-timeout",
  "http-response-timeout",
]);

/**
 * The error for `wasi:http` error `code` (lowercase, e.g. `connection-refused`) answering
 * `request`, with the case's payload as `detail` when it has one.
 */
export function errorFor(request: Request, code: string, detail?: string): HttpError {
  const what = `${request.method} ${request.url}`;
  if (code === "http-request-denied") {
    return new HttpError(
      "denied",
      `${what}: denied by the host: the origin is not in the plugin's \`allowed-outbound-hosts\` (or its tenant's)`,
      code,
    );
  }
  const why = detail === undefined ? code : `${code}: ${detail}`;
  return new HttpError(TIMEOUTS.has(code) ? "timeout" : "failed", `${what}: ${why}`, code);
}

/** Options for `send`. */
export interface SendOptions {
  /** Header fields (a `content-length` is added for a body). */
  headers?: Headers;
  /** The body; text is sent as UTF-8. */
  body?: Uint8Array | string;
  /** Bounds connecting and each wait for bytes (default 30 s). */
  timeoutMs?: number;
}

/**
 * Sends one request and reads the whole answer. Throws an `HttpError` (`denied`, `timeout`,
 * `invalid` or `failed`) when no response came.
 */
export function send(method: string, url: string, opts: SendOptions = {}): Response {
  const headers = Array.isArray(opts.headers) ? [...opts.headers] : Object.entries(opts.headers ?? {});
  const body = typeof opts.body === "string" ? utf8.encode(opts.body) : (opts.body ?? new Uint8Array());
  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  if (!(timeoutMs > 0)) throw new HttpError("invalid", `${method} ${url}: timeoutMs must be positive, got ${timeoutMs}`);
  return backend().httpSend(new Request(method.toUpperCase(), url, headers, body, timeoutMs));
}

/** GETs `url`. */
export function get(url: string, opts: { headers?: Headers; timeoutMs?: number } = {}): Response {
  return send("GET", url, opts);
}

/** POSTs `value` as JSON (`content-type: application/json`) to `url`. */
export function postJson(url: string, value: unknown, opts: { timeoutMs?: number } = {}): Response {
  return send("POST", url, {
    headers: [["content-type", "application/json"]],
    body: JSON.stringify(value),
    timeoutMs: opts.timeoutMs,
  });
}
