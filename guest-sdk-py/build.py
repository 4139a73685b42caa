"""Builds a Python plugin into a component:  python build.py PLUGIN_DIR OUT.wasm [--wit WIT_DIR]

PLUGIN_DIR/plugin.py defines one ``informant.Plugin`` subclass. componentize-py (run from this
interpreter's environment) generates the bindings from ``wit/`` and packs the plugin, the SDK and
a two-line entry module into a component for the ``plugin`` world. Writes OUT.wasm only on success.
"""

import argparse
import os
import subprocess
import sys
import tempfile

SDK = os.path.dirname(os.path.abspath(__file__))
ENTRY = "import plugin as _plugin\nfrom informant._guest import world as _world\n\nWitWorld = _world(_plugin)\n"


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
    with tempfile.TemporaryDirectory(prefix="informant-py-") as entry:
        with open(os.path.join(entry, "informant_main.py"), "w") as f:
            f.write(ENTRY)
        cmd = [exe, "-d", args.wit, "-w", "plugin", "componentize", "-p", entry, "-p", SDK,
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
