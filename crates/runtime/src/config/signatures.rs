//! `[signatures]` and `[tenants.NAME.signatures]`: which keys a source is pulled under, and the
//! key files checked while the config is read.

use std::path::Path;

use informant_oci::signature::SigningKey;

fn parse(text: &str) -> Result<crate::plugin::HostConfig, String> {
    super::parse(text, Path::new("/etc/informant.toml")).map_err(|e| e.to_string())
}

#[test]
fn a_tenant_without_its_own_policy_takes_the_top_level_one() {
    let dir = tempfile::tempdir().unwrap();
    let key = |name: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, SigningKey::generate().public_key_pem()).unwrap();
        path.display().to_string()
    };
    let (operator, team_a) = (key("operator.pub"), key("team-a.pub"));
    let config = parse(&format!(
        r#"
[signatures]
keys = ["{operator}"]

[[sources]]
reference = "registry.example/ops/audit:1"

[tenants.team-a]
namespaces = ["team-a"]
signatures = {{ keys = ["{team_a}"] }}
sources = [{{ reference = "registry.example/team-a/policy:1" }}]

[tenants.team-b]
namespaces = ["team-b"]
sources = [{{ reference = "registry.example/team-b/policy:1" }}]
"#
    ))
    .unwrap();
    let keys = |tenant: &str| {
        let s = config.sources.iter().find(|s| s.tenant == tenant).unwrap();
        s.signature_keys
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(keys(""), std::slice::from_ref(&operator));
    assert_eq!(keys("team-a"), [team_a]);
    assert_eq!(keys("team-b"), [operator]);
    // No policy at all: nothing is checked.
    let unchecked = parse("[[sources]]\nreference = \"registry.example/ops/audit:1\"\n").unwrap();
    assert!(unchecked.sources[0].signature_keys.is_empty());
}

#[test]
fn key_files_that_hold_no_public_key_are_refused_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let private = dir.path().join("cosign.key");
    std::fs::write(&private, SigningKey::generate().private_key_pem()).unwrap();
    let private = private.display();
    for (text, needles) in [
        (
            "[signatures]\nkeys = []\n".to_string(),
            &["key `signatures.keys`: no key"][..],
        ),
        (
            "[tenants.a]\nnamespaces = [\"a\"]\nsignatures = { keys = [\"/nonexistent/a.pub\"] }\n"
                .to_string(),
            &["key `tenants.a.signatures.keys[0]`: key `/nonexistent/a.pub`:"],
        ),
        (
            format!("[signatures]\nkeys = [\"{private}\"]\n"),
            &["key `signatures.keys[0]`", "not a PEM public key"],
        ),
        (
            "[signatures]\nkeys = [\"a.pub\"]\nrequire = false\n".to_string(),
            &["unknown field `require`"],
        ),
    ] {
        let err = parse(&text).unwrap_err();
        assert!(
            err.starts_with("config `/etc/informant.toml`: ")
                && needles.iter().all(|n| err.contains(n)),
            "{text}: {err}"
        );
    }
}
