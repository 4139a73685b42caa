//! Schedules (`[[schedule]]`): named ticks delivered to the plugin's `handle-schedule` export.
//!
//! ```toml
//! [[schedule]]
//! name = "summary"            # a DNS label, unique in the manifest; the export gets it
//! cron = "*/5 * * * *"        # five fields, or six with seconds first; UTC
//!
//! [[schedule]]
//! name = "sweep"
//! every = "30s"               # or a period: 1h30m, 500ms + 1s ...; at least 1s
//! ```
//!
//! A table gives `cron` or `every`, never both. Cron patterns are parsed by the `croner` crate
//! (OCPS rules: ranges, lists, `*/N` steps, month and weekday names, `L`, `W` and `#` in the day
//! fields; day-of-month and day-of-week restricted together match either, as in Vixie cron).
//! Nicknames (`@daily`) and a seventh (year) field are refused: five or six fields only. Every
//! value is checked while deserializing, so a refusal names the file, the field with its TOML
//! line, and the reason, down to the cron field at fault.

use std::time::{Duration, SystemTime};

use serde::Deserialize;

use informant_apimachinery::names::{Flaw, shown};

/// The shortest `every` period: cron's own resolution, and short enough for any real schedule.
pub const MIN_EVERY: Duration = Duration::from_secs(1);

/// The longest `every` period (366 days): a longer one is a cron pattern.
pub const MAX_EVERY: Duration = Duration::from_secs(366 * 24 * 3600);

/// One `[[schedule]]` table.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Schedule {
    /// What the plugin's `handle-schedule` export is called with.
    pub name: ScheduleName,
    /// A cron pattern (UTC); not with `every`.
    pub cron: Option<CronPattern>,
    /// A fixed period; not with `cron`.
    pub every: Option<Every>,
}

/// When a schedule ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When<'a> {
    /// At the times a cron pattern matches (UTC).
    Cron(&'a CronPattern),
    /// Every period, the first one period after the schedule starts.
    Every(Duration),
}

impl Schedule {
    /// When it ticks. A table [`Schedule::check`] accepted has exactly one of the two.
    pub fn when(&self) -> When<'_> {
        match (&self.cron, self.every) {
            (Some(cron), _) => When::Cron(cron),
            (None, Some(every)) => When::Every(every.0),
            (None, None) => unreachable!("a checked schedule has `cron` or `every`"),
        }
    }

    /// Checks what serde cannot: exactly one of `cron` and `every`.
    pub fn check(&self) -> Result<(), ScheduleTableError> {
        match (&self.cron, &self.every) {
            (Some(_), Some(_)) => Err(ScheduleTableError::Both),
            (None, None) => Err(ScheduleTableError::Neither),
            _ => Ok(()),
        }
    }
}

/// Checks a manifest's schedules: each table on its own, and no name twice. The error carries
/// the index of the table at fault. Linear in the tables, however many a manifest holds (how
/// many it may have is the host's [`check_count`]).
pub fn check_all(schedules: &[Schedule]) -> Result<(), (usize, ScheduleTableError)> {
    let mut seen = std::collections::HashMap::with_capacity(schedules.len());
    for (i, s) in schedules.iter().enumerate() {
        s.check().map_err(|e| (i, e))?;
        if let Some(&first) = seen.get(s.name.as_str()) {
            return Err((
                i,
                ScheduleTableError::Duplicate {
                    name: s.name.0.clone(),
                    first,
                },
            ));
        }
        seen.insert(s.name.as_str(), i);
    }
    Ok(())
}

/// Default of the host's `limits.max-schedules`: `[[schedule]]` tables one manifest may have.
pub const DEFAULT_MAX_SCHEDULES: usize = 16;

/// Refuses more than `max` tables (the host's `limits.max-schedules`): each is a timer of the
/// host's and series of its own on `/metrics`, so a manifest may not ask for thousands.
pub fn check_count(schedules: &[Schedule], max: usize) -> Result<(), TooManySchedules> {
    match schedules.len() {
        count if count > max => Err(TooManySchedules { count, max }),
        _ => Ok(()),
    }
}

