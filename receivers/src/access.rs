//! Who may do what on the collector's bindings: the operator's token (`server.token`: every
//! tenant, every role) and an access list of further tokens (`[[access]]`), each naming one
//! tenant and the roles it holds: `emit` (an edge bridge relaying its sessions here),
//! `view` (streams, replay, roster, the web view) and `answer` (commands).
//!
//! A team's hub holds one token per edge and per person: a tenant-A token sees, lists and
//! answers tenant A's sessions only. Authentication is AEP-0003 §8.1's bearer token;
//! *who may command whom* is deployment policy, enforced at the endpoint and surfaced as
//! `unauthorized` (AEP-0004 §4.2 item 3). The tenant of a session comes from the token that
//! first emitted it (see [`crate::tenancy`]), never from anything the event says.

use std::sync::Arc;

use serde::Deserialize;

/// Compares a presented secret with the expected one in a time that depends on the
/// presented length only: not on where they differ, nor on the expected secret's length
/// (a shorter or longer guess takes the same walk, so it learns neither).
pub fn constant_time_eq(presented: &[u8], expected: &[u8]) -> bool {
    let mut diff = u8::from(presented.len() != expected.len());
    let n = expected.len().max(1);
    for (i, x) in presented.iter().enumerate() {
        diff |= x ^ expected.get(i % n).copied().unwrap_or(0);
    }
    std::hint::black_box(diff) == 0
}

/// Whether a request carrying `got` passes a surface that wants `want` (none: open),
/// compared in constant time.
pub fn bearer_ok(want: Option<&str>, got: Option<&str>) -> bool {
    match want {
        None => true,
        Some(want) => got.is_some_and(|t| constant_time_eq(t.as_bytes(), want.as_bytes())),
    }
}

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Send events (an edge bridge's relay, `POST /events`): its sessions become its tenant's.
    Emit,
    /// Read: SSE and WebSocket subscriptions, replay, the roster, the web view.
    View,
    /// Send commands (answers, cancels) to its tenant's sessions.
    Answer,
}

/// `[[access]]`: one token of a hub's access list.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccessEntry {
    /// Who holds it (an edge's host, a person), in logs and refusals; unique.
    pub name: String,
    /// The tenant (team) it belongs to: it sees and answers this tenant's sessions only.
    pub tenant: String,
    /// The bearer token.
    pub token: String,
    /// What it may do.
    pub roles: Vec<Role>,
}

/// Shortest token an access entry may have: a token is guessed, not typed.
pub const MIN_TOKEN_CHARS: usize = 16;

/// Problems of an access list, as `(key, message)` with keys inside `access` (`[1].token`).
pub fn check(entries: &[AccessEntry], operator_token: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let at = |k: &str| format!("[{i}].{k}");
        if e.name.trim().is_empty() {
            out.push((at("name"), "is empty".into()));
        } else if entries[..i].iter().any(|o| o.name == e.name) {
            out.push((at("name"), format!("{:?} is used by an earlier entry", e.name)));
        }
        if e.tenant.trim().is_empty() {
            out.push((at("tenant"), "is empty: every access token belongs to one tenant".into()));
        }
        if e.token.chars().count() < MIN_TOKEN_CHARS {
            out.push((at("token"), format!("is shorter than {MIN_TOKEN_CHARS} characters")));
        } else if e.token == operator_token || entries[..i].iter().any(|o| o.token == e.token) {
            // One token, one holder: a shared one could not say who acted, nor be revoked alone.
            out.push((at("token"), "is the same as another token (server.token or an earlier entry)".into()));
        }
        if e.roles.is_empty() {
            out.push((at("roles"), "is empty (any of \"emit\", \"view\", \"answer\")".into()));
        }
    }
    out
}

/// Who a binding is talking to, once its token was checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The access entry's name; `operator` for `server.token`, `anonymous` without tokens.
    pub name: Arc<str>,
    /// The one tenant it is scoped to; `None` sees every tenant (the operator).
    pub tenant: Option<Arc<str>>,
    /// May emit events.
    pub emit: bool,
    /// May read.
    pub view: bool,
    /// May send commands.
    pub answer: bool,
}

impl Principal {
    /// The holder of `server.token`: every tenant, every role.
    pub fn operator() -> Self {
        Self { name: Arc::from("operator"), tenant: None, emit: true, view: true, answer: true }
    }

    /// A bridge with no token at all: watch-only and local (AEP-0004 §4.1 keeps control off an
    /// unauthenticated binding).
    pub fn anonymous() -> Self {
        Self { name: Arc::from("anonymous"), tenant: None, emit: true, view: true, answer: false }
    }

    /// Whether it may see a session belonging to `tenant` (`None`: to no tenant, the
    /// operator's own).
    pub fn sees(&self, tenant: Option<&str>) -> bool {
        scope_sees(self.tenant.as_deref(), tenant)
    }

    /// Whether it holds `role`.
    pub fn can(&self, role: Role) -> bool {
        match role {
            Role::Emit => self.emit,
            Role::View => self.view,
            Role::Answer => self.answer,
        }
    }
}

/// The tokens a collector accepts and whom each names.
#[derive(Debug, Default)]
pub struct Access {
    operator: Option<String>,
    entries: Vec<(String, Principal)>,
}

impl Access {
    /// The operator's token alone (or none: an open, watch-only endpoint).
    pub fn token(operator: Option<String>) -> Self {
        Self { operator: operator.filter(|t| !t.is_empty()), entries: Vec::new() }
    }

