/**
 * A TypeScript test plugin whose config `mode` picks its behaviour; the e2e tests install it
 * under several names.
 *
 * - `echo`: logs one JSON line per event (`tag`, `event`, `key`, `cached`: whether `cache.get`
 *   finds the object, `value`), so tests see every event and a cache query round trip;
 * - `raise`: like echo, but throws a TypeError for objects labelled `boom` (a failed event);
 * - `label`: on the (not initial) add of an object named `go-*`, applies the label `by=ts` to it
 *   and tries to delete it (which its manifest does not declare), logging
 *   `{tag, key, applied: labels, delete: "kind: message"}`;
 * - `noop`: reads the object's name from the metadata header only, no JSON (the plugins
 *   benchmark's metadata-only plugin);
 * - `parse`: parses the object's JSON and reads a field (the benchmark's full-parse plugin);
 * - `post`: on each event not from a replay, POSTs `{tag, type, key}` as JSON to `config.url`
 *   (timeout `config["timeout-ms"]`, default 30000) and logs `{tag, key, status, body}`, or
 *   `{tag, key, class, error}` with the `HttpError`'s kind and message (the event succeeds
 *   either way: the log is the record);
 * - `metrics`: on the (not initial) add of an object named `go-*`, adds 2 to the counter
 *   `polyglot_checks{name}`, observes 5 in the histogram `polyglot_sizes` (buckets 1 and 10),
 *   tries a gauge labelled `plugin`, deletes a gauge of its own and a group, and logs
 *   `{tag, key, refused: "kind: message", deleted, group}`.
 */
import { HttpError, MetricError, Plugin, WriteError, cache, http, kube, log, metrics, type Event } from "informant";

export default class Hostile extends Plugin {
  private readonly mode: string;
  private readonly tag: string;
  private readonly url: string;
  private readonly timeoutMs: number;

  constructor(config: Record<string, any>) {
    super(config);
    this.mode = config.mode ?? "echo";
    if (!["echo", "raise", "label", "noop", "parse", "post", "metrics"].includes(this.mode)) throw new Error(`unknown mode \`${this.mode}\``);
    this.tag = config.tag ?? this.mode;
    this.url = config.url ?? "";
    this.timeoutMs = config["timeout-ms"] ?? 30000;
  }

  private on(ev: Event): void {
    // A failing event, not a silent pass, if either path ever came back empty.
    if (this.mode === "noop") {
      if (!ev.meta.name) throw new Error("an object without a name");
      return;
    }
    if (this.mode === "parse") {
      if (!ev.object.metadata?.name) throw new Error("an object without a name");
      return;
    }
    if (this.mode === "label") {
      if (ev.type === "added" && !ev.initial && ev.meta.name.startsWith("go-")) this.label(ev);
      return;
    }
    if (this.mode === "post") {
      if (!ev.initial) this.post(ev);
      return;
    }
    if (this.mode === "metrics") {
      if (ev.type === "added" && !ev.initial && ev.meta.name.startsWith("go-")) this.metrics(ev);
      return;
    }
    if (this.mode === "raise" && ev.meta.label("boom") !== undefined) {
      throw new TypeError(`boom on ${ev.meta.key}`);
    }
    const got = cache.get(ev.resource, ev.meta.name, ev.meta.namespace);
    log.info(
      JSON.stringify({
        tag: this.tag,
        event: ev.type,
        key: ev.meta.key,
        cached: got !== undefined,
        value: ev.object.data?.value ?? null,
      }),
    );
  }

  private metrics(ev: Event): void {
    const name = ev.meta.name;
    metrics.counter("polyglot_checks", "Checks, \"quoted\".").labels({ name }).add(2);
    metrics.histogram("polyglot_sizes", "Sizes.", [1, 10]).observe(5);
    let refused = "none";
    try {
      metrics.gauge("polyglot_gauge").labels({ plugin: "evil" }).set(1);
    } catch (e) {
      if (!(e instanceof MetricError)) throw e;
      refused = e.message;
    }
    metrics.gauge("polyglot_temp", "Gone again.").labels({ name }).group("g").set(1);
    const deleted = metrics.deleteSeries("polyglot_temp", { name });
    metrics.gauge("polyglot_temp", "Gone again.").labels({ name }).group("g").set(1);
    const group = metrics.deleteGroup("g");
    log.info(JSON.stringify({ tag: this.tag, key: ev.meta.key, refused, deleted, group }));
  }

  private label(ev: Event): void {
    const m = ev.meta;
    const stored = kube.apply(ev.resource, m.name, { metadata: { labels: { by: "ts" } } }, { namespace: m.namespace });
    let deleted = "none";
    try {
      kube.delete(ev.resource, m.name, { namespace: m.namespace, uid: m.uid });
    } catch (e) {
      if (!(e instanceof WriteError)) throw e;
      deleted = e.message;
    }
    log.info(JSON.stringify({ tag: this.tag, key: m.key, applied: stored.metadata.labels, delete: deleted }));
  }

  private post(ev: Event): void {
    const key = ev.meta.key;
    let outcome: Record<string, unknown>;
    try {
      const r = http.postJson(this.url, { tag: this.tag, type: ev.type, key }, { timeoutMs: this.timeoutMs });
      outcome = { tag: this.tag, key, status: r.status, body: r.text() };
    } catch (e) {
      if (!(e instanceof HttpError)) throw e;
      outcome = { tag: this.tag, key, class: e.kind, error: e.message };
    }
    log.info(JSON.stringify(outcome));
  }

  override onAdded(ev: Event): void {
    this.on(ev);
  }
  override onUpdated(ev: Event): void {
    this.on(ev);
  }
  override onDeleted(ev: Event): void {
    this.on(ev);
  }
  override onResync(ev: Event): void {
    this.on(ev);
  }
}
