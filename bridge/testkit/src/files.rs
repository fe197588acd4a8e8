//! Reading what the CLI and the daemon leave behind, independently of the code under test:
//! a directory tree byte for byte, JSONC the way the vendors read it, a Prometheus scrape.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

/// Every file (with its bytes) and folder (`None`) under `root`, by relative path: what a
/// round trip (install then uninstall) must give back exactly.
pub fn tree(root: &Path) -> BTreeMap<String, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            if p.is_dir() {
                out.insert(rel, None);
                todo.push(p);
            } else {
                out.insert(rel, Some(std::fs::read(&p).unwrap()));
            }
        }
    }
    out
}

/// Reads JSONC the way the vendors do, independently of the installer: comments and
/// trailing commas dropped by a character walk, then strict JSON. Panics on anything else.
pub fn read_jsonc(text: &str) -> Value {
    let c: Vec<char> = text.chars().collect();
    let (mut out, mut i, mut in_string) = (String::new(), 0, false);
    while i < c.len() {
        let next = c.get(i + 1).copied();
        if in_string {
            out.push(c[i]);
            if c[i] == '\\' {
                out.extend(next);
                i += 1;
            } else if c[i] == '"' {
                in_string = false;
            }
        } else if c[i] == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
            continue;
        } else if c[i] == '/' && next == Some('*') {
            i += 2;
            while i + 1 < c.len() && !(c[i] == '*' && c[i + 1] == '/') {
                i += 1;
            }
            i += 1;
        } else if c[i] == ',' && next_closes(&c[i + 1..]) {
            // a trailing comma: dropped
        } else {
            in_string = c[i] == '"';
            out.push(c[i]);
        }
        i += 1;
    }
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSONC ({e}):\n{out}"))
}

/// Whether the next significant character (skipping whitespace and comments) closes a
/// container.
fn next_closes(rest: &[char]) -> bool {
    let mut i = 0;
    while i < rest.len() {
        match (rest[i], rest.get(i + 1)) {
            (c, _) if c.is_whitespace() => i += 1,
            ('/', Some('/')) => {
                while i < rest.len() && rest[i] != '\n' {
                    i += 1;
                }
            }
            ('/', Some('*')) => {
                i += 2;
                while i + 1 < rest.len() && !(rest[i] == '*' && rest[i + 1] == '/') {
                    i += 1;
                }
                i += 2;
            }
            (c, _) => return c == '}' || c == ']',
        }
    }
    false
}

/// The sum of the samples of metric `name` (exactly that name, any labels) whose line holds
/// every one of `labels` (`key="value"`), in a Prometheus text scrape.
pub fn metric_sum(text: &str, name: &str, labels: &[&str]) -> u64 {
    text.lines()
        .filter(|l| {
            l.strip_prefix(name).is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
                && labels.iter().all(|s| l.contains(s))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}
