//! The two ordered enums of the envelope: `severity` (AEP-0001 §8.1) and `capture` (§8.2).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Error for a string that names no level of an ordered enum.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {kind} {value:?} (expected one of: {expected})")]
pub struct UnknownLevel {
    /// Which enum was being parsed (`severity` or `capture`).
    pub kind: &'static str,
    /// The rejected input.
    pub value: String,
    /// The legal values, comma separated.
    pub expected: &'static str,
}

/// Event severity, totally ordered `debug < info < notice < warning < error < critical` (AEP-0001 §8.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Diagnostic detail; first to be dropped under backpressure.
    Debug,
    /// The default (AEP-0001 §5.1 #15).
    #[default]
    Info,
    /// Noteworthy; never dropped silently (AEP-0003 §8.4).
    Notice,
    /// Something may be wrong.
    Warning,
    /// Something failed.
    Error,
    /// The agent or session is in serious trouble.
    Critical,
}

impl Severity {
    /// All levels in ascending order.
    pub const ALL: [Severity; 6] =
        [Severity::Debug, Severity::Info, Severity::Notice, Severity::Warning, Severity::Error, Severity::Critical];

    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Debug => "debug",
            Severity::Info => "info",
            Severity::Notice => "notice",
            Severity::Warning => "warning",
            Severity::Error => "error",
            Severity::Critical => "critical",
        }
    }
}

impl FromStr for Severity {
    type Err = UnknownLevel;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Severity::ALL.into_iter().find(|l| l.as_str() == s).ok_or_else(|| UnknownLevel {
            kind: "severity",
            value: s.to_owned(),
            expected: "debug, info, notice, warning, error, critical",
        })
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Content-capture level, ordered `none < metadata < redacted < full` (AEP-0001 §8.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Capture {
    /// Envelope only; no payload content.
    None,
    /// Structural metadata only; the default posture (AEP-0001 §8.2(d)).
    #[default]
    Metadata,
    /// Free text that passed the AEP-0003 §9.4 redaction pipeline.
    Redacted,
    /// Verbatim content.
    Full,
}

impl Capture {
    /// All levels in ascending order.
    pub const ALL: [Capture; 4] = [Capture::None, Capture::Metadata, Capture::Redacted, Capture::Full];

    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Capture::None => "none",
            Capture::Metadata => "metadata",
            Capture::Redacted => "redacted",
            Capture::Full => "full",
        }
    }
}

impl FromStr for Capture {
    type Err = UnknownLevel;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Capture::ALL.into_iter().find(|l| l.as_str() == s).ok_or_else(|| UnknownLevel {
            kind: "capture",
            value: s.to_owned(),
            expected: "none, metadata, redacted, full",
        })
    }
}

impl fmt::Display for Capture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_and_parses() {
        assert!(Severity::Debug < Severity::Critical);
        assert!(Capture::Metadata < Capture::Redacted);
        assert_eq!("notice".parse::<Severity>().unwrap(), Severity::Notice);
        assert_eq!("full".parse::<Capture>().unwrap(), Capture::Full);
        let err = "loud".parse::<Severity>().unwrap_err();
        assert!(err.to_string().contains("loud"));
        assert!("FULL".parse::<Capture>().is_err());
    }
}
