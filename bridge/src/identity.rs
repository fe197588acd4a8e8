//! Who a bridge is, from its config and environment: the machine, the developer, the team
//! and the version ([`crate::export::fleet::Identity`]), and the authority of its `source`
//! URIs. Apart from the exporters that carry the identity, since it reads the whole config.

use crate::config::Config;
use crate::export::fleet::Identity;

/// The machine's name: `[server] host`, else the host name.
pub fn host_name(cfg: &Config) -> String {
    if !cfg.server.host.is_empty() {
        return cfg.server.host.clone();
    }
    std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// The identity `cfg` names.
pub fn of(cfg: &Config) -> Identity {
    let user = match &cfg.fleet.user {
        Some(u) => Some(u.clone()),
        None => cfg.env.raw("USER").or_else(|| cfg.env.raw("LOGNAME")),
    };
    Identity {
        host: host_name(cfg),
        user: user.filter(|u| !u.is_empty()),
        team: Some(cfg.fleet.team.clone()).filter(|t| !t.is_empty()),
        version: env!("CARGO_PKG_VERSION").to_owned(),
    }
}

/// The authority of the bridge's `source` URIs: the host, with the developer as userinfo
/// when `[fleet] user_in_source` says so (percent-encoded, RFC 3986 §3.2.1).
pub fn source_authority(cfg: &Config) -> String {
    let id = of(cfg);
    match (&id.user, cfg.fleet.user_in_source) {
        (Some(u), true) => format!("{}@{}", aep_schemas::ids::percent_encode(u), id.host),
        _ => id.host,
    }
}

/// `cfg` with the identity added to the OTLP resource attributes (what the daemon runs with).
pub fn stamped(mut cfg: Config) -> Config {
    let id = of(&cfg);
    id.add_to(&mut cfg.export.otlp);
    cfg
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::Env;

    fn cfg(text: &str, env: &[(&str, &str)]) -> Config {
        let mut c = Config::from_toml(text).unwrap();
        c.env = Env::from_pairs(env);
        c
    }

    #[test]
    fn the_identity_comes_from_the_config_and_the_login() {
        let c = cfg("[server]\nhost = \"lap-7\"\n[fleet]\nteam = \"team-a\"\n", &[("USER", "alice")]);
        let id = of(&c);
        assert_eq!(
            (id.host.as_str(), id.user.as_deref(), id.team.as_deref()),
            ("lap-7", Some("alice"), Some("team-a"))
        );
        assert_eq!(source_authority(&c), "lap-7", "the user goes into the source only when asked");
        let c =
            cfg("[server]\nhost = \"lap-7\"\n[fleet]\nuser = \"bob smith\"\nuser_in_source = true\n", &[("USER", "x")]);
        assert_eq!(source_authority(&c), "bob%20smith@lap-7");
        assert_eq!(
            crate::stamp::source_uri(&source_authority(&c), "codex", Some("s1")),
            "aep://bob%20smith@lap-7/agent/codex/session/s1"
        );
        let c = cfg("[fleet]\nuser = \"\"\n", &[("USER", "alice")]);
        assert_eq!(of(&c).user, None, "an empty user leaves it out");
        assert!(Config::from_toml("[fleet]\nteam = \"a\\u0007\"\n").is_err());
    }

    #[test]
    fn every_signal_gets_the_same_identity_where_absent() {
        let c = cfg(
            "[server]\nhost = \"lap-7\"\n[fleet]\nteam = \"team-a\"\n[export.otlp.resource_attributes]\n\"host.name\" = \"mine\"\n",
            &[("USER", "alice")],
        );
        let s = stamped(c);
        let r = &s.export.otlp.resource_attributes;
        assert_eq!(r["host.name"], "mine", "the file wins");
        assert_eq!((r["user.name"].as_str(), r["aep.team"].as_str()), ("alice", "team-a"));
        assert_eq!(r["aep.bridge.version"], env!("CARGO_PKG_VERSION"));
        let id = of(&s);
        let mut ce = serde_json::json!({"specversion": "1.0", "aepbridgeteam": "kept"});
        id.stamp_cloudevent(&mut ce);
        assert_eq!((ce["aepbridgehost"].as_str(), ce["aepbridgeuser"].as_str()), (Some("lap-7"), Some("alice")));
        assert_eq!(ce["aepbridgeteam"], "kept");
        for k in ["aepbridgehost", "aepbridgeuser", "aepbridgeteam", "aepbridgeversion"] {
            assert!(aep_projections::ce::is_legal_extension_name(k), "{k}");
        }
        let mut rec = serde_json::json!({"metadata": {"version": "1.8.0"}});
        id.stamp_ocsf(&mut rec);
        assert_eq!(rec["metadata"]["tenant_uid"], "team-a");
        assert_eq!(rec["metadata"]["loggers"][0]["device"]["hostname"], "lap-7");
        assert_eq!(rec["metadata"]["loggers"][0]["device"]["owner"]["name"], "alice");
    }
}
