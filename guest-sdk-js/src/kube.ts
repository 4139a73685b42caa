/**
 * Writes to the cluster through the host's `kube` import; refusals throw `WriteError`s.
 *
 * Each write must be declared in the manifest (`[[write]]`: api-version, kind, verbs, and
 * optionally namespaces) and fall inside the tenant's write grant; anything else throws a
 * `denied` WriteError before any request. Server-side apply runs as the field manager
 * `informant/TENANT/PLUGIN`. A write's effect comes back as ordinary watch events; an apply that
 * changes nothing produces none, so applying what a plugin wants on every event settles.
 *
 * In tests the `Harness` records each write (`harness.writes`) instead of sending it, refusing
 * undeclared ones as the host does.
 */
import { backend } from "./backend.js";
import type { KubeObject } from "./cache.js";
import type { Event } from "./event.js";
import type { Resource } from "./resource.js";

/** Patch formats: RFC 7386 merge patch, RFC 6902 JSON patch, strategic merge (built-ins only). */
export type PatchType = "merge" | "json" | "strategic";

/** Creates `obj` (its apiVersion and kind may be left out); returns it as stored. */
export function create(r: Resource, obj: KubeObject, opts: { namespace?: string } = {}): KubeObject {
  return JSON.parse(backend().create(r, opts.namespace, JSON.stringify(obj)));
}

/** Server-side applies the fields `obj` sets; `force` takes fields other managers own. */
export function apply(
  r: Resource,
  name: string,
  obj: KubeObject,
  opts: { namespace?: string; force?: boolean } = {},
): KubeObject {
  return JSON.parse(backend().apply(r, opts.namespace, name, JSON.stringify(obj), opts.force ?? false));
}

/** Patches the object (`kind` defaults to merge); returns it as stored. */
export function patch(
  r: Resource,
  name: string,
  body: unknown,
  opts: { namespace?: string; kind?: PatchType } = {},
): KubeObject {
  const kind = opts.kind ?? "merge";
  if (!["merge", "json", "strategic"].includes(kind)) {
    throw new RangeError(`patch kind must be merge, json or strategic, got ${kind}`);
  }
  return JSON.parse(backend().patch(r, opts.namespace, name, kind, JSON.stringify(body)));
}

/** Deletes the object if it still has `uid` / `resourceVersion` (when given). */
function del(r: Resource, name: string, opts: { namespace?: string; uid?: string; resourceVersion?: string } = {}): void {
  backend().delete(r, opts.namespace, name, opts.uid, opts.resourceVersion);
}
export { del as delete };

/** Replaces the `status` subresource with `obj`'s (send its resourceVersion). */
export function updateStatus(r: Resource, name: string, obj: KubeObject, opts: { namespace?: string } = {}): KubeObject {
  return JSON.parse(backend().updateStatus(r, opts.namespace, name, JSON.stringify(obj)));
}

/**
 * Records an `events.k8s.io/v1` Event about `ev`'s object (declare `[[write]] api-version =
 * "events.k8s.io/v1"`, `kind = "Event"`, `verbs = ["create"]`).
 */
export function event(ev: Event, reason: string, action: string, note: string, opts: { warning?: boolean } = {}): void {
  const m = ev.meta;
  backend().recordEvent(
    { kind: ev.resource, namespace: m.namespace, name: m.name, uid: m.uid || undefined },
    opts.warning ?? false,
    reason,
    action,
    note,
  );
}