/// A manifest with more `[[schedule]]` tables than the host allows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{count} [[schedule]] tables; a manifest may have at most {max} (`limits.max-schedules` in informant.toml)"
)]
pub struct TooManySchedules {
    /// Tables in the manifest.
    pub count: usize,
    /// The host's ceiling.
    pub max: usize,
}

/// What [`Schedule::check`] and [`check_all`] refuse; [`ScheduleTableError::field`] names the
/// field at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleTableError {
    /// Both `cron` and `every`.
    #[error("give either `cron` or `every`, not both")]
    Both,
    /// Neither.
    #[error("a schedule needs `cron` (a pattern) or `every` (a period)")]
    Neither,
    /// A name used by an earlier table.
    #[error("schedule `{name}` is already declared by schedule[{first}]")]
    Duplicate {
        /// The name.
        name: String,
        /// The earlier table's index.
        first: usize,
    },
}

impl ScheduleTableError {
    /// The field at fault, as the table spells it.
    pub fn field(&self) -> &'static str {
        match self {
            ScheduleTableError::Both => "every",
            ScheduleTableError::Neither => "cron",
            ScheduleTableError::Duplicate { .. } => "name",
        }
    }
}

/// A schedule's name: a DNS label (lowercase letters, digits and `-`, at most 63 characters),
/// so it is safe in logs, metrics labels and every SDK.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(try_from = "String")]
pub struct ScheduleName(String);

