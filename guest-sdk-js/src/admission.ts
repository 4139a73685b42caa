/**
 * Admission hooks: answer the API server's AdmissionReview requests from a plugin.
 *
 * A plugin whose manifest has `[[admit]]` tables gets `Plugin.admit` calls from the host's
 * webhook server: one `AdmissionRequest` per AdmissionReview, answered with an `Admission`. A
 * table of `mode = "validate"` allows or denies; one of `mode = "mutate"` may also change the
 * object with a JSON Patch (`Admission.patch`). A thrown exception, a trap or a missed
 * `timeout-ms` applies the table's `failure-policy` (`fail` refuses the request, `ignore` lets
 * it through).
 *
 * Contract:
 * - During `admit` the plugin reads the `cache` under its tenant's grant (the kinds its manifest
 *   watches); `kube` writes throw a `denied` WriteError and outbound `http` a `denied`
 *   HttpError: admission has no side effects. A request with `dryRun` set must be answered the
 *   same as without it.
 * - Each call runs on an instance of its own, never shared with a concurrent request, and the
 *   host keeps a pool of instances (each built from `[config]`) and reuses them: keep no
 *   per-request state on the plugin between calls, and expect two requests to land on two
 *   instances.
 * - Kubernetes runs mutating hooks before validating ones, so a validating hook sees the object
 *   as the mutating ones left it. A patch may not change the object's apiVersion, kind, name or
 *   namespace, and a validating table's patch is an error. `req.hook` names the table a request
 *   came through, so one plugin can hold a validating and a mutating table for one kind.
 *
 * ```ts
 * import { Admission, AdmissionRequest, Plugin } from "informant";
 *
 * export default class NoLatest extends Plugin {
 *   override admit(req: AdmissionRequest): Admission {
 *     const containers: any[] = req.object?.spec?.containers ?? [];
 *     const c = containers.find((c) => String(c.image).endsWith(":latest"));
 *     return c ? Admission.deny(`container \`${c.name}\` uses a :latest image`) : Admission.allow();
 *   }
 * }
 * ```
 */
import type { KubeObject } from "./cache.js";
import { parseHeader, type Meta } from "./event.js";
import { Resource } from "./resource.js";

/** The API operation being admitted, as the contract (and the manifest's `operations`) names it. */
export type Operation = "create" | "update" | "delete" | "connect";

/** A group, version and plural resource name, as the request addressed it. */
export interface GroupVersionResource {
  /** API group, empty for the core group. */
  readonly group: string;
  readonly version: string;
  /** The plural resource name, e.g. `deployments`. */
  readonly resource: string;
}

/** The user the API server authenticated. */
export interface UserInfo {
  /** E.g. `system:serviceaccount:ns:sa` or `alice@example.com`. */
  readonly username: string;
  /** Often empty. */
  readonly uid: string;
  readonly groups: readonly string[];
  /** Extra attributes the authenticator added: a key and its values. */
  readonly extra: ReadonlyArray<readonly [string, readonly string[]]>;
}

/**
 * The contract's `admission.request` record as componentize-js lifts it (an `option` is the
 * value or `undefined`, maybe `null`; a `list<u8>` a `Uint8Array`).
 */
export interface WitAdmissionRequest {
  uid: string;
  hook: string;
  kind: { group: string; version: string; kind: string };
  resource: { group: string; version: string; resource: string };
  subResource: string;
  operation: Operation;
  namespace?: string | null;
  name: string;
  userInfo: { username: string; uid: string; groups: string[]; extra: Array<[string, string[]]> };
  object?: string | null;
  oldObject?: string | null;
  header: Uint8Array;
  dryRun: boolean;
  options?: string | null;
}

/** The contract's `admission.response` record, as the `admit` export returns it. */
export interface WitAdmissionResponse {
  allowed: boolean;
  code: number;
  message: string;
  warnings: string[];
  patch: string | undefined;
}

/** Why a write made during `admit` is denied: the host's words, which the harness uses too. */
export const WRITES_REFUSED = "writes are refused during admission: an admission hook has no side effects";

