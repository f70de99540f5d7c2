//! Request JSON read strictly: serde_json keeps the last of two equal keys, so
//! `{"kind":"train","kind":"ingest_pgn"}` would silently become an ingest. Every JSON body
//! the API reads goes through [`check_no_duplicate_keys`] first; documents users write
//! (NetSpecs, saved layouts) through [`parse_document`], TOML or JSON.

use serde::de::{DeserializeSeed, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};
use std::collections::HashSet;

/// Refuses a JSON document in which an object holds a key twice, naming the key and where
/// (`$.spec.inputs`). Errors of the JSON itself are left to the real parser.
pub fn check_no_duplicate_keys(bytes: &[u8]) -> Result<(), String> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    match (Walk { at: &Seg::Root }).deserialize(&mut de) {
        Ok(()) => Ok(()),
        Err(e) if e.is_data() => Err(e.to_string()),
        Err(_) => Ok(()),
    }
}

/// Where a value is, as a chain to the root: written out only for an error, so a long array
/// costs nothing per element.
enum Seg<'a> {
    Root,
    Key(&'a Seg<'a>, &'a str),
    Index(&'a Seg<'a>, usize),
}

impl std::fmt::Display for Seg<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Seg::Root => f.write_str("$"),
            Seg::Key(up, k) => write!(f, "{up}.{}", k.chars().take(64).collect::<String>()),
            Seg::Index(up, i) => write!(f, "{up}[{i}]"),
        }
    }
}

struct Walk<'a> {
    at: &'a Seg<'a>,
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0usize;
        loop {
            let at = Seg::Index(self.at, i);
            if seq.next_element_seed(Walk { at: &at })?.is_none() {
                return Ok(());
            }
            i += 1;
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let at = Seg::Key(self.at, &key);
            if seen.contains(&key) {
                return Err(A::Error::custom(format!(
                    "duplicate key {:?} in {} (each key may appear once)",
                    key.chars().take(64).collect::<String>(),
                    self.at
                )));
            }
            map.next_value_seed(Walk { at: &at })?;
            seen.insert(key);
        }
        Ok(())
    }
}

/// A document (NetSpec, layout) from TOML, or from JSON when it starts with `{` (duplicate
/// keys refused), deserialized with the path of the field at fault: `(field, reason)`, the
/// field `root` when the fault is the document's as a whole.
pub fn parse_document<T: serde::de::DeserializeOwned>(
    text: &str,
    root: &str,
) -> Result<T, (String, String)> {
    fn located<E: std::fmt::Display>(
        e: serde_path_to_error::Error<E>,
        root: &str,
    ) -> (String, String) {
        let path = e.path().to_string();
        // An empty path: the document itself (or a key that is the empty string).
        let field = if path == "." || path.is_empty() {
            root.to_string()
        } else {
            path
        };
        (field, e.inner().to_string())
    }
    if text.trim_start().starts_with('{') {
        check_no_duplicate_keys(text.as_bytes()).map_err(|e| (root.to_string(), e))?;
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| (root.to_string(), e.to_string()))?;
        serde_path_to_error::deserialize(value).map_err(|e| located(e, root))
    } else {
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            (
                root.to_string(),
                e.to_string().trim_end().replace('\n', " "),
            )
        })?;
        serde_path_to_error::deserialize(toml::Value::Table(table)).map_err(|e| located(e, root))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_keys_are_named_with_their_place() {
        assert!(check_no_duplicate_keys(br#"{"kind":"train","spec":{"a":[1,{"b":2}]}}"#).is_ok());
        let e = check_no_duplicate_keys(br#"{"kind":"train","kind":"ingest_pgn"}"#).unwrap_err();
        assert!(e.contains("duplicate key \"kind\" in $"), "{e}");
        let e = check_no_duplicate_keys(br#"{"spec":{"x":[{"a":1,"a":2}]}}"#).unwrap_err();
        assert!(e.contains("\"a\" in $.spec.x[0]"), "{e}");
        // Equal keys in different objects are fine; broken JSON is the parser's to report.
        assert!(check_no_duplicate_keys(br#"[{"a":1},{"a":2}]"#).is_ok());
        assert!(check_no_duplicate_keys(br#"{"a":"#).is_ok());
        assert!(check_no_duplicate_keys(br#"{"a\u0062":1,"ab":2}"#).is_err());
    }
}
