//! Just enough HTTP/1.1 to read the bridge's reply: the head, then a body framed by
//! `Content-Length`, by chunks (with trailers) or by the connection's end.

/// A reply's head, once read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// The status code.
    pub status: u16,
    /// Header lines (name lowercased, value trimmed).
    pub headers: Fields,
    /// Where the body starts in the bytes read.
    pub body_at: usize,
}

impl Head {
    /// A header's value.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    fn chunked(&self) -> bool {
        self.get("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked"))
    }

    fn content_length(&self) -> Option<usize> {
        self.get("content-length")?.parse().ok()
    }
}

/// Header or trailer lines: (name lowercased, value trimmed).
pub type Fields = Vec<(String, String)>;

/// A complete body and its trailers.
pub type Complete = (Vec<u8>, Fields);

fn lines(text: &[u8]) -> Fields {
    String::from_utf8_lossy(text)
        .split("\r\n")
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            Some((k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        })
        .collect()
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The head of `resp`, once its blank line has arrived.
pub fn head(resp: &[u8]) -> Option<Head> {
    let end = find(resp, b"\r\n\r\n")?;
    let text = &resp[..end];
    let line_end = find(text, b"\r\n").unwrap_or(text.len());
    let status_line = String::from_utf8_lossy(&text[..line_end]);
    let mut parts = status_line.split_whitespace();
    if !parts.next()?.starts_with("HTTP/1.") {
        return None;
    }
    let status = parts.next()?.parse().ok()?;
    Some(Head { status, headers: lines(text.get(line_end + 2..).unwrap_or_default()), body_at: end + 4 })
}

/// A reply's body and trailers, once complete (`eof`: the connection has ended).
pub fn body(head: &Head, resp: &[u8], eof: bool) -> Option<Complete> {
    let rest = resp.get(head.body_at..)?;
    if head.chunked() {
        return chunks(rest);
    }
    match head.content_length() {
        Some(n) => rest.get(..n).map(|b| (b.to_vec(), Vec::new())),
        None => eof.then(|| (rest.to_vec(), Vec::new())),
    }
}

/// A chunked body and its trailers, once the last chunk and the trailer section are in.
fn chunks(mut rest: &[u8]) -> Option<Complete> {
    let mut out = Vec::new();
    loop {
        let line_end = find(rest, b"\r\n")?;
        let size = std::str::from_utf8(&rest[..line_end]).ok()?.split(';').next()?.trim();
        let size = usize::from_str_radix(size, 16).ok()?;
        rest = &rest[line_end + 2..];
        if size == 0 {
            // Trailer lines, then an empty line.
            if rest.starts_with(b"\r\n") {
                return Some((out, Vec::new()));
            }
            let end = find(rest, b"\r\n\r\n")?;
            return Some((out, lines(&rest[..end])));
        }
        out.extend_from_slice(rest.get(..size)?);
        rest = rest.get(size..)?.strip_prefix(b"\r\n")?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_framed_every_way_are_read_once_complete() {
        let r = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-A: b\r\n\r\n{}";
        let h = head(r).unwrap();
        assert_eq!((h.status, h.get("x-a")), (200, Some("b")));
        assert_eq!(body(&h, r, false).unwrap().0, b"{}");
        assert_eq!(body(&h, &r[..r.len() - 1], false), None);
        let c = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\n{}\r\n1;x=y\r\n \r\n0\r\nx-aep-proof: p\r\n\r\n";
        let h = head(c).unwrap();
        let (b, t) = body(&h, c, false).unwrap();
        assert_eq!((b.as_slice(), t), (&b"{} "[..], vec![("x-aep-proof".to_owned(), "p".to_owned())]));
        assert_eq!(body(&h, &c[..c.len() - 2], false), None, "the trailer section is not over");
        let no_trailers = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n";
        assert_eq!(body(&head(no_trailers).unwrap(), no_trailers, false).unwrap().0, b"");
        let eof = b"HTTP/1.1 200 OK\r\n\r\nabc";
        assert_eq!(body(&head(eof).unwrap(), eof, false), None);
        assert_eq!(body(&head(eof).unwrap(), eof, true).unwrap().0, b"abc");
        assert_eq!(head(b"SSH-2.0-x\r\n\r\n"), None);
        assert_eq!(head(b"HTTP/1.1 200 OK\r\n"), None);
    }
}
