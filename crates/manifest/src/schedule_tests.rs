use super::*;

const WATCH: &str = "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\n";

fn refusal(table: &str) -> String {
    let text = format!("{WATCH}[[schedule]]\n{table}");
    Manifest::parse(&text, Path::new("plugins/tick.toml"))
        .expect_err(table)
        .to_string()
}

#[test]
fn schedules_are_read_with_their_timing() {
    let m = Manifest::parse(
            &format!(
                "{WATCH}[[schedule]]\nname = \"sweep\"\nevery = \"30s\"\n[[schedule]]\nname = \"summary\"\ncron = \"0 */6 * * *\"\n"
            ),
            Path::new("p.toml"),
        )
        .unwrap();
    assert_eq!(m.schedule[0].name.as_str(), "sweep");
    assert_eq!(m.schedule[0].when(), When::Every(Duration::from_secs(30)));
    assert!(matches!(m.schedule[1].when(), When::Cron(c) if c.as_str() == "0 */6 * * *"));
    assert!(parse_plain(WATCH).schedule.is_empty());
}

fn parse_plain(text: &str) -> Manifest {
    Manifest::parse(text, Path::new("p.toml")).unwrap()
}

/// Hostile `[[schedule]]` tables: every refusal names the file, the field (with its line
/// where the value is at fault) and the reason.
#[test]
fn hostile_schedules_are_refused_naming_file_field_and_reason() {
    for (table, field, reason) in [
        (
            "name = \"a\"\ncron = \"\"\n",
            "schedule[0].cron",
            "it is empty",
        ),
        (
            "name = \"a\"\ncron = \"* * * * * * *\"\n",
            "schedule[0].cron",
            "7 fields; expected 5",
        ),
        (
            "name = \"a\"\ncron = \"0 0 1 1 * * 2030\"\n",
            "schedule[0].cron",
            "7 fields",
        ),
        (
            "name = \"a\"\ncron = \"61 * * * *\"\n",
            "schedule[0].cron",
            "the minute field `61`: number out of bounds",
        ),
        (
            "name = \"a\"\ncron = \"\u{0665} * * * *\"\n",
            "schedule[0].cron",
            "(U+0665) is not allowed",
        ),
        (
            "name = \"a\"\ncron = \"*/99999999999 * * * *\"\n",
            "schedule[0].cron",
            "the minute field `*/99999999999`: invalid step",
        ),
        (
            "name = \"a\"\ncron = \"* * * * *  \"\n",
            "schedule[0].cron",
            "remove the whitespace",
        ),
        (
            "name = \"a\"\nevery = \"0s\"\n",
            "schedule[0].every",
            "shorter than the shortest period, 1s",
        ),
        (
            "name = \"a\"\nevery = \"-1s\"\n",
            "schedule[0].every",
            "`-` where a number was expected",
        ),
        (
            "name = \"a\"\nevery = \"1ns\"\n",
            "schedule[0].every",
            "unknown unit `ns`",
        ),
        (
            "name = \"a\"\nevery = 30\n",
            "schedule[0].every",
            "expected a string",
        ),
        (
            "name = \"Tick_1\"\nevery = \"1s\"\n",
            "schedule[0].name",
            "is not a schedule name",
        ),
        (
            "name = \"\"\nevery = \"1s\"\n",
            "schedule[0].name",
            "it is empty",
        ),
        ("every = \"1s\"\n", "schedule[0]", "missing field `name`"),
        (
            "name = \"a\"\nevery = \"1s\"\nat = \"noon\"\n",
            "",
            "unknown field `at`",
        ),
    ] {
        let err = refusal(table);
        assert!(
            err.starts_with("manifest `plugins/tick.toml`: ")
                && err.contains(&format!("field `{field}"))
                && err.contains(reason),
            "`{table}` -> {err}"
        );
        let line = match field {
            "schedule[0].name" => Some("line 5"),
            "schedule[0].cron" | "schedule[0].every" => Some("line 6"),
            _ => None,
        };
        if let Some(line) = line {
            assert!(err.contains(line), "`{table}` -> {err}");
        }
    }
    // Whole-table rules, checked after deserializing: file, field and reason.
    for (table, field, reason) in [
        (
            "name = \"a\"\ncron = \"* * * * *\"\nevery = \"1s\"\n",
            "schedule[0].every",
            "either `cron` or `every`, not both",
        ),
        (
            "name = \"a\"\n",
            "schedule[0].cron",
            "needs `cron` (a pattern) or `every`",
        ),
    ] {
        let err = refusal(table);
        assert_eq!(
            err,
            format!("manifest `plugins/tick.toml`: field `{field}`: {}", {
                let (_, rest) = err.split_once(": field `").unwrap();
                rest.split_once("`: ").unwrap().1.to_string()
            }),
        );
        assert!(err.contains(reason), "{err}");
    }
}
