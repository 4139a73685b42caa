/**
 * Admission requests in the harness: `admissionRequest` builds one as the host would hand it
 * over, `Harness.admit` (in `testing.ts`) answers it with the plugin against the harness's
 * cache. Re-exported from `informant/testing`.
 */
import { AdmissionRequest, type GroupVersionResource, type Operation, type UserInfo, type WitAdmissionRequest } from "./admission.js";
import type { KubeObject } from "./cache.js";
import { Meta, encodeHeader } from "./event.js";
import { Resource } from "./resource.js";

const OPERATIONS: readonly Operation[] = ["create", "update", "delete", "connect"];

/**
 * Starts an admission request for `operation` on `object` (a plain object or JSON text;
 * `managedFields` removed). For `"delete"`, `object` is the stored object: the request has no
 * object, its old object is this one, as the API server sends it.
 *
 * The kind, namespace and name come from the object (`apiVersion` and `kind` are required, the
 * name may be absent as on a create with `generateName`), the header as the host encodes it,
 * the plural resource name from the kind (override with `.resource(...)`). The user is `tester`
 * in `system:authenticated`.
 *
 * ```ts
 * const answer = harness.admit(admissionRequest("create", pod).user("alice", ["devs"]));
 * ```
 */
export function admissionRequest(operation: Operation, object: KubeObject | string): AdmissionRequestBuilder {
  return new AdmissionRequestBuilder(operation, object);
}

/** An `AdmissionRequest` being built: see `admissionRequest`. Each setter returns the builder. */
export class AdmissionRequestBuilder {
  private readonly object: KubeObject;
  private old?: KubeObject;
  private uidValue = "test-request";
  private hookValue = "";
  /** Boxed: `[undefined]` is a cluster-scoped request, no box the object's namespace. */
  private ns?: [string | undefined];
  private nameValue?: string;
  private gvr?: GroupVersionResource;
  private sub = "";
  private who: UserInfo = { username: "tester", uid: "", groups: ["system:authenticated"], extra: [] };
  private dry = false;
  private opts?: string;

  constructor(
    readonly operation: Operation,
    object: KubeObject | string,
  ) {
    if (!OPERATIONS.includes(operation)) {
      throw new RangeError(`admissionRequest: operation must be one of ${OPERATIONS.join(", ")}, got ${operation}`);
    }
    this.object = toObject(object);
    kindOf(this.object); // refused here, where the test names the object
  }

  /**
   * The stored object an update replaces (for a delete, `admissionRequest`'s object is already
   * the stored one; this replaces it).
   */
  oldObject(old: KubeObject | string): this {
    this.old = toObject(old);
    return this;
  }

  /** The request's namespace (default: the object's; `undefined` for cluster-scoped). */
  namespace(namespace: string | undefined): this {
    this.ns = [namespace || undefined];
    return this;
  }

  /** The request's name (default: the object's `metadata.name`, or empty). */
  name(name: string): this {
    this.nameValue = name;
    return this;
  }

  /**
   * The `[[admit]]` table the request comes through (default: the first of the harness's
   * manifest that takes it, else empty).
   */
  hook(hook: string): this {
    this.hookValue = hook;
    return this;
  }

  /** The request's uid (default `test-request`). */
  uid(uid: string): this {
    this.uidValue = uid;
    return this;
  }

  /** The user asking, and the groups they are in. */
  user(username: string, groups: string[] = []): this {
    this.who = { ...this.who, username, groups: [...groups] };
    return this;
  }

  /** The user asking, in full (uid and extra attributes too). */
  userInfo(info: UserInfo): this {
    this.who = info;
    return this;
  }

  /** Marks the request as a dry run. */
  dryRun(dryRun = true): this {
    this.dry = dryRun;
    return this;
  }

  /** The subresource addressed, e.g. `status`. */
  subResource(subResource: string): this {
    this.sub = subResource;
    return this;
  }

  /** The resource addressed (default: the kind's group and version, and its plural). */
  resource(group: string, version: string, resource: string): this {
    this.gvr = { group, version, resource };
    return this;
  }

  /** The operation's options (e.g. `{kind: "CreateOptions", ...}`). */
  options(options: KubeObject): this {
    this.opts = JSON.stringify(options);
    return this;
  }

