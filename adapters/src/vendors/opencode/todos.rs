//! The pure todo snapshot diff (`diffTodos`): OpenCode and Kilo Code publish the whole
//! todo list on every `todo.updated`; the registry has no snapshot type, so consecutive
//! snapshots become `progress.task.*` transitions (Annex A.7).

use serde_json::{Value, json};

use crate::vendors::plugin_common::{content_ok, draft, gate_text};
use crate::{EventDraft, MapContext};

/// Diffs two todo snapshots (arrays of `{id, content, status, ...}`), in `next` order:
/// an id absent from `prev` is `progress.task.planned` (and also `progress.task.completed`
/// when it arrives already completed); a transition to `completed` is
/// `progress.task.completed`. Removals and other churn stay silent (payload minimalism).
/// The subject is the todo id; the content is `redacted`-gated (`task.title`), so data is
/// empty at the default `metadata` ceiling.
pub fn diff_todos(prev: &Value, next: &Value, cx: &MapContext) -> Vec<EventDraft> {
    let empty = Vec::new();
    let prev = prev.as_array().unwrap_or(&empty);
    let next = next.as_array().unwrap_or(&empty);
    let status_of = |list: &[Value], id: &str| -> Option<String> {
        list.iter()
            .find(|t| t.get("id").and_then(Value::as_str) == Some(id))
            .map(|t| t.get("status").and_then(Value::as_str).unwrap_or("").to_owned())
    };
    let mut out = Vec::new();
    for todo in next {
        let Some(id) = todo.get("id").and_then(Value::as_str) else { continue };
        let status = todo.get("status").and_then(Value::as_str).unwrap_or("");
        let content = todo.get("content").and_then(Value::as_str);
        let before = status_of(prev, id);
        if before.is_none() {
            out.push(task_draft("progress.task.planned", id, content, None, cx));
        }
        if status == "completed" && before.as_deref() != Some("completed") {
            out.push(task_draft("progress.task.completed", id, content, Some("completed"), cx));
        }
    }
    out
}

fn task_draft(ty: &str, id: &str, content: Option<&str>, status: Option<&str>, cx: &MapContext) -> EventDraft {
    let mut d = draft(ty, cx);
    d.subject = Some(id.to_owned());
    if content_ok(&d) {
        let mut task = serde_json::Map::new();
        task.insert("id".into(), json!(id));
        if let Some(t) = content.and_then(|c| gate_text(&d, cx, c)) {
            task.insert("title".into(), json!(t));
        }
        d.data.insert("task".into(), Value::Object(task));
        if let Some(s) = status {
            d.data.insert("status".into(), json!(s));
        }
    }
    d
}