impl ScheduleName {
    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for ScheduleName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Text that is not a schedule name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{shown}` is not a schedule name (a DNS label): {flaw}")]
pub struct ScheduleNameError {
    /// The text as messages show it.
    pub shown: String,
    /// What breaks the rule.
    #[source]
    pub flaw: Flaw,
}

impl TryFrom<String> for ScheduleName {
    type Error = ScheduleNameError;
    fn try_from(s: String) -> Result<Self, ScheduleNameError> {
        // A namespace is a DNS label too: the same rule, the message naming a schedule.
        match informant_apimachinery::names::check_namespace(&s) {
            Ok(()) => Ok(ScheduleName(s)),
            Err(informant_apimachinery::names::NameError::Namespace { shown, flaw })
            | Err(informant_apimachinery::names::NameError::Object { shown, flaw }) => {
                Err(ScheduleNameError { shown, flaw })
            }
        }
    }
}

/// A fixed period (`every = "30s"`): one or more `<digits><unit>` with units `ms`, `s`, `m`,
/// `h` (`1h30m`), between [`MIN_EVERY`] and [`MAX_EVERY`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct Every(pub Duration);

/// Why an `every` period is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EveryError {
    /// Not `<digits><unit>...`.
    #[error(
        "`{}` is not a period: expected digits and a unit (ms, s, m, h), such as `30s` or `1h30m`{}",
        shown(.text), .detail
    )]
    Syntax {
        /// The text.
        text: String,
        /// What in it is wrong, with a leading `: `; empty when the whole is.
        detail: String,
    },
    /// Too short.
    #[error("`{text}` is shorter than the shortest period, 1s")]
    TooShort {
        /// The text.
        text: String,
    },
    /// Too long (or overflowing).
    #[error("`{text}` is longer than the longest period, 366 days (use `cron` for rarer ticks)")]
    TooLong {
        /// The text.
        text: String,
    },
}

impl TryFrom<String> for Every {
    type Error = EveryError;
    fn try_from(text: String) -> Result<Self, EveryError> {
        let syntax = |detail: String| EveryError::Syntax {
            text: text.clone(),
            detail,
        };
        if text.is_empty() {
            return Err(syntax(": it is empty".into()));
        }
        let mut total = Duration::ZERO;
        let mut rest = text.as_str();
        while !rest.is_empty() {
            let digits = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            if digits == 0 {
                let c = rest.chars().next().unwrap_or_default();
                return Err(syntax(format!(
                    ": `{}` where a number was expected (digits 0-9 only)",
                    c.escape_debug()
                )));
            }
            let (number, after) = rest.split_at(digits);
            let unit_len = after
                .find(|c: char| c.is_ascii_digit())
                .unwrap_or(after.len());
            let (unit, next) = after.split_at(unit_len);
            let per_unit = match unit {
                "ms" => Duration::from_millis(1),
                "s" => Duration::from_secs(1),
                "m" => Duration::from_secs(60),
                "h" => Duration::from_secs(3600),
                "" => return Err(syntax(format!(": `{number}` has no unit"))),
                other => {
                    return Err(syntax(format!(
                        ": unknown unit `{}` (ms, s, m or h)",
                        other.escape_debug()
                    )));
                }
            };
            let too_long = || EveryError::TooLong { text: text.clone() };
            let n: u32 = number.parse().map_err(|_| too_long())?;
            total = per_unit
                .checked_mul(n)
                .and_then(|d| total.checked_add(d))
                .ok_or_else(too_long)?;
            rest = next;
        }
        if total < MIN_EVERY {
            return Err(EveryError::TooShort { text });
        }
        if total > MAX_EVERY {
            return Err(EveryError::TooLong { text });
        }
        Ok(Every(total))
    }
}

/// A cron pattern of five fields (minute hour day-of-month month day-of-week) or six (seconds
/// first), read in UTC.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct CronPattern {
    text: String,
    cron: croner::Cron,
}

/// Why a cron pattern is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CronPatternError {
    /// Not the expected number of fields, or whitespace around it.
    #[error("invalid cron `{}`: {reason}", shown(.text))]
    Shape {
        /// The pattern.
        text: String,
        /// What is wrong with it as a whole.
        reason: String,
    },
    /// One field does not parse.
    #[error("invalid cron `{}`: the {field} field `{}`: {reason}", shown(.text), shown(.value))]
    Field {
        /// The pattern.
        text: String,
        /// Which field (`minute`, `day-of-week`, ...).
        field: &'static str,
        /// Its text.
        value: String,
        /// The parser's reason.
        reason: String,
    },
    /// It parses but no time ever matches it (`0 0 30 2 *`).
    #[error("cron `{}` never matches any time", shown(.text))]
    Never {
        /// The pattern.
        text: String,
    },
}

/// The field names of a six-field pattern; a five-field one lacks the first.
const FIELDS: [&str; 6] = [
    "second",
    "minute",
    "hour",
    "day-of-month",
    "month",
    "day-of-week",
];

fn parser() -> croner::parser::CronParser {
    use croner::parser::{CronParser, Seconds, Year};
    CronParser::builder()
        .seconds(Seconds::Optional)
        .year(Year::Disallowed)
        .build()
}

impl TryFrom<String> for CronPattern {
    type Error = CronPatternError;
    fn try_from(text: String) -> Result<Self, CronPatternError> {
        let shape = |reason: &str| CronPatternError::Shape {
            text: text.clone(),
            reason: reason.into(),
        };
        if text.trim().is_empty() {
            return Err(shape("it is empty"));
        }
        if text.trim() != text {
            return Err(shape("remove the whitespace before or after it"));
        }
        if let Some(c) = text.chars().find(|c| !c.is_ascii()) {
            return Err(shape(&format!(
                "`{}` (U+{:04X}) is not allowed: ASCII digits, names and `* , - / L W #` only",
                c.escape_debug(),
                c as u32
            )));
        }
        if text.starts_with('@') {
            return Err(shape(
                "nicknames such as `@daily` are not supported; write the five fields",
            ));
        }
        let parts: Vec<&str> = text.split_ascii_whitespace().collect();
        let names = match parts.len() {
            5 => &FIELDS[1..],
            6 => &FIELDS[..],
            n => {
                return Err(shape(&format!(
                    "{n} fields; expected 5 (minute hour day-of-month month day-of-week) or 6 \
                     (second first)"
                )));
            }
        };
        let parser = parser();
        let cron = match parser.parse(&text) {
            Ok(cron) => cron,
            Err(whole) => {
                // The parser's messages do not say which field; find it by parsing each field
                // among wildcards.
                for (i, value) in parts.iter().enumerate() {
                    let mut alone = vec!["*"; parts.len()];
                    alone[i] = value;
                    if let Err(e) = parser.parse(&alone.join(" ")) {
                        return Err(CronPatternError::Field {
                            text: text.clone(),
                            field: names[i],
                            value: value.to_string(),
                            reason: reason(&e),
                        });
                    }
                }
                return Err(shape(&reason(&whole)));
            }
        };
        let pattern = CronPattern { text, cron };
        // A pattern no date satisfies (the 30th of February) would never tick: refused here
        // rather than found idle in production.
        if pattern.next_after(SystemTime::now()).is_none() {
            return Err(CronPatternError::Never { text: pattern.text });
        }
        Ok(pattern)
    }
}

