// kubediff-ts's unit tests: node --test against the SDK's in-memory harness (no wasm).
import assert from "node:assert/strict";
import { test } from "node:test";
import { Harness, added, deleted, updated } from "informant/testing";
import KubeDiff, { changedPaths } from "./plugin.ts";

const deploy = (replicas: number, extra: Record<string, unknown> = {}) => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { namespace: "demo", name: "web", resourceVersion: String(replicas), labels: { app: "web" } },
  spec: { replicas, template: { spec: { containers: [{ name: "app", image: "nginx:1.27" }] } } },
  ...extra,
});

const lines = (h: Harness) => h.takeLogs().map(([level, m]) => [level, JSON.parse(m)]);

test("an update logs the changed paths, not resourceVersion", () => {
  const h = new Harness(KubeDiff, { "ignore-status": true });
  h.send(updated(deploy(1), deploy(3)));
  assert.deepEqual(lines(h), [
    ["info", { event: "updated", apiVersion: "apps/v1", kind: "Deployment", namespace: "demo", name: "web", changed: ["/spec/replicas"] }],
  ]);
});

test("status-only updates are skipped with ignore-status, reported without", () => {
  const before = deploy(1, { status: { readyReplicas: 0 } });
  const after = { ...deploy(1, { status: { readyReplicas: 1 } }), metadata: { ...before.metadata, resourceVersion: "9" } };
  const quiet = new Harness(KubeDiff, { "ignore-status": true });
  quiet.send(updated(before, after));
  assert.deepEqual(quiet.takeLogs(), []);
  const loud = new Harness(KubeDiff, {});
  loud.send(updated(before, after));
  assert.deepEqual(lines(loud)[0][1].changed, ["/status/readyReplicas"]);
});

test("added and deleted log the object's identity from metadata, cluster-scoped as null", () => {
  const h = new Harness(KubeDiff, {});
  h.send(added({ apiVersion: "v1", kind: "Namespace", metadata: { name: "prod" } }));
  h.send(deleted(deploy(1)));
  assert.deepEqual(lines(h), [
    ["info", { event: "added", apiVersion: "v1", kind: "Namespace", namespace: null, name: "prod" }],
    ["info", { event: "deleted", apiVersion: "apps/v1", kind: "Deployment", namespace: "demo", name: "web" }],
  ]);
});

test("changed paths cover nested objects, arrays, added and removed keys, with escaping", () => {
  const none = () => false;
  assert.deepEqual(
    changedPaths({ a: { "x/y": 1, k: [1, 2] }, gone: 1 }, { a: { "x/y": 2, k: [1, 3, 4] }, fresh: true }, none),
    ["/a/k/1", "/a/k/2", "/a/x~1y", "/fresh", "/gone"],
  );
  assert.deepEqual(changedPaths({ a: 1 }, { a: 1 }, none), []);
});

test("bad config is refused with the reason", () => {
  assert.throws(() => new Harness(KubeDiff, { colour: "red" }), /unknown field `colour`/);
  assert.throws(() => new Harness(KubeDiff, { "ignore-status": "yes" }), /must be true or false/);
});
