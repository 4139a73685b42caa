/** A Kubernetes kind: `group` is empty for the core group (`v1`). */
export class Resource {
  constructor(
    readonly group: string,
    readonly version: string,
    readonly kind: string,
  ) {}

  /** `Resource.fromApiVersion("apps/v1", "Deployment")`, as a manifest's watch names it. */
  static fromApiVersion(apiVersion: string, kind: string): Resource {
    const i = apiVersion.lastIndexOf("/");
    const [group, version] = i < 0 ? ["", apiVersion] : [apiVersion.slice(0, i), apiVersion.slice(i + 1)];
    if (!version) throw new Error(`api version \`${apiVersion}\` names no version`);
    return new Resource(group, version, kind);
  }

  /** `v1` for the core group, `group/version` otherwise. */
  get apiVersion(): string {
    return this.group ? `${this.group}/${this.version}` : this.version;
  }

  /** Same group, version and kind. */
  equals(o: Resource): boolean {
    return this.group === o.group && this.version === o.version && this.kind === o.kind;
  }

  toString(): string {
    return `${this.apiVersion}/${this.kind}`;
  }
}
