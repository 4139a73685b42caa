/** The plugin base class and the dispatch the component and the test harness share. */
import { Admission, NO_ADMIT, type AdmissionRequest } from "./admission.js";
import { Retry } from "./errors.js";
import type { Event } from "./event.js";

/**
 * Extend it and override the handlers you need; the others do nothing (except `admit`, which
 * refuses: only a plugin that overrides it should have `[[admit]]` tables). One instance lives per
 * host instance, constructed with the manifest's `[config]` table, then fed one event at a
 * time. Throw to fail an event (logged and counted; the instance keeps running), or throw a
 * `Retry` to have it redelivered later. After a trap or a missed deadline the host builds a new
 * instance, so state kept here must be rebuildable from cache queries.
 */
export class Plugin {
  constructor(readonly config: Record<string, any> = {}) {}
  /** An object new to this plugin: created, seen in a relist, or part of a replay. */
  onAdded(_ev: Event): void {}
  /** An object changed; `ev.oldObject` is the version this plugin saw before. */
  onUpdated(_ev: Event): void {}
  /** An object is gone; its final state, or the last known one if `finalStateUnknown`. */
  onDeleted(_ev: Event): void {}
  /** The periodic re-delivery of a current object. */
  onResync(_ev: Event): void {}
  /**
   * The manifest's `[[schedule]]` table `name` ticked. Runs under the event deadline, never
   * while an event is handled; the cache answers as for events. Throw to count the tick as an
   * error (a `Retry` means nothing here: it counts as an error too).
   */
  onSchedule(_name: string): void {}
  /**
   * Answers one AdmissionReview request from a `[[admit]]` table of the manifest (see
   * `admission.ts` for the contract: cache reads only, no writes or HTTP, no per-request state).
   * Throw to apply the table's `failure-policy` (a `Retry` means nothing here: it counts as an
   * error too). The default throws: a plugin without `[[admit]]` tables is never asked.
   */
  admit(_req: AdmissionRequest): Admission {
    throw new Error(NO_ADMIT);
  }
}

/** A `Plugin` subclass. */
export type PluginClass = new (config: Record<string, any>) => Plugin;

/** Builds the plugin from the config JSON. */
export function construct(cls: PluginClass, configJson: string): Plugin {
  let config: Record<string, any>;
  try {
    config = configJson ? JSON.parse(configJson) : {};
  } catch (e) {
    throw new Error(`config is not JSON: ${(e as Error).message}`);
  }
  return new cls(config);
}

/** Calls the handler for the event's type. */
export function dispatch(plugin: Plugin, ev: Event): void {
  switch (ev.type) {
    case "added":
      return plugin.onAdded(ev);
    case "updated":
      return plugin.onUpdated(ev);
    case "deleted":
      return plugin.onDeleted(ev);
    case "resync":
      return plugin.onResync(ev);
  }
}

/** Runs `admit`, checking that it answered with an `Admission`; its exceptions propagate. */
export function answer(plugin: Plugin, req: AdmissionRequest): Admission {
  const a: unknown = plugin.admit(req);
  if (!(a instanceof Admission)) {
    const what = a === null ? "null" : a instanceof Promise ? "a Promise (admit is synchronous)" : typeof a;
    throw new TypeError(`admit returned ${what}, not an Admission (Admission.allow(), .deny(message) or .patch(ops))`);
  }
  return a;
}

/** Runs one schedule tick: `undefined` on success, else the error (a `Retry` included). */
export function tick(plugin: Plugin, name: string): string | undefined {
  try {
    plugin.onSchedule(name);
    return undefined;
  } catch (e) {
    return describe(e);
  }
}

/** `Name: message`, the way the host's log shows a failed event. */
export function describe(e: unknown): string {
  if (e instanceof Error) return `${e.name}: ${e.message}`;
  return `thrown: ${String(e)}`;
}

/** Runs one event: nothing on success, `{ error }` on failure, `{ retry }` on Retry. */
export function outcome(plugin: Plugin, ev: Event): { error?: string; retry?: Retry } {
  try {
    dispatch(plugin, ev);
    return {};
  } catch (e) {
    if (e instanceof Retry) return { retry: e };
    return { error: describe(e) };
  }
}
