#!/usr/bin/env bash
# Builds the example plugins for wasm32-wasip2 and lays them out as a plugins directory:
# OUT/NAME.wasm + OUT/NAME.toml (default OUT: target/plugins). Installs the target if missing.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$root/target/plugins}"
rustup target add wasm32-wasip2 >/dev/null
plugins=(kubediff orphans label-policy image-policy)
args=()
for p in "${plugins[@]}"; do args+=(-p "$p"); done
echo "building ${plugins[*]} for wasm32-wasip2 ..." >&2
cargo build --manifest-path "$root/Cargo.toml" --release --target wasm32-wasip2 \
  --target-dir "$root/target/wasm-plugins" "${args[@]}"
mkdir -p "$out"
for p in "${plugins[@]}"; do
  cp "$root/target/wasm-plugins/wasm32-wasip2/release/${p//-/_}.wasm" "$out/$p.wasm"
  cp "$root/plugins/$p/$p.toml" "$out/$p.toml"
done
echo "plugins ready in $out" >&2
