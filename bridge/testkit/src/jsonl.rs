//! Reading a JSONL log the bridge is still writing, as every test that looks at a live log
//! must: up to its last complete line. The writer appends each line with one `write`, but
//! a read can land inside it, so a last line without its newline is "not yet" (whole on
//! the next read), never a parse error that fails a test at random
//! ([`aep_schemas::jsonl`], the rule every reader of a live log follows).

use std::path::Path;

use serde_json::Value;

/// The complete lines of the log at `path` (none while it does not exist yet).
pub fn log_lines(path: &Path) -> Vec<String> {
    let bytes = std::fs::read(path).unwrap_or_default();
    let whole = &bytes[..aep_schemas::jsonl::complete_len(&bytes)];
    String::from_utf8_lossy(whole).lines().map(str::to_owned).collect()
}

/// The events of the log at `path`, one per complete line (none while it does not exist
/// yet). A complete line that is not JSON panics: the writer tore it, a real defect.
pub fn log_events(path: &Path) -> Vec<Value> {
    parse_lines(path, &log_lines(path))
}

/// `lines` of the log at `path` as JSON values; panics naming the file and the line when
/// one is not JSON.
pub fn parse_lines(path: &Path, lines: &[String]) -> Vec<Value> {
    lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l).unwrap_or_else(|e| {
                panic!("{} line {}: a whole line that is not JSON: {e}: {l}", path.display(), i + 1)
            })
        })
        .collect()
}

/// Every complete line of every file under `root`, recursively (none while it does not
/// exist yet).
pub fn tree_lines(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.extend(log_lines(&p));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_being_written_is_not_yet_read() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a")).unwrap();
        let log = dir.path().join("a/s.jsonl");
        assert!(log_events(&log).is_empty(), "no file yet: no events");
        std::fs::write(&log, "{\"n\":1}\n{\"n\":2}\n{\"n\":").unwrap();
        assert_eq!(log_events(&log), [serde_json::json!({"n": 1}), serde_json::json!({"n": 2})]);
        std::fs::write(dir.path().join("b.jsonl"), "{\"n\":3}\n").unwrap();
        let mut all = tree_lines(dir.path());
        all.sort();
        assert_eq!(all, ["{\"n\":1}", "{\"n\":2}", "{\"n\":3}"]);
    }

    #[test]
    #[should_panic(expected = "line 2: a whole line that is not JSON")]
    fn a_whole_line_that_is_not_json_is_a_defect() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("s.jsonl");
        std::fs::write(&log, "{\"n\":1}\n{\"n\"\n").unwrap();
        log_events(&log);
    }
}
