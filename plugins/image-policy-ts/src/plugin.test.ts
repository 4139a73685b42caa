// image-policy-ts's unit tests: node --test against the SDK's in-memory harness (no wasm), the
// harness built from the plugin's own manifest.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Harness, admissionRequest, readBeside } from "informant/testing";
import ImagePolicy, { pinned, repository } from "./plugin.ts";

/**
 * The manifest as parsed TOML, read by the little this file needs: `[table]` and `[[array]]`
 * headers, `key = value` with strings, numbers, booleans and arrays of strings on one line.
 * Anything else throws, so the manifest cannot outgrow this reader unnoticed.
 */
function readManifest(text: string): Record<string, any> {
  const root: Record<string, any> = {};
  let table = root;
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!line || line.startsWith("#")) continue;
    let m: RegExpExecArray | null;
    if ((m = /^\[\[([\w-]+)\]\]$/.exec(line))) {
      table = {};
      (root[m[1]] ??= []).push(table);
    } else if ((m = /^\[([\w-]+)\]$/.exec(line))) {
      table = root[m[1]] ??= {};
    } else if ((m = /^([\w-]+)\s*=\s*(.+)$/.exec(line))) {
      table[m[1]] = JSON.parse(m[2]);
    } else {
      throw new Error(`image-policy-ts.toml: this test cannot read \`${line}\``);
    }
  }
  return root;
}

const MANIFEST = readManifest(readBeside(import.meta.url, "../image-policy-ts.toml"));

/** The example manifest, its `team-label` dropped when `team` is false. */
function harness(team: boolean): Harness<ImagePolicy> {
  const config = { ...MANIFEST.config };
  if (!team) delete config["team-label"];
  return Harness.fromManifest(ImagePolicy, { ...MANIFEST, config });
}

const pod = (images: string[], labels: Record<string, string> = {}) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { namespace: "shop", name: "web", labels },
  spec: { containers: images.map((image, i) => ({ name: `c${i}`, image })) },
});

const deployment = (image: string) => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { namespace: "shop", name: "web" },
  spec: { selector: {}, template: { spec: { containers: [{ name: "web", image }] } } },
});

const namespace = (labels: Record<string, string>) => ({ apiVersion: "v1", kind: "Namespace", metadata: { name: "shop", labels } });

test("images from the allowed registries pass and others are named", () => {
  const h = harness(false);
  const ok = h.admit(admissionRequest("create", pod(["registry.example.com/web:1.4", "ghcr.io/example/tools/sh@sha256:ab"])));
  assert.deepEqual([ok.allowed, ok.warnings, ok.patchJson], [true, [], undefined]);
  const bad = h.admit(admissionRequest("update", pod(["registry.example.com/web:1.4", "nginx:1.27", "ghcr.io/example-evil/x:1"])));
  assert.equal(bad.allowed, false);
  assert.equal(
    bad.message,
    "images not from an allowed registry (registry.example.com, ghcr.io/example): " +
      "container `c1` uses `nginx:1.27`; container `c2` uses `ghcr.io/example-evil/x:1`",
  );
  const d = h.admit(admissionRequest("create", deployment("docker.io/x/web:2")));
  assert.match(d.message, /container `web` uses `docker.io\/x\/web:2`/);
  // Init and ephemeral containers count; a status update is not checked.
  const sneaky = { ...pod([]), spec: { containers: [], initContainers: [{ name: "init", image: "busybox" }] } };
  assert.match(h.admit(admissionRequest("create", sneaky)).message, /container `init` uses `busybox`/);
  assert.equal(h.admit(admissionRequest("update", pod(["nginx"])).subResource("status")).allowed, true);
});

test("unpinned images pass with a warning", () => {
  const h = harness(false);
  const a = h.admit(admissionRequest("create", pod(["registry.example.com/web", "registry.example.com/db:latest"])));
  assert.equal(a.allowed, true);
  assert.equal(a.warnings.length, 2);
  assert.equal(
    a.warnings[0],
    "container `c0`: image `registry.example.com/web` is not pinned (no tag, or `latest`); a digest or a version tag says what runs",
  );
});

