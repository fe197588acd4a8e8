//! JSONC (JSON with `//` and `/* */` comments and trailing commas), as Gemini CLI and Qwen
//! Code read their `settings.json`: parsed for the merge, and edited by insertion only, so
//! every byte the user wrote (comments included) stays where it was.
//!
//! The scanner blanks comments to spaces (newlines kept), so every offset into the blanked
//! text is an offset into the original; spans found there address the original bytes.

use serde::Serialize as _;
use serde_json::Value;

/// Why a settings text is not JSONC.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JsoncError {
    /// A `/*` comment that never ends.
    #[error("a /* comment is not closed")]
    OpenComment,
    /// A string that never ends.
    #[error("a string is not closed")]
    OpenString,
    /// Not JSON once comments and trailing commas are set aside.
    #[error("{0}")]
    Json(String),
}

/// The text with every comment (and a leading byte-order mark) replaced by spaces, newlines
/// kept: the same length, the same offsets.
fn blank_comments(text: &str) -> Result<Vec<u8>, JsoncError> {
    let mut b = text.as_bytes().to_vec();
    let mut i = 0;
    if b.starts_with("\u{feff}".as_bytes()) {
        b[..3].fill(b' ');
        i = 3;
    }
    while i < b.len() {
        match (b[i], b.get(i + 1)) {
            (b'"', _) => i = string_end(&b, i)?,
            (b'/', Some(b'/')) => {
                while i < b.len() && b[i] != b'\n' {
                    b[i] = b' ';
                    i += 1;
                }
            }
            (b'/', Some(b'*')) => {
                let end = b[i + 2..].windows(2).position(|w| w == b"*/").ok_or(JsoncError::OpenComment)? + i + 4;
                for x in &mut b[i..end] {
                    if *x != b'\n' {
                        *x = b' ';
                    }
                }
                i = end;
            }
            _ => i += 1,
        }
    }
    Ok(b)
}

/// The offset just past the string opening at `start`.
fn string_end(b: &[u8], start: usize) -> Result<usize, JsoncError> {
    let mut i = start + 1;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return Ok(i + 1),
            _ => i += 1,
        }
    }
    Err(JsoncError::OpenString)
}

/// The offset of the next byte that is not whitespace, from `i`.
fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

/// Parses JSONC into a value (comments ignored, trailing commas accepted).
pub fn parse(text: &str) -> Result<Value, JsoncError> {
    let mut b = blank_comments(text)?;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => i = string_end(&b, i)?,
            b',' if matches!(b.get(skip_ws(&b, i + 1)), Some(b'}' | b']')) => {
                b[i] = b' ';
                i += 1;
            }
            _ => i += 1,
        }
    }
    serde_json::from_slice(&b).map_err(|e| JsoncError::Json(e.to_string()))
}

/// Where a value sits in the text: `start..end`, and for containers where each item
/// starts (a member at its key) with the members' keys and values, or the elements.
#[derive(Debug, Clone)]
struct Node {
    start: usize,
    end: usize,
    items: Vec<usize>,
    members: Vec<(String, Node)>,
    elements: Vec<Node>,
}

/// The span of the value at `at` in comment-blanked text; `None` where the text is not
/// JSONC (callers run [`parse`] first).
fn scan(b: &[u8], at: usize) -> Option<Node> {
    let start = skip_ws(b, at);
    let mut node = Node { start, end: start, items: Vec::new(), members: Vec::new(), elements: Vec::new() };
    match *b.get(start)? {
        open @ (b'{' | b'[') => {
            let close = if open == b'{' { b'}' } else { b']' };
            let mut i = skip_ws(b, start + 1);
            while *b.get(i)? != close {
                node.items.push(i);
                if open == b'{' {
                    let key_end = string_end(b, i).ok()?;
                    let key: String = serde_json::from_slice(&b[i..key_end]).ok()?;
                    let colon = skip_ws(b, key_end);
                    (b.get(colon) == Some(&b':')).then_some(())?;
                    let v = scan(b, colon + 1)?;
                    i = v.end;
                    node.members.push((key, v));
                } else {
                    let v = scan(b, i)?;
                    i = v.end;
                    node.elements.push(v);
                }
                i = skip_ws(b, i);
                match b.get(i) {
                    Some(b',') => i = skip_ws(b, i + 1),
                    Some(&c) if c == close => {}
                    _ => return None,
                }
            }
            node.end = i + 1;
        }
        b'"' => node.end = string_end(b, start).ok()?,
        _ => {
            let mut i = start;
            while i < b.len() && !matches!(b[i], b',' | b'}' | b']' | b':') && !b[i].is_ascii_whitespace() {
                i += 1;
            }
            (i > start).then_some(())?;
            node.end = i;
        }
    }
    Some(node)
}

