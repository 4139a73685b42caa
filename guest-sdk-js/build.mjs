#!/usr/bin/env node
// Builds a TypeScript/JavaScript plugin into a component:
//   node build.mjs PLUGIN_DIR OUT.wasm [--wit WIT_DIR]
// PLUGIN_DIR/src/plugin.ts (or .js) default-exports one Plugin subclass. esbuild bundles it with
// this SDK behind a generated entry module that imports the contract's interfaces (and the
// wasi:http ones its world imports), then
// componentize-js (the engine behind `jco componentize`) builds the component against `wit/`,
// generating the bindings from it. The interface version comes from the WIT package line, so a
// new contract version needs no SDK edit. Every plugin is built for the `admitting-plugin` world
// (the `plugin` world plus the `admission-hook` export, which the host calls only for a manifest
// with `[[admit]]` tables), as the Rust SDK builds them; a WIT without that world (an older
// contract given with --wit) gets the `plugin` world.
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rename, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const sdk = dirname(fileURLToPath(import.meta.url));

// The toolchain comes from this SDK's node_modules, or from INFORMANT_JS_TOOLCHAIN: a directory
// where `informant dev` installed the lock's packages (ESM resolves bare names only upwards
// from this file, so that directory is resolved by hand).
async function tool(name) {
  const home = process.env.INFORMANT_JS_TOOLCHAIN;
  if (!home) return import(name);
  const dir = join(home, "node_modules", name);
  const pkg = JSON.parse(await readFile(join(dir, "package.json"), "utf8"));
  const entry = pkg.exports?.import ?? pkg.exports?.["."]?.import ?? pkg.main ?? "index.js";
  return import(pathToFileURL(join(dir, entry)).href);
}

function usage(message) {
  console.error(`build.mjs: ${message}\nusage: node build.mjs PLUGIN_DIR OUT.wasm [--wit WIT_DIR]`);
  process.exit(2);
}

const args = process.argv.slice(2);
const witAt = args.indexOf("--wit");
const wit = resolve(witAt >= 0 ? args.splice(witAt, 2)[1] ?? usage("--wit needs a directory") : join(sdk, "..", "wit"));
const [pluginDir, out] = args;
if (!pluginDir || !out) usage("missing arguments");
const entryTs = ["src/plugin.ts", "src/plugin.js"].map((p) => resolve(pluginDir, p)).find(existsSync);
if (!entryTs) usage(`${pluginDir} has no src/plugin.ts or src/plugin.js`);

const witText = await readFile(join(wit, "plugin.wit"), "utf8").catch((e) => usage(`cannot read ${wit}/plugin.wit: ${e.message}`));
const pkg = /^\s*package\s+([a-z0-9-]+:[a-z0-9-]+)(@[^;\s]+)?\s*;/m.exec(witText);
if (!pkg) usage(`${wit}/plugin.wit has no package line`);
const iface = (name) => JSON.stringify(`${pkg[1]}/${name}${pkg[2] ?? ""}`);
// Outbound HTTP, at the wasi:http version the world imports (none: the SDK's http says so).
const wasiHttp = /^\s*import\s+wasi:http\/outgoing-handler(@[^;\s]+)?\s*;/m.exec(witText);
const httpImports = wasiHttp
  ? [
      `import * as httpTypes from ${JSON.stringify(`wasi:http/types${wasiHttp[1] ?? ""}`)};`,
      `import * as outgoingHandler from ${JSON.stringify(`wasi:http/outgoing-handler${wasiHttp[1] ?? ""}`)};`,
    ]
  : [];
const httpArg = wasiHttp ? ", { types: httpTypes, outgoingHandler }" : "";
// One component shape for every plugin: admission-capable when the contract has the world.
const admitting = /^\s*world\s+admitting-plugin\s*\{/m.test(witText);
const worldName = admitting ? "admitting-plugin" : "plugin";

const { componentize } = await tool("@bytecodealliance/componentize-js");
const esbuild = await tool("esbuild");
const build = esbuild.build ?? esbuild.default.build;

const work = await mkdtemp(join(tmpdir(), "informant-js-"));
try {
  const entry = join(work, "entry.js");
  await writeFile(
    entry,
    [
      `import * as events from ${iface("events")};`,
      `import * as cache from ${iface("cache")};`,
      `import * as log from ${iface("log")};`,
      `import * as kube from ${iface("kube")};`,
      `import * as metrics from ${iface("metrics")};`,
      ...httpImports,
      `import { exportsFor } from ${JSON.stringify(join(sdk, "src", "guest.ts"))};`,
      `import Plugin from ${JSON.stringify(entryTs)};`,
      `const world = exportsFor(Plugin, events, cache, log, kube, metrics${httpArg});`,
      `export const init = world.init;`,
      `export const handleQueued = world.handleQueued;`,
      `export const handleSchedule = world.handleSchedule;`,
      // An exported interface is an object named after it, in camelCase.
      ...(admitting ? [`export const admissionHook = { admit: world.admit };`] : []),
      "",
    ].join("\n"),
  );
  const bundle = join(work, "bundle.js");
  await build({
    entryPoints: [entry],
    bundle: true,
    format: "esm",
    platform: "neutral",
    target: "es2022",
    outfile: bundle,
    external: [`${pkg[1]}/*`, "wasi:*"],
    alias: { informant: join(sdk, "src", "index.ts") },
    logLevel: "warning",
  });
  const { component } = await componentize({ sourcePath: bundle, witPath: wit, worldName });
  // Written beside the output and renamed, so a failed build never leaves a partial file.
  const partial = `${out}.partial`;
  await writeFile(partial, component);
  await rename(partial, out);
} finally {
  await rm(work, { recursive: true, force: true });
}
