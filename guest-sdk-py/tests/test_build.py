"""build.py's choice of world: ``admitting-plugin`` when the contract has it, so every plugin
exports ``admission-hook``; ``plugin`` for an older contract given with --wit."""

import importlib.util
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def load_build():
    spec = importlib.util.spec_from_file_location("informant_build", os.path.join(HERE, "..", "build.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_repository_contract_builds_admitting_plugins():
    build = load_build()
    assert build.world_of(os.path.join(HERE, "..", "..", "wit")) == "admitting-plugin"
    entry = build.ENTRY + build.ENTRY_ADMIT
    assert "WitWorld = _guest.world(_plugin)" in entry
    assert "AdmissionHook = _guest.admission_hook(WitWorld)" in entry


def test_a_contract_without_the_admitting_world_builds_the_plugin_world(tmp_path):
    build = load_build()
    (tmp_path / "plugin.wit").write_text(
        "package informant:plugin@0.8.0;\n\nworld plugin {\n    export init: func(config: string);\n}\n"
    )
    (tmp_path / "notes.txt").write_text("world admitting-plugin {\n")
    assert build.world_of(str(tmp_path)) == "plugin"
