/**
 * kubediff-ts: a TypeScript kubediff-lite. Logs one JSON line per event:
 *
 *     {"event":"updated","apiVersion":"apps/v1","kind":"Deployment","namespace":"demo",
 *      "name":"web","changed":["/spec/replicas"]}
 *
 * `changed` (updates only) lists the JSON pointers of the leaves that differ between the old
 * and new object, sorted; `/metadata/resourceVersion` and `/metadata/managedFields` never count,
 * and with `ignore-status = true` nothing under `/status` does (an update that changed only
 * ignored paths logs nothing). Added, deleted and resync lines carry no `changed`.
 */
import { Plugin, log, type Event, type KubeObject } from "informant";

const ALWAYS_IGNORED = ["/metadata/resourceVersion", "/metadata/managedFields"];

/** The `[config]` table. */
interface Config {
  "ignore-status"?: boolean;
}

/** RFC 6901 escaping of one path segment. */
const segment = (k: string) => k.replace(/~/g, "~0").replace(/\//g, "~1");

/** The sorted JSON pointers of the leaves that differ from `a` to `b`, skipping `ignored` ones. */
export function changedPaths(a: unknown, b: unknown, ignored: (path: string) => boolean, path = ""): string[] {
  if (ignored(path)) return [];
  const isObj = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
  if (isObj(a) && isObj(b)) {
    const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
    return keys.flatMap((k) =>
      k in a && k in b ? changedPaths(a[k], b[k], ignored, `${path}/${segment(k)}`) : ignored(`${path}/${segment(k)}`) ? [] : [`${path}/${segment(k)}`],
    );
  }
  if (Array.isArray(a) && Array.isArray(b)) {
    const n = Math.max(a.length, b.length);
    const out: string[] = [];
    for (let i = 0; i < n; i++) {
      const p = `${path}/${i}`;
      if (i < a.length && i < b.length) out.push(...changedPaths(a[i], b[i], ignored, p));
      else if (!ignored(p)) out.push(p);
    }
    return out;
  }
  return JSON.stringify(a) === JSON.stringify(b) ? [] : [path];
}

/** The plugin instance. */
export default class KubeDiff extends Plugin {
  private readonly ignoreStatus: boolean;

  constructor(config: Config & Record<string, unknown>) {
    super(config);
    const unknown = Object.keys(config).filter((k) => k !== "ignore-status");
    if (unknown.length) throw new Error(`kubediff-ts config: unknown field \`${unknown[0]}\``);
    if (config["ignore-status"] !== undefined && typeof config["ignore-status"] !== "boolean") {
      throw new Error("kubediff-ts config: `ignore-status` must be true or false");
    }
    this.ignoreStatus = config["ignore-status"] ?? false;
  }

  private ignored = (path: string): boolean => {
    const under = (p: string) => path === p || path.startsWith(`${p}/`);
    return ALWAYS_IGNORED.some(under) || (this.ignoreStatus && under("/status"));
  };

  private line(ev: Event, extra: Record<string, unknown> = {}): void {
    const r = ev.resource;
    const m = ev.meta;
    log.info(
      JSON.stringify({
        event: ev.type,
        apiVersion: r.apiVersion,
        kind: r.kind,
        namespace: m.namespace ?? null,
        name: m.name,
        ...extra,
      }),
    );
  }

  override onAdded(ev: Event): void {
    this.line(ev);
  }

  override onDeleted(ev: Event): void {
    this.line(ev);
  }

  override onResync(ev: Event): void {
    this.line(ev);
  }

  override onUpdated(ev: Event): void {
    const changed = changedPaths(ev.oldObject as KubeObject, ev.object, this.ignored);
    if (changed.length) this.line(ev, { changed });
  }
}
