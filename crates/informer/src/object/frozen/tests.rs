use kube::core::{ApiResource, GroupVersionKind};

use super::*;

fn pods() -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "Pod"))
}

/// Objects with and without a namespace, labels, owners and managedFields.
const OBJECTS: &[&str] = &[
    r#"{"metadata":{"name":"a","namespace":"ns","uid":"u1","resourceVersion":"7",
        "labels":{"b":"2","a":"1","":"empty key"},
        "ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"rs","uid":"o1"},
                           {"apiVersion":"apps/v1","kind":"ReplicaSet","name":"rs2","uid":"o2"}],
        "managedFields":[{"manager":"kubectl","operation":"Apply"}]},"spec":{"nodeName":"n1"}}"#,
    r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"node-1"}}"#,
    r#"{"metadata":{"name":"ünïcode","namespace":"","labels":{"k":""}},"data":{"x":"\"q\""}}"#,
    r#"{"metadata":{"name":"b","namespace":"ns","ownerReferences":[{"apiVersion":"v1","kind":"X","name":"x","uid":""}]}}"#,
];

fn assert_same(thawed: &CachedObject, parsed: &CachedObject) {
    assert_eq!(thawed.key(), parsed.key());
    assert_eq!(thawed.namespace(), parsed.namespace());
    assert_eq!(thawed.name(), parsed.name());
    assert_eq!(thawed.uid(), parsed.uid());
    assert_eq!(thawed.resource_version(), parsed.resource_version());
    assert_eq!(
        thawed.labels().collect::<Vec<_>>(),
        parsed.labels().collect::<Vec<_>>()
    );
    assert_eq!(thawed.labels().len(), parsed.labels().len());
    assert_eq!(
        thawed.owner_uids().collect::<Vec<_>>(),
        parsed.owner_uids().collect::<Vec<_>>()
    );
    assert_eq!(thawed.metadata_fields(), parsed.metadata_fields());
    assert_eq!(thawed.json(), parsed.json());
    assert_eq!(thawed.frozen(), parsed.frozen(), "frozen again alike");
}

#[test]
fn a_frozen_object_thaws_as_parsing_its_json_gives() {
    for json in OBJECTS {
        for strip in [true, false] {
            let parsed = CachedObject::from_json(json, &pods(), strip).unwrap();
            let frozen = parsed.frozen();
            let thawed = CachedObject::from_frozen(&frozen, parsed.json().into())
                .unwrap_or_else(|| panic!("{json}: frozen bytes refused"));
            assert_same(&thawed, &parsed);
            // What a restore from the JSON alone makes of it.
            let mut raw: crate::RawObject = serde_json::from_str(parsed.json()).unwrap();
            let stored = CachedObject::from_stored(&mut raw, parsed.json().into(), &pods(), strip);
            assert_same(&thawed, &stored);
        }
    }
}

#[test]
fn the_flags_say_whether_the_json_is_in_a_stores_cached_form() {
    let with_managed = CachedObject::from_json(OBJECTS[0], &pods(), false).unwrap();
    let frozen = with_managed.frozen();
    let read = Frozen::read(&frozen).unwrap();
    assert!(
        read.cached_form(false),
        "a store keeping managedFields uses it"
    );
    assert!(!read.cached_form(true), "a store stripping them must not");

    let stripped = CachedObject::from_json(OBJECTS[0], &pods(), true).unwrap();
    let frozen = stripped.frozen();
    let read = Frozen::read(&frozen).unwrap();
    assert!(read.cached_form(true) && read.cached_form(false));

    // Without apiVersion and kind the JSON is not in cached form, whatever the store.
    let mut untyped = frozen.clone();
    untyped[1] &= !TYPED;
    let read = Frozen::read(&untyped).unwrap();
    assert!(!read.cached_form(true) && !read.cached_form(false));
}

#[test]
fn every_cut_of_frozen_bytes_is_refused() {
    for json in OBJECTS {
        let frozen = CachedObject::from_json(json, &pods(), true)
            .unwrap()
            .frozen();
        for len in 0..frozen.len() {
            assert!(
                Frozen::read(&frozen[..len]).is_none(),
                "{json}: cut at {len} of {} read",
                frozen.len()
            );
        }
        let mut longer = frozen.clone();
        longer.push(0);
        assert!(
            Frozen::read(&longer).is_none(),
            "a trailing byte is refused"
        );
    }
}

/// Frozen bytes from parts, as a hostile writer could make them.
fn frozen_of(version: u8, flags: u8, fields: &[&[u8]], owners: &[&[u8]]) -> Vec<u8> {
    let field = |out: &mut Vec<u8>, f: &[u8]| {
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(f);
    };
    let mut metadata = Vec::new();
    for f in fields {
        field(&mut metadata, f);
    }
    let mut out = vec![version, flags];
    out.extend_from_slice(&(metadata.len() as u32).to_le_bytes());
    out.extend_from_slice(&metadata);
    out.extend_from_slice(&(owners.len() as u32).to_le_bytes());
    for o in owners {
        field(&mut out, o);
    }
    out
}

