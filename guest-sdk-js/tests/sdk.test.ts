// The JS SDK's own tests: header decoding, lazy objects, the harness cache, errors and retries.
import assert from "node:assert/strict";
import { test } from "node:test";
import { MetricError, Plugin, QueryError, Resource, Retry, WriteError, cache, kube, log, metrics, type Event } from "informant";
import { Event as EventClass, Meta, encodeHeader, parseHeader } from "../src/event.ts";
import { outcome } from "../src/plugin.ts";
import { Harness, MemCache, ObjectSource, added, deleted, updated } from "informant/testing";

const CM = new Resource("", "v1", "ConfigMap");
const cm = (name: string, labels: Record<string, string> = {}, ns = "default", owner?: string) => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { namespace: ns, name, uid: `u-${name}`, resourceVersion: "7", labels, ...(owner ? { ownerReferences: [{ uid: owner }] } : {}) },
  data: { k: name },
});
const names = (objs: string[]) => objs.map((o) => JSON.parse(o).metadata.name);

test("the header round-trips, labels sorted, unicode intact", () => {
  const raw = encodeHeader(new Resource("apps", "v1", "Deployment"), new Meta(undefined, "wéb", "u", "3", new Map([["b", "2"], ["a", "1"]])));
  const [r, m] = parseHeader(raw);
  assert.ok(r.equals(new Resource("apps", "v1", "Deployment")));
  assert.deepEqual([m.namespace, m.name, m.uid, m.resourceVersion, [...m.labels]], [undefined, "wéb", "u", "3", [["a", "1"], ["b", "2"]]]);
});

test("a malformed header is a clear error", () => {
  assert.throws(() => parseHeader(new Uint8Array([1, 0])), /truncated length/);
  assert.throws(() => parseHeader(new Uint8Array([9, 0, 0, 0, 97])), /overruns/);
  assert.throws(() => parseHeader(new Uint8Array(32)), /8 fields/);
});

test("meta needs no JSON, and the object is fetched once", () => {
  let calls = 0;
  const src = new ObjectSource(cm("a", { team: "x" }));
  const counting = { header: () => src.header(), json: () => (calls++, src.json()) };
  const ev = new EventClass("added", counting);
  assert.equal(ev.meta.label("team"), "x");
  assert.equal(calls, 0);
  assert.equal(ev.object, ev.object);
  assert.equal(calls, 1);
  const up = updated(cm("a", { v: "1" }), cm("a", { v: "2" }));
  assert.equal(up.oldMeta?.label("v"), "1");
  assert.equal(up.oldObject?.metadata.labels.v, "1");
});

test("list by selector, and bad selectors", () => {
  const c = new MemCache().put(cm("a", { env: "prod", team: "x" }), cm("b", { env: "dev" }), cm("c", {}, "other"));
  const sel = (s?: string, ns?: string) => names(c.list(CM, ns, s)).sort();
  assert.deepEqual(sel(), ["a", "b", "c"]);
  assert.deepEqual(sel("env=prod"), ["a"]);
  assert.deepEqual(sel("env==prod,team"), ["a"]);
  assert.deepEqual(sel("env!=prod"), ["b", "c"]);
  assert.deepEqual(sel("env in (prod, dev)"), ["a", "b"]);
  assert.deepEqual(sel("env notin (prod)"), ["b", "c"]);
  assert.deepEqual(sel("!team"), ["b", "c"]);
  assert.deepEqual(sel(undefined, "other"), ["c"]);
  for (const bad of ["=x", "a b", "env in prod", "a,,b", "bad key"]) {
    assert.throws(() => c.list(CM, undefined, bad), (e: any) => e instanceof QueryError && e.kind === "bad-selector", bad);
  }
});

