/**
 * Unit-test plugins natively with `node --test`: no cluster, no wasm runtime. A `Harness` owns
 * a plugin instance, an in-memory `MemCache`, the captured log, the writes and metric calls made and an `HttpStub`
 * answering outbound requests; while it runs the plugin, the SDK's `cache`, `log`, `kube`, `metrics` and
 * `http` calls go to them. Like the host, `send` first applies the event
 * to the cache (added, updated and resync store the object, deleted removes it); `admit`
 * answers an admission request built by `admissionRequest` (`testing-admission.ts`).
 */
import { readFileSync } from "node:fs";
import { AdmissionRequest, HTTP_REFUSED, WRITES_REFUSED, type Admission } from "./admission.js";
import { setBackend, type Backend, type Level, type MetricCallKind } from "./backend.js";
import { joinHeaders, type KubeObject } from "./cache.js";
import { HttpError, QueryError, Retry, WriteError } from "./errors.js";
import { Event, Meta, encodeHeader, type Source } from "./event.js";
import { Response, errorFor, type Request } from "./http.js";
import { answer, construct, dispatch, type Plugin, type PluginClass } from "./plugin.js";
import { Resource } from "./resource.js";
import { declares, type AdmissionRequestBuilder } from "./testing-admission.js";

export { AdmissionRequestBuilder, admissionRequest } from "./testing-admission.js";

/** The kind of an object (`apiVersion` and `kind` required). */
export function resourceOf(o: KubeObject): Resource {
  if (typeof o.apiVersion !== "string" || typeof o.kind !== "string") {
    throw new Error(`object has no apiVersion or kind: ${JSON.stringify(o).slice(0, 200)}`);
  }
  return Resource.fromApiVersion(o.apiVersion, o.kind);
}

/** The metadata the host would parse from `o`. */
export function metaOf(o: KubeObject): Meta {
  const m = o.metadata ?? {};
  if (!m.name) throw new Error(`object has no metadata.name: ${JSON.stringify(o).slice(0, 200)}`);
  return new Meta(m.namespace || undefined, m.name, m.uid ?? "", m.resourceVersion ?? "", new Map(Object.entries(m.labels ?? {})));
}

/** An object given as a plain object, answering as the host does for an event's object. */
export class ObjectSource implements Source {
  constructor(readonly obj: KubeObject) {}
  header(): Uint8Array {
    return encodeHeader(resourceOf(this.obj), metaOf(this.obj));
  }
  json(): string {
    return JSON.stringify(this.obj);
  }
}

/** An added event (`initial` for one from a replay). */
export const added = (o: KubeObject, initial = false) => new Event("added", new ObjectSource(o), undefined, initial);
/** An updated event from `old` to `now`. */
export const updated = (old: KubeObject, now: KubeObject) => new Event("updated", new ObjectSource(now), new ObjectSource(old));
/** A deleted event with `o` as the final state. */
export const deleted = (o: KubeObject, finalStateUnknown = false) =>
  new Event("deleted", new ObjectSource(o), undefined, false, finalStateUnknown);
/** A resync event. */
export const resync = (o: KubeObject) => new Event("resync", new ObjectSource(o));

