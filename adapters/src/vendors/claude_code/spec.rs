//! Claude Code around its mapping: manifest, held moments and reply shapes, install plan.

use serde_json::{Map, Value, json};

use crate::spec::{ControlSpec, Decision, Held, HooksInstall, InstallSpec, TimeUnit, VendorSpec, hook};

/// Claude Code.
pub static SPEC: VendorSpec = VendorSpec {
    id: super::VENDOR,
    display_name: "Claude Code",
    executables: &["claude"],
    hook_channel: "command hook (stdin JSON)",
    families: &["session", "run", "tool", "attention", "error", "progress", "delegation", "agent"],
    setup: "aep-bridge install claude-code [--project DIR]",
    control: ControlSpec { held: &["PermissionRequest", "Elicitation"], gate: None, reply: Some(reply) },
    install: Some(InstallSpec::Hooks(HooksInstall {
        project_file: ".claude/settings.json",
        user_file: ".claude/settings.json",
        user_dir_env: Some("CLAUDE_CONFIG_DIR"),
        // `FileChanged` is left out: its matcher names files, not tools.
        hooks: &[
            hook("PreToolUse", true),
            hook("PostToolUse", true),
            hook("PostToolUseFailure", true),
            hook("PostToolBatch", false),
            hook("Notification", false),
            hook("UserPromptSubmit", false),
            hook("UserPromptExpansion", false),
            hook("SessionStart", false),
            hook("SessionEnd", false),
            hook("Stop", false),
            hook("StopFailure", false),
            hook("SubagentStart", false),
            hook("SubagentStop", false),
            hook("PreCompact", false),
            hook("PostCompact", false),
            hook("PermissionRequest", true),
            hook("PermissionDenied", true),
            hook("Setup", false),
            hook("TeammateIdle", false),
            hook("TaskCreated", false),
            hook("TaskCompleted", false),
            hook("Elicitation", false),
            hook("ElicitationResult", false),
            hook("ConfigChange", false),
            hook("WorktreeCreate", false),
            hook("WorktreeRemove", false),
            hook("InstructionsLoaded", false),
            hook("CwdChanged", false),
            hook("MessageDisplay", false),
        ],
        timeout_unit: TimeUnit::Seconds,
        enable_hooks_config: false,
    })),
    server: None,
    otel: Some(&super::otel::ClaudeCodeOtel),
    adapter: Some(super::adapter),
};

/// The reply to a held PermissionRequest (an AskUserQuestion form answered with the
/// chosen labels as `updatedInput.answers`, or allow/deny) or Elicitation (accept with
/// the content, or decline).
fn reply(held: &Held<'_>, d: &Decision) -> Option<Value> {
    match held.hook {
        "PermissionRequest" if d.values.is_some() => {
            let input = held.payload.get("tool_input").cloned().unwrap_or(json!({}));
            let answers = ask_answers(&input, d.values.as_ref());
            let mut updated = input.as_object().cloned().unwrap_or_default();
            updated.insert("answers".into(), Value::Object(answers));
            Some(json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest",
                "decision": {"behavior": "allow", "updatedInput": Value::Object(updated)}}}))
        }
        "PermissionRequest" => match suggestion(held.payload, d) {
            // "Always allow" and the like: Claude Code's own suggestion, echoed as the
            // decision's `updatedPermissions` (its hooks reference: a hook can echo one of
            // the `permission_suggestions` it received).
            Some(s) => Some(json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest",
                "decision": {"behavior": "allow", "updatedPermissions": [s]}}})),
            None => super::super::hook_family::permission_reply(held, d),
        },
        "Elicitation" => Some(match &d.values {
            Some(v) => {
                json!({"hookSpecificOutput": {"hookEventName": "Elicitation", "action": "accept", "content": v}})
            }
            None => json!({"hookSpecificOutput": {"hookEventName": "Elicitation", "action": "decline"}}),
        }),
        _ => None,
    }
}

/// The permission suggestion an applied option names (`always-{n}`, n 1-based), from the
/// held payload's `permission_suggestions`.
fn suggestion<'a>(payload: &'a Value, d: &Decision) -> Option<&'a Value> {
    let n: usize = d.option.as_deref()?.strip_prefix("always-")?.parse().ok()?;
    payload.get("permission_suggestions")?.as_array()?.get(n.checked_sub(1)?)
}