test("by-index: built-ins, declared, unknown", () => {
  const c = new MemCache().put(cm("a", { team: "x" }, "default", "o1"), cm("b", {}, "kube-system"));
  c.addIndex(CM, "data-k", (o) => [o.data.k]);
  assert.deepEqual(names(c.byIndex(CM, "owner", "o1")), ["a"]);
  assert.deepEqual(names(c.byIndex(CM, "label", "team=x")), ["a"]);
  assert.deepEqual(names(c.byIndex(CM, "namespace", "kube-system")), ["b"]);
  assert.deepEqual(names(c.byIndex(CM, "data-k", "b")), ["b"]);
  assert.throws(() => c.byIndex(CM, "nope", "x"), /unknown-index: no index `nope`/);
});

test("by-index metadata and counts, through the SDK as a plugin calls them", () => {
  const h = new Harness(Plugin);
  h.cache.put(cm("a", { team: "x", env: "prod" }), cm("b", { team: "x" }), cm("c", { team: "y" }, "other"));
  h.run(() => {
    const found = cache.byIndexMeta(CM, "label", "team=x");
    assert.deepEqual(
      found.map(([r, m]) => [r.kind, m.namespace, m.name, m.label("env")]),
      [["ConfigMap", "default", "a", "prod"], ["ConfigMap", "default", "b", undefined]],
    );
    assert.equal(cache.countByIndex(CM, "label", "team=x"), 2);
    assert.equal(cache.countByIndex(CM, "label", "team=x", "env=prod"), 1);
    assert.equal(cache.countByIndex(CM, "namespace", "nowhere"), 0);
    assert.throws(() => cache.countByIndex(CM, "label", "team=x", "bad key"), /bad-selector/);
    assert.throws(() => cache.byIndexMeta(CM, "nope", "x"), /unknown-index/);
  });
  assert.throws(() => cache.splitHeaders(new Uint8Array([5, 0, 0, 0, 1])), /overruns/);
  assert.throws(() => cache.splitHeaders(new Uint8Array([5, 0])), /truncated/);
});

class Queries extends Plugin {
  override onAdded(ev: Event): void {
    const same = cache.get(ev.resource, ev.meta.name, ev.meta.namespace);
    log.info(`${ev.meta.key} cached=${same !== undefined}`);
    if (ev.meta.label("retry")) throw new Retry("not yet", 250);
    if (ev.meta.label("boom")) throw new TypeError("boom");
    cache.list(new Resource("batch", "v1", "Job"));
  }
}

test("the harness routes queries and logs, returns retries, propagates exceptions", () => {
  const h = new Harness(Queries, {}, new MemCache().watch(CM));
  assert.throws(() => h.send(added(cm("a"))), /not-watched: batch\/v1\/Job is not watched/);
  const r = h.send(added(cm("b", { retry: "1" })));
  assert.deepEqual([r?.reason, r?.afterMs], ["not yet", 250]);
  assert.throws(() => h.send(added(cm("c", { boom: "1" }))), TypeError);
  assert.deepEqual(h.takeLogs(), ["a", "b", "c"].map((n) => ["info", `default/${n} cached=true`]));
  h.send(deleted(cm("a")));
  assert.equal(h.cache.get(CM, "default", "a"), undefined);
  h.applyToCache = false;
  h.send(added(cm("d", { retry: "1" })));
  assert.deepEqual(h.takeLogs(), [["info", "default/d cached=false"]]);
});

/** Catches a helper's Retry and fails with another error instead. */
class ChangesItsMind extends Plugin {
  override onAdded(ev: Event): void {
    try {
      throw new Retry("webhook down");
    } catch {
      throw new RangeError(`changed its mind about ${ev.meta.name}`);
    }
  }
}

test("only the exception that escapes decides on a retry", () => {
  assert.deepEqual(outcome(new ChangesItsMind({}), added(cm("c"))), { error: "RangeError: changed its mind about c" });
  assert.throws(() => new Harness(ChangesItsMind, {}).send(added(cm("c"))), RangeError);
});

test("outcome turns exceptions into the host's error text", () => {
  assert.deepEqual(outcome(new Queries({}), added(cm("c", { boom: "1" }))), { error: "Error: informant: this call needs the host; run the plugin as a component, or in tests through the Harness" });
  assert.throws(() => new Retry("r", -1), /u32/);
  assert.throws(() => Resource.fromApiVersion("apps/", "X"), /names no version/);
});