#[test]
fn malformed_frozen_bytes_are_refused() {
    let fixed: [&[u8]; 4] = [b"ns", b"a", b"u1", b"7"];
    let ok = frozen_of(FROZEN_VERSION, TYPED, &fixed, &[b"o1"]);
    assert!(Frozen::read(&ok).is_some(), "the baseline reads");

    fn with<'a>(fixed: &[&'a [u8]], extra: &[&'a [u8]]) -> Vec<&'a [u8]> {
        fixed.iter().chain(extra).copied().collect()
    }
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty", Vec::new()),
        (
            "another version",
            frozen_of(FROZEN_VERSION + 1, TYPED, &fixed, &[]),
        ),
        ("version zero", frozen_of(0, TYPED, &fixed, &[])),
        (
            "unknown flags",
            frozen_of(FROZEN_VERSION, 0x80 | TYPED, &fixed, &[]),
        ),
        (
            "three fields",
            frozen_of(FROZEN_VERSION, TYPED, &fixed[..3], &[]),
        ),
        ("no fields", frozen_of(FROZEN_VERSION, TYPED, &[], &[])),
        (
            "a label without its value",
            frozen_of(FROZEN_VERSION, TYPED, &with(&fixed, &[b"k"]), &[]),
        ),
        (
            "labels out of order",
            frozen_of(
                FROZEN_VERSION,
                TYPED,
                &with(&fixed, &[b"b", b"1", b"a", b"2"]),
                &[],
            ),
        ),
        (
            "a label twice",
            frozen_of(
                FROZEN_VERSION,
                TYPED,
                &with(&fixed, &[b"a", b"1", b"a", b"2"]),
                &[],
            ),
        ),
        (
            "a name not UTF-8",
            frozen_of(
                FROZEN_VERSION,
                TYPED,
                &[b"ns", b"\xff\xfe", b"u", b"1"],
                &[],
            ),
        ),
        (
            "a label not UTF-8",
            frozen_of(FROZEN_VERSION, TYPED, &with(&fixed, &[b"k", b"\xc3"]), &[]),
        ),
        (
            "an owner not UTF-8",
            frozen_of(FROZEN_VERSION, TYPED, &fixed, &[b"\x80"]),
        ),
    ];
    for (what, bytes) in &cases {
        assert!(Frozen::read(bytes).is_none(), "{what}: read");
        assert!(
            CachedObject::from_frozen(bytes, "{}".into()).is_none(),
            "{what}"
        );
    }

    // Counts and lengths that promise more than there is.
    let mut huge_metadata = ok.clone();
    huge_metadata[2..6].copy_from_slice(&u32::MAX.to_le_bytes());
    let mut huge_field = ok.clone();
    huge_field[6..10].copy_from_slice(&u32::MAX.to_le_bytes());
    let owners_at = ok.len() - (4 + 2) - 4;
    let mut more_owners = ok.clone();
    more_owners[owners_at..owners_at + 4].copy_from_slice(&2u32.to_le_bytes());
    let mut fewer_owners = ok.clone();
    fewer_owners[owners_at..owners_at + 4].copy_from_slice(&0u32.to_le_bytes());
    let mut huge_owner = ok.clone();
    huge_owner[owners_at + 4..owners_at + 8].copy_from_slice(&u32::MAX.to_le_bytes());
    for (what, bytes) in [
        ("huge metadata length", huge_metadata),
        ("huge field length", huge_field),
        ("more owners counted than stored", more_owners),
        ("fewer owners counted than stored", fewer_owners),
        ("huge owner length", huge_owner),
    ] {
        assert!(Frozen::read(&bytes).is_none(), "{what}: read");
    }
}

#[test]
fn flipped_bytes_never_panic_and_what_reads_is_well_formed() {
    let frozen = CachedObject::from_json(OBJECTS[0], &pods(), false)
        .unwrap()
        .frozen();
    for at in 0..frozen.len() {
        for bit in 0..8 {
            let mut bytes = frozen.clone();
            bytes[at] ^= 1 << bit;
            let Some(object) = CachedObject::from_frozen(&bytes, "{}".into()) else {
                continue;
            };
            // A flip inside a field's text can still read; the object is then whole.
            let labels: Vec<_> = object.labels().collect();
            assert_eq!(labels.len(), object.labels().len());
            assert!(labels.windows(2).all(|w| w[0].0 < w[1].0));
            assert_eq!(
                object.key(),
                &ObjectKey::new(object.namespace(), object.name())
            );
            assert_eq!(object.frozen(), bytes, "frozen again as read");
        }
    }
}
