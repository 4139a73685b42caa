//! A state directory someone else can reach: links, other owners, shared modes, a second
//! process, set-aside files piling up. Each is refused with its path and reason, or bounded.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use super::{CLUSTER, flush, open};
use crate::{FILE_NAME, Holder, KEEP_SET_ASIDE, LOCK_FILE_NAME, StateDir, StateError};

fn chmod(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path).unwrap().mode() & 0o7777
}

fn is_root() -> bool {
    // SAFETY: no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The refusal of opening `dir`: the path it names and the reason's text.
fn refusal(dir: &Path) -> (PathBuf, String) {
    match StateDir::open(dir, CLUSTER) {
        Err(StateError::Unsafe { path, source }) => (path, source.to_string()),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// A closed state in `dir` that a clean open would use.
async fn closed_state(dir: &Path) {
    let (state, _) = open(dir);
    let journal = state.journal();
    journal.record("v1/pods", 1, "ns/a", Some("{}"));
    flush(&journal).await;
    state.close();
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn a_new_directory_is_0700_and_every_file_in_it_0600() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("a/b/state");
    closed_state(&dir).await;
    for d in [tmp.path().join("a"), tmp.path().join("a/b"), dir.clone()] {
        assert_eq!(mode(&d), 0o700, "{}", d.display());
    }
    assert_eq!(
        names(&dir),
        ["state.lock", FILE_NAME, "state.redb.seal"],
        "no temp file left"
    );
    for name in names(&dir) {
        assert_eq!(mode(&dir.join(&name)), 0o600, "{name}");
    }
}

#[tokio::test]
async fn a_directory_and_files_an_earlier_version_left_readable_are_made_private() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    closed_state(&dir).await;
    chmod(&dir, 0o755);
    chmod(&dir.join(FILE_NAME), 0o644);
    chmod(&dir.join("state.redb.seal"), 0o644);
    let (state, aside) = open(&dir);
    assert!(aside.is_none());
    assert_eq!(state.load().unwrap().informers["v1/pods"].versions.len(), 1);
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&dir.join(FILE_NAME)), 0o600);
}

#[test]
fn a_symlinked_directory_is_refused_even_dangling() {
    let tmp = tempfile::tempdir().unwrap();
    let real = tmp.path().join("real");
    fs::create_dir(&real).unwrap();
    chmod(&real, 0o700);
    let link = tmp.path().join("link");
    symlink(&real, &link).unwrap();
    let (path, reason) = refusal(&link);
    assert_eq!(path, link);
    assert!(reason.contains("a symbolic link"), "{reason}");
    assert!(names(&real).is_empty(), "nothing written through the link");

    let dangling = tmp.path().join("dangling");
    symlink(tmp.path().join("nowhere"), &dangling).unwrap();
    let (path, reason) = refusal(&dangling);
    assert_eq!(path, dangling);
    assert!(reason.contains("a symbolic link"), "{reason}");
    assert!(!tmp.path().join("nowhere").exists(), "not created");
}

#[test]
fn a_directory_others_may_write_is_refused_and_left_as_found() {
    let tmp = tempfile::tempdir().unwrap();
    for bad in [0o777, 0o770, 0o757, 0o1777, 0o2770] {
        let dir = tmp.path().join(format!("{bad:o}"));
        fs::create_dir(&dir).unwrap();
        chmod(&dir, bad);
        let (path, reason) = refusal(&dir);
        assert_eq!(path, dir);
        assert!(
            reason.contains(&format!("writable by its group or others (mode {bad:04o})")),
            "{reason}"
        );
        assert!(reason.contains("chmod go-w"), "says what to do: {reason}");
        assert_eq!(mode(&dir), bad, "refusing never repairs");
        assert!(names(&dir).is_empty(), "nothing written in it");
    }
}

