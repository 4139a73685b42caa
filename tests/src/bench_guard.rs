//! The end-to-end bench's regression guard (`E2E_GUARD=FILE`): a short run whose events/s, as a
//! ratio to the kube-runtime baseline measured in the same round, must not fall more than a
//! margin below the figures committed in `FILE` (`tests/benches/e2e-guard.toml`).
//!
//! A ratio and never a time, so a slower or busier machine slows both sides and does not fail
//! it; a median over interleaved rounds, so one disturbed round does not either. The stream is
//! the bench's own, fully determined by its sizes: no randomness to seed.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The guard's file: the run's sizes and the committed figures.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    pods: usize,
    mods: usize,
    rounds: usize,
    margin: f64,
    ratio: BTreeMap<String, f64>,
}

/// A guarded run: its sizes, and the ratio each configuration must keep.
#[derive(Debug)]
pub struct Guard {
    path: PathBuf,
    /// Pods the server holds.
    pub pods: usize,
    /// Modifications pushed per configuration and round.
    pub mods: usize,
    /// Interleaved rounds of every configuration (the baseline first in each).
    pub rounds: usize,
    margin: f64,
    ratios: BTreeMap<String, f64>,
}

/// A guard file that cannot be used; names the file and the reason.
#[derive(Debug)]
pub struct BadGuard {
    path: PathBuf,
    reason: String,
}

impl fmt::Display for BadGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "E2E_GUARD {}: {}", self.path.display(), self.reason)
    }
}

impl std::error::Error for BadGuard {}

/// A configuration whose median ratio fell below what the guard allows.
#[derive(Debug, PartialEq)]
pub struct Fell {
    /// The configuration, as `E2E_CONFIGS` names it.
    pub config: String,
    /// Its median ratio to the baseline in this run.
    pub measured: f64,
    /// The committed figure.
    pub committed: f64,
    /// The lowest ratio the margin allows.
    pub floor: f64,
}

impl fmt::Display for Fell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {:.2}x kube-runtime, below {:.2}x (the committed {:.2}x less the margin)",
            self.config, self.measured, self.floor, self.committed
        )
    }
}

impl Guard {
    /// Reads the guard file `path`.
    pub fn load(path: &Path) -> Result<Guard, BadGuard> {
        let bad = |reason: String| BadGuard {
            path: path.to_owned(),
            reason,
        };
        let text = std::fs::read_to_string(path).map_err(|e| bad(format!("cannot read: {e}")))?;
        let file: File = toml::from_str(&text).map_err(|e| bad(e.to_string()))?;
        if file.pods == 0 || file.mods == 0 || file.rounds == 0 {
            return Err(bad("`pods`, `mods` and `rounds` must be above 0".into()));
        }
        if !(0.0..1.0).contains(&file.margin) {
            return Err(bad(format!(
                "`margin` is a fraction of the figure in [0, 1), not {}",
                file.margin
            )));
        }
        if file.ratio.is_empty() {
            return Err(bad("`[ratio]` names no configuration to guard".into()));
        }
        for (config, ratio) in &file.ratio {
            if config == "kube" || !config.starts_with("meta") && !config.starts_with("parse") {
                return Err(bad(format!(
                    "`ratio.{config}`: a guarded configuration is metaN or parseN"
                )));
            }
            if !(ratio.is_finite() && *ratio > 0.0) {
                return Err(bad(format!(
                    "`ratio.{config}` must be above 0, not {ratio}"
                )));
            }
        }
        Ok(Guard {
            path: path.to_owned(),
            pods: file.pods,
            mods: file.mods,
            rounds: file.rounds,
            margin: file.margin,
            ratios: file.ratio,
        })
    }

