//! Rendezvous (highest-random-weight) hashing: each key goes to the member whose hash with it
//! weighs most, so a member joining takes only the keys it now wins and a member leaving gives
//! up only its own, each to the runner-up.
//!
//! The weight is SHA-256 of the member and the key, not `std`'s hasher: every replica must
//! compute the same owner, across builds and toolchains, during a rolling update too.

use sha2::{Digest, Sha256};

/// The weight of `key` on `member`.
fn weight(member: &str, key: &str) -> [u8; 32] {
    let mut h = Sha256::new();
    // Lengths first, so ("ab", "c") and ("a", "bc") never weigh the same.
    h.update((member.len() as u64).to_be_bytes());
    h.update(member.as_bytes());
    h.update((key.len() as u64).to_be_bytes());
    h.update(key.as_bytes());
    h.finalize().into()
}

/// The member that owns `key` among `members` (`None` without members). Ties, which need a
/// SHA-256 collision, go to the greater identity so every replica still agrees.
pub fn owner<'a>(key: &str, members: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    members
        .into_iter()
        .map(|m| (weight(m, key), m))
        .max()
        .map(|(_, m)| m)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(n: usize) -> Vec<String> {
        (0..n)
            .map(|i| format!("tenant-{}/plugin-{i}", i % 7))
            .collect()
    }

    #[test]
    fn every_key_has_one_owner_whatever_the_order_of_members() {
        let a = ["a", "b", "c"];
        let b = ["c", "a", "b"];
        for k in keys(200) {
            assert_eq!(owner(&k, a), owner(&k, b), "{k}");
            assert!(owner(&k, a).is_some());
        }
        assert_eq!(owner("x", []), None);
    }

    #[test]
    fn a_joining_member_takes_only_what_it_wins_about_its_share() {
        let before = ["r0", "r1", "r2"];
        let after = ["r0", "r1", "r2", "r3"];
        let all = keys(3000);
        let mut moved = 0;
        for k in &all {
            let (b, a) = (owner(k, before).unwrap(), owner(k, after).unwrap());
            if a != b {
                // Only to the newcomer, never between the old members.
                assert_eq!(a, "r3", "{k} moved from {b} to {a}");
                moved += 1;
            }
        }
        // A quarter on average; far from a third.
        assert!((600..=900).contains(&moved), "{moved} of 3000 moved");
    }

    #[test]
    fn a_leaving_member_gives_up_only_its_own() {
        let before = ["r0", "r1", "r2"];
        let after = ["r0", "r2"];
        for k in keys(1000) {
            let b = owner(&k, before).unwrap();
            let a = owner(&k, after).unwrap();
            if b != "r1" {
                assert_eq!(a, b, "{k}");
            }
        }
    }

    #[test]
    fn lookalike_identities_weigh_differently() {
        // Boundaries are part of the hash: "ab"+"c" is not "a"+"bc".
        assert_ne!(weight("ab", "c"), weight("a", "bc"));
        // Unicode look-alikes and trailing spaces are other members, not the same one.
        assert_ne!(weight("replica-a", "k"), weight("replicа-a", "k"));
        assert_ne!(weight("replica-a", "k"), weight("replica-a ", "k"));
    }
}
