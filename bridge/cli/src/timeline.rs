//! `aep-bridge timeline <session>`: a run/tool/attention tree of one session with
//! durations, or (`--dag`) the cause DAG (AEP-0001 §5.1 `cause`). Reads the session's JSONL
//! (`--file`, else the data dir's `logs/*/<session>.jsonl`) or replays it from the
//! collector (`from: "all"`, AEP-0003 §5).

use std::collections::{HashMap, HashSet};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::time::Duration;

use aep_schemas::Event;
use clap::Args;
use serde_json::{Value, json};

use crate::client::{Dedupe, Endpoint, clip, paint, replay_all, short_time, stdout_color, summary};

/// Arguments of `aep-bridge timeline`.
#[derive(Debug, Clone, Args)]
pub struct TimelineArgs {
    /// The session id.
    pub session: String,
    /// Print the cause DAG instead of the run tree.
    #[arg(long)]
    pub dag: bool,
    /// Read this JSONL file.
    #[arg(long, conflicts_with = "url")]
    pub file: Option<PathBuf>,
    /// Replay from this collector instead of reading the log.
    #[arg(long, env = "AEP_URL")]
    pub url: Option<String>,
    /// Bearer token for `--url`.
    #[arg(long, env = "AEP_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Data directory holding `logs/` (default ~/.aep).
    #[arg(long, env = "AEP_BRIDGE_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
}

/// Reads the events of `session` from JSONL text (other sessions' lines and invalid lines
/// are skipped; the count of invalid lines is returned). A last line the bridge is still
/// writing is not yet an event ([`aep_schemas::jsonl`]).
pub fn read_jsonl(r: impl BufRead, session: &str) -> (Vec<Event>, usize) {
    let mut out = Vec::new();
    let mut bad = 0;
    for line in aep_schemas::jsonl::LiveLines::new(r).map_while(Result::ok) {
        if line.trim().is_empty() {
            continue;
        }
        match Event::from_json(&line) {
            Ok(ev) if ev.session.as_deref() == Some(session) => out.push(ev),
            Ok(_) => {}
            Err(_) => bad += 1,
        }
    }
    (out, bad)
}

/// Dedupes on `(source, id)` and orders by `(epoch, seq)`; seq-less events (commands,
/// foreign emitters) keep their place after the event they followed.
pub fn order(events: Vec<Event>) -> Vec<Event> {
    let mut seen = Dedupe::new(1_000_000);
    let mut keyed = Vec::with_capacity(events.len());
    let mut last = (0u64, 0u64);
    for (i, ev) in events.into_iter().enumerate() {
        if !seen.first(&ev) {
            continue;
        }
        let k = match ev.seq {
            Some(s) => (ev.epoch(), s),
            None => last,
        };
        last = k;
        keyed.push((k, i, ev));
    }
    keyed.sort_by_key(|(k, i, _)| (*k, *i));
    keyed.into_iter().map(|(_, _, e)| e).collect()
}

fn ms_of(ev: &Event) -> Option<u64> {
    aep_bridge::time::parse_rfc3339_nanos(&ev.time).map(|n| n / 1_000_000)
}

/// `350ms`, `4.2s`, `2m03s`, `1h05m`.
pub fn fmt_duration(ms: u64) -> String {
    match ms {
        0..1000 => format!("{ms}ms"),
        1000..60_000 => format!("{:.1}s", ms as f64 / 1000.0),
        60_000..3_600_000 => format!("{}m{:02}s", ms / 60_000, (ms / 1000) % 60),
        _ => format!("{}h{:02}m", ms / 3_600_000, (ms / 60_000) % 60),
    }
}

fn between(a: &Event, b: &Event) -> String {
    match (ms_of(a), ms_of(b)) {
        (Some(x), Some(y)) if y >= x => fmt_duration(y - x),
        _ => "?".into(),
    }
}

fn data_str<'a>(ev: &'a Event, path: &[&str]) -> Option<&'a str> {
    let mut v = ev.data.as_ref()?;
    for p in path {
        v = v.get(p)?;
    }
    v.as_str()
}

/// One item of a run (or of the session outside runs).
#[derive(Debug)]
enum Item {
    Tool { req: usize, end: Option<usize> },
    Attention { req: usize, answered: Option<usize>, end: Option<usize> },
    Other(usize),
}

