// Admission in the JS SDK: the request's accessors, the answer's record, the export glue and the
// harness's `admit` (writes and HTTP refused, tables from a manifest).
import assert from "node:assert/strict";
import { test } from "node:test";
import { Admission, AdmissionRequest, HttpError, Plugin, PatchOp, Resource, Retry, WriteError, cache, http, jsonPointer, kube, log } from "informant";
import { Harness, admissionRequest } from "informant/testing";
import { NO_ADMIT, WRITES_REFUSED } from "../src/admission.ts";
import { Meta, encodeHeader } from "../src/event.ts";
import { exportsFor, type WitCache, type WitEvents, type WitKube, type WitLog, type WitMetrics } from "../src/guest.ts";
import { plural } from "../src/testing-admission.ts";

const cm = (labels: Record<string, string>, extra: Record<string, unknown> = {}) => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { namespace: "team-a", name: "cfg", uid: "u1", resourceVersion: "5", labels, managedFields: [{}] },
  data: { k: "v" },
  ...extra,
});

/** Answers by the object's `mode` label, to observe the harness and the glue. */
class Gate extends Plugin {
  override admit(req: AdmissionRequest): Admission {
    log.info(`${req.operation} ${req.kind} ${req.meta.key} by ${req.userInfo.username} via ${req.hook || "-"}`);
    switch (req.meta.label("mode")) {
      case "read": {
        const ns = cache.get(new Resource("", "v1", "Namespace"), req.namespace ?? "");
        return Admission.allow().warn(`namespace cached: ${ns !== undefined}`);
      }
      case "write":
        kube.create(new Resource("", "v1", "ConfigMap"), { metadata: { name: "side-effect" } }, { namespace: req.namespace });
        return Admission.allow();
      case "http":
        http.get("https://example.com/");
        return Admission.allow();
      case "deny":
        return Admission.deny(`not today: ${req.meta.label("why")}`).withCode(422);
      case "patch":
        return Admission.patch([PatchOp.add(jsonPointer(["metadata", "labels", "ok"]), "yes")]).warn("checked");
      case "fail":
        throw new Retry("a retry is an error here");
      case "nothing":
        return undefined as unknown as Admission;
      default:
        return Admission.allow();
    }
  }
}

test("the builder fills the request as the host would", () => {
  const req = admissionRequest("update", cm({ z: "1", a: "2" }))
    .oldObject(cm({}))
    .user("alice", ["devs"])
    .dryRun()
    .options({ kind: "UpdateOptions" })
    .build();
  assert.equal(req.operation, "update");
  assert.ok(req.kind.equals(new Resource("", "v1", "ConfigMap")));
  assert.deepEqual(req.resource, { group: "", version: "v1", resource: "configmaps" });
  assert.deepEqual([req.uid, req.hook, req.namespace, req.name, req.subResource], ["test-request", "", "team-a", "cfg", ""]);
  assert.deepEqual([req.userInfo.username, req.userInfo.groups, req.userInfo.uid, req.userInfo.extra], ["alice", ["devs"], "", []]);
  assert.equal(req.dryRun, true);
  assert.equal(req.optionsJson, '{"kind":"UpdateOptions"}');
  assert.deepEqual([req.meta.key, req.meta.uid, req.meta.resourceVersion, [...req.meta.labels]], ["team-a/cfg", "u1", "5", [["a", "2"], ["z", "1"]]]);
  assert.ok(!req.objectJson!.includes("managedFields"));
  assert.equal(req.object!.data.k, "v");
  assert.equal(req.object, req.object, "parsed once");
  assert.deepEqual(req.oldObject!.metadata.labels, {});
});

test("the header is the host's encoding, name and namespace filled in from the request", () => {
  const wire = admissionRequest("create", cm({ b: "2", a: "1" })).toWit();
  const expected = encodeHeader(new Resource("", "v1", "ConfigMap"), new Meta("team-a", "cfg", "u1", "5", new Map([["a", "1"], ["b", "2"]])));
  assert.deepEqual([...wire.header], [...expected]);
  // The same bytes the Rust SDK's builder writes (informant-header's layout): lengths, then UTF-8.
  const fields = ["", "v1", "ConfigMap", "team-a", "cfg", "u1", "5", "a", "1", "b", "2"];
  const bytes = fields.flatMap((f) => [f.length, 0, 0, 0, ...new TextEncoder().encode(f)]);
  assert.deepEqual([...wire.header], bytes);
  const bare = { apiVersion: "v1", kind: "ConfigMap", metadata: {} };
  const req = admissionRequest("create", bare).namespace("ns").name("given").build();
  assert.equal(req.meta.key, "ns/given");
});

