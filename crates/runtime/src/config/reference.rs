//! `informant.toml` against the book: `manifest-version`, and the configuration reference's
//! table of keys held equal to the fields this parser reads.

use std::collections::BTreeSet;
use std::path::Path;

use informant_manifest::keys;

use super::signatures::FileIdentity;
use super::{File, FileLimits, FileSignatures, FileSource, FileTenant};
use crate::manifest::Write;

fn parse(text: &str) -> Result<crate::plugin::load::host_config::HostConfig, String> {
    super::parse(text, Path::new("/etc/informant.toml")).map_err(|e| e.to_string())
}

#[test]
fn manifest_version_1_is_read_and_the_default() {
    parse("").unwrap();
    parse("manifest-version = 1\n").unwrap();
    parse("manifest-version = 1\noperator-plugins = true\n").unwrap();
}

#[test]
fn other_manifest_versions_are_refused_naming_file_key_and_reason() {
    for (value, reason) in [
        ("2", "version 2 is not one this Informant reads"),
        ("-1", "version -1 is not one this Informant reads"),
        ("\"1\"", "must be the integer 1, not the string \"1\""),
        ("true", "expected the integer 1"),
    ] {
        let err = parse(&format!("manifest-version = {value}\n")).unwrap_err();
        assert!(
            err.starts_with(
                "config `/etc/informant.toml`: line 1, column 20: field `manifest-version`: "
            ) && err.contains(reason),
            "{value}: {err}"
        );
    }
}

/// A trust policy's keys, under `prefix`.
fn signatures(code: &mut BTreeSet<String>, prefix: &str) {
    for field in keys::of::<FileSignatures>().unwrap() {
        code.insert(format!("{prefix}.{field}"));
        if *field == "keyless" {
            for f in keys::of::<FileIdentity>().unwrap() {
                code.insert(format!("{prefix}.keyless.{f}"));
            }
        }
    }
}

/// The book's configuration reference lists every key the parser reads and no other, and its
/// complete example is a config this parser accepts.
#[test]
fn the_books_configuration_reference_matches_the_parser() {
    const PAGE: &str = include_str!("../../../../docs/src/configuration.md");
    let mut code = BTreeSet::new();
    for key in keys::of::<File>().unwrap() {
        code.insert(key.to_string());
        match *key {
            "limits" => {
                for field in keys::of::<FileLimits>().unwrap() {
                    code.insert(format!("limits.{field}"));
                }
            }
            "tenants" => {
                for field in keys::of::<FileTenant>().unwrap() {
                    code.insert(format!("tenants.NAME.{field}"));
                    if *field == "write" {
                        for w in keys::of::<Write>().unwrap() {
                            code.insert(format!("tenants.NAME.write.{w}"));
                        }
                    }
                    if *field == "sources" {
                        for f in keys::of::<FileSource>().unwrap() {
                            code.insert(format!("tenants.NAME.sources.{f}"));
                        }
                    }
                    if *field == "signatures" {
                        signatures(&mut code, "tenants.NAME.signatures");
                    }
                }
            }
            "sources" => {
                for field in keys::of::<FileSource>().unwrap() {
                    code.insert(format!("sources.{field}"));
                }
            }
            "signatures" => signatures(&mut code, "signatures"),
            _ => {}
        }
    }
    let book: BTreeSet<String> = keys::table_column(PAGE, "## Keys").into_iter().collect();
    let missing: Vec<_> = code.difference(&book).collect();
    let extra: Vec<_> = book.difference(&code).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "docs/src/configuration.md's `## Keys` table: rows missing for {missing:?}; rows for nothing the code has: {extra:?}"
    );
    let example = PAGE
        .split_once("## Example")
        .and_then(|(_, rest)| rest.split_once("```toml\n"))
        .and_then(|(_, rest)| rest.split_once("```"))
        .expect("a ```toml block under `## Example`")
        .0;
    parse(example).unwrap();
}
