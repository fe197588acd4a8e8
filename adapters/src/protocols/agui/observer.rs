//! The AG-UI observer (`vendor = "agui"`, formerly `kind = "agui-proxy"`; design record
//! `bridge-agui-design.md`, AEP-0002 Annex A.14), as the daemon's tee proxy drives it: the
//! UI points at `listen` instead of its agent, the daemon forwards every request verbatim to
//! `url` and streams the answer back unchanged; each `2xx text/event-stream` answer it
//! forwards is one link here, its frames mapped off the client's path by a fresh [`Stream`]
//! (`threadId` -> session, `runId` -> run, the tool-name join) under the bridge's agent
//! identity (`agui` unless `agent` says otherwise). An event that is not JSON is skipped; a
//! session-scoped event before `RUN_STARTED` named the thread has no session (AEP-0001
//! §5.2) and is skipped, never guessed.
//!
//! AG-UI is a protocol, not a vendor: any agent that speaks it (Pydantic AI, LangGraph,
//! Mastra, ...) is observed the same way, so its observer lives with the protocol mapping
//! and is listed after the vendors' (`crate::protocols::OBSERVERS`). A read-only channel
//! (the design record): no `attention.*` with a respond path, no command accepted;
//! `control = true` is refused by `config validate`.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::{PROTOCOL, Stream};
use crate::observer::{Ctx, Gate, Input, Level, Observer, ObserverSpec, Step, Transport, scoped, table};
use crate::protocols::Options;

/// AG-UI's observer.
pub static OBSERVER: ObserverSpec = ObserverSpec {
    id: PROTOCOL,
    kinds: &["agui-proxy"],
    transport: Transport::TeeProxy,
    gate: Gate::Never,
    moded: false,
    hook_companion: false,
    input: "agui",
    fields: FIELDS,
    check,
    build: |s| {
        let cfg: Config = table(FIELDS, s.table).map_err(|e| format!("{e:?}"))?;
        Ok(Box::new(ProxyObserver { opts: Options { deltas: cfg.deltas }, streams: HashMap::new() }))
    },
};

/// The keys of an AG-UI section (beside `listen`).
pub const FIELDS: &[&str] = &["deltas"];

/// `[bridges.<name>]`'s own keys for an AG-UI agent.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub struct Config {
    /// The token and argument delta planes (`AEP_AGUI_DELTAS`), off by default.
    pub deltas: bool,
}

/// Checks an AG-UI section's own keys.
pub fn check(t: &Map<String, Value>) -> Vec<(String, String)> {
    table::<Config>(FIELDS, t).err().unwrap_or_default()
}

/// What one stream counted (logged when it ends).
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    events: u64,
    unparsable: u64,
    unscoped: u64,
}

/// The observer of one AG-UI agent's run streams.
struct ProxyObserver {
    opts: Options,
    streams: HashMap<String, (Stream, Counts)>,
}

impl Observer for ProxyObserver {
    fn feed(&mut self, input: Input<'_>, cx: &Ctx<'_>, out: &mut Vec<Step>) {
        match input {
            Input::Up(link) => {
                self.streams.insert(link.to_owned(), (Stream::new(self.opts), Counts::default()));
            }
            Input::Frame(link, text) => {
                let Some((stream, counts)) = self.streams.get_mut(link) else { return };
                let ev: Value = match serde_json::from_str(text) {
                    Ok(v @ Value::Object(_)) => v,
                    _ => {
                        counts.unparsable += 1;
                        return;
                    }
                };
                counts.events += 1;
                let mut drafts = stream.map(&ev, cx.map);
                counts.unscoped += scoped(&mut drafts) as u64;
                if !drafts.is_empty() {
                    out.push(Step::Publish(drafts, None));
                }
            }
            Input::Down(link, _) => {
                if let Some((_, c)) = self.streams.remove(link) {
                    out.push(Step::Log(
                        Level::Debug,
                        format!(
                            "AG-UI stream ended: events {}, unparsable {}, unscoped {}.",
                            c.events, c.unparsable, c.unscoped
                        ),
                    ));
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MapContext;
    use crate::observer::Asks;

    struct NoAsks;
    impl Asks for NoAsks {
        fn knows(&self, _: &str) -> bool {
            false
        }
        fn open(&self, _: Option<&str>) -> Vec<(String, String)> {
            Vec::new()
        }
    }

    /// Each stream maps on its own: the second stream's events before its `RUN_STARTED`
    /// have no session, whatever the first stream named.
    #[test]
    fn each_stream_maps_on_its_own_and_unscoped_events_are_skipped() {
        let mut o = (OBSERVER.build)(&crate::observer::Setup {
            table: &Map::new(),
            primary: false,
            gated: false,
            max_frame: 1 << 20,
        })
        .unwrap();
        let map = MapContext::default();
        let cx = Ctx { now: 0, map: &map, mint: &|| "id".into(), asks: &NoAsks, claimed: &|_| false };
        let mut out = Vec::new();
        o.feed(Input::Up("1"), &cx, &mut out);
        let start = r#"{"type":"RUN_STARTED","threadId":"t1","runId":"r1"}"#;
        o.feed(Input::Frame("1", start), &cx, &mut out);
        o.feed(Input::Frame("1", "not json"), &cx, &mut out);
        o.feed(Input::Up("2"), &cx, &mut out);
        o.feed(Input::Frame("2", r#"{"type":"STEP_STARTED","stepName":"s"}"#), &cx, &mut out);
        o.feed(Input::Down("1", crate::observer::Down::Closed(None)), &cx, &mut out);
        let published: Vec<(&str, Option<&str>)> = out
            .iter()
            .filter_map(|s| match s {
                Step::Publish(d, _) => Some(d),
                _ => None,
            })
            .flatten()
            .map(|d| (d.r#type.as_str(), d.session.as_deref()))
            .collect();
        assert_eq!(published, [("run.started", Some("t1"))]);
        assert!(matches!(out.last(), Some(Step::Log(Level::Debug, m)) if m.contains("unparsable 1")));
    }
}