    /// The operator's token and an access list (checked by [`check`] first).
    pub fn new(operator: Option<String>, entries: &[AccessEntry]) -> Self {
        let entries = entries
            .iter()
            .map(|e| {
                let p = Principal {
                    name: Arc::from(e.name.as_str()),
                    tenant: Some(Arc::from(e.tenant.as_str())),
                    emit: e.roles.contains(&Role::Emit),
                    view: e.roles.contains(&Role::View),
                    answer: e.roles.contains(&Role::Answer),
                };
                (e.token.clone(), p)
            })
            .collect();
        Self { operator: operator.filter(|t| !t.is_empty()), entries }
    }

    /// Whether any token is configured: then every binding requires one.
    pub fn required(&self) -> bool {
        self.operator.is_some() || !self.entries.is_empty()
    }

    /// Whether some token may send commands (control is offered at all).
    pub fn control(&self) -> bool {
        self.operator.is_some() || self.entries.iter().any(|(_, p)| p.answer)
    }

    /// Whom `presented` names: `None` when it names no one and a token is required. Every
    /// token is compared, in constant time, whichever matches.
    pub fn principal(&self, presented: Option<&str>) -> Option<Principal> {
        if !self.required() {
            return Some(Principal::anonymous());
        }
        let got = presented?.as_bytes();
        let mut found = None;
        if let Some(op) = &self.operator
            && constant_time_eq(got, op.as_bytes())
        {
            found = Some(Principal::operator());
        }
        for (token, p) in &self.entries {
            if constant_time_eq(got, token.as_bytes()) && found.is_none() {
                found = Some(p.clone());
            }
        }
        found
    }

    /// The principal an access entry's `name` is (the operator for `operator`), for a
    /// login kept across requests by name: a removed entry's sessions end with it.
    pub fn by_name(&self, name: &str) -> Option<Principal> {
        if name == "operator" && self.operator.is_some() {
            return Some(Principal::operator());
        }
        if name == "anonymous" && !self.required() {
            return Some(Principal::anonymous());
        }
        self.entries.iter().find(|(_, p)| &*p.name == name).map(|(_, p)| p.clone())
    }
}

/// The one visibility rule of a hub: a reader limited to tenant `scope` sees what belongs
/// to that tenant only (`owner`: `None` is no tenant's, the operator's own); an unlimited
/// reader (`scope` `None`: the operator, or a bridge without tenants) sees everything.
pub fn scope_sees(scope: Option<&str>, owner: Option<&str>) -> bool {
    scope.is_none_or(|mine| owner == Some(mine))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, tenant: &str, token: &str, roles: &[Role]) -> AccessEntry {
        AccessEntry { name: name.into(), tenant: tenant.into(), token: token.into(), roles: roles.to_vec() }
    }

    #[test]
    fn each_token_names_its_holder_and_tenant() {
        let a = Access::new(
            Some("operator-token-0123456789".into()),
            &[
                entry("edge-1", "team-a", "edge-1-token-0123456789", &[Role::Emit]),
                entry("alice", "team-a", "alice-token-0123456789", &[Role::View, Role::Answer]),
                entry("bob", "team-b", "bob-token-01234567890", &[Role::View]),
            ],
        );
        assert!(a.required() && a.control());
        assert_eq!(a.principal(Some("operator-token-0123456789")), Some(Principal::operator()));
        let alice = a.principal(Some("alice-token-0123456789")).unwrap();
        assert_eq!(
            (&*alice.name, alice.tenant.as_deref(), alice.emit, alice.view, alice.answer),
            ("alice", Some("team-a"), false, true, true)
        );
        assert!(alice.sees(Some("team-a")) && !alice.sees(Some("team-b")) && !alice.sees(None));
        let edge = a.principal(Some("edge-1-token-0123456789")).unwrap();
        assert!(edge.can(Role::Emit) && !edge.can(Role::View) && !edge.can(Role::Answer));
        assert_eq!(a.principal(Some("nope")), None);
        assert_eq!(a.principal(None), None);
        assert!(Principal::operator().sees(Some("team-b")) && Principal::operator().sees(None));
        assert_eq!(a.by_name("bob").and_then(|p| p.tenant).as_deref(), Some("team-b"));
        assert_eq!(a.by_name("anonymous"), None, "a bridge with tokens has no anonymous login");
    }

    #[test]
    fn without_tokens_the_endpoint_is_open_and_watch_only() {
        let a = Access::token(None);
        assert!(!a.required() && !a.control());
        let p = a.principal(None).unwrap();
        assert!(p.view && p.emit && !p.answer);
    }

    #[test]
    fn the_list_is_checked_for_what_would_make_it_ambiguous() {
        let op = "operator-token-0123456789";
        let problems = check(
            &[
                entry("edge-1", "team-a", "edge-1-token-0123456789", &[Role::Emit]),
                entry("edge-1", "", "short", &[]),
                entry("edge-3", "team-b", op, &[Role::View]),
                entry("edge-4", "team-b", "edge-1-token-0123456789", &[Role::View]),
            ],
            op,
        );
        let keys: Vec<&str> = problems.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["[1].name", "[1].tenant", "[1].token", "[1].roles", "[2].token", "[3].token"]);
    }

    #[test]
    fn roles_are_read_from_toml() {
        #[derive(Deserialize)]
        struct File {
            access: Vec<AccessEntry>,
        }
        let f: File = toml_like(
            r#"{"access": [{"name": "lap-7", "tenant": "team-a", "token": "x", "roles": ["emit", "view", "answer"]}]}"#,
        );
        assert_eq!(f.access[0].roles, [Role::Emit, Role::View, Role::Answer]);
        assert!(
            serde_json::from_str::<AccessEntry>(r#"{"name":"a","tenant":"t","token":"x","roles":["admin"]}"#).is_err()
        );
    }

    fn toml_like<T: for<'de> Deserialize<'de>>(json: &str) -> T {
        serde_json::from_str(json).unwrap()
    }
}
