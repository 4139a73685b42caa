//! The keys a TOML table accepts, read from the parser itself, and the keys a reference page of
//! the book lists, so a test can hold the two equal: the book's tables cannot drift from the
//! code.

use serde::Deserialize;
use serde::de::value::Error;
use serde::de::{Error as _, Visitor};

/// The field names (as spelt in the file) of the struct `T` deserializes as, or `None` when `T`
/// is not read as a struct. Read from `T`'s `Deserialize` impl, so renames are applied.
pub fn of<'de, T: Deserialize<'de>>() -> Option<&'static [&'static str]> {
    let seen = std::cell::Cell::new(None);
    let _ = T::deserialize(Fields(&seen));
    seen.get()
}

/// A deserializer that only notes the field list it is asked for, then stops.
struct Fields<'a>(&'a std::cell::Cell<Option<&'static [&'static str]>>);

impl<'de> serde::Deserializer<'de> for Fields<'_> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Error> {
        Err(Error::custom("not a struct"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Error> {
        self.0.set(Some(fields));
        Err(Error::custom("fields noted"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

/// The first column of the first table under the heading line `heading` (e.g. `## Keys`) in a
/// Markdown page, each cell's text without its backticks.
pub fn table_column(page: &str, heading: &str) -> Vec<String> {
    let mut lines = page
        .lines()
        .skip_while(|l| l.trim_end() != heading)
        .skip(1)
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'));
    // The header row and the `|---|` separator.
    lines.next();
    lines.next();
    lines
        .filter_map(|row| row.split('|').nth(1))
        .map(|cell| cell.trim().trim_matches('`').to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    #[serde(rename_all = "kebab-case")]
    #[allow(dead_code)]
    struct Demo {
        max_plugins: u32,
        #[serde(rename = "other")]
        renamed: bool,
    }

    #[test]
    fn fields_are_read_from_the_impl_with_renames() {
        assert_eq!(of::<Demo>(), Some(&["max-plugins", "other"][..]));
        assert_eq!(of::<u32>(), None);
    }

    #[test]
    fn a_table_column_is_read_under_its_heading() {
        let page = "# T\n\n## Other\n\n| a | b |\n|---|---|\n| `x` | 1 |\n\n## Keys\n\ntext\n\n\
                    | key | what |\n|---|---|\n| `one` | 1 |\n| `two.three` | 2 |\n\nafter\n| `no` | |\n";
        assert_eq!(table_column(page, "## Keys"), ["one", "two.three"]);
        assert!(table_column(page, "## Missing").is_empty());
    }
}