/// One insertion: a member `key: value` at the end of the object at `path` (object keys
/// from the root), or, with no `key`, an element at the end of the array at `path`.
#[derive(Debug, Clone, Copy)]
pub struct Insert<'a> {
    /// Object keys leading to the container.
    pub path: &'a [&'a str],
    /// The new member's key; `None` to append an array element.
    pub key: Option<&'a str>,
    /// The new value.
    pub value: &'a Value,
}

/// The indentation unit the file uses (its first indented line's leading whitespace, else
/// two spaces).
fn indent_unit(text: &str) -> &str {
    text.lines().map(|l| &l[..l.len() - l.trim_start().len()]).find(|ws| !ws.is_empty()).unwrap_or("  ")
}

/// The offset where the line holding `at` starts.
fn line_start(text: &str, at: usize) -> usize {
    text[..at].rfind('\n').map_or(0, |i| i + 1)
}

/// The leading whitespace of the line holding offset `at`.
fn line_indent(text: &str, at: usize) -> &str {
    let line = &text[line_start(text, at)..];
    &line[..line.len() - line.trim_start().len()]
}

/// `value` pretty-printed with `unit` per level, lines ending in `nl`, every line after the
/// first prefixed by `indent`.
fn pretty(value: &Value, unit: &str, indent: &str, nl: &str) -> String {
    let mut out = Vec::new();
    let fmt = serde_json::ser::PrettyFormatter::with_indent(unit.as_bytes());
    // Serializing a `Value` into a `Vec` cannot fail.
    let _ = value.serialize(&mut serde_json::Serializer::with_formatter(&mut out, fmt));
    String::from_utf8_lossy(&out).replace('\n', &format!("{nl}{indent}"))
}

/// Applies one insertion to `text` without changing any byte of it: a comma after the
/// container's last item when it has items and no trailing comma, then the new item on a
/// line of its own before the closing bracket. `None` when `path` does not lead to a
/// container of the kind.
pub fn insert(text: &str, ins: Insert<'_>) -> Option<String> {
    let blank = blank_comments(text).ok()?;
    let mut node = scan(&blank, 0)?;
    for k in ins.path {
        node = node.members.iter().rev().find(|(m, _)| m == k)?.1.clone();
    }
    if blank[node.start] != if ins.key.is_some() { b'{' } else { b'[' } {
        return None;
    }
    let close = node.end - 1;
    let last = (node.start..close).rev().find(|&i| !blank[i].is_ascii_whitespace())?;
    let needs_comma = last != node.start && blank[last] != b',';
    let unit = indent_unit(text);
    // A file with CRLF line ends gets CRLF in what is inserted too.
    let nl = if text.contains("\r\n") { "\r\n" } else { "\n" };
    let close_indent = line_indent(text, close);
    // The items' own indentation when the first one starts a line, else one level in.
    let child = match node.items.first() {
        Some(&first) if text[node.start..first].contains('\n') => line_indent(text, first).to_owned(),
        _ => format!("{close_indent}{unit}"),
    };
    let value = pretty(ins.value, unit, &child, nl);
    let body = match ins.key {
        Some(key) => format!("{}: {value}", Value::String(key.to_owned())),
        None => value,
    };
    let own_line = text[line_start(text, close)..close].trim().is_empty() && text[last..close].contains('\n');
    let mut out = String::with_capacity(text.len() + body.len() + 16);
    out.push_str(&text[..=last]);
    if needs_comma {
        out.push(',');
    }
    if own_line {
        let at = line_start(text, close);
        out.push_str(&text[last + 1..at]);
        out.push_str(&format!("{child}{body}{nl}"));
        out.push_str(&text[at..]);
    } else {
        out.push_str(&text[last + 1..close]);
        out.push_str(&format!("{nl}{child}{body}{nl}{close_indent}"));
        out.push_str(&text[close..]);
    }
    Some(out)
}

/// One step into a document: an object member by key, or an array element by index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seg<'a> {
    /// A member (the last one of that key, as the readers take it).
    Key(&'a str),
    /// An element.
    Index(usize),
}

