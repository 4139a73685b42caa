/**
 * Informant's JavaScript/TypeScript SDK: event hooks for Kubernetes objects as WebAssembly
 * plugins. A plugin's `src/plugin.ts` exports one `Plugin` subclass as `default`; the build
 * (`build.mjs`) bundles it with this SDK and componentizes it for the contract in `wit/`.
 * Natively, `testing.ts` runs the same class against an in-memory cache under `node --test`.
 * A plugin whose manifest has `[[admit]]` tables answers admission requests from `admit`
 * (`admission.ts`).
 */
export {
  Admission,
  AdmissionRequest,
  PatchOp,
  jsonPointer,
  type GroupVersionResource,
  type Operation,
  type UserInfo,
} from "./admission.js";
export * as cache from "./cache.js";
export * as http from "./http.js";
export * as kube from "./kube.js";
export * as log from "./log.js";
export * as metrics from "./metrics.js";
export type { KubeObject } from "./cache.js";
export { HttpError, MetricError, QueryError, Retry, WriteError } from "./errors.js";
export { Event, Meta, type EventType } from "./event.js";
export { Plugin, type PluginClass } from "./plugin.js";
export { Resource } from "./resource.js";
