#!/usr/bin/env python3
"""Render (and lint) a chart with Helm's own Go engine, without a helm binary.

helm-python-sdk (PyPI) bundles libhelm_c, a C ABI over Helm v4's Go SDK, so this renders exactly
what `helm template` would: Go templates, Sprig, include/tpl/required/fail, values.schema.json.

    pip install helm-python-sdk==0.2.2
    python3 deploy/helm/render.py deploy/helm/informant RELEASE NAMESPACE [VALUES_JSON] [--json]

Prints the manifests as `helm template` does, or with --json one object:
{"manifests": {template path: text}, "lint": {"messages": [...], "errors": [...]}}.
A values or template error exits 1 with Helm's message on stderr.
"""

import json
import sys

try:
    import helm_python as helm
except ImportError:
    sys.exit("render.py needs helm-python-sdk: pip install helm-python-sdk==0.2.2")


def main(argv):
    as_json = "--json" in argv
    args = [a for a in argv if a != "--json"]
    if len(args) not in (3, 4):
        sys.exit(__doc__)
    chart_dir, release, namespace = args[:3]
    values = json.loads(args[3]) if len(args) == 4 else {}
    try:
        with helm.Chart.load(chart_dir) as chart:
            # `helm template` and `helm install` check values.schema.json before rendering.
            chart.validate_schema(values)
            manifests = chart.render(values, name=release, namespace=namespace, is_install=True)
        lint = helm.lint(chart_dir, values, strict=True, namespace=namespace)
    except helm.HelmError as e:
        sys.exit(f"{chart_dir}: {e}")
    if as_json:
        json.dump({"manifests": manifests, "lint": lint}, sys.stdout)
        return
    for path in sorted(manifests):
        if path.endswith("NOTES.txt") or not manifests[path].strip():
            continue
        print(f"---\n# Source: {path}\n{manifests[path].strip()}")


if __name__ == "__main__":
    main(sys.argv[1:])
