//! Names that end up in object keys. Validated once, at the edge, so no path traversal or
//! ambiguous hive partition value can reach the lake.

use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("{what} name is empty")]
    Empty { what: &'static str },
    #[error("{what} name {name:?} is longer than {max} characters")]
    TooLong {
        what: &'static str,
        name: String,
        max: usize,
    },
    #[error(
        "{what} name {name:?} may only contain a-z, A-Z, 0-9, '.', '_' and '-', must start with a letter or digit and must not contain '..'"
    )]
    BadCharacters { what: &'static str, name: String },
}

/// Checks a name that becomes one path segment of an object key.
pub fn check_segment(what: &'static str, name: &str, max: usize) -> Result<(), NameError> {
    if name.is_empty() {
        return Err(NameError::Empty { what });
    }
    if name.len() > max {
        return Err(NameError::TooLong {
            what,
            name: name.to_string(),
            max,
        });
    }
    let first_ok = name.as_bytes()[0].is_ascii_alphanumeric();
    let chars_ok = name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if !first_ok || !chars_ok || name.contains("..") {
        return Err(NameError::BadCharacters {
            what,
            name: name.to_string(),
        });
    }
    Ok(())
}

/// Declares a name type that holds only strings passing [`check_segment`]: checked when
/// built, parsed (clap) or deserialized (serde), so an unchecked name never exists.
#[macro_export]
macro_rules! segment_name {
    ($(#[$doc:meta])* $name:ident, $what:literal, $max:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            pub const MAX_LEN: usize = $max;

            pub fn new(name: &str) -> Result<Self, $crate::NameError> {
                $crate::names::check_segment($what, name, Self::MAX_LEN)?;
                Ok(Self(name.to_string()))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                $name::new(&s).map_err(serde::de::Error::custom)
            }
        }

        /// The rule of [`check_segment`] as far as a pattern can say it (not the `..` ban).
        impl schemars::JsonSchema for $name {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({
                    "type": "string",
                    "minLength": 1,
                    "maxLength": $max,
                    "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]*$",
                })
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.pad(&self.0)
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::NameError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                $name::new(s)
            }
        }

        /// Read-only: a checked name is used wherever a `&str` is.
        impl std::ops::Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<$name> for String {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }
    };
}

segment_name!(
    /// A dataset name: one hive partition value, `dataset=<name>`.
    DatasetName,
    "dataset",
    64
);

segment_name!(
    /// A training run's id (`runs/<id>/`).
    RunId,
    "run",
    64
);

segment_name!(
    /// A shuffle's id, `sh-<12 hex>` (`shuffles/<id>/`).
    ShuffleId,
    "shuffle",
    64
);

segment_name!(
    /// An SPRT's id (`sprt/<id>/`).
    SprtId,
    "sprt",
    64
);

segment_name!(
    /// One run of a pipeline: `<pipeline>-<UTC yyyymmddThhmmss>`.
    PipelineRunId,
    "pipeline run",
    128
);

/// Where the rows of a `positions` partition came from: `source=<...>`.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    PartialOrd,
    Ord,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    Binpack,
    Lichess,
    Selfplay,
    /// Stockfish's `plain` text (`lakefish ingest plain`).
    Plain,
    /// bullet's text and bulletformat records (`lakefish ingest bullet`).
    Bullet,
}

impl Source {
    pub const ALL: [Source; 5] = [
        Source::Binpack,
        Source::Lichess,
        Source::Selfplay,
        Source::Plain,
        Source::Bullet,
    ];

    /// Every source's name, for messages and help.
    pub const CHOICES: &'static str = "binpack, lichess, selfplay, plain or bullet";

    pub fn as_str(self) -> &'static str {
        match self {
            Source::Binpack => "binpack",
            Source::Lichess => "lichess",
            Source::Selfplay => "selfplay",
            Source::Plain => "plain",
            Source::Bullet => "bullet",
        }
    }

    pub fn parse(s: &str) -> Option<Source> {
        match s {
            "binpack" => Some(Source::Binpack),
            "lichess" => Some(Source::Lichess),
            "selfplay" => Some(Source::Selfplay),
            "plain" => Some(Source::Plain),
            "bullet" => Some(Source::Bullet),
            _ => None,
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `raw/<source>/<file name>`: where uploaded inputs are kept as given.
pub fn raw_key(source: Source, file_name: &str) -> Result<String, NameError> {
    check_segment("file", file_name, 200)?;
    Ok(format!("raw/{source}/{file_name}"))
}

/// Where opening books are uploaded: `raw/books/<file>` (`PUT /v1/books/{name}`).
pub fn book_key(file_name: &str) -> Result<String, NameError> {
    check_segment("file", file_name, 200)?;
    Ok(format!("raw/books/{file_name}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dataset_names() {
        assert!(DatasetName::new("small-2024.v1_a").is_ok());
        for bad in [
            "", "a/b", "..", "a..b", ".hidden", "-x", "x y", "é", "a\\b", "a=b",
        ] {
            assert!(DatasetName::new(bad).is_err(), "{bad:?} accepted");
        }
        assert!(DatasetName::new(&"a".repeat(65)).is_err());
        let err = serde_json::from_str::<DatasetName>("\"../etc\"").unwrap_err();
        assert!(err.to_string().contains("may only contain"), "{err}");
        assert_eq!(
            raw_key(Source::Binpack, "a.binpack").unwrap(),
            "raw/binpack/a.binpack"
        );
        assert!(raw_key(Source::Binpack, "../x").is_err());
    }
}
