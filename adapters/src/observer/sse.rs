//! An incremental `text/event-stream` parser (the WHATWG HTML "server-sent events"
//! interpretation), bounded in bytes: a line longer than `max_line` or a frame whose data
//! grows past `max_frame` is dropped whole and counted, never buffered, never truncated
//! into a different frame.
//!
//! Lines end at CRLF, LF or CR (a CRLF split across two reads is one ending). `data` lines
//! join with `\n`; `event`, `id` and `retry` are kept; a line starting with `:` is a comment
//! (a keep-alive); a blank line dispatches the frame, and a frame without data dispatches
//! nothing. The last event id persists across frames, as the resume point (`Last-Event-ID`).

/// One dispatched frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// `event:` (the frame's type; `None` means the default `message`).
    pub event: Option<String>,
    /// The `data:` lines joined by `\n`.
    pub data: String,
    /// The last event id in force when the frame was dispatched.
    pub id: Option<String>,
}

/// The parser state between reads.
#[derive(Debug)]
pub struct Parser {
    max_line: usize,
    max_frame: usize,
    line: Vec<u8>,
    /// The current line passed `max_line`: the rest of it is skipped.
    line_over: bool,
    /// The last read ended in CR: a LF opening the next one ends nothing.
    after_cr: bool,
    data: String,
    has_data: bool,
    event: Option<String>,
    /// The frame is being dropped (an oversized line or data): it dispatches nothing.
    dropping: bool,
    last_id: Option<String>,
    retry_ms: Option<u64>,
    dropped: u64,
}

impl Parser {
    /// A parser dropping lines over `max_line` bytes and frames with more than `max_frame`
    /// bytes of data.
    pub fn new(max_line: usize, max_frame: usize) -> Self {
        Self {
            max_line,
            max_frame,
            line: Vec::new(),
            line_over: false,
            after_cr: false,
            data: String::new(),
            has_data: false,
            event: None,
            dropping: false,
            last_id: None,
            retry_ms: None,
            dropped: 0,
        }
    }

    /// The last event id seen (`id:`), for `Last-Event-ID` on reconnect.
    pub fn last_id(&self) -> Option<&str> {
        self.last_id.as_deref()
    }

    /// The server's `retry:` advice, milliseconds.
    pub fn retry_ms(&self) -> Option<u64> {
        self.retry_ms
    }

    /// Frames dropped for size so far.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Forgets a half-read line and frame (the connection ended); the last id stays.
    pub fn reset(&mut self) {
        self.line.clear();
        self.line_over = false;
        self.after_cr = false;
        self.clear_frame();
    }

    fn clear_frame(&mut self) {
        self.data.clear();
        self.has_data = false;
        self.event = None;
        self.dropping = false;
    }

    /// Feeds one read; complete frames are appended to `out`.
    pub fn push(&mut self, mut chunk: &[u8], out: &mut Vec<Frame>) {
        if self.after_cr && chunk.first() == Some(&b'\n') {
            chunk = &chunk[1..];
        }
        self.after_cr = false;
        while !chunk.is_empty() {
            match chunk.iter().position(|b| *b == b'\n' || *b == b'\r') {
                None => {
                    self.extend_line(chunk);
                    return;
                }
                Some(i) => {
                    self.extend_line(&chunk[..i]);
                    let cr = chunk[i] == b'\r';
                    let mut next = i + 1;
                    if cr {
                        match chunk.get(next) {
                            Some(b'\n') => next += 1,
                            None => self.after_cr = true,
                            Some(_) => {}
                        }
                    }
                    self.end_line(out);
                    chunk = &chunk[next..];
                }
            }
        }
    }

    fn extend_line(&mut self, bytes: &[u8]) {
        if self.line_over {
            return;
        }
        if self.line.len() + bytes.len() > self.max_line {
            self.line_over = true;
            self.line = Vec::new();
            return;
        }
        self.line.extend_from_slice(bytes);
    }

    fn end_line(&mut self, out: &mut Vec<Frame>) {
        if std::mem::take(&mut self.line_over) {
            // An oversized line spoils its frame.
            self.dropping = true;
            return;
        }
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        if line[0] == b':' {
            return;
        }
        let (name, value) = match line.iter().position(|b| *b == b':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (&line[..], &b""[..]),
        };
        let value = String::from_utf8_lossy(value);
        match name {
            b"data" => {
                if self.dropping {
                    return;
                }
                if self.data.len() + value.len() + 1 > self.max_frame {
                    self.dropping = true;
                    self.data = String::new();
                    return;
                }
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(&value);
                self.has_data = true;
            }
            b"event" => self.event = Some(value.into_owned()),
            b"id" if !value.contains('\0') => {
                self.last_id = (!value.is_empty()).then(|| value.into_owned());
            }
            b"retry" => {
                if let Ok(ms) = value.parse::<u64>() {
                    self.retry_ms = Some(ms);
                }
            }
            _ => {}
        }
    }

