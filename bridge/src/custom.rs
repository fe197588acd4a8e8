//! Custom adapter manifests (`{data}/adapters/*.toml`): a vendor the bridge has no
//! folder for, registered on the generic fallback mapping (AEP-0002 Annex A: unknown
//! hooks become `x.{vendor}.session.*`). `serve` loads them; `aep-bridge adapters`
//! lists and checks them.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// A custom adapter manifest (TOML), mapped through the generic fallback.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct CustomManifest {
    /// Agent identity and vendor token, `[a-z0-9-]+`.
    pub id: String,
    /// Human name.
    pub display_name: String,
    /// Executables to detect on PATH.
    #[serde(default)]
    pub executables: Vec<String>,
    /// Payload field naming the hook.
    #[serde(default = "default_hook_field")]
    pub hook_field: String,
    /// Payload field carrying the session id.
    #[serde(default = "default_session_field")]
    pub session_field: String,
}

fn default_hook_field() -> String {
    "hook_event_name".into()
}

fn default_session_field() -> String {
    "session_id".into()
}

/// Parses and validates a manifest strictly: unknown fields, id grammar, built-in collisions.
pub fn parse_manifest(text: &str) -> Result<CustomManifest, String> {
    let m: CustomManifest = toml::from_str(text).map_err(|e| e.to_string().trim().to_owned())?;
    let mut problems = Vec::new();
    if m.id.is_empty() || !m.id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-') {
        problems.push(format!("id {:?}: must match [a-z0-9-]+ (it becomes the agent and x.{{id}}.* token)", m.id));
    }
    if aep_adapters::vendors::by_vendor(&m.id).is_some() {
        problems.push(format!("id {:?} collides with a built-in adapter", m.id));
    }
    if m.display_name.trim().is_empty() {
        problems.push("display_name: must not be empty".into());
    }
    for (k, v) in [("hook_field", &m.hook_field), ("session_field", &m.session_field)] {
        if v.trim().is_empty() {
            problems.push(format!("{k}: must not be empty"));
        }
    }
    for e in &m.executables {
        if e.trim().is_empty() || e.contains('/') {
            problems.push(format!("executables: {e:?} must be a bare command name"));
        }
    }
    if problems.is_empty() { Ok(m) } else { Err(problems.join("; ")) }
}

/// The default custom manifest directory: `$AEP_BRIDGE_DATA_DIR/adapters` or `~/.aep/adapters`.
pub fn default_dir(env: &crate::env::Env) -> PathBuf {
    env.data_dir().join("adapters")
}

/// Valid manifests with their files, and `(file, error)` for the rejected ones.
pub type Loaded = (Vec<(PathBuf, CustomManifest)>, Vec<(PathBuf, String)>);

/// Loads every `*.toml` in `dir` (sorted); invalid ones and duplicate ids come back as
/// `(file, error)` and are skipped. A missing directory is empty.
pub fn load_custom(dir: &Path) -> Loaded {
    let mut ok: Vec<(PathBuf, CustomManifest)> = Vec::new();
    let mut bad = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else { return (ok, bad) };
    let mut files: Vec<PathBuf> =
        rd.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "toml")).collect();
    files.sort();
    for f in files {
        match std::fs::read_to_string(&f).map_err(|e| e.to_string()).and_then(|t| parse_manifest(&t)) {
            Ok(m) if ok.iter().any(|(_, o)| o.id == m.id) => {
                bad.push((f, format!("id {:?} is already defined by another manifest", m.id)));
            }
            Ok(m) => ok.push((f, m)),
            Err(e) => bad.push((f, e)),
        }
    }
    (ok, bad)
}

/// The hook adapters of the valid custom manifests in `dir`, on the generic fallback
/// mapping. Their strings are leaked once here (adapters live for the process).
pub fn custom_adapters(dir: &Path) -> Vec<Box<dyn aep_adapters::HookAdapter>> {
    let leak = |s: &str| -> &'static str { Box::leak(s.to_owned().into_boxed_str()) };
    load_custom(dir)
        .0
        .into_iter()
        .map(|(_, m)| {
            Box::new(aep_adapters::generic::GenericAdapter {
                vendor: leak(&m.id),
                hook_field: leak(&m.hook_field),
                session_field: leak(&m.session_field),
            }) as Box<dyn aep_adapters::HookAdapter>
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn manifests_are_validated_strictly() {
        let ok = parse_manifest("id = \"my-agent\"\ndisplay_name = \"Mine\"\nexecutables = [\"mine\"]\n").unwrap();
        assert_eq!(ok.hook_field, "hook_event_name");
        assert_eq!(ok.session_field, "session_id");
        let e = parse_manifest("id = \"x\"\ndisplay_name = \"X\"\ncolour = 1\n").unwrap_err();
        assert!(e.contains("colour"), "{e}");
        let e = parse_manifest("id = \"My_Agent\"\ndisplay_name = \"X\"\n").unwrap_err();
        assert!(e.contains("[a-z0-9-]+"), "{e}");
        let e = parse_manifest("id = \"codex\"\ndisplay_name = \"X\"\n").unwrap_err();
        assert!(e.contains("built-in"), "{e}");
        assert!(parse_manifest("id = \"a\"\n").is_err(), "display_name is required");
    }

    #[test]
    fn custom_manifests_load_and_map_through_the_generic_fallback() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("a.toml"),
            "id = \"acme\"\ndisplay_name = \"Acme\"\nhook_field = \"event\"\nsession_field = \"sid\"\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("b.toml"), "id = \"acme\"\ndisplay_name = \"Dup\"\n").unwrap();
        std::fs::write(dir.path().join("c.toml"), "nonsense").unwrap();
        let (ok, bad) = load_custom(dir.path());
        assert_eq!(ok.len(), 1);
        assert_eq!(bad.len(), 2);
        let ads = custom_adapters(dir.path());
        let payload = json!({"event": "ThingDone", "sid": "s-1"});
        let call = aep_adapters::HookCall { event: None, payload: &payload };
        let drafts = ads[0]
            .map(&call, &mut aep_adapters::SessionState::default(), &aep_adapters::MapContext::default())
            .unwrap();
        assert_eq!(drafts[0].r#type, "x.acme.session.thing_done");
        assert_eq!(drafts[0].session.as_deref(), Some("s-1"));
    }
}