const KEY = /^([A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const VALUE = /^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$/;
const REQ = /^\s*(?:!\s*(?<nkey>[^\s,!=()]+)|(?<key>[^\s,!=()]+)\s*(?:(?<op>==|=|!=)\s*(?<val>[^\s,!=()]*)|\s(?<set>in|notin)\s*\((?<vals>[^()]*)\))?)\s*$/;

type Requirement = (labels: Map<string, string>) => boolean;

/** Parses a Kubernetes label selector; throws a bad-selector `QueryError` naming the bad part. */
export function parseSelector(selector: string): Requirement[] {
  const parts: string[] = [];
  let depth = 0;
  let cur = "";
  for (const c of selector) {
    if (c === "(") depth++;
    if (c === ")") depth--;
    if (c === "," && depth === 0) {
      parts.push(cur);
      cur = "";
    } else cur += c;
  }
  parts.push(cur);
  return parts.map((p) => {
    const g = REQ.exec(p)?.groups;
    const key = g && (g.nkey ?? g.key);
    if (!g || !key || !KEY.test(key)) throw new QueryError("bad-selector", `label selector \`${selector}\`: cannot parse \`${p.trim()}\``);
    const values = g.op ? [g.val] : (g.vals ?? "").split(",").map((v) => v.trim());
    if ((g.op || g.set) && !values.every((v) => VALUE.test(v))) {
      throw new QueryError("bad-selector", `label selector \`${selector}\`: invalid value in \`${p.trim()}\``);
    }
    if (g.nkey) return (ls) => !ls.has(key);
    if (g.op === "=" || g.op === "==") return (ls) => ls.get(key) === values[0];
    if (g.op === "!=") return (ls) => ls.get(key) !== values[0];
    if (g.set === "in") return (ls) => values.includes(ls.get(key) as string);
    if (g.set === "notin") return (ls) => !values.includes(ls.get(key) as string);
    return (ls) => ls.has(key);
  });
}

const cacheKey = (r: Resource, ns: string | undefined, name: string) => `${r}|${ns ?? ""}|${name}`;

/**
 * The informer cache in memory, answering queries as the host does. Until a kind is declared
 * with `watch` (`Harness.fromManifest` declares the manifest's), every kind may be queried;
 * once one is, queries on undeclared kinds throw not-watched.
 */
export class MemCache {
  readonly objects = new Map<string, KubeObject>();
  readonly watched: Resource[] = [];
  private readonly indexes = new Map<string, (o: KubeObject) => string[]>();

  /** Declares a watched kind. */
  watch(r: Resource): this {
    this.watched.push(r);
    return this;
  }
  /** Declares index `name` on kind `r`: `fn` gives an object's values. */
  addIndex(r: Resource, name: string, fn: (o: KubeObject) => string[]): this {
    this.indexes.set(`${r}|${name}`, fn);
    return this;
  }
  /** Stores objects (replacing any with the same kind, namespace and name). */
  put(...objs: KubeObject[]): this {
    for (const o of objs) {
      const m = metaOf(o);
      this.objects.set(cacheKey(resourceOf(o), m.namespace, m.name), o);
    }
    return this;
  }
  /** Removes an object if present. */
  remove(o: KubeObject): void {
    const m = metaOf(o);
    this.objects.delete(cacheKey(resourceOf(o), m.namespace, m.name));
  }
  private check(r: Resource): void {
    if (this.watched.length && !this.watched.some((w) => w.equals(r))) {
      throw new QueryError("not-watched", `${r} is not watched by this plugin`);
    }
  }
  private of(r: Resource): KubeObject[] {
    return [...this.objects.entries()]
      .filter(([, o]) => resourceOf(o).equals(r))
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([, o]) => o);
  }
  /** One object as JSON. */
  get(r: Resource, namespace: string | undefined, name: string): string | undefined {
    this.check(r);
    const o = this.objects.get(cacheKey(r, namespace, name));
    return o && JSON.stringify(o);
  }
  /** Objects as JSON, by namespace and label selector. */
  list(r: Resource, namespace: string | undefined, selector: string | undefined): string[] {
    this.check(r);
    const reqs = selector ? parseSelector(selector) : [];
    return this.of(r)
      .filter((o) => {
        const m = metaOf(o);
        return (namespace === undefined || m.namespace === namespace) && reqs.every((q) => q(m.labels));
      })
      .map((o) => JSON.stringify(o));
  }
  /** Objects as JSON whose index has `value`; built-ins: namespace, label, owner. */
  byIndex(r: Resource, index: string, value: string): string[] {
    return this.indexed(r, index, value).map((o) => JSON.stringify(o));
  }
  /** What `byIndex` finds as the host sends it to `by-index-headers`: headers, length-prefixed. */
  byIndexHeaders(r: Resource, index: string, value: string): Uint8Array {
    return joinHeaders(this.indexed(r, index, value).map((o) => encodeHeader(r, metaOf(o))));
  }
  /** How many of what `byIndex` finds match the label selector (all when none). */
  countByIndex(r: Resource, index: string, value: string, selector: string | undefined): number {
    const reqs = selector ? parseSelector(selector) : [];
    return this.indexed(r, index, value).filter((o) => reqs.every((q) => q(metaOf(o).labels))).length;
  }
  private indexed(r: Resource, index: string, value: string): KubeObject[] {
    this.check(r);
    const builtin: Record<string, (o: KubeObject) => string[]> = {
      namespace: (o) => [metaOf(o).namespace ?? ""],
      label: (o) => [...metaOf(o).labels].map(([k, v]) => `${k}=${v}`),
      owner: (o) => (o.metadata?.ownerReferences ?? []).map((ref: KubeObject) => ref.uid ?? ""),
    };
    const fn = this.indexes.get(`${r}|${index}`) ?? builtin[index];
    if (!fn) throw new QueryError("unknown-index", `no index \`${index}\` is declared for ${r}`);
    return this.of(r).filter((o) => fn(o).includes(value));
  }
}

/**
 * `[scheme, lowercase host, port]` of a URL's authority (the scheme's default port when it
 * names none; `*` stays a wildcard).
 */
function origin(scheme: string, authority: string): [string, string, string] {
  let host = authority;
  let port = "";
  if (authority.startsWith("[")) {
    const end = authority.indexOf("]") + 1;
    host = authority.slice(0, end);
    const rest = authority.slice(end);
    port = rest.startsWith(":") ? rest.slice(1) : "";
  } else if (authority.includes(":")) {
    const at = authority.lastIndexOf(":");
    [host, port] = [authority.slice(0, at), authority.slice(at + 1)];
  }
  return [scheme, host.toLowerCase(), port || (scheme === "https" ? "443" : "80")];
}

/**
 * Outbound HTTP in tests: records each request and answers from canned responses. Nothing
 * leaves the process. A request to a URL with no canned response throws an `HttpError`, as
 * there is no host to send it through. With `allowed` set (a harness built from a manifest sets
 * its `allowed-outbound-hosts`), a request to an origin not listed throws a `denied` HttpError
 * and is not recorded, as on the host (which also refuses non-canonical spellings this stub does
 * not check).
 */
export class HttpStub {
  /** Every request sent (denied ones excepted), oldest first. */
  readonly requests: Request[] = [];
  /** Allowed origins (`scheme://host[:port]`, port `*` for any), or undefined: any. */
  allowed: string[] | undefined;
  private readonly answers = new Map<string, Response | string>();

  /**
   * Answers every request to `url` (matched exactly, query included) with `status` and `body`:
   * bytes, text (UTF-8), or any other value (sent as JSON).
   */
  respond(url: string, status = 200, body: unknown = "", headers: Array<[string, string]> = []): this {
    let bytes: Uint8Array;
    if (body instanceof Uint8Array) bytes = body;
    else if (typeof body === "string") bytes = new TextEncoder().encode(body);
    else {
      bytes = new TextEncoder().encode(JSON.stringify(body));
      headers = [...headers, ["content-type", "application/json"]];
    }
    this.answers.set(url, new Response(status, headers, bytes));
    return this;
  }

  /**
   * Fails every request to `url` with `wasi:http` error `code` (lowercase, e.g.
   * `connection-read-timeout`, which throws a `timeout` HttpError).
   */
  fail(url: string, code = "connection-refused"): this {
    this.answers.set(url, code);
    return this;
  }

  private allows(req: Request): boolean {
    if (this.allowed === undefined) return true;
    if (req.authority.includes("@")) return false;
    const [scheme, host, port] = origin(req.scheme, req.authority);
    return this.allowed.some((o) => {
      const at = o.indexOf("://");
      const [s, h, p] = origin(o.slice(0, at).toLowerCase(), o.slice(at + 3).replace(/\/$/, ""));
      return s === scheme && h === host && (p === "*" || p === port);
    });
  }

  /** The canned answer to `req`, after recording it. */
  send(req: Request): Response {
    if (!this.allows(req)) throw errorFor(req, "http-request-denied");
    this.requests.push(req);
    const answer = this.answers.get(req.url);
    if (answer === undefined) {
      throw new HttpError(
        "failed",
        `${req.method} ${req.url}: not sent: outbound HTTP needs the host, and the test harness has none (give it a canned answer with harness.http.respond)`,
      );
    }
    if (typeof answer === "string") throw errorFor(req, answer);
    return answer;
  }
}

/** Drives one plugin instance the way the host does, against an in-memory cache. */
export class Harness<P extends Plugin = Plugin> {
  plugin: P;
  logs: Array<[Level, string]> = [];
  /**
   * Every write the plugin made, oldest first: `verb` (create, apply, apply-forced, patch-merge,
   * patch-json, patch-strategic, delete, update-status, record-event), the kind, namespace,
   * name and body (object, patch, preconditions or Event) as parsed JSON.
   */
  writes: Array<{ verb: string; resource: Resource; namespace?: string; name?: string; body: any }> = [];
  /** Every `metrics` call, oldest first (accepted: the host's rules are not checked here). */
  metrics: MetricCall[] = [];
  /**
   * The manifest's `[[write]]` tables when built from one: writes outside them throw a `denied`
   * WriteError as on the host. Undefined: anything goes.
   */
  declared: Array<Record<string, any>> | undefined;
  /** Outbound HTTP: the requests the plugin sent and the canned answers it gets. */
  readonly http = new HttpStub();
  /**
   * The manifest's `[[schedule]]` names when built from one: `tick` refuses others, as the host
   * never ticks them. Undefined: any name.
   */
  schedules: string[] | undefined;
  /**
   * The manifest's `[[admit]]` tables when built from one: `admit` refuses a request none of
   * them takes, as the host never sends one. Undefined: any request.
   */
  admits: Array<Record<string, any>> | undefined;
  /** Whether `send` applies each event to the cache first. */
  applyToCache = true;
  private readonly configJson: string;
  /** Inside `admit`: writes and HTTP are refused, as the host refuses them. */
  private admitting = false;

  constructor(
    readonly cls: new (config: Record<string, any>) => P,
    config: Record<string, any> = {},
    readonly cache: MemCache = new MemCache(),
  ) {
    this.configJson = JSON.stringify(config);
    this.plugin = this.run(() => construct(cls as PluginClass, this.configJson) as P);
  }

  /**
   * Builds the plugin from a manifest's `[config]` (given as parsed TOML, e.g. `{config, watch}`),
   * whose watched kinds become the only ones the cache answers for, its `write` tables the only
   * writes allowed, and its `allowed-outbound-hosts` the only origins `http` reaches.
   */
  static fromManifest<P extends Plugin>(
    cls: new (config: Record<string, any>) => P,
    manifest: {
      config?: Record<string, any>;
      watch?: Array<Record<string, string>>;
      write?: Array<Record<string, any>>;
      "allowed-outbound-hosts"?: string[];
      schedule?: Array<Record<string, string>>;
      admit?: Array<Record<string, any>>;
    },
  ): Harness<P> {
    const cache = new MemCache();
    for (const w of manifest.watch ?? []) cache.watch(Resource.fromApiVersion(w["api-version"], w.kind));
    const h = new Harness(cls, manifest.config ?? {}, cache);
    h.declared = manifest.write ?? [];
    h.http.allowed = [...(manifest["allowed-outbound-hosts"] ?? [])];
    h.schedules = (manifest.schedule ?? []).map((s) => s.name);
    h.admits = manifest.admit ?? [];
    return h;
  }

  /** Records a write, refusing it as the host would when the manifest does not declare it. */
  private record(verb: string, r: Resource, namespace: string | undefined, name: string | undefined, body: string): string {
    if (this.admitting) throw new WriteError("denied", WRITES_REFUSED);
    if (this.declared) {
      let needs = verb === "record-event" ? "create" : verb === "apply-forced" ? "apply" : verb;
      if (needs.startsWith("patch-")) needs = "patch";
      const allows = (w: Record<string, any>) => {
        const spaces: string[] | undefined = w.namespaces ?? (w.namespace ? [w.namespace] : undefined);
        const k = Resource.fromApiVersion(w["api-version"], w.kind);
        return (
          k.group === r.group &&
          k.version === r.version &&
          k.kind === r.kind &&
          (w.verbs ?? []).includes(needs) &&
          (spaces === undefined || (namespace !== undefined && spaces.includes(namespace)))
        );
      };
      if (!this.declared.some(allows)) {
        const where = namespace ? ` in namespace \`${namespace}\`` : "";
        throw new WriteError(
          "denied",
          `\`${needs}\` of \`${r.apiVersion}/${r.kind}\`${where} is not declared in the manifest's [[write]] tables`,
        );
      }
    }
    this.writes.push({ verb, resource: r, namespace, name, body: JSON.parse(body) });
    return body;
  }

  /**
   * Calls `f` with the SDK's calls routed to this harness, as they are while it runs the
   * plugin: for testing a plugin's helpers outside a handler.
   */
  run<T>(f: () => T): T {
    const me: Backend = {
      get: (r, ns, name) => this.cache.get(r, ns, name),
      list: (r, ns, sel) => this.cache.list(r, ns, sel),
      byIndex: (r, i, v) => this.cache.byIndex(r, i, v),
      byIndexHeaders: (r, i, v) => this.cache.byIndexHeaders(r, i, v),
      countByIndex: (r, i, v, sel) => this.cache.countByIndex(r, i, v, sel),
      log: (level, message) => void this.logs.push([level, message]),
      create: (r, ns, obj) => this.record("create", r, ns, undefined, obj),
      apply: (r, ns, name, obj, force) => this.record(force ? "apply-forced" : "apply", r, ns, name, obj),
      patch: (r, ns, name, kind, p) => {
        this.record(`patch-${kind}`, r, ns, name, p);
        // The object as stored is the host's to say; the cache's copy stands in for it.
        return this.cache.get(r, ns, name) ?? "{}";
      },
      delete: (r, ns, name, uid, resourceVersion) =>
        void this.record("delete", r, ns, name, JSON.stringify({ uid, resourceVersion })),
      updateStatus: (r, ns, name, obj) => this.record("update-status", r, ns, name, obj),
      recordEvent: (ref, warning, reason, action, note) => {
        const body = JSON.stringify({
          type: warning ? "Warning" : "Normal",
          reason,
          action,
          note,
          regarding: { apiVersion: ref.kind.apiVersion, kind: ref.kind.kind, namespace: ref.namespace, name: ref.name, uid: ref.uid },
        });
        this.record("record-event", new Resource("events.k8s.io", "v1", "Event"), ref.namespace ?? "default", undefined, body);
      },
      httpSend: (request) => {
        if (this.admitting) throw new HttpError("denied", `${request.method} ${request.url}: ${HTTP_REFUSED}`);
        return this.http.send(request);
      },
      metric: (call, name, help, labels, group, _buckets, value) =>
        void this.metrics.push({ call, name, help, labels: sortedPairs(labels), group, value }),
      metricDelete: (name, labels) => {
        const sorted = sortedPairs(labels);
        const existed = this.live().has(seriesKey(name, sorted));
        this.metrics.push({ call: "delete", name, help: "", labels: sorted, group: undefined, value: 0 });
        return existed;
      },
      metricDeleteGroup: (group) => {
        const n = [...this.live().values()].filter((g) => g === group).length;
        this.metrics.push({ call: "delete-group", name: "", help: "", labels: [], group, value: 0 });
        return n;
      },
    };
    const previous = setBackend(me);
    try {
      return f();
    } finally {
      setBackend(previous);
    }
  }

  /**
   * Applies the event to the cache (see `applyToCache`) and hands it to the plugin. The
   * plugin's exceptions propagate; a `Retry` is returned, as the host would schedule it.
   */
  send(ev: Event): Retry | undefined {
    if (this.applyToCache) {
      if (ev.type === "deleted") this.cache.remove(ev.object);
      else this.cache.put(ev.object);
    }
    try {
      this.run(() => dispatch(this.plugin, ev));
    } catch (e) {
      if (e instanceof Retry) return e;
      throw e;
    }
    return undefined;
  }

  /**
   * Ticks the schedule `name` as the host's timer does: `onSchedule` with this harness's cache
   * and log. The plugin's exceptions propagate (the host would count the tick as an error); a
   * name the manifest does not declare throws.
   */
  tick(name: string): void {
    if (this.schedules && !this.schedules.includes(name)) {
      throw new Error(`schedule \`${name}\` is not declared in the manifest's [[schedule]] tables`);
    }
    this.run(() => this.plugin.onSchedule(name));
  }

  /**
   * Answers one admission request as the host's webhook server does: `admit` on the instance,
   * reading the harness's cache (the request's object is not stored: admission comes before the
   * write). Writes throw a `denied` WriteError with the host's message, and HTTP a `denied`
   * HttpError, neither recorded. The plugin's exceptions propagate (the host would apply the
   * table's failure policy).
   *
   * A harness built from a manifest refuses a request whose kind and operation none of its
   * `[[admit]]` tables takes (the host never sends one), and names the table that takes it in
   * `req.hook` unless the request names one. The answer is the plugin's as it is: the host's
   * checks of it (a validating table's patch, a patch that renames the object, the bounds on
   * warnings) are not made here.
   */
  admit(request: AdmissionRequestBuilder | AdmissionRequest): Admission {
    let wire = request instanceof AdmissionRequest ? request.wire : request.toWit();
    if (this.admits) {
      const table = this.admits.find((t) => (!wire.hook || t.name === wire.hook) && declares(t, wire));
      if (!table) {
        const kind = new Resource(wire.kind.group, wire.kind.version, wire.kind.kind);
        throw new Error(`no [[admit]] table of the manifest admits ${wire.operation.toUpperCase()} of ${kind}`);
      }
      wire = { ...wire, hook: table.name };
    }
    const req = new AdmissionRequest(wire);
    this.admitting = true;
    try {
      return this.run(() => answer(this.plugin, req));
    } finally {
      this.admitting = false;
    }
  }

  /** Replaces the instance with a fresh one from the same config, as after a trap. */
  restart(): void {
    this.plugin = this.run(() => construct(this.cls as PluginClass, this.configJson) as P);
  }

  /** The series written and not deleted since, by the recorded calls, to their latest group. */
  private live(): Map<string, string | undefined> {
    const live = new Map<string, string | undefined>();
    for (const c of this.metrics) {
      const key = seriesKey(c.name, c.labels);
      if (c.call === "delete") live.delete(key);
      else if (c.call === "delete-group") {
        for (const [k, g] of [...live]) if (g === c.group) live.delete(k);
      } else live.set(key, c.group);
    }
    return live;
  }

  /**
   * A counter's total or a gauge's last value over the recorded calls since the series was last
   * deleted; `undefined` if it has none.
   */
  metricValue(name: string, labels: Record<string, string> = {}): number | undefined {
    const key = seriesKey(name, sortedPairs(Object.entries(labels)));
    if (!this.live().has(key)) return undefined;
    let value: number | undefined;
    for (const c of this.metrics) {
      if (seriesKey(c.name, c.labels) !== key) continue;
      if (c.call === "counter-add") value = (value ?? 0) + c.value;
      else if (c.call === "gauge-set") value = c.value;
      else if (c.call === "delete") value = undefined;
    }
    return value;
  }

  /** The captured log lines, clearing them. */
  takeLogs(): Array<[Level, string]> {
    const out = this.logs;
    this.logs = [];
    return out;
  }
}

/** Reads a text file relative to a test module (`import.meta.url`), e.g. a manifest. */
export function readBeside(moduleUrl: string, path: string): string {
  return readFileSync(new URL(path, moduleUrl), "utf8");
}

/** One `metrics` call a plugin made, as the harness recorded it. */
export interface MetricCall {
  call: MetricCallKind | "delete" | "delete-group";
  /** Empty for `delete-group`. */
  name: string;
  help: string;
  /** Label pairs, sorted by name. */
  labels: Array<[string, string]>;
  group: string | undefined;
  /** Added, set or observed (0 for deletes). */
  value: number;
}

const sortedPairs = (pairs: Array<[string, string]>): Array<[string, string]> =>
  [...pairs].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));

const seriesKey = (name: string, labels: Array<[string, string]>) => JSON.stringify([name, labels]);