    fn dispatch(&mut self, out: &mut Vec<Frame>) {
        if self.dropping {
            self.dropped += 1;
        } else if self.has_data {
            out.push(Frame {
                event: self.event.take(),
                data: std::mem::take(&mut self.data),
                id: self.last_id.clone(),
            });
        }
        self.clear_frame();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(p: &mut Parser, input: &[&[u8]]) -> Vec<Frame> {
        let mut out = Vec::new();
        for c in input {
            p.push(c, &mut out);
        }
        out
    }

    #[test]
    fn frames_split_anywhere_parse_the_same() {
        let text = b": keep-alive\nevent: e1\ndata: {\"a\":1}\nid: 7\n\ndata: x\r\ndata:  y\r\n\r\ndata: z\r\rretry: 250\nbogus\n\n";
        let whole = frames(&mut Parser::new(1024, 1024), &[text]);
        assert_eq!(
            whole,
            [
                Frame { event: Some("e1".into()), data: "{\"a\":1}".into(), id: Some("7".into()) },
                Frame { event: None, data: "x\n y".into(), id: Some("7".into()) },
                Frame { event: None, data: "z".into(), id: Some("7".into()) },
            ]
        );
        // Every split point, including inside a CRLF, gives the same frames.
        for cut in 0..text.len() {
            let mut p = Parser::new(1024, 1024);
            assert_eq!(frames(&mut p, &[&text[..cut], &text[cut..]]), whole, "cut at {cut}");
            assert_eq!(p.retry_ms(), Some(250));
        }
    }

    #[test]
    fn oversized_lines_and_frames_are_dropped_whole() {
        let mut p = Parser::new(16, 24);
        let long_line = format!("data: {}\n\n", "a".repeat(40));
        let long_frame = "data: 0123456789\ndata: 0123456789\ndata: 0123456789\n\n";
        let out = frames(&mut p, &[long_line.as_bytes(), long_frame.as_bytes(), b"data: ok\n\n"]);
        assert_eq!(out, [Frame { event: None, data: "ok".into(), id: None }]);
        assert_eq!(p.dropped(), 2);
        // A frame spoiled by a long line still ends at its blank line, not later.
        let out = frames(&mut p, &[b"data: a\n", "b".repeat(100).as_bytes(), b"\ndata: c\n\ndata: d\n\n"]);
        assert_eq!(out, [Frame { event: None, data: "d".into(), id: None }]);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
        /// Hostile bytes in hostile pieces: no panic, the buffers never pass their bounds,
        /// every frame dispatched fits the frame bound.
        #[test]
        fn hostile_input_stays_bounded(bytes in proptest::collection::vec(
            proptest::prop_oneof![proptest::prelude::any::<u8>(), proptest::prelude::Just(b'\n'),
                proptest::prelude::Just(b'\r'), proptest::prelude::Just(b':'), proptest::prelude::Just(b'd')], 0..4096),
            cuts in proptest::collection::vec(0usize..4096, 0..16)) {
            let mut p = Parser::new(64, 128);
            let mut out = Vec::new();
            let mut cuts = cuts;
            cuts.sort_unstable();
            let mut at = 0;
            for c in cuts.into_iter().chain([bytes.len()]) {
                let c = c.min(bytes.len()).max(at);
                p.push(&bytes[at..c], &mut out);
                at = c;
                proptest::prop_assert!(p.line.len() <= 64 && p.data.len() <= 128);
            }
            proptest::prop_assert!(out.iter().all(|f| f.data.len() <= 128));
        }
    }

    #[test]
    fn frames_without_data_dispatch_nothing_and_the_id_persists() {
        let mut p = Parser::new(64, 64);
        let out = frames(&mut p, &[b"id: 1\n\nevent: x\n\ndata\n\n"]);
        assert_eq!(out, [Frame { event: None, data: String::new(), id: Some("1".into()) }]);
        assert_eq!(p.last_id(), Some("1"));
        p.push(b"data: half", &mut Vec::new());
        p.reset();
        assert_eq!(frames(&mut p, &[b"\n\n"]), []);
        assert_eq!(p.last_id(), Some("1"));
    }
}
