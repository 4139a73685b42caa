/**
 * Sends `http` requests through the component's `wasi:http` imports, as componentize-js binds
 * them (the entry module `build.mjs` generates imports them and hands them to `exportsFor`).
 *
 * The calls block in WASI polls rather than going through `fetch`: `handle-queued` is a
 * synchronous export, `fetch` follows redirects by itself, and it has no per-request timeouts.
 * Each resource is disposed of as soon as it is done with, children before their parents — a
 * body's stream before the body, a future's pollable before the future, a response's headers
 * before the response — because `wasi:http` traps on a parent dropped first, and finalizers
 * would drop them in no particular order.
 */
import { HttpError } from "./errors.js";
import { Response, errorFor, type Request } from "./http.js";

/** A generated resource: dropped by its dispose method. */
type Rsc = Record<PropertyKey, any>;

/** The `wasi:http/types` exports the SDK uses (constructors and static functions). */
export interface WasiHttpTypes {
  Fields: new () => Rsc;
  OutgoingRequest: new (headers: Rsc) => Rsc;
  OutgoingBody: { finish(body: Rsc, trailers: undefined): void };
  RequestOptions: new () => Rsc;
  httpErrorCode(err: Rsc): { tag: string; val?: unknown } | undefined;
}

/** The `wasi:http/outgoing-handler` export. */
export interface WasiOutgoingHandler {
  handle(request: Rsc, options: Rsc | undefined): Rsc;
}

// The bindings' own fallback, where the engine has no `Symbol.dispose`.
const DISPOSE: symbol = (Symbol as any).dispose ?? Symbol.for("dispose");

function dispose(r: Rsc | undefined): void {
  r?.[DISPOSE]?.();
}

/** A thrown binding error's payload (componentize-js throws errs with a `payload`). */
function payload(e: unknown): any {
  if (e && typeof e === "object" && "payload" in e) return (e as any).payload;
  throw e;
}

// A variant payload as text (u64s are bigints, which JSON cannot spell).
const detail = (val: unknown): string | undefined =>
  val === undefined || val === null
    ? undefined
    : typeof val === "object"
      ? JSON.stringify(val, (_, v) => (typeof v === "bigint" ? v.toString() : v))
      : String(val);

/** Sends requests through the given bindings. */
export class WasiHttp {
  constructor(
    private readonly types: WasiHttpTypes,
    private readonly handler: WasiOutgoingHandler,
  ) {}

  private wasiError(req: Request, code: { tag: string; val?: unknown }): HttpError {
    return errorFor(req, code.tag.toLowerCase(), detail(code.val));
  }

  private invalid(req: Request, what: string): HttpError {
    return new HttpError("invalid", `${req.method} ${req.url}: ${what}`);
  }

  /** A failed stream operation: the `error-code` behind it if the host gives one. */
  private streamError(req: Request, what: string, err: any): HttpError {
    if (err?.tag !== "last-operation-failed") {
      return new HttpError("failed", `${req.method} ${req.url}: ${what}: the stream is closed`);
    }
    try {
      const code = this.types.httpErrorCode(err.val);
      if (code) return this.wasiError(req, code);
      return new HttpError("failed", `${req.method} ${req.url}: ${what}: ${err.val.toDebugString()}`);
    } finally {
      dispose(err.val);
    }
  }

