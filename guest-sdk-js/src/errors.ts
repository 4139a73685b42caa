/** Exceptions a plugin throws or catches: cache query, write and HTTP failures, retry requests. */

/** A cache query the host refused; `kind` says why, the message says what. */
export class QueryError extends Error {
  /** The contract's case: forbidden, not-watched, bad-selector or unknown-index. */
  readonly kind: "forbidden" | "not-watched" | "bad-selector" | "unknown-index";
  constructor(kind: QueryError["kind"], message: string) {
    super(`${kind}: ${message}`);
    this.name = "QueryError";
    this.kind = kind;
  }
}

/** A write that did not happen; `kind` says why, `code`/`reason` are the server's `Status`. */
export class WriteError extends Error {
  /** The contract's case: `denied` is the host's refusal before any request. */
  readonly kind: "denied" | "conflict" | "not-found" | "forbidden" | "invalid" | "other";
  /** The HTTP status (0 when no answer came or the host refused). */
  readonly code: number;
  /** `Status.reason`, e.g. `Conflict`. */
  readonly reason: string;
  constructor(kind: WriteError["kind"], message: string, code = 0, reason = "") {
    super(`${kind}: ${message}`);
    this.name = "WriteError";
    this.kind = kind;
    this.code = code;
    this.reason = reason;
  }
}

/**
 * An HTTP request that got no response; `kind` says why, the message names the request.
 * A status of any kind (4xx, 5xx, a redirect's 3xx) is a response, not an `HttpError`.
 */
export class HttpError extends Error {
  /**
   * `denied`: refused by the host before any connection (the origin is not in the plugin's
   * `allowed-outbound-hosts`, or its tenant's); `timeout`: connecting or a wait for the answer
   * outlasted the request's timeout; `invalid`: the URL, method or a header cannot be sent;
   * `failed`: anything else (the connection was refused, the body was too large, ...).
   */
  readonly kind: "denied" | "timeout" | "invalid" | "failed";
  /** The `wasi:http` error code in lowercase (`connection-refused`, ...), when there is one. */
  readonly code: string | undefined;
  constructor(kind: HttpError["kind"], message: string, code?: string) {
    super(`${kind}: ${message}`);
    this.name = "HttpError";
    this.kind = kind;
    this.code = code;
  }
}

/** Throw from a handler to have the host redeliver the object's latest state later. */
export class Retry extends Error {
  /** Why, for the host's log and `/plugins`. */
  readonly reason: string;
  /** Not before this many milliseconds (the host's backoff may wait longer). */
  readonly afterMs: number | undefined;
  constructor(reason: string, afterMs?: number) {
    super(reason);
    if (afterMs !== undefined && !(Number.isInteger(afterMs) && afterMs >= 0 && afterMs < 2 ** 32)) {
      throw new RangeError(`Retry afterMs must fit in a u32, got ${afterMs}`);
    }
    this.name = "Retry";
    this.reason = reason;
    this.afterMs = afterMs;
  }
}

/** The host refused a metric call; `kind` is the contract's case, the message names the rule. */
export class MetricError extends Error {
  /** The contract's case. */
  readonly kind: "invalid-name" | "invalid-label" | "invalid-value" | "type-conflict" | "too-many-series";
  constructor(kind: MetricError["kind"], message: string) {
    super(`${kind}: ${message}`);
    this.name = "MetricError";
    this.kind = kind;
  }
}