#[tokio::test]
async fn a_directory_or_file_owned_by_another_user_is_refused() {
    if !is_root() {
        eprintln!("not root: cannot chown to another uid; the owner checks are untested here");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let theirs = tmp.path().join("theirs");
    fs::create_dir(&theirs).unwrap();
    chmod(&theirs, 0o700);
    std::os::unix::fs::chown(&theirs, Some(65534), None).unwrap();
    let (path, reason) = refusal(&theirs);
    assert_eq!(path, theirs);
    assert!(
        reason.contains("owned by uid 65534, not by this process's effective uid 0"),
        "{reason}"
    );

    let ours = tmp.path().join("ours");
    closed_state(&ours).await;
    std::os::unix::fs::chown(ours.join(FILE_NAME), Some(65534), None).unwrap();
    let (path, reason) = refusal(&ours);
    assert_eq!(path, ours.join(FILE_NAME));
    assert!(reason.contains("owned by uid 65534"), "{reason}");
}

/// The attack that worked: a link planted where the clean close wrote its seal's temp file
/// made the close overwrite the link's target.
#[tokio::test]
async fn a_link_planted_as_the_seals_temp_file_is_never_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    let victim = tmp.path().join("victim");
    fs::write(&victim, b"precious").unwrap();
    let (state, _) = open(&dir);
    let planted = dir.join("state.redb.seal.tmp");
    symlink(&victim, &planted).unwrap();
    let journal = state.journal();
    journal.record("v1/pods", 1, "ns/a", Some("{}"));
    flush(&journal).await;
    state.close();
    assert_eq!(
        fs::read(&victim).unwrap(),
        b"precious",
        "the target is untouched"
    );
    assert!(fs::symlink_metadata(&planted).unwrap().is_symlink());
    let seal = fs::symlink_metadata(dir.join("state.redb.seal")).unwrap();
    assert!(seal.is_file(), "the seal is a file of its own");
    // And the sealed state reopens without a check.
    let (state, _) = open(&dir);
    assert!(!state.checked_at_open());
}

/// The attack that worked: a dangling `state.redb` link was followed, and the state created
/// wherever it pointed.
#[test]
fn a_state_file_that_is_a_link_is_refused_even_dangling() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    fs::create_dir(&dir).unwrap();
    chmod(&dir, 0o700);
    let elsewhere = tmp.path().join("elsewhere.redb");
    symlink(&elsewhere, dir.join(FILE_NAME)).unwrap();
    let (path, reason) = refusal(&dir);
    assert_eq!(path, dir.join(FILE_NAME));
    assert!(reason.contains("a symbolic link"), "{reason}");
    assert!(!elsewhere.exists(), "nothing created where it points");

    // A link to a real file is refused the same way, and the file is left alone.
    fs::write(&elsewhere, b"someone's file").unwrap();
    let (_, reason) = refusal(&dir);
    assert!(reason.contains("a symbolic link"), "{reason}");
    assert_eq!(fs::read(&elsewhere).unwrap(), b"someone's file");
}

#[tokio::test]
async fn links_at_the_seal_or_the_lock_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("target");
    fs::write(&target, b"x").unwrap();
    for name in ["state.redb.seal", LOCK_FILE_NAME] {
        let dir = tmp.path().join(name);
        closed_state(&dir).await;
        let at = dir.join(name);
        fs::remove_file(&at).unwrap();
        symlink(&target, &at).unwrap();
        let (path, reason) = refusal(&dir);
        assert_eq!(path, at);
        assert!(reason.contains("a symbolic link"), "{reason}");
    }
    assert_eq!(fs::read(&target).unwrap(), b"x");
}

#[tokio::test]
async fn a_hard_linked_state_file_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    closed_state(&dir).await;
    fs::hard_link(dir.join(FILE_NAME), tmp.path().join("kept-elsewhere")).unwrap();
    let (path, reason) = refusal(&dir);
    assert_eq!(path, dir.join(FILE_NAME));
    assert!(reason.contains("2 hard links"), "{reason}");
}

