//! Reading a JSONL log that may still be being written. AEP-0003 §3.1 makes an appended
//! session log a transport (`tail -f` is a conformant consume path) and has each writer
//! append a line with one `write`; but a `read` can still land inside that write (Linux
//! copies it into the page cache a page at a time), so a reader sees the front of a line
//! before its end. A last line without its newline is therefore not yet an event: every
//! reader of a live log skips it (and finds it whole on its next read), never an error.

use std::io::BufRead;

/// Whether `rest`, a last line without its newline, is a finished line anyway: blank, or
/// a whole JSON value (a file written without a final newline). A cut JSON object never
/// parses (its closing brace is missing), so a torn event is never taken for one.
fn finished(rest: &[u8]) -> bool {
    rest.iter().all(u8::is_ascii_whitespace) || serde_json::from_slice::<serde::de::IgnoredAny>(rest).is_ok()
}

/// How many bytes of `buf` (a log's content, read while it may be growing) are whole lines:
/// everything up to its last newline, plus a last line without one that is finished anyway
/// (see [`finished`]). The rest is a line still being written.
pub fn complete_len(buf: &[u8]) -> usize {
    let cut = buf.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    if finished(&buf[cut..]) { buf.len() } else { cut }
}

/// The lines of a JSONL log read while it may be growing, like [`BufRead::lines`] (line
/// ends `\n` or `\r\n` cut off), but stopping before a last line that is still being
/// written; [`LiveLines::unfinished`] then says one was left for a later read.
#[derive(Debug)]
pub struct LiveLines<R> {
    reader: R,
    unfinished: bool,
}

impl<R: BufRead> LiveLines<R> {
    /// Reads `reader`'s lines.
    pub fn new(reader: R) -> Self {
        Self { reader, unfinished: false }
    }

    /// Whether the read stopped before a last line still being written (not an error: the
    /// line is whole on a later read).
    pub fn unfinished(&self) -> bool {
        self.unfinished
    }
}

impl<R: BufRead> Iterator for LiveLines<R> {
    type Item = std::io::Result<String>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut buf = Vec::new();
        match self.reader.read_until(b'\n', &mut buf) {
            Ok(0) => return None,
            Ok(_) => {}
            Err(e) => return Some(Err(e)),
        }
        if buf.last() == Some(&b'\n') {
            buf.pop();
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
        } else if !finished(&buf) {
            self.unfinished = true;
            return None;
        }
        Some(String::from_utf8(buf).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> (Vec<String>, bool) {
        let mut it = LiveLines::new(text.as_bytes());
        let got = it.by_ref().map(Result::unwrap).collect();
        (got, it.unfinished())
    }

    #[test]
    fn a_torn_last_line_is_not_yet_a_line() {
        let whole = "{\"a\":1}\n{\"b\":2}\n";
        assert_eq!(complete_len(whole.as_bytes()), whole.len());
        for cut in 8..whole.len() - 1 {
            let torn = &whole[..cut];
            assert_eq!(complete_len(torn.as_bytes()), 8, "{torn:?}");
            assert_eq!(lines(torn), (vec!["{\"a\":1}".to_owned()], cut > 8), "{torn:?}");
        }
        assert_eq!(lines(whole), (vec!["{\"a\":1}".to_owned(), "{\"b\":2}".to_owned()], false));
    }

    #[test]
    fn a_finished_last_line_without_its_newline_counts() {
        assert_eq!(lines("{\"a\":1}\r\n{\"b\":2}"), (vec!["{\"a\":1}".to_owned(), "{\"b\":2}".to_owned()], false));
        assert_eq!(complete_len(b"{\"a\":1}\n{\"b\":2}"), 15);
        assert_eq!(complete_len(b"{\"a\":1}\n  "), 10);
        // A complete line that is not JSON is the caller's to report, not "not yet".
        assert_eq!(lines("oops\n{\"a\":1}\n"), (vec!["oops".to_owned(), "{\"a\":1}".to_owned()], false));
    }
}