/// The parser's reason, without its own prefixes.
fn reason(e: &croner::errors::CronError) -> String {
    use croner::errors::CronError as E;
    let text = match e {
        E::InvalidPattern(m) | E::IllegalCharacters(m) | E::ComponentError(m) => m.clone(),
        other => other.to_string(),
    };
    text.trim_end_matches('.').to_lowercase()
}

impl CronPattern {
    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The first time after `after` the pattern matches, in UTC; `None` if none is left before
    /// the parser's horizon.
    pub fn next_after(&self, after: SystemTime) -> Option<SystemTime> {
        let now = jiff::Timestamp::try_from(after).ok()?;
        let zoned = now.to_zoned(jiff::tz::TimeZone::UTC);
        let next = self.cron.find_next_occurrence(&zoned, false).ok()?;
        Some(SystemTime::from(next.timestamp()))
    }
}

impl std::fmt::Display for CronPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every(s: &str) -> Result<Duration, String> {
        Every::try_from(s.to_string())
            .map(|e| e.0)
            .map_err(|e| e.to_string())
    }

    fn cron(s: &str) -> Result<CronPattern, String> {
        CronPattern::try_from(s.to_string()).map_err(|e| e.to_string())
    }

    #[test]
    fn periods_are_sums_of_numbers_with_units() {
        assert_eq!(every("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(every("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(every("1s500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(every("1000ms"), Ok(Duration::from_secs(1)));
        assert_eq!(every("8784h"), Ok(MAX_EVERY));
        for (text, reason) in [
            ("", "it is empty"),
            ("0s", "shorter than the shortest period, 1s"),
            ("999ms", "shorter than the shortest period"),
            ("-1s", "`-` where a number was expected"),
            ("1ns", "unknown unit `ns`"),
            ("1d", "unknown unit `d`"),
            ("30", "`30` has no unit"),
            ("s", "`s` where a number was expected"),
            (" 30s", "` ` where a number was expected"),
            ("30s ", "unknown unit `s `"),
            ("\u{0661}s", "`\u{0661}` where a number was expected"),
            ("1.5s", "unknown unit `.`"),
            ("8785h", "longer than the longest period"),
            ("99999999999h", "longer than the longest period"),
            ("4294967295h4294967295h", "longer than the longest period"),
        ] {
            let err = every(text).unwrap_err();
            assert!(err.contains(reason), "`{text}`: {err}");
        }
    }

    #[test]
    fn cron_takes_five_or_six_fields_in_utc() {
        let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000); // 2027-01-15T08:00:00Z
        let five = cron("*/5 * * * *").unwrap();
        assert_eq!(
            five.next_after(start),
            Some(start + Duration::from_secs(300))
        );
        let six = cron("*/10 * * * * *").unwrap();
        assert_eq!(six.next_after(start), Some(start + Duration::from_secs(10)));
        // 08:00 UTC is not 09:00, whatever the machine's zone.
        let nine = cron("0 9 * * *").unwrap();
        assert_eq!(
            nine.next_after(start),
            Some(start + Duration::from_secs(3600))
        );
        cron("0 0 * JAN,jul MON-FRI").unwrap();
        cron("0 0 L * *").unwrap();
        assert_eq!(nine.as_str(), "0 9 * * *");
    }

    #[test]
    fn hostile_cron_patterns_are_refused_naming_the_reason() {
        for (text, reason) in [
            ("", "it is empty"),
            ("   ", "it is empty"),
            ("* * * *", "4 fields; expected 5"),
            ("* * * * * * *", "7 fields; expected 5"),
            ("0 0 1 1 * 2030 x", "7 fields"),
            ("61 * * * *", "the minute field `61`: number out of bounds"),
            ("* 61 * * * *", "the minute field `61`"),
            ("60 * * * * *", "the second field `60`"),
            ("* 24 * * *", "the hour field `24`"),
            ("* * 32 * *", "the day-of-month field `32`"),
            ("* * 0 * *", "the day-of-month field `0`"),
            ("* * * 13 *", "the month field `13`"),
            ("* * * * 8", "the day-of-week field `8`"),
            (
                "*/99999999999 * * * *",
                "the minute field `*/99999999999`: invalid step",
            ),
            ("*/0 * * * *", "step cannot be zero"),
            ("\u{0661} * * * *", "(U+0661) is not allowed"),
            ("\u{ff11} * * * *", "(U+FF11) is not allowed"),
            ("* * * * * ", "remove the whitespace"),
            (" * * * * *", "remove the whitespace"),
            ("*\u{a0}* * * * *", "(U+00A0) is not allowed"),
            ("@daily", "nicknames"),
            ("x * * * *", "the minute field `x`: "),
            ("0 0 30 2 *", "never matches"),
            ("5-1 * * * *", "the minute field `5-1`"),
        ] {
            let err = cron(text).unwrap_err();
            assert!(err.contains(reason), "`{text}`: {err}");
        }
    }

    #[test]
    fn names_are_dns_labels() {
        let name = |s: &str| ScheduleName::try_from(s.to_string()).map_err(|e| e.to_string());
        assert_eq!(name("summary-5m").unwrap().as_str(), "summary-5m");
        for (text, reason) in [
            ("", "it is empty"),
            ("Summary", "`S` is not allowed"),
            ("a_b", "`_` is not allowed"),
            ("a.b", "`.` is not allowed"),
            ("-a", "start and end with a letter or digit"),
            ("a/../b", "`/` is not allowed"),
            ("naïve", "`ï` is not allowed"),
            (&"a".repeat(64), "longer than 63"),
        ] {
            let err = name(text).unwrap_err();
            assert!(
                err.contains("is not a schedule name") && err.contains(reason),
                "`{text}`: {err}"
            );
        }
    }

    #[test]
    fn thousands_of_tables_are_checked_in_linear_time_and_counted_against_the_host() {
        let tables: Vec<Schedule> = (0..5000)
            .map(|i| Schedule {
                name: ScheduleName::try_from(format!("s{i}")).unwrap(),
                cron: None,
                every: Some(Every(MIN_EVERY)),
            })
            .collect();
        let started = std::time::Instant::now();
        check_all(&tables).unwrap();
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        let mut twice = tables.clone();
        twice.push(tables[4321].clone());
        assert_eq!(
            check_all(&twice).unwrap_err(),
            (
                5000,
                ScheduleTableError::Duplicate {
                    name: "s4321".into(),
                    first: 4321
                }
            )
        );
        let e = check_count(&tables, DEFAULT_MAX_SCHEDULES).unwrap_err();
        assert_eq!(
            e.to_string(),
            "5000 [[schedule]] tables; a manifest may have at most 16 (`limits.max-schedules` in informant.toml)"
        );
        assert!(check_count(&tables[..16], DEFAULT_MAX_SCHEDULES).is_ok());
    }
}
