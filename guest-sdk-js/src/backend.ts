/**
 * Where the SDK's host calls go: the component's imports (installed by the build's generated
 * entry module) or the test harness. A call with neither fails with a clear message.
 */
import type { Request, Response } from "./http.js";
import type { Resource } from "./resource.js";

/** The `metrics` calls that write a series. */
export type MetricCallKind = "counter-add" | "gauge-set" | "histogram-observe";

/** Log severities, as the contract names them. */
export type Level = "trace" | "debug" | "info" | "warn" | "error";

/**
 * The host calls the SDK makes; query refusals are thrown as `QueryError`s, write refusals as
 * `WriteError`s, failed requests as `HttpError`s.
 */
export interface Backend {
  get(r: Resource, namespace: string | undefined, name: string): string | undefined;
  list(r: Resource, namespace: string | undefined, selector: string | undefined): string[];
  byIndex(r: Resource, index: string, value: string): string[];
  byIndexHeaders(r: Resource, index: string, value: string): Uint8Array;
  countByIndex(r: Resource, index: string, value: string, selector: string | undefined): number;
  log(level: Level, message: string): void;
  create(r: Resource, namespace: string | undefined, obj: string): string;
  apply(r: Resource, namespace: string | undefined, name: string, obj: string, force: boolean): string;
  patch(r: Resource, namespace: string | undefined, name: string, kind: "merge" | "json" | "strategic", patch: string): string;
  delete(r: Resource, namespace: string | undefined, name: string, uid?: string, resourceVersion?: string): void;
  updateStatus(r: Resource, namespace: string | undefined, name: string, obj: string): string;
  recordEvent(regarding: ObjectRef, warning: boolean, reason: string, action: string, note: string): void;
  httpSend(request: Request): Response;
  metric(
    call: MetricCallKind,
    name: string,
    help: string,
    labels: Array<[string, string]>,
    group: string | undefined,
    buckets: number[],
    value: number,
  ): void;
  metricDelete(name: string, labels: Array<[string, string]>): boolean;
  metricDeleteGroup(group: string): number;
}

/** The object an Event is about. */
export interface ObjectRef {
  kind: Resource;
  namespace: string | undefined;
  name: string;
  uid: string | undefined;
}

const unavailable = (): never => {
  throw new Error(
    "informant: this call needs the host; run the plugin as a component, or in tests through the Harness",
  );
};

let current: Backend = {
  get: unavailable,
  list: unavailable,
  byIndex: unavailable,
  byIndexHeaders: unavailable,
  countByIndex: unavailable,
  log: unavailable,
  create: unavailable,
  apply: unavailable,
  patch: unavailable,
  delete: unavailable,
  updateStatus: unavailable,
  recordEvent: unavailable,
  httpSend: unavailable,
  metric: unavailable,
  metricDelete: unavailable,
  metricDeleteGroup: unavailable,
};

/** The backend in use. */
export function backend(): Backend {
  return current;
}

/** Installs `b` and returns the previous backend (the harness restores it). */
export function setBackend(b: Backend): Backend {
  const previous = current;
  current = b;
  return previous;
}
