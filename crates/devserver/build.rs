//! Compiles Kubernetes' own `generated.proto` files (vendored in `proto/`) into one encoded
//! `FileDescriptorSet`, which `src/protobuf.rs` loads to decode protobuf request bodies.
//! protox is a protobuf compiler in Rust, so building needs no `protoc`.

use std::path::{Path, PathBuf};

/// The API groups whose kinds the server decodes; their imports come along.
const ROOTS: &[&str] = &[
    "api/core/v1/generated.proto",
    "api/apps/v1/generated.proto",
    "api/batch/v1/generated.proto",
    "api/coordination/v1/generated.proto",
    "api/autoscaling/v1/generated.proto",
    "api/authorization/v1/generated.proto",
    "apiextensions_apiserver/pkg/apis/apiextensions/v1/generated.proto",
];

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("proto");
    println!("cargo::rerun-if-changed={}", dir.display());
    let mut compiler = protox::Compiler::new([&dir]).unwrap_or_else(|e| panic!("{e}"));
    compiler.include_imports(true).include_source_info(false);
    compiler
        .open_files(ROOTS)
        .unwrap_or_else(|e| panic!("compiling {}: {e:?}", dir.display()));
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"))
        .join("kubernetes.fds");
    std::fs::write(&out, compiler.encode_file_descriptor_set())
        .unwrap_or_else(|e| panic!("writing {}: {e}", out.display()));
}
