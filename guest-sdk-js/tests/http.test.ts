// The http module natively: URL splitting, typed errors, and the harness's recorded requests and
// canned answers (the component path is exercised end to end in tests/e2e/polyglot_http.rs).
import assert from "node:assert/strict";
import { test } from "node:test";
import { HttpError, Plugin, Retry, http, log, type Event } from "informant";
import { Harness, added } from "informant/testing";

const cm = (name: string) => ({ apiVersion: "v1", kind: "ConfigMap", metadata: { namespace: "default", name } });

/** Posts each add to its configured webhook; a non-2xx answer or a failure is a retry. */
class Notifier extends Plugin {
  override onAdded(ev: Event): void {
    let r: http.Response;
    try {
      r = http.postJson(this.config.url, { key: ev.meta.key }, { timeoutMs: 2000 });
    } catch (e) {
      if (e instanceof HttpError) throw new Retry(e.message);
      throw e;
    }
    if (!r.ok) throw new Retry(`webhook answered ${r.status}`);
    log.info(`${r.status} ${r.json().seen}`);
  }
}

const URL = "http://127.0.0.1:8080/hook?x=1";
const isHttpError = (kind: string, message: RegExp) => (e: any) => e instanceof HttpError && e.kind === kind && message.test(e.message);

test("URLs split as wasi:http wants them", () => {
  const r = new http.Request("POST", "HTTPS://Hooks.example.com:8443/a/b?c=d", [], new Uint8Array(), 1000);
  assert.deepEqual([r.scheme, r.authority, r.pathWithQuery], ["https", "Hooks.example.com:8443", "/a/b?c=d"]);
  assert.deepEqual(http.splitUrl("http://h?q"), ["http", "h", "?q"]);
  assert.deepEqual(http.splitUrl("http://h:1"), ["http", "h:1", "/"]);
  for (const [bad, why] of [["h/x", /not an absolute/], ["ftp://h/", /only http and https/], ["http:///x", /names no host/]] as const) {
    assert.throws(() => http.splitUrl(bad), isHttpError("invalid", why));
  }
});

test("without a canned answer a request fails saying there is no host", () => {
  const h = new Harness(Notifier, { url: URL });
  const retry = h.send(added(cm("a")));
  assert.match(retry?.reason ?? "", /^failed: POST http:\/\/127\.0\.0\.1:8080\/hook\?x=1: not sent: outbound HTTP needs the host/);
  // Still recorded: the plugin did send it.
  assert.deepEqual(
    h.http.requests.map((r) => [r.method, r.url, r.json(), r.timeoutMs]),
    [["POST", URL, { key: "default/a" }, 2000]],
  );
  assert.deepEqual(h.http.requests[0].headers, [["content-type", "application/json"]]);
});

test("canned answers come back with status, headers and body", () => {
  const h = new Harness(Notifier, { url: URL });
  h.http.respond(URL, 201, { seen: 1 });
  assert.equal(h.send(added(cm("a"))), undefined);
  assert.deepEqual(h.takeLogs(), [["info", "201 1"]]);
  h.http.respond(URL, 503, "down");
  assert.equal(h.send(added(cm("b")))?.reason, "webhook answered 503");
  // A redirect is an answer like any other: nothing follows it.
  h.http.respond(URL, 302, "", [["Location", "http://elsewhere/"]]);
  assert.equal(h.send(added(cm("c")))?.reason, "webhook answered 302");
  assert.equal(h.http.requests.length, 3);
});

test("failures throw typed errors with the wasi:http code", () => {
  const h = new Harness(Notifier, { url: URL });
  h.http.fail(URL, "connection-read-timeout");
  assert.equal(h.send(added(cm("a")))?.reason, `timeout: POST ${URL}: connection-read-timeout`);
  h.http.fail(URL);
  assert.equal(h.send(added(cm("b")))?.reason, `failed: POST ${URL}: connection-refused`);
  const e = http.errorFor(new http.Request("GET", URL, [], new Uint8Array(), 1), "dns-error", '{"rcode":"x"}');
  assert.deepEqual([e.kind, e.code, e.message], ["failed", "dns-error", `failed: GET ${URL}: dns-error: {"rcode":"x"}`]);
});

test("a harness from a manifest denies origins it does not list", () => {
  const h = Harness.fromManifest(Notifier, {
    "allowed-outbound-hosts": ["http://127.0.0.1:8080", "https://hooks.example.com", "http://[::1]:*"],
    watch: [{ "api-version": "v1", kind: "ConfigMap" }],
    config: { url: "http://127.0.0.1:9090/hook" },
  });
  assert.equal(
    h.send(added(cm("a")))?.reason,
    "denied: POST http://127.0.0.1:9090/hook: denied by the host: the origin is not in the plugin's `allowed-outbound-hosts` (or its tenant's)",
  );
  assert.deepEqual(h.http.requests, [], "a denied request is never sent");
  // The scheme's default port, any port for `*`, hosts compared lowercase; user info never.
  for (const [url, allowed] of [
    ["https://HOOKS.example.com/x", true],
    ["https://hooks.example.com:443/x", true],
    ["http://hooks.example.com/x", false],
    ["http://[::1]:1234/", true],
    ["http://127.0.0.1:8080", true],
    ["http://u@127.0.0.1:8080/", false],
  ] as const) {
    h.http.respond(url, 204);
    const call = () => h.run(() => http.get(url));
    if (allowed) assert.equal(call().status, 204, url);
    else assert.throws(call, isHttpError("denied", /denied by the host/), url);
  }
});

test("send takes header objects, text and a positive timeout", () => {
  const h = new Harness(Notifier, { url: URL });
  h.http.respond(URL, 200, "fine", [["X-Reply", "yes"]]);
  const r = h.run(() => http.send("put", URL, { headers: { "x-a": "1" }, body: "héllo", timeoutMs: 500 }));
  assert.deepEqual([r.status, r.text(), r.header("x-reply"), r.header("missing"), r.ok], [200, "fine", "yes", undefined, true]);
  const sent = h.http.requests.at(-1)!;
  assert.deepEqual([sent.method, sent.headers, [...sent.body], sent.text()], ["PUT", [["x-a", "1"]], [...new TextEncoder().encode("héllo")], "héllo"]);
  assert.throws(() => h.run(() => http.get(URL, { timeoutMs: 0 })), isHttpError("invalid", /timeoutMs must be positive/));
  assert.equal(new http.Response(404, [], new Uint8Array()).ok, false);
});

test("outside a harness or component http needs the host", () => {
  assert.throws(() => http.get(URL), /needs the host/);
});