    /// The configurations to run, the baseline first: `kube,meta10,...`.
    pub fn configs(&self) -> String {
        std::iter::once("kube")
            .chain(self.ratios.keys().map(String::as_str))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The guard's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Compares each guarded configuration's median ratio with its figure; every one that fell
    /// below the margin, or had no measurement at all.
    pub fn check(&self, medians: &BTreeMap<String, f64>) -> Vec<Fell> {
        self.ratios
            .iter()
            .filter_map(|(config, &committed)| {
                let floor = committed * (1.0 - self.margin);
                let measured = medians.get(config).copied().unwrap_or(0.0);
                (measured < floor).then(|| Fell {
                    config: config.clone(),
                    measured,
                    committed,
                    floor,
                })
            })
            .collect()
    }

    /// Guarded configurations now well above their figure (by more than the margin): a figure
    /// worth raising, so that the guard keeps what was won.
    pub fn outgrown(&self, medians: &BTreeMap<String, f64>) -> Vec<(String, f64, f64)> {
        self.ratios
            .iter()
            .filter_map(|(config, &committed)| {
                let measured = *medians.get(config)?;
                (measured > committed * (1.0 + self.margin))
                    .then(|| (config.clone(), measured, committed))
            })
            .collect()
    }
}

/// The median of `values` (the mean of the middle two for an even count); none for no values.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(text: &str) -> Result<Guard, BadGuard> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("guard.toml");
        std::fs::write(&path, text).unwrap();
        Guard::load(&path)
    }

    const GOOD: &str = "pods = 100\nmods = 300\nrounds = 3\nmargin = 0.25\n\
                        [ratio]\nmeta10 = 1.6\nparse10 = 0.4\n";

    #[test]
    fn a_guard_file_gives_the_sizes_and_the_baseline_first() {
        let g = guard(GOOD).unwrap();
        assert_eq!((g.pods, g.mods, g.rounds), (100, 300, 3));
        assert_eq!(g.configs(), "kube,meta10,parse10");
    }

    #[test]
    fn a_ratio_fails_only_below_the_margin() {
        let g = guard(GOOD).unwrap();
        let medians = |meta: f64, parse: f64| {
            BTreeMap::from([("meta10".to_string(), meta), ("parse10".to_string(), parse)])
        };
        // 1.6 less 25 % is 1.2; 0.4 less 25 % is 0.3.
        assert_eq!(g.check(&medians(1.21, 0.31)), vec![]);
        let fell = g.check(&medians(1.19, 0.31));
        assert_eq!(fell.len(), 1);
        assert_eq!(fell[0].config, "meta10");
        assert!((fell[0].floor - 1.2).abs() < 1e-9);
        assert!(
            fell[0]
                .to_string()
                .contains("1.19x kube-runtime, below 1.20x")
        );
        // A configuration that measured nothing fails too.
        let only_meta = BTreeMap::from([("meta10".to_string(), 2.1)]);
        assert_eq!(g.check(&only_meta)[0].config, "parse10");
        assert_eq!(g.outgrown(&only_meta), vec![("meta10".into(), 2.1, 1.6)]);
    }

    #[test]
    fn bad_guard_files_name_the_field_and_the_reason() {
        let cases = [
            (
                "pods = 0\nmods = 1\nrounds = 1\nmargin = 0.2\n[ratio]\nmeta10 = 1.0\n",
                "above 0",
            ),
            (
                "pods = 1\nmods = 1\nrounds = 1\nmargin = 1.5\n[ratio]\nmeta10 = 1.0\n",
                "`margin`",
            ),
            (
                "pods = 1\nmods = 1\nrounds = 1\nmargin = 0.2\n[ratio]\n",
                "no configuration",
            ),
            (
                "pods = 1\nmods = 1\nrounds = 1\nmargin = 0.2\n[ratio]\nkube = 1.0\n",
                "`ratio.kube`",
            ),
            (
                "pods = 1\nmods = 1\nrounds = 1\nmargin = 0.2\n[ratio]\nmeta10 = -1.0\n",
                "`ratio.meta10`",
            ),
            (
                "pods = 1\nmods = 1\nrounds = 1\nmargin = 0.2\nspeed = 3\n[ratio]\nmeta10 = 1.0\n",
                "speed",
            ),
        ];
        for (text, says) in cases {
            let e = guard(text).unwrap_err().to_string();
            assert!(
                e.starts_with("E2E_GUARD ") && e.contains("guard.toml"),
                "{e}"
            );
            assert!(e.contains(says), "{text:?}: {e}");
        }
    }

    #[test]
    fn the_median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[f64::NAN]), None);
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn the_committed_guard_file_loads() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/e2e-guard.toml");
        let g = Guard::load(&path).unwrap();
        assert!(g.configs().starts_with("kube,"));
    }
}