#[derive(Debug)]
struct RunNode {
    id: String,
    start: Option<usize>,
    end: Option<usize>,
    items: Vec<Item>,
}

/// Renders the run/tool/attention tree.
pub fn render_tree(evs: &[Event], color: bool) -> Vec<String> {
    let mut runs: Vec<RunNode> = Vec::new();
    let mut session_items: Vec<Item> = Vec::new();
    let mut run_ix: HashMap<String, usize> = HashMap::new();
    // Where an open tool / attention lives: (run index or None, item index).
    let mut tools: HashMap<String, (Option<usize>, usize)> = HashMap::new();
    let mut atts: HashMap<String, (Option<usize>, usize)> = HashMap::new();
    let (mut s_start, mut s_end) = (None, None);
    for (i, ev) in evs.iter().enumerate() {
        let ri = ev.run.as_ref().map(|r| {
            *run_ix.entry(r.clone()).or_insert_with(|| {
                runs.push(RunNode { id: r.clone(), start: None, end: None, items: Vec::new() });
                runs.len() - 1
            })
        });
        let ty = ev.r#type.as_str();
        let push = |runs: &mut Vec<RunNode>, session_items: &mut Vec<Item>, item: Item| -> (Option<usize>, usize) {
            match ri {
                Some(r) => {
                    runs[r].items.push(item);
                    (Some(r), runs[r].items.len() - 1)
                }
                None => {
                    session_items.push(item);
                    (None, session_items.len() - 1)
                }
            }
        };
        match ty {
            "session.started" if s_start.is_none() => s_start = Some(i),
            "session.ended" => s_end = Some(i),
            "run.started" => {
                if let Some(r) = ri {
                    runs[r].start.get_or_insert(i);
                }
            }
            "run.finished" | "run.failed" | "run.cancelled" => match ri {
                Some(r) => runs[r].end = Some(i),
                None => session_items.push(Item::Other(i)),
            },
            "tool.requested" => {
                let at = push(&mut runs, &mut session_items, Item::Tool { req: i, end: None });
                if let Some(k) = data_str(ev, &["tool", "call_id"]) {
                    tools.insert(k.to_owned(), at);
                }
                tools.insert(format!("id:{}", ev.id), at);
            }
            "tool.completed" | "tool.failed" | "tool.denied" => {
                let key = data_str(ev, &["tool", "call_id"])
                    .map(str::to_owned)
                    .filter(|k| tools.contains_key(k))
                    .or_else(|| ev.cause.as_ref().map(|c| format!("id:{c}")));
                match key.and_then(|k| tools.get(&k).copied()) {
                    Some(at) => {
                        let it = match at.0 {
                            Some(r) => &mut runs[r].items[at.1],
                            None => &mut session_items[at.1],
                        };
                        if let Item::Tool { end, .. } = it {
                            *end = Some(i);
                        }
                    }
                    None => {
                        push(&mut runs, &mut session_items, Item::Tool { req: i, end: Some(i) });
                    }
                }
            }
            "attention.requested" => {
                let at = push(&mut runs, &mut session_items, Item::Attention { req: i, answered: None, end: None });
                atts.insert(ev.id.clone(), at);
            }
            "attention.answered" | "attention.resolved" | "attention.timeout" => {
                let at = ev.subject.as_ref().and_then(|s| atts.get(s).copied());
                match at {
                    Some(at) => {
                        let it = match at.0 {
                            Some(r) => &mut runs[r].items[at.1],
                            None => &mut session_items[at.1],
                        };
                        if let Item::Attention { answered, end, .. } = it {
                            if ty == "attention.answered" {
                                *answered = Some(i);
                            } else {
                                *end = Some(i);
                            }
                        }
                    }
                    None => {
                        push(&mut runs, &mut session_items, Item::Other(i));
                    }
                }
            }
            "attention.routed" => {}
            _ => {
                push(&mut runs, &mut session_items, Item::Other(i));
            }
        }
    }

    let mut out = Vec::new();
    let Some(first) = evs.first() else { return out };
    let last = &evs[evs.len() - 1];
    let head = format!(
        "session {} ({}) {} events, {} → {}{}",
        first.session.as_deref().unwrap_or("-"),
        first.agent,
        evs.len(),
        short_time(&first.time),
        short_time(&last.time),
        match (s_start, s_end) {
            (Some(a), Some(b)) => format!(", ended after {}", between(&evs[a], &evs[b])),
            (_, None) => ", not ended".into(),
            _ => String::new(),
        }
    );
    out.push(paint(color, "1;34", &head));
    // Session-level items and runs interleave in order of their first event.
    let key = |it: &Item| match it {
        Item::Tool { req, .. } | Item::Attention { req, .. } => *req,
        Item::Other(i) => *i,
    };
    let mut blocks: Vec<(usize, Option<&RunNode>, Option<&Item>)> =
        session_items.iter().map(|it| (key(it), None, Some(it))).collect();
    for r in &runs {
        let k = r.start.or_else(|| evs.iter().position(|e| e.run.as_deref() == Some(r.id.as_str()))).unwrap_or(0);
        blocks.push((k, Some(r), None));
    }
    blocks.sort_by_key(|b| b.0);
    for (_, run, item) in blocks {
        if let Some(it) = item {
            render_items(evs, std::slice::from_ref(it), "  ", color, &mut out);
            continue;
        }
        let Some(r) = run else { continue };
        let end = r.end.map(|e| &evs[e]);
        let status = match end {
            Some(e) => {
                let from = r.start.map(|s| &evs[s]).or_else(|| first_of(evs, r));
                let dur = from.map(|f| between(f, e)).unwrap_or_else(|| "?".into());
                format!("{} {dur}", e.r#type.trim_start_matches("run."))
            }
            None => "open".into(),
        };
        let at = r.start.map(|s| short_time(&evs[s].time)).unwrap_or_default();
        out.push(paint(color, "32", &format!("  ▸ run {} {at} {status}", r.id)));
        render_items(evs, &r.items, "    ", color, &mut out);
    }
    out
}

fn first_of<'a>(evs: &'a [Event], r: &RunNode) -> Option<&'a Event> {
    evs.iter().find(|e| e.run.as_deref() == Some(r.id.as_str()))
}