#[test]
fn a_second_open_is_refused_naming_the_holder_until_it_closes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let holder = Holder {
        identity: Some("replica-a".into()),
    };
    let (first, _) = StateDir::open_as(&dir, CLUSTER, &holder).unwrap();
    let other = dir.clone();
    let err = std::thread::spawn(move || StateDir::open(&other, CLUSTER).unwrap_err())
        .join()
        .unwrap();
    let StateError::InUse { dir: at, holder } = &err else {
        panic!("expected InUse, got {err:?}");
    };
    assert_eq!(*at, dir);
    let pid = std::process::id();
    assert!(
        holder.starts_with(&format!("pid {pid} on host ")),
        "{holder}"
    );
    assert!(
        holder.contains(" (identity replica-a) since 20"),
        "{holder}"
    );
    let text = err.to_string();
    assert!(
        text.contains(&format!("is in use by pid {pid} on host")),
        "{text}"
    );
    first.close();
    let (second, _) = StateDir::open(&dir, CLUSTER).expect("free once closed");
    drop(second);
}

#[test]
fn a_lock_file_left_by_a_dead_process_does_not_block() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    fs::create_dir(&dir).unwrap();
    chmod(&dir, 0o700);
    let lock = dir.join(LOCK_FILE_NAME);
    // What a killed holder leaves: its text, and no lock (the kernel dropped it).
    fs::write(
        &lock,
        "pid 4194303 on host gone since 2020-01-01T00:00:00Z\n",
    )
    .unwrap();
    chmod(&lock, 0o600);
    let (_state, _) = open(&dir);
    let text = fs::read_to_string(&lock).unwrap();
    assert!(
        text.starts_with(&format!("pid {} on host ", std::process::id())),
        "{text}"
    );
    assert!(!text.contains("gone"), "{text}");
}

#[test]
fn set_aside_files_are_pruned_to_the_newest_few_and_nothing_else_is_touched() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    fs::create_dir(&dir).unwrap();
    chmod(&dir, 0o700);
    let victim = tmp.path().join("victim");
    fs::write(&victim, b"precious").unwrap();
    for name in [
        "state.redb.set-aside-100",
        "state.redb.set-aside-300",
        "state.redb.set-aside-300-1",
        "state.redb.set-aside-200",
        "state.redb.set-aside-notes",
        "notes.txt",
    ] {
        fs::write(dir.join(name), name).unwrap();
    }
    symlink(&victim, dir.join("state.redb.set-aside-50")).unwrap();
    fs::write(dir.join(FILE_NAME), super::noise(64 * 1024, 7)).unwrap();
    chmod(&dir.join(FILE_NAME), 0o600);

    let (_state, aside) = open(&dir);
    let aside = aside.expect("set aside");
    let mut pruned: Vec<String> = aside
        .pruned
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    pruned.sort();
    assert_eq!(
        pruned,
        [
            "state.redb.set-aside-100",
            "state.redb.set-aside-200",
            "state.redb.set-aside-50"
        ]
    );
    let kept: Vec<String> = names(&dir)
        .into_iter()
        .filter(|n| n.starts_with("state.redb.set-aside-"))
        .collect();
    let newest = aside.moved_to.file_name().unwrap().to_string_lossy();
    assert_eq!(kept.len(), KEEP_SET_ASIDE + 1, "{kept:?}");
    assert!(kept.contains(&"state.redb.set-aside-300".to_string()));
    assert!(kept.contains(&"state.redb.set-aside-300-1".to_string()));
    assert!(kept.contains(&newest.to_string()));
    assert!(
        kept.contains(&"state.redb.set-aside-notes".to_string()),
        "not a name this host gives"
    );
    assert!(dir.join("notes.txt").exists());
    assert_eq!(
        fs::read(&victim).unwrap(),
        b"precious",
        "the link's target untouched"
    );
}

#[tokio::test]
async fn set_aside_files_stay_bounded_over_many_refusals() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    // Every start points at another cluster: each start sets the last one's state aside.
    for i in 0..(KEEP_SET_ASIDE + 4) {
        let (state, _) = StateDir::open(&dir, &format!("https://cluster-{i}")).unwrap();
        state.close();
    }
    let aside = names(&dir)
        .into_iter()
        .filter(|n| n.starts_with("state.redb.set-aside-"))
        .count();
    assert_eq!(aside, KEEP_SET_ASIDE);
}
