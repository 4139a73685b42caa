"""Builds a Python plugin into a component:  python build.py PLUGIN_DIR OUT.wasm [--wit WIT_DIR]

PLUGIN_DIR/plugin.py defines one ``informant.Plugin`` subclass. componentize-py (run from this
interpreter's environment) generates the bindings from ``wit/`` and packs the plugin, the SDK and
a small entry module into a component. Writes OUT.wasm only on success.

Every plugin is built for the ``admitting-plugin`` world (the ``plugin`` world plus the
``admission-hook`` export, which the host calls only for a manifest with ``[[admit]]`` tables),
as the Rust and TypeScript SDKs build them; a WIT without that world (an older contract given
with --wit) gets the ``plugin`` world.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

SDK = os.path.dirname(os.path.abspath(__file__))
ENTRY = "import plugin as _plugin\nfrom informant import _guest\n\nWitWorld = _guest.world(_plugin)\n"
# An exported interface is a class named after it, in UpperCamelCase.
ENTRY_ADMIT = "AdmissionHook = _guest.admission_hook(WitWorld)\n"
_ADMITTING = re.compile(r"^\s*world\s+admitting-plugin\s*\{", re.M)


def world_of(wit: str) -> str:
    """``admitting-plugin`` when the contract in ``wit`` (a directory) has it, else ``plugin``."""
    for name in sorted(os.listdir(wit)):
        if name.endswith(".wit"):
            with open(os.path.join(wit, name), encoding="utf-8") as f:
                if _ADMITTING.search(f.read()):
                    return "admitting-plugin"
    return "plugin"


def main() -> int:
    """Parses the arguments, builds, and returns componentize-py's exit status."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("plugin_dir")
    p.add_argument("out")
    p.add_argument("--wit", default=os.path.join(SDK, "..", "wit"))
    args = p.parse_args()
    if not os.path.isfile(os.path.join(args.plugin_dir, "plugin.py")):
        print(f"build.py: {args.plugin_dir} has no plugin.py", file=sys.stderr)
        return 2
    exe = os.path.join(os.path.dirname(sys.executable), "componentize-py")
    partial = args.out + ".partial"
    world = world_of(args.wit)
    with tempfile.TemporaryDirectory(prefix="informant-py-") as entry:
        with open(os.path.join(entry, "informant_main.py"), "w") as f:
            f.write(ENTRY + (ENTRY_ADMIT if world == "admitting-plugin" else ""))
        cmd = [exe, "-d", args.wit, "-w", world, "componentize", "-p", entry, "-p", SDK,
               "-p", args.plugin_dir, "informant_main", "-o", partial]
        code = subprocess.call(cmd, stdout=subprocess.DEVNULL)
    if code != 0:
        if os.path.exists(partial):
            os.remove(partial)
        return code
    # Renamed into place, so a failed build never leaves a partial component.
    os.replace(partial, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
