/**
 * Read-only queries against the host's informer cache; refusals throw `QueryError`s. Answers
 * reflect the cache at the moment of the call, which may be ahead of the event being handled.
 * The `*Json` forms return the JSON text for plugins that only pass it on.
 */
import { backend } from "./backend.js";
import { joinPrefixed, parseHeader, splitPrefixed, type Meta } from "./event.js";
import type { Resource } from "./resource.js";

/** A Kubernetes object as parsed JSON. */
export type KubeObject = Record<string, any>;

/** One object by name (and namespace, none for cluster-scoped kinds) as JSON. */
export function getJson(r: Resource, name: string, namespace?: string): string | undefined {
  return backend().get(r, namespace, name);
}

/** One object by name (and namespace, none for cluster-scoped kinds). */
export function get(r: Resource, name: string, namespace?: string): KubeObject | undefined {
  const text = getJson(r, name, namespace);
  return text === undefined ? undefined : JSON.parse(text);
}

/** Objects in a namespace (all when none) matching a label selector (all when none), as JSON. */
export function listJson(r: Resource, opts: { namespace?: string; selector?: string } = {}): string[] {
  return backend().list(r, opts.namespace, opts.selector);
}

/** Objects in a namespace (all when none) matching a label selector (all when none). */
export function list(r: Resource, opts: { namespace?: string; selector?: string } = {}): KubeObject[] {
  return listJson(r, opts).map((t) => JSON.parse(t));
}

/** Objects whose index `index` has `value`, as JSON. */
export function byIndexJson(r: Resource, index: string, value: string): string[] {
  return backend().byIndex(r, index, value);
}

/**
 * Objects whose index `index` has `value`. Built-in indexes: `namespace`, `label` (values
 * `key=value`), `owner` (owner uid); others come from the manifest.
 */
export function byIndex(r: Resource, index: string, value: string): KubeObject[] {
  return byIndexJson(r, index, value).map((t) => JSON.parse(t));
}

/**
 * The kind and metadata of each object whose index `index` has `value`: one copy from the host
 * and no JSON, for policies that look at many objects' names and labels.
 */
export function byIndexMeta(r: Resource, index: string, value: string): Array<[Resource, Meta]> {
  return splitHeaders(backend().byIndexHeaders(r, index, value)).map(parseHeader);
}

/**
 * How many objects whose index `index` has `value` match a label selector (all when none),
 * counted in the host's cache: nothing is copied into the plugin.
 */
export function countByIndex(r: Resource, index: string, value: string, selector?: string): number {
  return backend().countByIndex(r, index, value, selector);
}

/** The headers of a `by-index-headers` answer: each after its length, a little-endian u32. */
export function splitHeaders(buf: Uint8Array): Uint8Array[] {
  return splitPrefixed(buf, "header list", "header", "list");
}

/** The `by-index-headers` encoding of `headers`: each after its length, a little-endian u32. */
export const joinHeaders = joinPrefixed;
