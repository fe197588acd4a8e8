//! Who a bridge runs for, on everything it exports: a team runs one bridge per laptop, dev
//! box and CI runner, and its dashboards group the agents' sessions by machine, developer
//! and team. One identity, the same in every signal:
//!
//! | | OTLP resource (logs, spans, the agents' spans and metrics passed on, the bridge's metrics) | CloudEvents extension | OCSF |
//! |---|---|---|---|
//! | machine | `host.name` | `aepbridgehost` | `metadata.loggers[0].device.hostname` |
//! | developer | `user.name` | `aepbridgeuser` | `metadata.loggers[0].device.owner.name` |
//! | team | `aep.team` | `aepbridgeteam` | `metadata.tenant_uid` |
//! | bridge version | `aep.bridge.version` | `aepbridgeversion` | `metadata.loggers[0].version` |
//!
//! Each is added where the record does not carry it already (an agent's own resource keeps
//! its `host.name`). The extension names follow AEP-0001 §5.4 (`[a-z0-9]{1,20}`, led by the
//! producer's name), so the CloudEvents inverse (AEP-0005 §2) keeps them as extensions.
//!
//! The AEP `source` names the machine already (`aep://{host}/agent/...`, AEP-0001 §5.1 #6);
//! `[fleet] user_in_source` adds the developer as the URI's userinfo
//! (`aep://{user}@{host}/agent/...`), so two laptops of the same host name stay two
//! emitters at a hub (consumers key sessions by `(source, session)`, AEP-0001 §5.2). The
//! team has no place in the URI's RECOMMENDED form and goes on no AEP event: a hub knows an
//! edge's tenant from its credentials.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::config::OtlpConfig;

/// `[fleet]`: the team and developer a bridge runs for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FleetConfig {
    /// The team or tenant; `""` = none.
    pub team: String,
    /// The developer; unset = the login name (`$USER`, else `$LOGNAME`); `""` = none.
    pub user: Option<String>,
    /// Put the developer in the AEP `source` as its userinfo (`aep://{user}@{host}/...`).
    pub user_in_source: bool,
}

impl FleetConfig {
    /// Problems in this section alone, as `(key, message)`.
    pub fn check(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (key, v) in [("team", Some(self.team.as_str())), ("user", self.user.as_deref())] {
            if v.is_some_and(|v| v.len() > 256 || v.chars().any(char::is_control)) {
                out.push((key.to_owned(), "must be at most 256 characters, none of them a control character".into()));
            }
        }
        out
    }
}

/// The attribute names of the identity in OTLP resources.
pub const HOST: &str = "host.name";
/// The developer, in OTLP resources.
pub const USER: &str = "user.name";
/// The team, in OTLP resources.
pub const TEAM: &str = "aep.team";
/// The bridge's version, in OTLP resources.
pub const VERSION: &str = "aep.bridge.version";

/// A bridge's identity, resolved from its config and environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identity {
    /// The machine (`[server] host`, else the host name).
    pub host: String,
    /// The developer.
    pub user: Option<String>,
    /// The team.
    pub team: Option<String>,
    /// The bridge's version.
    pub version: String,
}

impl Identity {
    /// The identity as OTLP resource attributes.
    pub fn resource(&self) -> Vec<(&'static str, String)> {
        let mut v = vec![(HOST, self.host.clone())];
        v.extend(self.user.clone().map(|u| (USER, u)));
        v.extend(self.team.clone().map(|t| (TEAM, t)));
        v.push((VERSION, self.version.clone()));
        v
    }

    /// Adds the identity to `[export.otlp] resource_attributes` where the file (or
    /// `OTEL_RESOURCE_ATTRIBUTES`) does not set the key: every OTLP request then carries it.
    pub fn add_to(&self, otlp: &mut OtlpConfig) {
        for (k, v) in self.resource() {
            otlp.resource_attributes.entry(k.to_owned()).or_insert(v);
        }
    }

    /// Adds the identity's CloudEvents extension attributes where absent.
    pub fn stamp_cloudevent(&self, ce: &mut Value) {
        let Some(m) = ce.as_object_mut() else { return };
        let mut put = |k: &str, v: &str| {
            if !m.contains_key(k) {
                m.insert(k.to_owned(), Value::String(v.to_owned()));
            }
        };
        put("aepbridgehost", &self.host);
        if let Some(u) = &self.user {
            put("aepbridgeuser", u);
        }
        if let Some(t) = &self.team {
            put("aepbridgeteam", t);
        }
        put("aepbridgeversion", &self.version);
    }

    /// Adds the identity to an OCSF record's `metadata`: the team as `tenant_uid`, the
    /// bridge as the `loggers` entry (its version, its device's host name and owner).
    pub fn stamp_ocsf(&self, rec: &mut Value) {
        let Some(meta) = rec.get_mut("metadata").and_then(Value::as_object_mut) else { return };
        if let Some(t) = &self.team {
            meta.entry("tenant_uid").or_insert_with(|| Value::String(t.clone()));
        }
        if !meta.contains_key("loggers") {
            let mut device = Map::new();
            device.insert("type_id".into(), 0.into());
            device.insert("hostname".into(), Value::String(self.host.clone()));
            if let Some(u) = &self.user {
                device.insert("owner".into(), serde_json::json!({ "name": u }));
            }
            meta.insert(
                "loggers".into(),
                serde_json::json!([{
                    "name": "aep-bridge",
                    "version": self.version,
                    "product": { "name": "aep-bridge", "version": self.version },
                    "device": device,
                }]),
            );
        }
    }
}
