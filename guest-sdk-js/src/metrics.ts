/**
 * Metrics on the host's `/metrics`: counters, gauges and histograms, exported as
 * `informant_plugin_NAME` (a tenant's plugin: `informant_tenant_TENANT__NAME`) with the host's
 * `plugin` and `tenant` labels added.
 *
 * ```ts
 * metrics.counter("violations", "Objects breaking the policy.").labels({ kind: "Deployment" }).add(1);
 * metrics.gauge("queue_depth", "Items waiting.").set(4);
 * metrics.histogram("payload_bytes", "Payload sizes.", [1e3, 1e4]).observe(2048);
 * ```
 *
 * The host checks every call that would create a series (names by Prometheus's rules; labels
 * other than `plugin`, `tenant` and `__*`; one type per name; the plugin's series ceiling) and
 * throws a `MetricError` naming the rule; a refused call changes nothing. In tests the
 * `Harness` records the calls (`h.metrics`) and accepts them.
 */
import { backend, type MetricCallKind } from "./backend.js";
import { MetricError } from "./errors.js";

export type { MetricCallKind };

/** One series to write; `labels` and `group` return a new one. */
export class Metric {
  constructor(
    private readonly call: MetricCallKind,
    readonly name: string,
    readonly help: string,
    readonly labelPairs: Array<[string, string]> = [],
    readonly groupName: string | undefined = undefined,
    readonly buckets: number[] = [],
  ) {}

  /** The series with these labels (added to any given before). */
  labels(labels: Record<string, string>): Metric {
    const pairs = [...this.labelPairs, ...Object.entries(labels).map(([k, v]) => [k, String(v)] as [string, string])];
    return new Metric(this.call, this.name, this.help, pairs, this.groupName, this.buckets);
  }

  /** The series in `group`: `deleteGroup` removes a group's series at once. */
  group(group: string): Metric {
    return new Metric(this.call, this.name, this.help, this.labelPairs, group, this.buckets);
  }

  private write(call: MetricCallKind, value: number): void {
    if (call !== this.call) {
      throw new MetricError("type-conflict", `metric \`${this.name}\`: made for ${this.call}, written by ${call}`);
    }
    backend().metric(call, this.name, this.help, this.labelPairs, this.groupName, this.buckets, value);
  }

  /** Adds `value` (finite, not negative) to a counter. */
  add(value = 1): void {
    this.write("counter-add", value);
  }

  /** Adds one to a counter. */
  inc(): void {
    this.add(1);
  }

  /** Sets a gauge. */
  set(value: number): void {
    this.write("gauge-set", value);
  }

  /** Counts one observation into a histogram. */
  observe(value: number): void {
    this.write("histogram-observe", value);
  }
}

/** A counter: only goes up. */
export const counter = (name: string, help = "") => new Metric("counter-add", name, help);

/** A gauge: set to any finite value. */
export const gauge = (name: string, help = "") => new Metric("gauge-set", name, help);

/**
 * A histogram with these bucket upper bounds (ascending; Prometheus's defaults when none), fixed
 * by the metric's first use.
 */
export const histogram = (name: string, help = "", buckets: number[] = []) =>
  new Metric("histogram-observe", name, help, [], undefined, buckets);

/** Removes one series; whether it existed. */
export function deleteSeries(name: string, labels: Record<string, string> = {}): boolean {
  return backend().metricDelete(name, Object.entries(labels).map(([k, v]) => [k, String(v)]));
}

/** Removes every series of `group`; how many there were. */
export function deleteGroup(group: string): number {
  return backend().metricDeleteGroup(group);
}

export { MetricError };