/** Why outbound HTTP during `admit` is denied (the SDK says so before the host refuses it). */
export const HTTP_REFUSED = "outbound HTTP is refused during admission: an admission hook has no side effects";

/** The error `Plugin.admit` throws when a plugin does not override it. */
export const NO_ADMIT = "this plugin does not answer admission requests (it implements no `admit`)";

/**
 * One admission request: the object, its kind and metadata (parsed by the host, as an event's),
 * the operation and who asked for it. `meta` needs no JSON parse; `object` and `oldObject` parse
 * the JSON on first use.
 */
export class AdmissionRequest {
  /** Identifies the request (the host copies it into the response). */
  readonly uid: string;
  /**
   * The name of the manifest's `[[admit]]` table the request came through: a plugin with a
   * validating and a mutating table for one kind tells their calls apart by it.
   */
  readonly hook: string;
  readonly operation: Operation;
  /** The object's kind. */
  readonly kind: Resource;
  /** The resource the request addressed (group, version, plural name). */
  readonly resource: GroupVersionResource;
  /** The subresource addressed (`status`, `scale`, ...); empty for the main resource. */
  readonly subResource: string;
  /** The request's namespace; `undefined` for cluster-scoped objects. */
  readonly namespace: string | undefined;
  /** The object's name; empty on a create whose name the server generates. */
  readonly name: string;
  /** The user the API server authenticated. */
  readonly userInfo: UserInfo;
  /** Nothing will be stored: answer as usual, and cause no effect. */
  readonly dryRun: boolean;
  /** The object as it would be stored, as JSON (managedFields removed); `undefined` for a delete. */
  readonly objectJson: string | undefined;
  /** For an update or a delete: the stored object as JSON (managedFields removed). */
  readonly oldObjectJson: string | undefined;
  /** The operation's options (CreateOptions, UpdateOptions or DeleteOptions) as JSON. */
  readonly optionsJson: string | undefined;
  private head?: Meta;
  // Boxed, so an absent object is parsed (found absent) once too.
  private parsedObject?: [KubeObject | undefined];
  private parsedOld?: [KubeObject | undefined];

  /** Wraps the record the host passes to the `admit` export. */
  constructor(readonly wire: WitAdmissionRequest) {
    this.uid = wire.uid;
    this.hook = wire.hook;
    this.operation = wire.operation;
    this.kind = new Resource(wire.kind.group, wire.kind.version, wire.kind.kind);
    this.resource = { ...wire.resource };
    this.subResource = wire.subResource;
    this.namespace = wire.namespace ?? undefined;
    this.name = wire.name;
    this.userInfo = {
      username: wire.userInfo.username,
      uid: wire.userInfo.uid,
      groups: [...wire.userInfo.groups],
      extra: wire.userInfo.extra.map(([k, v]) => [k, [...v]] as const),
    };
    this.dryRun = wire.dryRun;
    this.objectJson = wire.object ?? undefined;
    this.oldObjectJson = wire.oldObject ?? undefined;
    this.optionsJson = wire.options ?? undefined;
  }

  /** The object's metadata (for a delete: the stored object's), parsed by the host. */
  get meta(): Meta {
    if (!this.head) {
      if (!this.wire.header.length) {
        throw new Error(`admission request ${this.uid}: no object, so no metadata (${this.operation} of ${this.kind})`);
      }
      this.head = parseHeader(this.wire.header)[1];
    }
    return this.head;
  }

  /** The object as it would be stored, parsed on first use; `undefined` for a delete. */
  get object(): KubeObject | undefined {
    return (this.parsedObject ??= [this.decode(this.objectJson, "object")])[0];
  }

  /** For an update or a delete: the stored object, parsed on first use. */
  get oldObject(): KubeObject | undefined {
    return (this.parsedOld ??= [this.decode(this.oldObjectJson, "old object")])[0];
  }

  private decode(json: string | undefined, what: string): KubeObject | undefined {
    if (json === undefined) return undefined;
    try {
      return JSON.parse(json);
    } catch (e) {
      throw new Error(`admission request ${this.uid}: the ${what} is not JSON: ${(e as Error).message}`);
    }
  }
}

/**
 * One JSON Patch (RFC 6902) operation, for `Admission.patch`; paths are JSON pointers
 * (`jsonPointer` builds one from keys).
 */
