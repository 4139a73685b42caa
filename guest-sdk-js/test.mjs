#!/usr/bin/env node
// Runs TypeScript unit tests with `node --test`: esbuild compiles each `*.test.ts` under the given
// directories (the SDK's `informant` import resolved to its sources) into target/js-tests.
//   node test.mjs DIR...
import { build } from "esbuild";
import { spawnSync } from "node:child_process";
import { readFileSync, readdirSync, rmSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const sdk = dirname(fileURLToPath(import.meta.url));
const outdir = resolve(process.env.CARGO_TARGET_DIR ?? join(sdk, "..", "target"), "js-tests");
const dirs = process.argv.slice(2);
if (!dirs.length) dirs.push(join(sdk, "tests"));

const tests = dirs.flatMap((d) =>
  readdirSync(d, { recursive: true })
    .filter((f) => String(f).endsWith(".test.ts") && !String(f).includes("node_modules"))
    .map((f) => resolve(d, String(f))),
);
if (!tests.length) {
  console.error(`test.mjs: no *.test.ts under ${dirs.join(", ")}`);
  process.exit(1);
}
rmSync(outdir, { recursive: true, force: true });
// A bundled test runs from outdir, so `import.meta.url` in a test's sources is made the source
// file's own: `readBeside(import.meta.url, "../NAME.toml")` reads beside the test, as written.
const sourceUrls = {
  name: "source-import-meta-url",
  setup(b) {
    b.onLoad({ filter: /\.[cm]?[jt]s$/ }, ({ path }) => {
      if (path.includes("node_modules")) return undefined;
      const text = readFileSync(path, "utf8");
      if (!text.includes("import.meta.url")) return undefined;
      return {
        contents: text.replaceAll("import.meta.url", JSON.stringify(pathToFileURL(path).href)),
        loader: /\.[cm]?ts$/.test(path) ? "ts" : "js",
      };
    });
  },
};
// Numbered by position, so tests from anywhere (outside this tree too) land inside outdir.
const outName = (t, i) => join(String(i), basename(t).replace(/\.ts$/, ""));
await build({
  entryPoints: tests.map((t, i) => ({ in: t, out: outName(t, i) })),
  bundle: true,
  format: "esm",
  platform: "node",
  target: "node20",
  outdir,
  outExtension: { ".js": ".mjs" },
  sourcemap: "inline",
  plugins: [sourceUrls],
  alias: { informant: join(sdk, "src", "index.ts"), "informant/testing": join(sdk, "src", "testing.ts") },
  logLevel: "warning",
});
const files = tests.map((t, i) => join(outdir, `${outName(t, i)}.mjs`));
const run = spawnSync(process.execPath, ["--enable-source-maps", "--test", ...files], { stdio: "inherit" });
process.exit(run.status ?? 1);
