/**
 * A TypeScript test plugin whose config `mode` picks its behaviour; the e2e tests install it
 * under several names.
 *
 * - `echo`: logs one JSON line per event (`tag`, `event`, `key`, `cached`: whether `cache.get`
 *   finds the object, `value`), so tests see every event and a cache query round trip;
 * - `raise`: like echo, but throws a TypeError for objects labelled `boom` (a failed event).
 */
import { Plugin, cache, log, type Event } from "informant";

export default class Hostile extends Plugin {
  private readonly mode: string;
  private readonly tag: string;

  constructor(config: Record<string, any>) {
    super(config);
    this.mode = config.mode ?? "echo";
    if (!["echo", "raise"].includes(this.mode)) throw new Error(`unknown mode \`${this.mode}\``);
    this.tag = config.tag ?? this.mode;
  }

  private on(ev: Event): void {
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