export class PatchOp {
  private constructor(
    readonly op: "add" | "replace" | "remove",
    readonly path: string,
    readonly value?: unknown,
  ) {}

  /**
   * Sets `path` to `value`: adds an object member (replacing one there), or inserts into an
   * array (`-` appends). The parent must exist.
   */
  static add(path: string, value: unknown): PatchOp {
    return new PatchOp("add", path, value);
  }

  /** Replaces the value at `path`, which must exist. */
  static replace(path: string, value: unknown): PatchOp {
    return new PatchOp("replace", path, value);
  }

  /** Removes the value at `path`, which must exist. */
  static remove(path: string): PatchOp {
    return new PatchOp("remove", path);
  }

  /** The operation as JSON: `{"op": ..., "path": ..., "value": ...}`. */
  toJSON(): Record<string, unknown> {
    return this.op === "remove" ? { op: this.op, path: this.path } : { op: this.op, path: this.path, value: this.value };
  }
}

/**
 * A JSON pointer (RFC 6901) to the member reached by `keys`: each key escaped (`~` as `~0`, `/`
 * as `~1`) and prefixed with `/`, e.g. `["metadata", "labels", "a/b"]` is
 * `/metadata/labels/a~1b`.
 */
export function jsonPointer(keys: readonly string[]): string {
  return keys.map((k) => `/${k.replaceAll("~", "~0").replaceAll("/", "~1")}`).join("");
}

/**
 * The answer to an `AdmissionRequest`: allowed (possibly with a patch) or denied, with warnings
 * either way. Immutable: `withCode` and `warn` return a new answer.
 */
export class Admission {
  private constructor(
    /** Whether the request is let through. */
    readonly allowed: boolean,
    /** A denial's HTTP status code (0 means 403). */
    readonly code: number,
    /** A denial's message. */
    readonly message: string,
    /** The warnings, in the order they were added. */
    readonly warnings: readonly string[],
    /** The patch as the host receives it (JSON text); `undefined` without one. */
    readonly patchJson: string | undefined,
  ) {}

  /** Lets the request through unchanged. */
  static allow(): Admission {
    return new Admission(true, 0, "", [], undefined);
  }

  /**
   * Refuses the request: the client sees `admission webhook "..." denied the request: MESSAGE`
   * with HTTP status 403 (see `withCode`).
   */
  static deny(message: string): Admission {
    return new Admission(false, 0, String(message), [], undefined);
  }

  /**
   * Lets the request through with a JSON Patch (RFC 6902) applied to the object: a mutating
   * hook's answer. `ops` is the array of operations (`PatchOp`s, or plain `{op, path, value}`
   * objects); an empty array is no patch.
   */
  static patch(ops: ReadonlyArray<PatchOp | Record<string, unknown>>): Admission {
    if (!Array.isArray(ops)) throw new TypeError("Admission.patch takes an array of JSON Patch operations");
    return new Admission(true, 0, "", [], ops.length ? JSON.stringify(ops) : undefined);
  }

  /**
   * Lets the request through with a JSON Patch already serialized, passed on as it is (the host
   * refuses text that is not a JSON Patch array).
   */
  static patchText(text: string): Admission {
    return new Admission(true, 0, "", [], String(text));
  }

  /** This answer with a denial's HTTP status code (default 403). */
  withCode(code: number): Admission {
    if (!(Number.isInteger(code) && code >= 0 && code < 2 ** 16)) {
      throw new RangeError(`Admission code must fit in a u16, got ${code}`);
    }
    return new Admission(this.allowed, code, this.message, this.warnings, this.patchJson);
  }

  /**
   * This answer with a warning shown to the client, allowed or not (the host keeps at most 16,
   * each at most 256 bytes).
   */
  warn(text: string): Admission {
    return new Admission(this.allowed, this.code, this.message, [...this.warnings, String(text)], this.patchJson);
  }

  /** The record the `admit` export returns. */
  toWit(): WitAdmissionResponse {
    return { allowed: this.allowed, code: this.code, message: this.message, warnings: [...this.warnings], patch: this.patchJson };
  }
}
