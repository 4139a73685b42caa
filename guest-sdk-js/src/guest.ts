/**
 * The component's exports: turns a `Plugin` subclass into `init`/`handleQueued`/`handleSchedule`
 * and `admission-hook.admit`, and routes the SDK's calls to the host's imports. Used only by
 * the entry module `build.mjs` generates, which imports the contract's interfaces (versioned as
 * `wit/` says) and passes them in here.
 */
import { AdmissionRequest, HTTP_REFUSED, type WitAdmissionRequest, type WitAdmissionResponse } from "./admission.js";
import { setBackend, type Level } from "./backend.js";
import { HttpError, MetricError, QueryError, WriteError } from "./errors.js";
import { Event, type EventType, type Source } from "./event.js";
import { answer, construct, outcome, describe, tick, type Plugin, type PluginClass } from "./plugin.js";
import type { Resource } from "./resource.js";
import { WasiHttp, type WasiHttpTypes, type WasiOutgoingHandler } from "./wasi-http.js";

type WitResource = { group: string; version: string; kind: string };

/** The `cache` import as componentize-js binds it (an err is thrown with a `payload`). */
export interface WitCache {
  get(r: WitResource, namespace: string | undefined, name: string): string | undefined;
  list(r: WitResource, namespace: string | undefined, selector: string | undefined): string[];
  byIndex(r: WitResource, index: string, value: string): string[];
  byIndexHeaders(r: WitResource, index: string, value: string): Uint8Array;
  countByIndex(r: WitResource, index: string, value: string, selector: string | undefined): number;
}

/** The `kube` import as componentize-js binds it (an err is thrown with a `payload`). */
export interface WitKube {
  create(r: WitResource, namespace: string | undefined, object: string): string;
  apply(r: WitResource, namespace: string | undefined, name: string, object: string, force: boolean): string;
  patch(r: WitResource, namespace: string | undefined, name: string, kind: string, patch: string): string;
  delete(r: WitResource, namespace: string | undefined, name: string, preconditions: { uid?: string; resourceVersion?: string }): void;
  updateStatus(r: WitResource, namespace: string | undefined, name: string, object: string): string;
  recordEvent(
    regarding: { kind: WitResource; namespace?: string; name: string; uid?: string },
    severity: "normal" | "warning",
    reason: string,
    action: string,
    note: string,
  ): void;
}

function write<T>(f: () => T): T {
  try {
    return f();
  } catch (e: any) {
    const p = e?.payload;
    if (p && typeof p.tag === "string") {
      if (p.tag === "denied") throw new WriteError("denied", String(p.val));
      throw new WriteError(p.tag, String(p.val?.message ?? ""), Number(p.val?.code ?? 0), String(p.val?.reason ?? ""));
    }
    throw e;
  }
}

/** The `metrics` import as componentize-js binds it (an err is thrown with a `payload`). */
export interface WitMetrics {
  counterAdd(m: WitMetric, value: number): void;
  gaugeSet(m: WitMetric, value: number): void;
  histogramObserve(m: WitMetric, buckets: Float64Array | number[], value: number): void;
  delete(name: string, labels: Array<[string, string]>): boolean;
  deleteGroup(group: string): number;
}

/** The contract's `metric` record. */
type WitMetric = { name: string; help: string; labels: Array<[string, string]>; group: string | undefined };

function metric(f: () => void): void {
  try {
    f();
  } catch (e: any) {
    const p = e?.payload;
    if (p && typeof p.tag === "string") throw new MetricError(p.tag, String(p.val));
    throw e;
  }
}

/** The `log` import as componentize-js binds it. */
export interface WitLog {
  log(level: Level, message: string): void;
}

/** The contract's `event` record as componentize-js lifts it (a `u64` is a `bigint`). */
export interface WitEvent {
  id: bigint;
  eventType: EventType;
  /** The object's header, brought with the event. */
  header: Uint8Array;
  hasOld: boolean;
  initial: boolean;
  finalStateUnknown: boolean;
}

/**
 * The contract's `failure` variant, and an event's outcome as `events.next` takes it: a
 * `result<_, failure>` parameter is `{ tag: "ok" | "err", val }` in componentize-js (jco)
 * bindings, and the `option` around it is the value or `undefined`.
 */
export type WitFailure = { tag: "error"; val: string } | { tag: "retry"; val: { reason: string; afterMs?: number } };
export type WitOutcome = { tag: "ok"; val: undefined } | { tag: "err"; val: WitFailure };

/** The `events` import as componentize-js binds it (none is `undefined`, maybe `null`). */
export interface WitEvents {
  next(previous: WitOutcome | undefined): WitEvent | undefined | null;
  /** The event in hand's object as JSON, by its id (a trap for any other id). */
  json(event: bigint): string;
  oldJson(event: bigint): string | undefined | null;
  oldHeader(event: bigint): Uint8Array | undefined | null;
}

function query<T>(f: () => T): T {
  try {
    return f();
  } catch (e: any) {
    const p = e?.payload;
    if (p && typeof p.tag === "string") throw new QueryError(p.tag, String(p.val));
    throw e;
  }
}

/** The `wasi:http` imports, when the contract's world has them. */
export interface WitHttp {
  types: WasiHttpTypes;
  outgoingHandler: WasiOutgoingHandler;
}