/// Removes the member or element `path` leads to, with the comma that separated it and,
/// when it had its lines to itself, those lines; every other byte stays. The inverse of
/// [`insert`] where the container's last item had no trailing comma (else that comma goes
/// too). `None` when `path` leads nowhere.
pub fn remove(text: &str, path: &[Seg<'_>]) -> Option<String> {
    let blank = blank_comments(text).ok()?;
    let bytes = text.as_bytes();
    let (last, parents) = path.split_last()?;
    let mut node = scan(&blank, 0)?;
    for seg in parents {
        node = match *seg {
            Seg::Key(k) => node.members.iter().rev().find(|(m, _)| m == k)?.1.clone(),
            Seg::Index(i) => node.elements.get(i)?.clone(),
        };
    }
    let k = match *last {
        Seg::Key(key) if blank[node.start] == b'{' => node.members.iter().rposition(|(m, _)| m == key)?,
        Seg::Index(i) if blank[node.start] == b'[' && i < node.elements.len() => i,
        _ => return None,
    };
    let end_of = |k: usize| if blank[node.start] == b'{' { node.members[k].1.end } else { node.elements[k].end };
    let (start, end) = (node.items[k], end_of(k));
    // Whitespace in the text itself: a comment is never taken for blank space.
    let blank_in = |a: usize, b: usize| bytes[a..b].iter().all(u8::is_ascii_whitespace);
    let eol = |i: usize| bytes[i..].iter().position(|&c| c == b'\n').map_or(bytes.len(), |p| i + p + 1);
    // The item (and its comma, up to `to`) alone on its lines, a line end after it.
    let own_lines = |to: usize| {
        let e = eol(to);
        blank_in(line_start(text, start), start) && blank_in(to, e) && bytes.get(e.wrapping_sub(1)) == Some(&b'\n')
    };
    let mut cuts: Vec<std::ops::Range<usize>> = Vec::new();
    let after = skip_ws(&blank, end);
    if blank.get(after) == Some(&b',') {
        let stop = after + 1;
        if own_lines(stop) {
            cuts.push(line_start(text, start)..eol(stop));
        } else {
            let mut to = stop;
            while matches!(bytes.get(to), Some(b' ' | b'\t')) {
                to += 1;
            }
            cuts.push(start..to);
        }
    } else if k > 0 {
        let comma = skip_ws(&blank, end_of(k - 1));
        (blank.get(comma) == Some(&b',')).then_some(())?;
        if own_lines(end) {
            cuts.push(comma..comma + 1);
            cuts.push(line_start(text, start)..eol(end));
        } else if blank_in(comma + 1, start) {
            cuts.push(comma..end);
        } else {
            cuts.push(comma..comma + 1);
            cuts.push(start..end);
        }
    } else if own_lines(end) {
        cuts.push(line_start(text, start)..eol(end));
    } else {
        cuts.push(start..end);
    }
    let mut out = text.to_owned();
    for r in cuts.into_iter().rev() {
        out.replace_range(r, "");
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn comments_and_trailing_commas_parse_and_strings_keep_their_slashes() {
        let text = "\u{feff}// head\n{\"a\": \"x//y/*z*/\", /* b */ \"b\": [1, 2,],\n \"c\": {\"d\": \"\\\"//\",},}\n";
        assert_eq!(parse(text).unwrap(), json!({"a": "x//y/*z*/", "b": [1, 2], "c": {"d": "\"//"}}));
        assert_eq!(parse("{/* open"), Err(JsoncError::OpenComment));
        assert_eq!(parse("{\"a"), Err(JsoncError::OpenString));
        assert!(matches!(parse("{\"a\": }"), Err(JsoncError::Json(_))));
        assert!(matches!(parse("{\"a\" 1}"), Err(JsoncError::Json(_))));
    }

    fn ins<'a>(path: &'a [&'a str], key: Option<&'a str>, value: &'a Value) -> Insert<'a> {
        Insert { path, key, value }
    }

    /// Whether `small` is a subsequence of `big` (every byte kept, in order).
    fn kept(small: &str, big: &str) -> bool {
        let mut it = big.bytes();
        small.bytes().all(|c| it.any(|b| b == c))
    }

    #[test]
    fn insertions_keep_every_original_byte() {
        let text = "{\n  // keep me\n  \"hooks\": {\n    \"A\": [1,], /* and me */\n  },\n  \"x\": 1 // last\n}\n";
        let a = insert(text, ins(&["hooks", "A"], None, &json!({"k": 2}))).unwrap();
        let b = insert(&a, ins(&["hooks"], Some("B"), &json!([3]))).unwrap();
        let c = insert(&b, ins(&[], Some("y"), &json!(true))).unwrap();
        assert_eq!(parse(&c).unwrap(), json!({"hooks": {"A": [1, {"k": 2}], "B": [3]}, "x": 1, "y": true}));
        assert!(kept(text, &c), "{c}");
        assert!(c.contains("\"x\": 1, // last\n  \"y\": true\n}\n"), "{c}");
        assert!(c.contains("\"A\": [1,\n      {\n        \"k\": 2\n      }\n    ], /* and me */\n    \"B\": [\n      3\n    ]\n  },"), "{c}");
    }

    #[test]
    fn crlf_files_get_crlf_insertions() {
        let text = "{\r\n  \"a\": 1 // one\r\n}\r\n";
        let out = insert(text, ins(&[], Some("h"), &json!({"k": [1]}))).unwrap();
        assert_eq!(parse(&out).unwrap(), json!({"a": 1, "h": {"k": [1]}}));
        assert!(kept(text, &out));
        assert!(!out.replace("\r\n", "").contains('\n'), "a bare LF slipped in: {out:?}");
    }

    #[test]
    fn compact_and_empty_containers_take_insertions() {
        let a = insert("{}", ins(&[], Some("h"), &json!({}))).unwrap();
        assert_eq!(parse(&a).unwrap(), json!({"h": {}}));
        let compact = r#"{"hooksConfig": {"enabled": false}}"#;
        let b = insert(compact, ins(&[], Some("h"), &json!(1))).unwrap();
        assert_eq!(parse(&b).unwrap(), json!({"hooksConfig": {"enabled": false}, "h": 1}));
        assert!(kept(compact, &b));
        let c = insert("[\n]", ins(&[], None, &json!(1))).unwrap();
        assert_eq!(parse(&c).unwrap(), json!([1]));
        assert!(insert("{\"a\": 1}", ins(&["a"], None, &json!(1))).is_none(), "not an array");
        assert!(insert("{\"a\": 1}", ins(&["b"], Some("k"), &json!(1))).is_none(), "no such key");
        assert!(insert("{\"a\": [}", ins(&["a"], None, &json!(1))).is_none(), "not JSONC");
    }

    #[test]
    fn removals_undo_insertions_and_keep_the_rest() {
        let text = "{\n  // keep me\n  \"hooks\": {\n    \"A\": [1] /* and me */\n  },\n  \"x\": 1 // last\n}\n";
        let a = insert(text, ins(&["hooks", "A"], None, &json!({"k": 2}))).unwrap();
        let b = insert(&a, ins(&["hooks"], Some("B"), &json!([3]))).unwrap();
        let c = insert(&b, ins(&[], Some("y"), &json!(true))).unwrap();
        let back = remove(&c, &[Seg::Key("y")]).unwrap();
        assert_eq!(back, b);
        let back = remove(&back, &[Seg::Key("hooks"), Seg::Key("B")]).unwrap();
        assert_eq!(back, a);
        let back = remove(&back, &[Seg::Key("hooks"), Seg::Key("A"), Seg::Index(1)]).unwrap();
        assert_eq!(parse(&back).unwrap(), parse(text).unwrap());
        assert!(kept(text, &back), "{back}");
        // Not last, one line, or alone: the separating comma goes with the item.
        assert_eq!(remove("[1, 2, 3]", &[Seg::Index(1)]).unwrap(), "[1, 3]");
        assert_eq!(remove("[1, /* c */ 2]", &[Seg::Index(1)]).unwrap(), "[1 /* c */ ]");
        assert_eq!(remove("{\"a\": [2]}", &[Seg::Key("a")]).unwrap(), "{}");
        assert_eq!(remove("{\r\n  \"a\": 1,\r\n  \"b\": 2\r\n}", &[Seg::Key("b")]).unwrap(), "{\r\n  \"a\": 1\r\n}");
        assert!(remove("{\"a\": 1}", &[Seg::Key("b")]).is_none());
        assert!(remove("{\"a\": 1}", &[Seg::Index(0)]).is_none());
    }

    mod prop {
        use super::super::*;
        use super::kept;
        use proptest::prelude::*;
        use serde_json::json;

        fn value() -> impl Strategy<Value = Value> {
            let leaf = prop_oneof![
                Just(json!(null)),
                any::<bool>().prop_map(Value::from),
                any::<i32>().prop_map(Value::from),
                "[a-z/*\\\\\" ,\\]\\[{}é]{0,6}".prop_map(Value::from),
            ];
            leaf.prop_recursive(3, 24, 4, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                    prop::collection::btree_map("[a-z]{1,3}", inner, 0..4)
                        .prop_map(|m| Value::Object(m.into_iter().collect())),
                ]
            })
        }

        /// JSONC text of `v`: between tokens, by the `noise` bits, nothing, a newline with
        /// indentation, a `//` comment or a `/* */` one; after a container's last item,
        /// sometimes a trailing comma.
        fn write(v: &Value, noise: &mut impl Iterator<Item = u8>, depth: usize, out: &mut String) {
            let gap = |out: &mut String, noise: &mut dyn Iterator<Item = u8>| match noise.next().unwrap_or(0) % 6 {
                0 => out.push_str(&format!("\n{}", "  ".repeat(depth + 1))),
                1 => out.push_str(" // a \"quoted\" comment, with {braces}\n"),
                2 => out.push_str(" /* block, ] */ "),
                _ => {}
            };
            match v {
                Value::Object(m) => {
                    out.push('{');
                    for (i, (k, x)) in m.iter().enumerate() {
                        gap(out, noise);
                        out.push_str(&Value::String(k.clone()).to_string());
                        out.push(':');
                        gap(out, noise);
                        write(x, noise, depth + 1, out);
                        if i + 1 < m.len() || noise.next().unwrap_or(0).is_multiple_of(3) {
                            out.push(',');
                        }
                    }
                    gap(out, noise);
                    out.push('}');
                }
                Value::Array(a) => {
                    out.push('[');
                    for (i, x) in a.iter().enumerate() {
                        gap(out, noise);
                        write(x, noise, depth + 1, out);
                        if i + 1 < a.len() || noise.next().unwrap_or(0).is_multiple_of(3) {
                            out.push(',');
                        }
                    }
                    gap(out, noise);
                    out.push(']');
                }
                other => out.push_str(&other.to_string()),
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 1024, failure_persistence: None, ..ProptestConfig::default() })]

            /// Any JSONC rendering of an object parses to it, and a member inserted at the
            /// root or into any nested object lands there with every original byte kept.
            #[test]
            fn insertions_into_any_jsonc_keep_the_text_and_land(
                map in prop::collection::btree_map("[a-z]{1,3}", value(), 0..5),
                noise in prop::collection::vec(any::<u8>(), 0..400),
                new in value(),
                pick in any::<usize>(),
            ) {
                let doc = Value::Object(map.into_iter().collect());
                let mut text = String::new();
                write(&doc, &mut noise.into_iter(), 0, &mut text);
                prop_assert_eq!(parse(&text).unwrap(), doc.clone(), "{}", text);
                // Every object in the document, by its key path.
                let mut objects: Vec<Vec<String>> = vec![Vec::new()];
                let mut i = 0;
                while i < objects.len() {
                    let mut node = &doc;
                    for k in &objects[i] {
                        node = &node[k.as_str()];
                    }
                    if let Value::Object(m) = node {
                        for (k, x) in m {
                            if x.is_object() {
                                let mut p = objects[i].clone();
                                p.push(k.clone());
                                objects.push(p);
                            }
                        }
                    }
                    i += 1;
                }
                let path = &objects[pick % objects.len()];
                let path: Vec<&str> = path.iter().map(String::as_str).collect();
                let out = insert(&text, Insert { path: &path, key: Some("new_key"), value: &new }).unwrap();
                let mut want = doc.clone();
                let mut node = &mut want;
                for k in &path {
                    node = &mut node[*k];
                }
                node.as_object_mut().unwrap().insert("new_key".into(), new);
                prop_assert_eq!(parse(&out).unwrap(), want, "{}\n=>\n{}", text, out);
                prop_assert!(kept(&text, &out));
                // And removing it gives the document back, deleting bytes only.
                let mut segs: Vec<Seg<'_>> = path.iter().map(|k| Seg::Key(k)).collect();
                segs.push(Seg::Key("new_key"));
                let back = remove(&out, &segs).unwrap();
                prop_assert_eq!(parse(&back).unwrap(), doc, "{}\n=>\n{}", out, back);
                prop_assert!(kept(&back, &out));
            }
        }
    }
}
