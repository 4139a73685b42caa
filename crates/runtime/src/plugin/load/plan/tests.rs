use super::*;

fn id(s: &str) -> PluginId {
    match s.split_once('/') {
        Some((tenant, name)) => PluginId {
            tenant: tenant.into(),
            name: name.into(),
        },
        None => PluginId {
            tenant: String::new(),
            name: s.into(),
        },
    }
}

/// `name=fingerprint` (`?` for unreadable files), with the tenant's `max-plugins` (none:
/// denied).
fn found(entries: &[(&str, &str, Option<usize>)]) -> BTreeMap<PluginId, Candidate> {
    entries
        .iter()
        .map(|(name, fp, max)| {
            let fingerprint = (*fp != "?").then(|| fp.to_string());
            (
                id(name),
                Candidate {
                    fingerprint,
                    max_plugins: *max,
                },
            )
        })
        .collect()
}

/// `name=fingerprint`, admitted under the config in force or not.
fn running(entries: &[(&str, &str, bool)]) -> BTreeMap<PluginId, Running> {
    entries
        .iter()
        .map(|(name, fp, admitted_now)| {
            (
                id(name),
                Running {
                    fingerprint: fp.to_string(),
                    admitted_now: *admitted_now,
                },
            )
        })
        .collect()
}

fn load(s: &str) -> Step {
    Step::Load(id(s))
}

fn remove(s: &str) -> Step {
    Step::Remove {
        id: id(s),
        handed_over: false,
    }
}

fn hand_over(s: &str) -> Step {
    Step::Remove {
        id: id(s),
        handed_over: true,
    }
}

fn refuse(s: &str, why: Refusal) -> Step {
    Step::Refuse(id(s), why)
}

const ANY: Option<usize> = Some(usize::MAX);

fn all(_: &PluginId) -> bool {
    true
}

#[test]
fn the_plan_for_each_kind_of_change() {
    struct Case {
        what: &'static str,
        found: BTreeMap<PluginId, Candidate>,
        running: BTreeMap<PluginId, Running>,
        owns: fn(&PluginId) -> bool,
        only: Option<&'static [&'static str]>,
        steps: Vec<Step>,
    }
    let cases = [
        Case {
            what: "a new plugin loads",
            found: found(&[("a", "1", ANY)]),
            running: running(&[]),
            owns: all,
            only: None,
            steps: vec![load("a")],
        },
        Case {
            what: "an unchanged plugin is left alone",
            found: found(&[("a", "1", ANY)]),
            running: running(&[("a", "1", true)]),
            owns: all,
            only: None,
            steps: vec![],
        },
        Case {
            what: "a changed plugin loads its new version",
            found: found(&[("a", "2", ANY)]),
            running: running(&[("a", "1", true)]),
            owns: all,
            only: None,
            steps: vec![load("a")],
        },
        Case {
            what: "a removed plugin is removed",
            found: found(&[("b", "1", ANY)]),
            running: running(&[("a", "1", true), ("b", "1", true)]),
            owns: all,
            only: None,
            steps: vec![remove("a")],
        },
        Case {
            // The scan lists a plugin only once both its files are there: until then it is not
            // found, and the next reconcile, with the pair complete, loads it.
            what: "a pair completed late loads once it is found",
            found: found(&[("a", "1", ANY), ("late", "1", ANY)]),
            running: running(&[("a", "1", true)]),
            owns: all,
            only: None,
            steps: vec![load("late")],
        },
        Case {
            what: "unreadable files refuse the plugin and keep its running version",
            found: found(&[("a", "?", ANY)]),
            running: running(&[("a", "1", true)]),
            owns: all,
            only: None,
            steps: vec![refuse("a", Refusal::Files)],
        },
        Case {
            what: "a waiting plugin becoming ready loads, and only the waiting are decided",
            found: found(&[("a", "2", ANY), ("w", "1", ANY)]),
            running: running(&[("a", "1", true)]),
            owns: all,
            only: Some(&["w"]),
            steps: vec![load("w")],
        },
        Case {
            what: "a waiting-only reconcile still removes what is gone",
            found: found(&[("w", "1", ANY)]),
            running: running(&[("gone", "1", true)]),
            owns: all,
            only: Some(&["w"]),
            steps: vec![remove("gone"), load("w")],
        },
        Case {
            what: "a tenant over its quota: new plugins past it refused in name order",
            found: found(&[
                ("t/a", "1", Some(2)),
                ("t/b", "1", Some(2)),
                ("t/c", "1", Some(2)),
                ("u/a", "1", Some(1)),
            ]),
            running: running(&[("t/a", "1", true)]),
            owns: all,
            only: None,
            steps: vec![
                load("t/b"),
                refuse("t/c", Refusal::Quota { max: 2 }),
                load("u/a"),
            ],
        },
        Case {
            what: "a changed plugin of a full tenant still loads: it replaces one counted",
            found: found(&[("t/a", "2", Some(1))]),
            running: running(&[("t/a", "1", true)]),
            owns: all,
            only: None,
            steps: vec![load("t/a")],
        },
        Case {
            what: "a plugin removed makes room in its tenant",
            found: found(&[("t/new", "1", Some(1))]),
            running: running(&[("t/old", "1", true)]),
            owns: all,
            only: None,
            steps: vec![remove("t/old"), load("t/new")],
        },
        Case {
            what: "a config change reloads the plugins it touches and refuses a denied tenant",
            found: found(&[("t/a", "1", ANY), ("t/b", "1", ANY), ("u/a", "1", None)]),
            running: running(&[("t/a", "1", true), ("t/b", "1", false), ("u/a", "1", false)]),
            owns: all,
            only: None,
            steps: vec![
                load("t/b"),
                Step::DropStale(id("u/a")),
                refuse("u/a", Refusal::Denied),
            ],
        },
        Case {
            what: "a stale version dropped frees its tenant's room for a later plugin",
            found: found(&[("t/a", "?", Some(1)), ("t/b", "1", Some(1))]),
            running: running(&[("t/a", "1", false)]),
            owns: all,
            only: None,
            steps: vec![
                Step::DropStale(id("t/a")),
                refuse("t/a", Refusal::Files),
                load("t/b"),
            ],
        },
        Case {
            what: "a shard assignment change hands over what another member owns now",
            found: found(&[("a", "1", ANY), ("b", "1", ANY), ("c", "1", ANY)]),
            running: running(&[("a", "1", true), ("b", "1", true)]),
            owns: |id| id.name != "b",
            only: None,
            steps: vec![hand_over("b"), load("c")],
        },
        Case {
            what: "another member's plugins count against no tenant here",
            found: found(&[("t/a", "1", Some(1)), ("t/b", "1", Some(1))]),
            running: running(&[("t/a", "1", true)]),
            owns: |id| id.name == "b",
            only: None,
            steps: vec![hand_over("t/a"), load("t/b")],
        },
    ];
    for case in cases {
        let only: Option<BTreeSet<PluginId>> = case.only.map(|o| o.iter().map(|s| id(s)).collect());
        let steps = plan(&case.found, &case.running, case.owns, only.as_ref());
        assert_eq!(steps, case.steps, "{}", case.what);
    }
}