test("a delete carries the stored object as old; generated names and cluster scope", () => {
  const req = admissionRequest("delete", cm({ gone: "yes" })).build();
  assert.equal(req.objectJson, undefined);
  assert.equal(req.object, undefined);
  assert.match(req.oldObjectJson!, /"gone":"yes"/);
  assert.equal(req.meta.label("gone"), "yes");
  const ns = { apiVersion: "v1", kind: "Namespace", metadata: { generateName: "tmp-" } };
  const created = admissionRequest("create", JSON.stringify(ns)).build();
  assert.deepEqual([created.name, created.namespace, created.resource.resource], ["", undefined, "namespaces"]);
  assert.equal(admissionRequest("create", cm({})).namespace(undefined).build().namespace, undefined);
  assert.throws(() => admissionRequest("create", { kind: "X" }), /no `apiVersion`/);
  assert.throws(() => admissionRequest("create", "[1]"), /must be a JSON object/);
  assert.throws(() => admissionRequest("patch" as any, cm({})), /operation must be one of/);
});

test("plurals follow the API server's usual rules", () => {
  for (const [kind, name] of [
    ["Pod", "pods"],
    ["Deployment", "deployments"],
    ["Ingress", "ingresses"],
    ["NetworkPolicy", "networkpolicies"],
    ["Gateway", "gateways"],
  ]) {
    assert.equal(plural(kind), name, kind);
  }
});

test("answers become the contract's response", () => {
  const denied = Admission.deny("no").withCode(422).warn("w1").warn("w2");
  assert.deepEqual(denied.toWit(), { allowed: false, code: 422, message: "no", warnings: ["w1", "w2"], patch: undefined });
  assert.deepEqual(Admission.allow().toWit(), { allowed: true, code: 0, message: "", warnings: [], patch: undefined });
  const patched = Admission.patch([
    PatchOp.add("/metadata/labels", { a: "1" }),
    PatchOp.replace("/spec/replicas", 3),
    PatchOp.remove("/metadata/annotations/x"),
    { op: "test", path: "/kind", value: "ConfigMap" },
  ]).warn("patched");
  assert.equal(patched.allowed, true);
  assert.deepEqual(JSON.parse(patched.patchJson!), [
    { op: "add", path: "/metadata/labels", value: { a: "1" } },
    { op: "replace", path: "/spec/replicas", value: 3 },
    { op: "remove", path: "/metadata/annotations/x" },
    { op: "test", path: "/kind", value: "ConfigMap" },
  ]);
  assert.deepEqual(patched.warnings, ["patched"]);
  // An empty patch is none; a raw one passes as it is; answers are values.
  assert.deepEqual(Admission.patch([]), Admission.allow());
  assert.equal(Admission.patchText("not json").patchJson, "not json");
  const base = Admission.allow();
  base.warn("x");
  assert.deepEqual(base.warnings, []);
  assert.throws(() => Admission.deny("x").withCode(70000), /u16/);
  assert.throws(() => Admission.patch({} as any), /array/);
});

test("pointers escape tilde before slash", () => {
  assert.equal(jsonPointer([]), "");
  assert.equal(jsonPointer(["metadata", "labels", "team"]), "/metadata/labels/team");
  assert.equal(jsonPointer(["a~/b", "", "~1"]), "/a~0~1b//~01");
});

test("admit reads the cache and refuses writes and HTTP", () => {
  const h = new Harness(Gate);
  h.cache.put({ apiVersion: "v1", kind: "Namespace", metadata: { name: "team-a" } });
  const a = h.admit(admissionRequest("create", cm({ mode: "read" })));
  assert.deepEqual([a.allowed, a.warnings], [true, ["namespace cached: true"]]);
  // The request's object is not put in the cache.
  assert.equal(h.cache.list(new Resource("", "v1", "ConfigMap"), undefined, undefined).length, 0);
  assert.throws(
    () => h.admit(admissionRequest("create", cm({ mode: "write" }))),
    (e: any) => e instanceof WriteError && e.kind === "denied" && e.message === `denied: ${WRITES_REFUSED}`,
  );
  assert.deepEqual(h.writes, []);
  h.http.respond("https://example.com/", 200);
  assert.throws(
    () => h.admit(admissionRequest("create", cm({ mode: "http" }))),
    (e: any) => e instanceof HttpError && e.kind === "denied" && /GET https:\/\/example.com\/: outbound HTTP is refused during admission/.test(e.message),
  );
  assert.deepEqual(h.http.requests, []);
  assert.throws(() => h.admit(admissionRequest("delete", cm({ mode: "fail" }))), Retry);
  assert.throws(() => h.admit(admissionRequest("create", cm({ mode: "nothing" }))), /admit returned undefined, not an Admission/);
  assert.deepEqual(
    h.takeLogs().map(([, m]) => m),
    [
      "create v1/ConfigMap team-a/cfg by tester via -",
      "create v1/ConfigMap team-a/cfg by tester via -",
      "create v1/ConfigMap team-a/cfg by tester via -",
      "delete v1/ConfigMap team-a/cfg by tester via -",
      "create v1/ConfigMap team-a/cfg by tester via -",
    ],
  );
  // Events after an admission may write again.
  h.run(() => kube.create(new Resource("", "v1", "ConfigMap"), { metadata: { name: "x" } }, { namespace: "team-a" }));
  assert.equal(h.writes.length, 1);
});

