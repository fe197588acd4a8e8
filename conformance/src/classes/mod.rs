//! One module per fixture class. Each `run` appends one check per fixture case.

use crate::{Checks, Fixtures};

pub mod attr_match;
pub mod capture_gating;
pub mod ce_roundtrip;
pub mod downlevel;
pub mod golden;
pub mod invalid;
pub mod mappings;
pub mod ocsf;
pub mod otlp;
pub mod redaction;
pub mod registry_parity;

/// A fixture class: its name and its runner.
pub struct Class {
    /// The class name, which prefixes every check name.
    pub name: &'static str,
    /// Appends this class's checks.
    pub run: fn(&Fixtures, &mut Checks),
}

/// Every class, in report order.
pub const ALL: &[Class] = &[
    Class { name: "registry", run: registry_parity::run },
    Class { name: "golden", run: golden::run },
    Class { name: "invalid", run: invalid::run },
    Class { name: "attr-match", run: attr_match::run },
    Class { name: "capture-gating", run: capture_gating::run },
    Class { name: "downlevel", run: downlevel::run },
    Class { name: "redaction", run: redaction::run },
    Class { name: "ce-roundtrip", run: ce_roundtrip::run },
    Class { name: "otlp", run: otlp::run },
    Class { name: "ocsf", run: ocsf::run },
    Class { name: "mappings", run: mappings::run },
];
