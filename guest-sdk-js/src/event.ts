/**
 * Events: the kind and metadata without a JSON parse, the object parsed on demand.
 *
 * The header's bytes (`parseHeader`, `encodeHeader`) are defined once, in the Rust crate
 * `informant-header` (`crates/header/src/lib.rs`: the layout, its contract version and its
 * tests); this module follows that definition.
 */
import { Resource } from "./resource.js";
import type { KubeObject } from "./cache.js";

/** What happened to the object. */
export type EventType = "added" | "updated" | "deleted" | "resync";

/** An object as the host (or the harness) holds it: its header and its JSON. */
export interface Source {
  header(): Uint8Array;
  json(): string;
}

/** The metadata most plugins need, parsed by the host. */
export class Meta {
  constructor(
    readonly namespace: string | undefined,
    readonly name: string,
    readonly uid: string,
    readonly resourceVersion: string,
    readonly labels: Map<string, string>,
  ) {}

  /** The value of label `key`, if set. */
  label(key: string): string | undefined {
    return this.labels.get(key);
  }

  /** `namespace/name`, or `name` for a cluster-scoped object. */
  get key(): string {
    return this.namespace ? `${this.namespace}/${this.name}` : this.name;
  }
}

const utf8 = new TextDecoder("utf-8", { fatal: true });
const utf8Out = new TextEncoder();

/**
 * The parts of `raw`, each after its length as a little-endian u32 (the contract's encoding of a
 * header's fields, and of `by-index-headers`' headers); a malformed `raw` throws, its message
 * starting with `what` and calling the parts `part` and the whole `whole`.
 */
export function splitPrefixed(raw: Uint8Array, what: string, part: string, whole: string): Uint8Array[] {
  const view = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
  const out: Uint8Array[] = [];
  let at = 0;
  while (at < raw.length) {
    if (at + 4 > raw.length) throw new Error(`${what}: truncated length at byte ${at}`);
    const n = view.getUint32(at, true);
    at += 4;
    if (at + n > raw.length) throw new Error(`${what}: ${part} of ${n} bytes overruns the ${whole} at byte ${at}`);
    out.push(raw.subarray(at, at + n));
    at += n;
  }
  return out;
}

/** `parts`, each after its length as a little-endian u32. */
export function joinPrefixed(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + 4 + p.length, 0));
  const view = new DataView(out.buffer);
  let at = 0;
  for (const p of parts) {
    view.setUint32(at, p.length, true);
    out.set(p, at + 4);
    at += 4 + p.length;
  }
  return out;
}

/** Decodes the contract's `header` encoding; throws on a malformed header. */
export function parseHeader(raw: Uint8Array): [Resource, Meta] {
  const fields = splitPrefixed(raw, "object header", "field", "header").map((f) => utf8.decode(f));
  if (fields.length < 7 || (fields.length - 7) % 2) {
    throw new Error(`object header: ${fields.length} fields, expected 7 plus label pairs`);
  }
  const [group, version, kind, namespace, name, uid, rv] = fields;
  const labels = new Map<string, string>();
  for (let i = 7; i < fields.length; i += 2) labels.set(fields[i], fields[i + 1]);
  return [new Resource(group, version, kind), new Meta(namespace || undefined, name, uid, rv, labels)];
}

/** The contract's `header` encoding of a kind and metadata (labels sorted by key). */
export function encodeHeader(r: Resource, m: Meta): Uint8Array {
  const fields = [r.group, r.version, r.kind, m.namespace ?? "", m.name, m.uid, m.resourceVersion];
  for (const k of [...m.labels.keys()].sort()) fields.push(k, m.labels.get(k)!);
  return joinPrefixed(fields.map((f) => utf8Out.encode(f)));
}

/** One object: header and JSON fetched from the source on first use, then kept. */
class Lazy {
  private head?: [Resource, Meta];
  private text?: string;
  private parsed?: KubeObject;
  constructor(readonly src: Source) {}
  header(): [Resource, Meta] {
    return (this.head ??= parseHeader(this.src.header()));
  }
  json(): string {
    return (this.text ??= this.src.json());
  }
  object(): KubeObject {
    return (this.parsed ??= JSON.parse(this.json()));
  }
}

/**
 * One event for one plugin. `resource` and `meta` are decoded from the header the event brought
 * (no host call, no JSON parse); `object` copies the JSON in and parses it on first use only. Valid during the handler call
 * it came with: the host answers for the event in hand, and reading a kept event later traps.
 */
export class Event {
  private readonly obj: Lazy;
  private readonly old?: Lazy;
  constructor(
    readonly type: EventType,
    obj: Source,
    old?: Source,
    readonly initial = false,
    readonly finalStateUnknown = false,
  ) {
    this.obj = new Lazy(obj);
    this.old = old && new Lazy(old);
  }
  /** The object's kind. */
  get resource(): Resource {
    return this.obj.header()[0];
  }
  /** The object's metadata (for deleted: its final or last known state). */
  get meta(): Meta {
    return this.obj.header()[1];
  }
  /** For updated: the previous version's metadata. */
  get oldMeta(): Meta | undefined {
    return this.old?.header()[1];
  }
  /** The object as JSON. */
  get json(): string {
    return this.obj.json();
  }
  /** For updated: the previous version as JSON. */
  get oldJson(): string | undefined {
    return this.old?.json();
  }
  /** The object, parsed on first use. */
  get object(): KubeObject {
    return this.obj.object();
  }
  /** For updated: the previous version, parsed on first use. */
  get oldObject(): KubeObject | undefined {
    return this.old?.object();
  }
}