test("a harness from a manifest admits only what its tables take, and names the table", () => {
  const h = Harness.fromManifest(Gate, {
    watch: [{ "api-version": "v1", kind: "ConfigMap" }],
    admit: [
      { name: "cms-delete", "api-version": "v1", kind: "ConfigMap", operations: ["delete"] },
      { name: "cms-check", "api-version": "v1", kind: "ConfigMap", mode: "validate" },
      { name: "cms-label", "api-version": "v1", kind: "ConfigMap", mode: "mutate" },
    ],
  });
  h.admit(admissionRequest("delete", cm({})));
  h.admit(admissionRequest("update", cm({})));
  h.admit(admissionRequest("create", cm({})).hook("cms-label"));
  assert.deepEqual(
    h.takeLogs().map(([, m]) => m.split(" via ")[1]),
    ["cms-delete", "cms-check", "cms-label"],
  );
  assert.throws(() => h.admit(admissionRequest("connect", cm({}))), /^Error: no \[\[admit\]\] table of the manifest admits CONNECT of v1\/ConfigMap$/);
  const pod = { apiVersion: "v1", kind: "Pod", metadata: { name: "p" } };
  assert.throws(() => h.admit(admissionRequest("delete", pod)), /admits DELETE of v1\/Pod/);
  assert.throws(() => h.admit(admissionRequest("delete", cm({})).hook("cms-check")), /admits DELETE of v1\/ConfigMap/);
  assert.deepEqual(h.logs, [], "refused requests never reach the plugin");
  // A built request is taken as it is too.
  const built = admissionRequest("create", cm({ mode: "deny", why: "x" })).build();
  assert.deepEqual([h.admit(built).allowed, h.admit(built).message, h.admit(built).code], [false, "not today: x", 422]);
});

test("a plugin without admit refuses, never allows", () => {
  const h = new Harness(Plugin);
  assert.throws(() => h.admit(admissionRequest("create", cm({}))), new Error(NO_ADMIT));
});

/** The component's imports, none of which admission may need but `log`. */
function glue(cls: new (config: Record<string, any>) => Plugin, logged: string[]) {
  const none = () => {
    throw new Error("not during this test");
  };
  const events = { next: () => undefined, json: none, oldJson: none, oldHeader: none } as unknown as WitEvents;
  const store = { get: none, list: none, byIndex: none } as unknown as WitCache;
  const logger: WitLog = { log: (level, m) => void logged.push(`${level} ${m}`) };
  const writer = { create: none, apply: none, patch: none, delete: none, updateStatus: none, recordEvent: none } as unknown as WitKube;
  const meter = { counterAdd: none, gaugeSet: none, histogramObserve: none, delete: none, deleteGroup: none } as unknown as WitMetrics;
  return exportsFor(cls, events, store, logger, writer, meter);
}

test("the export glue answers after init, turns errors into the err string", () => {
  const logged: string[] = [];
  const world = glue(Gate, logged);
  const wire = (labels: Record<string, string>) => admissionRequest("create", cm(labels)).hook("h").toWit();
  assert.throws(() => world.admit(wire({})), (e) => e === "handle called before a successful init");
  world.init("{}");
  assert.deepEqual(world.admit(wire({})), { allowed: true, code: 0, message: "", warnings: [], patch: undefined });
  assert.deepEqual(world.admit(wire({ mode: "patch" })), {
    allowed: true,
    code: 0,
    message: "",
    warnings: ["checked"],
    patch: '[{"op":"add","path":"/metadata/labels/ok","value":"yes"}]',
  });
  assert.deepEqual(world.admit(wire({ mode: "deny", why: "y" })), { allowed: false, code: 422, message: "not today: y", warnings: [], patch: undefined });
  assert.throws(() => world.admit(wire({ mode: "fail" })), (e) => e === "Retry: a retry is an error here");
  // Outbound HTTP is refused by the SDK before the host would refuse it.
  assert.throws(() => world.admit(wire({ mode: "http" })), (e) => typeof e === "string" && e.startsWith("HttpError: denied: GET https://example.com/: outbound HTTP is refused during admission"));
  assert.deepEqual(logged, Array(5).fill("info create v1/ConfigMap team-a/cfg by tester via h"));
  // The host's record as componentize-js lifts it: options as null, not undefined.
  const lifted = { ...wire({}), operation: "delete" as const, namespace: null, object: null, oldObject: JSON.stringify(cm({})), options: null };
  assert.equal(world.admit(lifted).allowed, true);
  // A plugin that implements no admit answers with an error, never a default allow.
  const bare = glue(Plugin, []);
  bare.init("{}");
  assert.throws(() => bare.admit(wire({})), (e) => e === `Error: ${NO_ADMIT}`);
});