fn render_items(evs: &[Event], items: &[Item], indent: &str, color: bool, out: &mut Vec<String>) {
    for it in items {
        match it {
            Item::Tool { req, end } => {
                let r = &evs[*req];
                let name = data_str(r, &["tool", "name"]).unwrap_or("?");
                let call = data_str(r, &["tool", "call_id"]).map(|c| format!(" ({})", clip(c, 20))).unwrap_or_default();
                let status = match end {
                    Some(e) if e == req => format!("{} (no request seen)", evs[*e].r#type),
                    Some(e) => {
                        let e = &evs[*e];
                        let d = e.data.as_ref().and_then(|d| d.get("duration_ms")).and_then(Value::as_u64);
                        let dur = d.map(fmt_duration).unwrap_or_else(|| between(r, e));
                        format!("{} {dur}", e.r#type.trim_start_matches("tool."))
                    }
                    None => "pending".into(),
                };
                let c = if status.starts_with("failed") || status.starts_with("denied") { "31" } else { "36" };
                out.push(format!(
                    "{indent}{} {} tool {name}{call} {}",
                    paint(color, "2", &short_time(&r.time)),
                    paint(color, c, "●"),
                    status
                ));
            }
            Item::Attention { req, answered, end } => {
                let r = &evs[*req];
                let kind = data_str(r, &["kind"]).unwrap_or("?");
                let prompt = data_str(r, &["prompt"]).map(|p| format!(" \"{}\"", clip(p, 40))).unwrap_or_default();
                let mut status = String::new();
                if let Some(a) = answered {
                    let ans = evs[*a].data.as_ref().and_then(|d| d.get("answer"));
                    status.push_str(&format!(" answered {}", summary(Some(&json!({"answer": ans})), 40)));
                }
                match end {
                    Some(e) => {
                        let e = &evs[*e];
                        let res = data_str(e, &["resolution"]).unwrap_or(e.r#type.trim_start_matches("attention."));
                        status.push_str(&format!(" → {res} after {}", between(r, e)));
                    }
                    None => status.push_str(" → open"),
                }
                out.push(format!(
                    "{indent}{} {} attention {kind}{prompt}{status} [{}]",
                    paint(color, "2", &short_time(&r.time)),
                    paint(color, "35", "◆"),
                    clip(&r.id, 26)
                ));
            }
            Item::Other(i) => {
                let e = &evs[*i];
                let sum = summary(e.data.as_ref(), 60);
                out.push(format!(
                    "{indent}{} · {}{}",
                    paint(color, "2", &short_time(&e.time)),
                    paint(color, crate::client::event_color(e), &e.r#type),
                    if sum.is_empty() { String::new() } else { format!(" {sum}") }
                ));
            }
        }
    }
}

/// Renders the cause DAG: roots are events whose `cause` is absent or not in the set.
pub fn render_dag(evs: &[Event], color: bool) -> Vec<String> {
    let ids: HashMap<&str, usize> = evs.iter().enumerate().map(|(i, e)| (e.id.as_str(), i)).collect();
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); evs.len()];
    let mut roots = Vec::new();
    for (i, e) in evs.iter().enumerate() {
        match e.cause.as_deref().and_then(|c| ids.get(c)) {
            Some(&p) if p != i => children[p].push(i),
            _ => roots.push(i),
        }
    }
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for r in roots {
        walk(evs, &children, r, "", true, true, color, &mut seen, &mut out);
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn walk(
    evs: &[Event],
    children: &[Vec<usize>],
    i: usize,
    prefix: &str,
    last: bool,
    root: bool,
    color: bool,
    seen: &mut HashSet<usize>,
    out: &mut Vec<String>,
) {
    if !seen.insert(i) {
        return;
    }
    let e = &evs[i];
    let branch = if root {
        ""
    } else if last {
        "└─ "
    } else {
        "├─ "
    };
    let sum = summary(e.data.as_ref(), 50);
    out.push(format!(
        "{prefix}{branch}{} {} [{}]{}",
        paint(color, "2", &short_time(&e.time)),
        paint(color, crate::client::event_color(e), &e.r#type),
        clip(&e.id, 26),
        if sum.is_empty() { String::new() } else { format!(" {sum}") }
    ));
    let next = if root { String::new() } else { format!("{prefix}{}", if last { "   " } else { "│  " }) };
    let kids = &children[i];
    for (n, c) in kids.iter().enumerate() {
        walk(evs, children, *c, &next, n + 1 == kids.len(), false, color, seen, out);
    }
}

/// The session's log files under `data/logs/*/`.
pub fn find_logs(data: &Path, session: &str) -> Vec<PathBuf> {
    let name = aep_bridge::sinks::jsonl::log_path(data, "x", Some(session));
    let Some(file) = name.file_name() else { return Vec::new() };
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(data.join("logs")) {
        for d in rd.flatten() {
            let p = d.path().join(file);
            if p.is_file() {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Runs the command; returns the exit code.
pub fn run(args: TimelineArgs) -> i32 {
    let mut events = Vec::new();
    let mut bad = 0;
    let files = match (&args.file, &args.url) {
        (Some(f), _) => vec![f.clone()],
        (None, Some(_)) => Vec::new(),
        (None, None) => {
            let data = args.data_dir.clone().unwrap_or_else(|| aep_bridge::env::Env::process().data_dir());
            find_logs(&data, &args.session)
        }
    };
    for f in &files {
        match std::fs::File::open(f) {
            Ok(file) => {
                let (evs, b) = read_jsonl(std::io::BufReader::new(file), &args.session);
                events.extend(evs);
                bad += b;
            }
            Err(e) => {
                eprintln!("aep-bridge timeline: cannot open {}: {e}", f.display());
                return 2;
            }
        }
    }
    if files.is_empty() {
        // The collector's replay (the URL given, else the default bridge).
        let ep = Endpoint::new(args.url.clone(), args.token.clone());
        match replay_all(&ep, json!({"session": args.session}), Duration::from_millis(500)) {
            Ok(evs) => events = evs,
            Err(e) => {
                eprintln!("aep-bridge timeline: no log for {:?} and the collector replay failed: {e}", args.session);
                return 1;
            }
        }
    }
    if bad > 0 {
        eprintln!("aep-bridge timeline: skipped {bad} invalid line(s)");
    }
    let events = order(events);
    if events.is_empty() {
        eprintln!("aep-bridge timeline: no events for session {:?}", args.session);
        return 1;
    }
    let color = stdout_color();
    let lines = if args.dag { render_dag(&events, color) } else { render_tree(&events, color) };
    for l in lines {
        println!("{l}");
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_last_line_still_being_written_is_not_an_invalid_line() {
        let line = |id: &str, seq: u64| {
            format!(
                r#"{{"aep":"0.1","id":"{id}","type":"progress.status","time":"2026-01-01T00:00:00Z","source":"aep://h/agent/a","agent":"a","session":"s","seq":{seq}}}"#
            )
        };
        let text = format!("{}\nnot json\n{}\n{}", line("e1", 1), line("e2", 2), &line("e3", 3)[..40]);
        let (evs, bad) = read_jsonl(text.as_bytes(), "s");
        assert_eq!((evs.len(), bad), (2, 1), "the junk line is invalid, the torn last one is not yet read");
    }

    fn ev(id: &str, ty: &str, t: &str, seq: u64, extra: Value) -> Event {
        let mut v = json!({"aep": "0.1", "id": id, "type": ty, "time": format!("2026-01-01T00:00:{t}Z"),
            "source": "aep://h/agent/a", "agent": "a", "session": "s", "seq": seq});
        if let (Value::Object(m), Value::Object(e)) = (&mut v, extra) {
            m.extend(e);
        }
        Event::from_value(v).unwrap()
    }

    fn sample() -> Vec<Event> {
        vec![
            ev("e1", "session.started", "00.000", 1, json!({})),
            ev("e2", "run.started", "01.000", 2, json!({"run": "r1"})),
            ev(
                "e3",
                "tool.requested",
                "01.500",
                3,
                json!({"run": "r1", "data": {"tool": {"name": "Bash", "call_id": "c1"}}}),
            ),
            ev(
                "e4",
                "attention.requested",
                "02.000",
                4,
                json!({"run": "r1", "cause": "e3", "data": {"kind": "permission", "prompt": "ok?"}}),
            ),
            ev(
                "e5",
                "attention.answered",
                "05.000",
                5,
                json!({"run": "r1", "subject": "e4", "cause": "e4", "data": {"answer": {"option": "allow"}}}),
            ),
            ev(
                "e6",
                "attention.resolved",
                "05.000",
                6,
                json!({"run": "r1", "subject": "e4", "cause": "e5", "data": {"resolution": "answered"}}),
            ),
            ev(
                "e7",
                "tool.completed",
                "06.000",
                7,
                json!({"run": "r1", "cause": "e3", "data": {"tool": {"name": "Bash", "call_id": "c1"}}}),
            ),
            ev("e8", "run.finished", "07.250", 8, json!({"run": "r1"})),
        ]
    }

    #[test]
    fn the_tree_pairs_tools_attention_and_runs_with_durations() {
        let lines = render_tree(&sample(), false);
        let text = lines.join("\n");
        assert!(text.contains("▸ run r1 00:00:01.000 finished 6.2s"), "{text}");
        assert!(text.contains("tool Bash (c1) completed 4.5s"), "{text}");
        assert!(
            text.contains("attention permission \"ok?\" answered answer.option=allow → answered after 3.0s"),
            "{text}"
        );
        assert!(text.contains("not ended"), "{text}");
    }

    #[test]
    fn the_dag_nests_by_cause() {
        let lines = render_dag(&sample(), false);
        // e3 (tool.requested) is a root; e4 and e7 hang under it; e5 under e4; e6 under e5.
        let pos = |needle: &str| lines.iter().position(|l| l.contains(needle)).unwrap();
        assert!(lines[pos("[e4]")].contains("├─ "), "{lines:#?}");
        assert!(lines[pos("[e7]")].contains("└─ "), "{lines:#?}");
        assert!(lines[pos("[e6]")].starts_with("│     └─ "), "{lines:#?}");
        assert!(!lines[pos("[e1]")].contains('─'));
    }

    #[test]
    fn order_dedupes_and_sorts_by_position() {
        let mut evs = sample();
        evs.reverse();
        evs.push(sample()[0].clone());
        let o = order(evs);
        assert_eq!(o.len(), 8);
        assert_eq!(o.iter().map(|e| e.seq.unwrap()).collect::<Vec<_>>(), (1..=8).collect::<Vec<_>>());
    }
}