class Labeller extends Plugin {
  onAdded(ev: Event): void {
    if (ev.meta.labels.get("team") === undefined) {
      kube.apply(ev.resource, ev.meta.name, { metadata: { labels: { team: "unknown" } } }, { namespace: ev.meta.namespace });
      kube.event(ev, "Labelled", "Label", "added team=unknown");
    }
  }
}

test("the harness records declared writes and refuses the rest", () => {
  const h = Harness.fromManifest(Labeller, {
    watch: [{ "api-version": "v1", kind: "ConfigMap" }],
    write: [
      { "api-version": "v1", kind: "ConfigMap", verbs: ["apply"], namespace: "default" },
      { "api-version": "events.k8s.io/v1", kind: "Event", verbs: ["create"] },
    ],
  });
  h.send(added(cm("a")));
  h.send(added(cm("b", { team: "t" })));
  assert.deepEqual(
    h.writes.map((w) => [w.verb, w.namespace, w.name]),
    [["apply", "default", "a"], ["record-event", "default", undefined]],
  );
  assert.deepEqual(h.writes[0].body, { metadata: { labels: { team: "unknown" } } });
  assert.equal(h.writes[1].body.regarding.name, "a");
  assert.throws(
    () => h.send(added(cm("c", {}, "other"))),
    (e: any) => e instanceof WriteError && e.kind === "denied" && /`apply` of `v1\/ConfigMap` in namespace `other` is not declared/.test(e.message),
  );
  assert.equal(h.writes.length, 2);
});

class Ticker extends Plugin {
  onSchedule(name: string): void {
    if (name === "bad") throw new Retry("a retry is an error here");
    log.info(`tick ${name}: ${cache.list(CM).length} configmaps`);
  }
}

test("tick runs a schedule with the harness cache and refuses undeclared names", () => {
  const h = Harness.fromManifest(Ticker, {
    watch: [{ "api-version": "v1", kind: "ConfigMap" }],
    schedule: [{ name: "count", every: "1m" }],
  });
  h.cache.put(cm("a"), cm("b"));
  h.tick("count");
  assert.deepEqual(h.takeLogs(), [["info", "tick count: 2 configmaps"]]);
  assert.throws(() => h.tick("other"), /schedule `other` is not declared in the manifest's \[\[schedule\]\] tables/);
  assert.throws(() => h.tick("count-not"), /not declared/);
  // A plugin without a handler does nothing; a harness without a manifest ticks any name.
  new Harness(Plugin).tick("anything");
});

test("the harness records metric calls", () => {
  class Counting extends Plugin {
    onAdded(ev: Event) {
      metrics.counter("seen_total", "Objects seen.").labels({ namespace: ev.meta.namespace ?? "" }).inc();
      metrics.gauge("present", "Present.").labels({ name: ev.meta.name }).group(ev.meta.name).set(1);
      metrics.histogram("name_len", "Name lengths.", [4, 16]).observe(ev.meta.name.length);
    }
    onDeleted(ev: Event) {
      log.info(`${metrics.deleteGroup(ev.meta.name)} series gone`);
    }
  }
  const h = new Harness(Counting);
  h.send(added(cm("a")));
  h.send(added(cm("b")));
  assert.equal(h.metricValue("seen_total", { namespace: "default" }), 2);
  assert.equal(h.metricValue("present", { name: "a" }), 1);
  assert.deepEqual(h.metrics.slice(0, 3).map((c) => c.call), ["counter-add", "gauge-set", "histogram-observe"]);
  assert.deepEqual([h.metrics[1].labels, h.metrics[1].group], [[["name", "a"]], "a"]);
  h.send(deleted(cm("a")));
  assert.equal(h.metricValue("present", { name: "a" }), undefined);
  assert.equal(h.metricValue("present", { name: "b" }), 1);
  assert.deepEqual(h.takeLogs(), [["info", "1 series gone"]]);
  assert.throws(() => h.run(() => metrics.gauge("g").add(1)), (e) => e instanceof MetricError && e.kind === "type-conflict");
});
