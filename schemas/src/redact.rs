//! The AEP-0003 §9.4 redaction pipeline (in progress).

/// Settings of the redaction pipeline.
#[derive(Debug, Clone)]
pub struct RedactConfig {
    /// Environment variable / config key names whose values are secret (§9.4 b).
    pub secret_names: Vec<String>,
    /// Values of the configured secret names, resolved by the caller (§9.4 b).
    pub secret_values: Vec<String>,
    /// The user's home directory prefix, replaced with `~` (§9.4 c).
    pub home: Option<String>,
    /// Redact emails and phone numbers (§9.4 d); on by default.
    pub pii: bool,
}

impl Default for RedactConfig {
    fn default() -> Self {
        Self { secret_names: Vec::new(), secret_values: Vec::new(), home: None, pii: true }
    }
}
