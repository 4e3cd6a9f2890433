//! One error type for the whole engine. Every user-facing failure says what
//! file, which line (or binary record) and which field was wrong.

use std::fmt;

/// Where in an input a problem was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    /// 1-based line number of a text input.
    Line(u64),
    /// 0-based record index of a binary input.
    Record(u64),
    /// No finer position (e.g. the file as a whole).
    Whole,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Line(n) => write!(f, "line {n}"),
            Location::Record(n) => write!(f, "record {n}"),
            Location::Whole => write!(f, "file"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A malformed record in an input file.
    #[error("{file}: {location}: field `{field}`: {message}")]
    Parse {
        file: String,
        location: Location,
        field: String,
        message: String,
    },
    /// The file could not be opened or read.
    #[error("{path}: {message}")]
    Io { path: String, message: String },
    /// An impossible configuration: unknown name, bad size, ...
    #[error("{0}")]
    Config(String),
    /// A bad key of a configuration file (a stack file): which file, which
    /// key (dotted path, as `--set` writes it), what is wrong.
    #[error("{file}: key `{key}`: {message}")]
    Key { file: String, key: String, message: String },
}

impl Error {
    pub fn parse(
        file: impl Into<String>,
        location: Location,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Error::Parse {
            file: file.into(),
            location,
            field: field.into(),
            message: message.into(),
        }
    }

    pub fn io(path: impl Into<String>, err: impl fmt::Display) -> Self {
        Error::Io {
            path: path.into(),
            message: err.to_string(),
        }
    }

    pub fn config(message: impl Into<String>) -> Self {
        Error::Config(message.into())
    }

    pub fn key(file: impl Into<String>, key: impl Into<String>, message: impl fmt::Display) -> Self {
        Error::Key {
            file: file.into(),
            key: key.into(),
            message: message.to_string(),
        }
    }

    /// The message alone, without the file and key a caller may add.
    pub fn message(&self) -> String {
        match self {
            Error::Key { message, .. } => message.clone(),
            other => other.to_string(),
        }
    }

    /// An unknown name, listing the valid ones.
    pub fn unknown(what: &str, given: &str, valid: &[&str]) -> Self {
        Error::Config(format!("unknown {what} `{given}`; valid: {}", valid.join(", ")))
    }
}

pub type Result<T> = std::result::Result<T, Error>;