/// AskUserQuestion answers keyed by question text, values mapped back to option labels
/// (field and choice ids are 1-based indexes; a non-index string is the "Other" text).
fn ask_answers(input: &Value, values: Option<&Map<String, Value>>) -> Map<String, Value> {
    let mut out = Map::new();
    let Some(values) = values else { return out };
    let questions: &[Value] = input.get("questions").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
    for (i, q) in questions.iter().enumerate() {
        let Some(v) = values.get(&(i + 1).to_string()) else { continue };
        let options: &[Value] = q.get("options").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
        let label = |s: &str| -> String {
            s.parse::<usize>()
                .ok()
                .and_then(|n| options.get(n.wrapping_sub(1)))
                .and_then(|o| o.get("label"))
                .and_then(Value::as_str)
                .map(str::to_owned)
                .unwrap_or_else(|| s.to_owned())
        };
        let answer = match v {
            Value::Array(items) => items.iter().filter_map(Value::as_str).map(label).collect::<Vec<_>>().join(", "),
            Value::String(s) => label(s),
            other => other.to_string(),
        };
        let key = q.get("question").and_then(Value::as_str).unwrap_or("").to_owned();
        out.insert(key, json!(answer));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ask_user_question_form_answers_with_labels() {
        let input =
            json!({"questions": [{"question": "Which db?", "options": [{"label": "Postgres"}, {"label": "SQLite"}]}]});
        let payload = json!({"tool_input": input});
        let d = Decision { values: Some(json!({"1": "2"}).as_object().cloned().unwrap()), ..Default::default() };
        let reply = reply(&Held { hook: "PermissionRequest", payload: &payload }, &d).unwrap();
        let decision = &reply["hookSpecificOutput"]["decision"];
        assert_eq!(decision["behavior"], "allow");
        assert_eq!(decision["updatedInput"]["answers"]["Which db?"], "SQLite");
        assert_eq!(decision["updatedInput"]["questions"][0]["question"], "Which db?");
    }

    /// The two PermissionRequest payloads of the recorded interactive session: a Bash call
    /// suggesting an allow rule, a Write suggesting `acceptEdits` for the session.
    fn recorded_requests() -> Vec<Value> {
        include_str!("../../../tests/data/claude-code/i01_interactive_permission.jsonl")
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|l| l["hook"] == "PermissionRequest")
            .map(|l| l["payload"].clone())
            .collect()
    }

    #[test]
    fn a_suggestion_is_echoed_as_the_allow_decisions_updated_permissions() {
        let recorded = recorded_requests();
        let (bash, write) = (&recorded[0], &recorded[1]);
        let held = Held { hook: "PermissionRequest", payload: bash };
        let always = Decision { option: Some("always-1".into()), ..Default::default() };
        assert!(always.allows());
        assert_eq!(
            reply(&held, &always).unwrap(),
            json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow",
                "updatedPermissions": [{"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "python3 -c 'print(6*7)'"}],
                    "behavior": "allow", "destination": "localSettings"}]}}})
        );
        let mode = reply_of(&Held { hook: "PermissionRequest", payload: write }, "always-1");
        assert_eq!(
            mode["hookSpecificOutput"]["decision"]["updatedPermissions"],
            json!([{"type": "setMode", "mode": "acceptEdits", "destination": "session"}])
        );
        // An option past the suggestions, or plain allow/deny, keeps the plain reply.
        assert_eq!(reply_of(&held, "always-2")["hookSpecificOutput"]["decision"], json!({"behavior": "allow"}));
        assert_eq!(reply_of(&held, "allow")["hookSpecificOutput"]["decision"], json!({"behavior": "allow"}));
        assert_eq!(reply_of(&held, "deny")["hookSpecificOutput"]["decision"]["behavior"], "deny");
    }

    fn reply_of(held: &Held<'_>, option: &str) -> Value {
        reply(held, &Decision { option: Some(option.into()), ..Default::default() }).unwrap()
    }

    #[test]
    fn elicitation_accepts_with_content_or_declines() {
        let p = json!({});
        let held = Held { hook: "Elicitation", payload: &p };
        let accept = Decision { values: Some(json!({"x": 1}).as_object().cloned().unwrap()), ..Default::default() };
        assert_eq!(reply(&held, &accept).unwrap()["hookSpecificOutput"]["content"]["x"], 1);
        assert_eq!(reply(&held, &Decision::default()).unwrap()["hookSpecificOutput"]["action"], "decline");
    }
}