test("the team label comes from the namespace, in the mutating tables only", () => {
  const h = harness(true);
  const create = (o: object, hook = "team-pods") => admissionRequest("create", o).hook(hook);
  const unlabelled = pod(["registry.example.com/web:1"]);
  // The namespace is not cached yet: no patch.
  assert.equal(h.admit(create(unlabelled)).patchJson, undefined);
  h.cache.put(namespace({ team: "payments" }));
  assert.equal(h.admit(create(unlabelled)).patchJson, '[{"op":"add","path":"/metadata/labels","value":{"team":"payments"}}]');
  assert.equal(
    h.admit(create(pod(["registry.example.com/web:1"], { app: "web" }))).patchJson,
    '[{"op":"add","path":"/metadata/labels/team","value":"payments"}]',
  );
  assert.equal(
    h.admit(create(deployment("registry.example.com/web:1"), "team-deployments")).patchJson,
    '[{"op":"add","path":"/metadata/labels","value":{"team":"payments"}}]',
  );
  // A team of the object's own is kept.
  assert.equal(h.admit(create(pod(["registry.example.com/web:1"], { team: "search" }))).patchJson, undefined);
  // The mutating tables never deny; the validating ones never patch.
  assert.equal(h.admit(create(pod(["nginx"]))).allowed, true);
  const checked = h.admit(create(unlabelled, "images-pods"));
  assert.deepEqual([checked.allowed, checked.patchJson], [true, undefined]);
  // A request without a table name goes to the first table that takes it: the validating one.
  assert.equal(h.admit(admissionRequest("create", pod(["nginx"]))).allowed, false);
  // Without `team-label`, never a patch.
  const plain = harness(false);
  plain.cache.put(namespace({ team: "payments" }));
  assert.equal(plain.admit(create(unlabelled)).patchJson, undefined);
});

test("deletes and other kinds are not the plugin's business", () => {
  const h = new Harness(ImagePolicy, { "allowed-registries": ["registry.example.com"] });
  assert.equal(h.admit(admissionRequest("delete", pod(["nginx"]))).allowed, true);
  const cm = { apiVersion: "v1", kind: "ConfigMap", metadata: { namespace: "shop", name: "c" } };
  assert.equal(h.admit(admissionRequest("create", cm)).allowed, true);
  // The manifest takes no deletes at all.
  assert.throws(() => harness(false).admit(admissionRequest("delete", pod(["nginx"]))), /no \[\[admit\]\] table of the manifest admits DELETE of v1\/Pod/);
});

test("images are read as the container runtime reads them", () => {
  for (const [image, repo] of [
    ["nginx", "docker.io/library/nginx"],
    ["nginx:1.27", "docker.io/library/nginx"],
    ["acme/app:2", "docker.io/acme/app"],
    ["registry.example.com:5000/team/app:1@sha256:ab", "registry.example.com:5000/team/app"],
    ["localhost/app", "localhost/app"],
  ]) {
    assert.equal(repository(image), repo, image);
  }
  assert.deepEqual(["a", "a:latest", "a:1", "r:5000/a", "a@sha256:x"].map(pinned), [false, false, true, false, true]);
});

test("bad config is refused with the reason", () => {
  assert.throws(() => new Harness(ImagePolicy, { "allowed-registries": ["r"], colour: "red" }), /unknown field `colour`/);
  assert.throws(() => new Harness(ImagePolicy, { "allowed-registries": [] }), /at least one registry/);
  assert.throws(() => new Harness(ImagePolicy, { "allowed-registries": ["/"] }), /none empty/);
  assert.throws(() => new Harness(ImagePolicy, { "allowed-registries": ["r"], "team-label": "" }), /`team-label` must be a non-empty string/);
});
