/**
 * image-policy-ts: the TypeScript port of `plugins/image-policy`. Admits Deployments and Pods
 * only with images from allowed registries, and labels them with their namespace's team.
 *
 * Config:
 * - `allowed-registries = ["registry.example.com", "ghcr.io/example"]` (at least one): where
 *   images may come from, each a registry host or a host and a path. An image is admitted when
 *   its repository is an entry or lies under one: `ghcr.io/example` admits
 *   `ghcr.io/example/app:1.2`, not `ghcr.io/example-evil/app`. Images are read as the container
 *   runtime reads them: `nginx` is `docker.io/library/nginx`, `acme/app` is `docker.io/acme/app`,
 *   so `docker.io/library` admits Docker Hub's official images.
 * - `team-label = "team"` (optional): a label copied from the object's Namespace (read from the
 *   cache: the manifest watches Namespaces) onto an object that does not carry it.
 *
 * The manifest's tables are told apart by name (`req.hook`): those named `team-...` are mutating
 * and only label, every other one validates and never patches (a validating table's patch is an
 * error).
 *
 * Validation: a create or update of a Deployment (its pod template) or a Pod whose containers,
 * init containers or ephemeral containers use an image from elsewhere is denied (403), naming
 * each:
 *
 *     images not from an allowed registry (registry.example.com, ghcr.io/example): container `web` uses `nginx:1.27`
 *
 * An admitted image without a tag or digest, or tagged `latest`, passes with a warning (the
 * client shows it). Subresource requests (`status`, `scale`, ...) are allowed untouched, except
 * `ephemeralcontainers`, which adds images.
 *
 * Labelling: with `team-label`, a created or updated object without that label in a namespace
 * that has it gets it, by a JSON Patch (`add /metadata/labels/team`, or `/metadata/labels` on an
 * object with none). An object that has the label keeps its value; a namespace without it (or
 * not cached yet) leaves the object unchanged. Kubernetes calls mutating hooks first, so the
 * validating call sees the object labelled.
 */
import { Admission, AdmissionRequest, PatchOp, Plugin, Resource, cache, jsonPointer, type KubeObject } from "informant";

const NAMESPACE = new Resource("", "v1", "Namespace");

/** The prefix of the mutating tables' names in the manifest. */
const LABEL_HOOKS = "team-";

/** The `[config]` table, as the manifest should give it (checked when the plugin is built). */
interface Config {
  "allowed-registries": string[];
  "team-label"?: string;
}

/** The plugin: the config, checked. It keeps no state between requests. */
export default class ImagePolicy extends Plugin {
  private readonly allowed: string[];
  private readonly teamLabel: string | undefined;

  constructor(config: Partial<Config> & Record<string, unknown>) {
    super(config);
    const unknown = Object.keys(config).filter((k) => k !== "allowed-registries" && k !== "team-label");
    if (unknown.length) throw new Error(`image-policy-ts config: unknown field \`${unknown[0]}\``);
    const registries = config["allowed-registries"];
    if (!Array.isArray(registries) || !registries.length || !registries.every((r) => typeof r === "string" && r.replace(/\/+$/, ""))) {
      throw new Error("image-policy-ts config: `allowed-registries` needs at least one registry, none empty");
    }
    this.allowed = registries.map((r: string) => r.replace(/\/+$/, ""));
    const label = config["team-label"];
    if (label !== undefined && (typeof label !== "string" || !label)) {
      throw new Error("image-policy-ts config: `team-label` must be a non-empty string");
    }
    this.teamLabel = label;
  }

  override admit(req: AdmissionRequest): Admission {
    if (req.operation !== "create" && req.operation !== "update") return Admission.allow();
    if (req.hook.startsWith(LABEL_HOOKS)) return this.label(req);
    if (req.subResource !== "" && req.subResource !== "ephemeralcontainers") return Admission.allow();
    const spec = podSpec(req);
    if (!spec) return Admission.allow();
    const refused: string[] = [];
    const warnings: string[] = [];
    for (const [container, image] of images(spec)) {
      if (!this.admits(image)) refused.push(`container \`${container}\` uses \`${image}\``);
      else if (!pinned(image)) {
        warnings.push(`container \`${container}\`: image \`${image}\` is not pinned (no tag, or \`latest\`); a digest or a version tag says what runs`);
      }
    }
    if (refused.length) {
      return Admission.deny(`images not from an allowed registry (${this.allowed.join(", ")}): ${refused.join("; ")}`);
    }
    return warnings.reduce((answer, w) => answer.warn(w), Admission.allow());
  }

  /** Whether `image` comes from an allowed registry. */
  admits(image: string): boolean {
    const repo = repository(image);
    return this.allowed.some((entry) => repo === entry || repo.startsWith(`${entry}/`));
  }

  /** A mutating table's answer: the namespace's team label added when the object lacks it. */
  private label(req: AdmissionRequest): Admission {
    const label = this.teamLabel;
    if (!label || !req.namespace || req.subResource !== "") return Admission.allow();
    if (req.meta.label(label) !== undefined) return Admission.allow();
    const team = cache.get(NAMESPACE, req.namespace)?.metadata?.labels?.[label];
    if (typeof team !== "string") return Admission.allow();
    // The header's labels are the object's: none means no `labels` map to add into.
    const op = req.meta.labels.size
      ? PatchOp.add(jsonPointer(["metadata", "labels", label]), team)
      : PatchOp.add("/metadata/labels", { [label]: team });
    return Admission.patch([op]);
  }
}

/** The pod spec of a Pod or of a Deployment's template; `undefined` for other kinds. */
function podSpec(req: AdmissionRequest): KubeObject | undefined {
  const { group, kind } = req.kind;
  if (group === "" && kind === "Pod") return req.object?.spec;
  if (group === "apps" && kind === "Deployment") return req.object?.spec?.template?.spec;
  return undefined;
}

/** Each container's name and image: containers, init containers, ephemeral containers. */
export function images(spec: KubeObject): Array<[string, string]> {
  const all: KubeObject[] = [...(spec.containers ?? []), ...(spec.initContainers ?? []), ...(spec.ephemeralContainers ?? [])];
  return all.filter((c) => typeof c.image === "string").map((c) => [String(c.name), c.image]);
}

/**
 * The repository an image names, as the container runtime resolves it: without its tag and
 * digest, the registry host added when it has none (`docker.io`, and `library/` for a bare
 * name).
 */
export function repository(image: string): string {
  let name = image.split("@")[0];
  // A tag is a `:` after the last `/` (before it, a `:` is a registry's port).
  const colon = name.lastIndexOf(":");
  if (colon >= 0 && !name.slice(colon).includes("/")) name = name.slice(0, colon);
  const slash = name.indexOf("/");
  if (slash < 0) return `docker.io/library/${name}`;
  const host = name.slice(0, slash);
  return host.includes(".") || host.includes(":") || host === "localhost" ? name : `docker.io/${name}`;
}

/** Whether `image` says exactly what runs: a digest, or a tag other than `latest`. */
export function pinned(image: string): boolean {
  if (image.includes("@")) return true;
  const last = image.slice(image.lastIndexOf("/") + 1);
  const colon = last.indexOf(":");
  return colon >= 0 && last.slice(colon + 1) !== "latest";
}