  private request(req: Request): Rsc {
    const fields = new this.types.Fields();
    const headers = [...req.headers];
    // A length rather than chunked encoding: some webhook receivers refuse chunked bodies.
    if (req.body.length && !headers.some(([n]) => n.toLowerCase() === "content-length")) {
      headers.push(["content-length", String(req.body.length)]);
    }
    const utf8 = new TextEncoder();
    for (const [name, value] of headers) {
      try {
        fields.append(name, utf8.encode(value));
      } catch (e) {
        dispose(fields);
        throw this.invalid(req, `header \`${name}\`: ${payload(e)?.tag ?? "invalid"}`);
      }
    }
    const request = new this.types.OutgoingRequest(fields);
    const standard = ["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"];
    const method = standard.includes(req.method) ? { tag: req.method.toLowerCase() } : { tag: "other", val: req.method };
    const set: Array<[string, () => void]> = [
      ["method", () => request.setMethod(method)],
      // The WIT spells the schemes `HTTP` and `HTTPS`.
      ["scheme", () => request.setScheme({ tag: req.scheme.toUpperCase() })],
      ["host", () => request.setAuthority(req.authority)],
      ["path", () => request.setPathWithQuery(req.pathWithQuery)],
    ];
    for (const [what, call] of set) {
      try {
        call();
      } catch (e) {
        payload(e);
        dispose(request);
        throw this.invalid(req, `invalid ${what}`);
      }
    }
    return request;
  }

  private options(timeoutMs: number): Rsc {
    const options = new this.types.RequestOptions();
    const ns = BigInt(Math.round(timeoutMs * 1e6));
    for (const set of ["setConnectTimeout", "setFirstByteTimeout", "setBetweenBytesTimeout"]) {
      try {
        options[set](ns);
      } catch (e) {
        payload(e); // A timeout the host cannot set is no reason to fail the request.
      }
    }
    return options;
  }

  private wait(req: Request, pending: Rsc): Rsc {
    let got: any;
    try {
      while ((got = pending.get()) == null) {
        // A WASI poll: the host's deadline for the event bounds this wait too.
        const ready = pending.subscribe();
        try {
          ready.block();
        } finally {
          dispose(ready);
        }
      }
    } finally {
      dispose(pending);
    }
    if (got.tag === "err") throw new HttpError("failed", `${req.method} ${req.url}: response already taken`);
    if (got.val.tag === "err") throw this.wasiError(req, got.val.val);
    return got.val.val;
  }

  private read(req: Request, response: Rsc): Response {
    try {
      const status: number = response.status();
      const fields = response.headers();
      let headers: Array<[string, string]>;
      try {
        const text = new TextDecoder();
        headers = fields.entries().map(([k, v]: [string, Uint8Array]) => [k, text.decode(v)]);
      } finally {
        dispose(fields);
      }
      const chunks: Uint8Array[] = [];
      const incoming = response.consume();
      try {
        const stream = incoming.stream();
        try {
          for (;;) {
            try {
              chunks.push(stream.blockingRead(64n * 1024n));
            } catch (e) {
              const p = payload(e);
              if (p?.tag === "closed") break;
              throw this.streamError(req, "reading the body", p);
            }
          }
        } finally {
          dispose(stream);
        }
      } finally {
        dispose(incoming);
      }
      const body = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
      let at = 0;
      for (const c of chunks) {
        body.set(c, at);
        at += c.length;
      }
      return new Response(status, headers, body);
    } finally {
      dispose(response);
    }
  }

  /** Sends `req` through `wasi:http/outgoing-handler` and reads the whole answer. */
  send(req: Request): Response {
    const request = this.request(req);
    const outgoing = request.body();
    const stream = outgoing.write();
    try {
      for (let at = 0; at < req.body.length; at += 4096) {
        stream.blockingWriteAndFlush(req.body.subarray(at, at + 4096));
      }
    } catch (e) {
      const p = payload(e);
      dispose(stream);
      dispose(outgoing);
      dispose(request);
      throw this.streamError(req, "writing the body", p);
    }
    dispose(stream);
    let pending: Rsc;
    try {
      pending = this.handler.handle(request, this.options(req.timeoutMs));
    } catch (e) {
      const p = payload(e);
      dispose(outgoing);
      throw this.wasiError(req, p);
    }
    try {
      this.types.OutgoingBody.finish(outgoing, undefined);
    } catch (e) {
      const p = payload(e);
      dispose(pending);
      throw this.wasiError(req, p);
    }
    return this.read(req, this.wait(req, pending));
  }
}