/** The world's exports for plugin class `cls`, with the SDK's calls routed to the imports. */
export function exportsFor(
  cls: PluginClass,
  events: WitEvents,
  cache: WitCache,
  log: WitLog,
  kube: WitKube,
  metrics: WitMetrics,
  http?: WitHttp,
) {
  const wasiHttp = http && new WasiHttp(http.types, http.outgoingHandler);
  /** Inside `admit`: the host refuses outbound HTTP then, and the SDK says why first. */
  let admitting = false;
  const wr = (r: Resource): WitResource => ({ group: r.group, version: r.version, kind: r.kind });
  setBackend({
    get: (r, ns, name) => query(() => cache.get(wr(r), ns, name) ?? undefined),
    list: (r, ns, sel) => query(() => cache.list(wr(r), ns, sel)),
    byIndex: (r, index, value) => query(() => cache.byIndex(wr(r), index, value)),
    byIndexHeaders: (r, index, value) => query(() => cache.byIndexHeaders(wr(r), index, value)),
    countByIndex: (r, index, value, sel) => query(() => cache.countByIndex(wr(r), index, value, sel)),
    log: (level, message) => log.log(level, message),
    create: (r, ns, obj) => write(() => kube.create(wr(r), ns, obj)),
    apply: (r, ns, name, obj, force) => write(() => kube.apply(wr(r), ns, name, obj, force)),
    patch: (r, ns, name, kind, p) => write(() => kube.patch(wr(r), ns, name, kind, p)),
    delete: (r, ns, name, uid, resourceVersion) => write(() => kube.delete(wr(r), ns, name, { uid, resourceVersion })),
    updateStatus: (r, ns, name, obj) => write(() => kube.updateStatus(wr(r), ns, name, obj)),
    recordEvent: (ref, warning, reason, action, note) =>
      write(() =>
        kube.recordEvent(
          { kind: wr(ref.kind), namespace: ref.namespace, name: ref.name, uid: ref.uid },
          warning ? "warning" : "normal",
          reason,
          action,
          note,
        ),
      ),
    metric: (call, name, help, labels, group, buckets, value) => {
      const m: WitMetric = { name, help, labels, group };
      metric(() => {
        if (call === "counter-add") metrics.counterAdd(m, value);
        else if (call === "gauge-set") metrics.gaugeSet(m, value);
        else metrics.histogramObserve(m, new Float64Array(buckets), value);
      });
    },
    metricDelete: (name, labels) => metrics.delete(name, labels),
    metricDeleteGroup: (group) => metrics.deleteGroup(group),
    httpSend: (request) => {
      if (admitting) throw new HttpError("denied", `${request.method} ${request.url}: ${HTTP_REFUSED}`);
      if (!wasiHttp) {
        throw new HttpError("failed", `${request.method} ${request.url}: this plugin's contract does not import wasi:http`);
      }
      return wasiHttp.send(request);
    },
  });
  let instance: Plugin | undefined;
  const announced = (v: string | Uint8Array | undefined | null) => {
    if (v == null) throw new Error("the host lacks the previous version it announced");
    return v;
  };
  /** Handles one event; a failure is the event's outcome. */
  function handleOne(e: WitEvent): WitOutcome {
    let result: { error?: string; retry?: { reason: string; afterMs?: number } };
    try {
      if (!instance) throw new Error("handle called before a successful init");
      // The header came with the event; the JSON and the previous version are fetched by the
      // event's id if read, which the host answers for while the event is in hand.
      const id = e.id;
      const obj: Source = { header: () => e.header, json: () => events.json(id) };
      const old: Source | undefined = e.hasOld
        ? {
            header: () => announced(events.oldHeader(id)) as Uint8Array,
            json: () => announced(events.oldJson(id)) as string,
          }
        : undefined;
      const ev = new Event(e.eventType, obj, old, e.initial, e.finalStateUnknown);
      result = outcome(instance, ev);
    } catch (err) {
      result = { error: describe(err) };
    }
    if (result.retry) {
      const { reason, afterMs } = result.retry;
      return { tag: "err", val: { tag: "retry", val: { reason, afterMs } } };
    }
    if (result.error !== undefined) return { tag: "err", val: { tag: "error", val: result.error } };
    return { tag: "ok", val: undefined };
  }
  return {
    init(config: string): void {
      try {
        instance = construct(cls, config);
      } catch (e) {
        throw describe(e);
      }
    },
    /** Takes the queued events from `events.next`, reporting each one's outcome with the next. */
    handleQueued(): void {
      let previous: WitOutcome | undefined;
      for (;;) {
        const e = events.next(previous);
        if (e == null) return;
        previous = handleOne(e);
      }
    },
    /** A `[[schedule]]` tick; a thrown string is the `err` of `result<_, string>`. */
    handleSchedule(name: string): void {
      if (!instance) throw "handle called before a successful init";
      const error = tick(instance, name);
      if (error !== undefined) throw error;
    },
    /**
     * `admission-hook.admit`: one AdmissionReview request; a thrown string is the `err` of
     * `result<response, string>`, which applies the table's failure policy.
     */
    admit(request: WitAdmissionRequest): WitAdmissionResponse {
      if (!instance) throw "handle called before a successful init";
      admitting = true;
      try {
        return answer(instance, new AdmissionRequest(request)).toWit();
      } catch (e) {
        throw describe(e);
      } finally {
        admitting = false;
      }
    },
  };
}