  /** The record the host would pass to the `admit` export. */
  toWit(): WitAdmissionRequest {
    const [object, old] = this.operation === "delete" ? [undefined, this.old ?? this.object] : [this.object, this.old];
    // The header is the object's, or for a delete the stored object's.
    const described = (object ?? old)!;
    const kind = kindOf(described);
    const meta = described.metadata ?? {};
    const text = (v: unknown) => (typeof v === "string" ? v : undefined);
    const namespace = this.ns ? this.ns[0] : text(meta.namespace) || undefined;
    const name = this.nameValue ?? text(meta.name) ?? "";
    // As the host does: the object's metadata, its name and namespace filled in from the
    // request's when it has none.
    const labels = new Map<string, string>();
    for (const [k, v] of Object.entries(meta.labels ?? {})) if (typeof v === "string") labels.set(k, v);
    const header = encodeHeader(
      kind,
      new Meta(text(meta.namespace) || namespace, text(meta.name) ?? name, text(meta.uid) ?? "", text(meta.resourceVersion) ?? "", labels),
    );
    return {
      uid: this.uidValue,
      hook: this.hookValue,
      kind: { group: kind.group, version: kind.version, kind: kind.kind },
      resource: { ...(this.gvr ?? { group: kind.group, version: kind.version, resource: plural(kind.kind) }) },
      subResource: this.sub,
      operation: this.operation,
      namespace,
      name,
      userInfo: {
        username: this.who.username,
        uid: this.who.uid,
        groups: [...this.who.groups],
        extra: this.who.extra.map(([k, v]) => [k, [...v]]),
      },
      object: object && JSON.stringify(object),
      oldObject: old && JSON.stringify(old),
      header,
      dryRun: this.dry,
      options: this.opts,
    };
  }

  /** The request. */
  build(): AdmissionRequest {
    return new AdmissionRequest(this.toWit());
  }
}

/**
 * Whether the `[[admit]]` table `t` (as parsed TOML) sends `request` to the plugin, its
 * selectors aside. A table without `operations` takes creates and updates, as the host reads it.
 */
export function declares(t: Record<string, any>, request: WitAdmissionRequest): boolean {
  const k = Resource.fromApiVersion(t["api-version"], t.kind);
  const ops: string[] = t.operations ?? ["create", "update"];
  return k.equals(new Resource(request.kind.group, request.kind.version, request.kind.kind)) && ops.includes(request.operation);
}

/**
 * The plural resource name the API server most likely serves a kind under: lower case, `-es`
 * after a sibilant, `-ies` for a consonant and `y` (`Ingress` -> `ingresses`, `NetworkPolicy`
 * -> `networkpolicies`); a kind it gets wrong (`Endpoints`) takes `.resource(...)`.
 */
export function plural(kind: string): string {
  const lower = kind.toLowerCase();
  if (["s", "x", "z", "ch", "sh"].some((end) => lower.endsWith(end))) return `${lower}es`;
  if (/[^aeiou]y$/.test(lower)) return `${lower.slice(0, -1)}ies`;
  return `${lower}s`;
}

/** A copy of `o` (or `o` parsed) without `metadata.managedFields`; throws on a non-object. */
function toObject(o: KubeObject | string): KubeObject {
  let value: unknown = o;
  if (typeof o === "string") {
    try {
      value = JSON.parse(o);
    } catch (e) {
      throw new Error(`admissionRequest: object is not valid JSON: ${(e as Error).message}`);
    }
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new Error(`admissionRequest: object must be a JSON object, got ${JSON.stringify(value)}`);
  }
  const copy: KubeObject = structuredClone(value);
  if (copy.metadata && typeof copy.metadata === "object") delete copy.metadata.managedFields;
  return copy;
}

/** An object's kind, from `apiVersion` and `kind`. */
function kindOf(o: KubeObject): Resource {
  if (typeof o.apiVersion !== "string") throw new Error("admissionRequest: object has no `apiVersion`");
  if (typeof o.kind !== "string") throw new Error("admissionRequest: object has no `kind`");
  return Resource.fromApiVersion(o.apiVersion, o.kind);
}
