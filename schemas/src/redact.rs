//! The AEP-0003 §9.4 redaction pipeline for `redacted`-gated free text.
//!
//! Applied in the normative order: (a) secrets and credentials become
//! `[REDACTED:secret]`, (b) values of operator-configured secret names become
//! `[REDACTED:secret]`, (c) the home directory prefix becomes `~`, (d) PII (emails,
//! phone numbers) becomes `[REDACTED:pii]` (on by default). The pipeline is a floor
//! (§9.4): this implementation also redacts well-known vendor token shapes (GitHub,
//! GitLab, Slack, OpenAI-style, Stripe, Google), quoted credential assignments,
//! `Authorization:` header values, any `/home/<user>` or `/Users/<user>` prefix, and,
//! in [`redact_value`], the values of credential-named object keys.
//!
//! Text that matches nothing is returned without allocating (every stage works on a
//! `Cow`). Out of scope, like the spec corpus: encoded secrets, homoglyph key names,
//! secrets inside object key names (keys are structural) and prose-obfuscated PII.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::{Captures, Regex};
use serde_json::Value;

/// Replacement for secrets and credentials (§9.4 a, b).
pub const SECRET: &str = "[REDACTED:secret]";
/// Replacement for PII (§9.4 d).
pub const PII: &str = "[REDACTED:pii]";

/// Configured secret values shorter than this are not redacted: a one- to three-character
/// value would shred unrelated text and protects nothing.
pub const MIN_SECRET_VALUE_LEN: usize = 4;

/// Settings of the redaction pipeline.
#[derive(Debug, Clone)]
pub struct RedactConfig {
    /// Environment variable / config key names whose values are secret (§9.4 b).
    pub secret_names: Vec<String>,
    /// Values of the configured secret names, resolved by the caller (§9.4 b).
    pub secret_values: Vec<String>,
    /// The user's home directory prefix, replaced with `~` (§9.4 c).
    pub home: Option<String>,
    /// Redact emails and phone numbers (§9.4 d); on by default.
    pub pii: bool,
}

impl Default for RedactConfig {
    fn default() -> Self {
        Self { secret_names: Vec::new(), secret_values: Vec::new(), home: None, pii: true }
    }
}

// AEP-0003 §9.4 (a): one alternation so each string is scanned once. Group names say
// which rule hit; `kv` keeps the key and separator and replaces only the value.
static SECRETS: LazyLock<Regex> = LazyLock::new(|| {
    let pem = r"(?P<pem>-----BEGIN [A-Z0-9 ]{0,64}-----(?s:.*?)(?:-----END [A-Z0-9 ]{0,64}-----|\z))";
    let aws = r"(?P<aws>(?-u:\b)(?:AKIA|ASIA)[0-9A-Z]{16}(?-u:\b))";
    let jwt = r"(?P<jwt>(?-u:\b)eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*)";
    let vendor = concat!(
        r"(?P<vendor>(?-u:\b)(?:",
        r"gh[pousr]_[A-Za-z0-9]{20,}",
        r"|github_pat_[A-Za-z0-9_]{20,}",
        r"|glpat-[A-Za-z0-9_-]{20,}",
        r"|xox[abposre]-[A-Za-z0-9-]{10,}",
        r"|sk-(?:proj-|ant-|svcacct-)?[A-Za-z0-9_-]{16,}",
        r"|[rs]k_(?:live|test)_[A-Za-z0-9]{10,}",
        r"|AIza[0-9A-Za-z_-]{35}",
        r"))"
    );
    // `Authorization: <scheme> <credentials>`: the whole header value.
    let auth = r#"(?P<auth>(?i:(?-u:\b)(?:proxy-)?authorization)\\?["']?\s*[=:]\s*\\?["']?)(?P<authval>(?i:(?:basic|bearer|digest|token|negotiate)\s+)?[^\s"'\\]+)"#;
    // RFC 6750 schemes are case-insensitive; the token must look like one (see below).
    let bearer = r"(?P<bearer>(?i:(?-u:\b)bearer)\s+)(?P<bearerval>[A-Za-z0-9\-._~+/]+=*)";
    // `(password|passwd|secret|api[_-]?key|token)\s*[=:]\s*\S+`, widened to a quote
    // between key and separator (JSON), to quoted values with spaces, and to
    // `*_access_key` / `*_secret_key` / `*_private_key` / `credentials` keys.
    let kv = concat!(
        r#"(?P<kv>(?i:password|passwd|passphrase|secret|api[_-]?key|token|(?:access|secret|private)[_-]?key|credentials?)"#,
        r#"\\?["']?\s*[=:]\s*)(?P<kvval>\\?"[^"]*"?|'[^']*'?|\S+)"#
    );
    // Hardening: `--password VALUE`-style command-line flags.
    let flag = r#"(?P<flag>(?:^|[\s"'=])(?i:--?(?:[a-z0-9]+[-_])*(?:password|passwd|secret|api[_-]?key|token))[ \t]+)(?P<flagval>[^\s-]\S*)"#;
    // Hardening: the password of `scheme://user:password@host`.
    let url = r"(?P<url>(?-u:\b)[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]+:)(?P<urlval>[^/\s@]+)@";
    // Hardening: `Cookie:` / `Set-Cookie:` header values, to the end of the line.
    let cookie = r#"(?P<cookie>(?i:(?-u:\b)(?:set-)?cookie)\\?["']?\s*:\s*)(?P<cookieval>\\?"[^"]*"?|[^\r\n]+)"#;
    let all = [pem, aws, jwt, vendor, auth, bearer, url, cookie, flag, kv].join("|");
    Regex::new(&all).expect("static secret regex")
});

// Hardening beyond §9.4 (c): any `/home/<user>`, `/Users/<user>`, `C:\Users\<user>`.
static HOMES: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?P<pre>^|[^A-Za-z0-9_.~/\\-])(?:/home/|/Users/|[A-Za-z]:\\Users\\)[^/\\\s"'`:;,()\[\]{}<>]+"#)
        .expect("static home regex")
});

// AEP-0003 §9.4 (d).
static EMAIL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?P<local>[A-Za-z0-9._%+-]+)@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
        .expect("static email regex")
});

static PHONE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        // international: +CC then groups
        r"\+[0-9]{1,3}[ .-]?(?:\([0-9]{1,4}\)|[0-9]{1,4})(?:[ .-]?[0-9]{2,4}){2,4}",
        // (555) 123-4567
        r"|\([0-9]{3}\)[ ]?[0-9]{3}[ .-][0-9]{4}",
        // 555-123-4567 / 555.123.4567
        r"|[0-9]{3}[.-][0-9]{3}[.-][0-9]{4}",
    ))
    .expect("static phone regex")
});

/// Runs the §9.4 pipeline over one string. Returns the input unchanged (borrowed) when
/// nothing matched.
pub fn redact_cow<'a>(text: &'a str, cfg: &RedactConfig) -> Cow<'a, str> {
    // (a) secrets and credentials
    let mut out = secrets(text);
    // (b) configured names and their values
    if let Cow::Owned(s) = configured(&out, cfg) {
        out = Cow::Owned(s);
    }
    // (c) home paths
    if let Cow::Owned(s) = homes(&out, cfg) {
        out = Cow::Owned(s);
    }
    // (d) PII, operator-disableable
    if cfg.pii
        && let Cow::Owned(s) = pii(&out)
    {
        out = Cow::Owned(s);
    }
    out
}

/// Runs the §9.4 pipeline over one string (see [`redact_cow`] for a non-allocating form).
pub fn redact_text(text: &str, cfg: &RedactConfig) -> String {
    redact_cow(text, cfg).into_owned()
}

/// Returns a copy of `v` with every string inside redacted, recursively; object keys are
/// untouched, and string values under credential-named keys are replaced outright.
pub fn redact_value(v: &Value, cfg: &RedactConfig) -> Value {
    let mut v = v.clone();
    redact_value_in_place(&mut v, cfg);
    v
}

/// [`redact_value`] in place: only strings that change are reallocated.
pub fn redact_value_in_place(v: &mut Value, cfg: &RedactConfig) {
    walk(v, cfg, false);
}

fn walk(v: &mut Value, cfg: &RedactConfig, forced: bool) {
    match v {
        Value::String(s) => {
            if forced {
                if !s.is_empty() && s != SECRET {
                    *s = SECRET.to_owned();
                }
            } else if let Cow::Owned(r) = redact_cow(s, cfg) {
                *s = r;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| walk(i, cfg, forced)),
        Value::Object(map) => {
            for (k, item) in map.iter_mut() {
                let force = forced || is_credential_key(k) || is_configured_name(k, cfg);
                walk(item, cfg, force);
            }
        }
        _ => {}
    }
}

/// `true` for object keys whose value is a credential whatever it looks like
/// (`token`, `API_KEY`, `client-secret`, `Authorization`, ...), but not for token
/// counts such as `max_tokens`.
pub fn is_credential_key(key: &str) -> bool {
    const ENDINGS: [&str; 13] = [
        "password",
        "passwd",
        "passphrase",
        "secret",
        "token",
        "apikey",
        "authorization",
        "credential",
        "credentials",
        "privatekey",
        "accesskey",
        "secretkey",
        "cookie",
    ];
    // Compare from the end over the lowercased alphanumerics: no allocation.
    ENDINGS.iter().any(|e| {
        let mut norm = key.bytes().rev().filter(u8::is_ascii_alphanumeric).map(|b| b.to_ascii_lowercase());
        e.bytes().rev().all(|b| norm.next() == Some(b))
    })
}

fn is_configured_name(key: &str, cfg: &RedactConfig) -> bool {
    cfg.secret_names.iter().any(|n| !n.is_empty() && n.eq_ignore_ascii_case(key))
}

fn secrets(text: &str) -> Cow<'_, str> {
    SECRETS.replace_all(text, |c: &Captures<'_>| {
        if let (Some(pre), Some(_)) = (c.name("kv"), c.name("kvval")) {
            return keep_key(pre.as_str(), c.name("kvval").map_or("", |m| m.as_str()));
        }
        if let (Some(pre), Some(_)) = (c.name("url"), c.name("urlval")) {
            return format!("{}{SECRET}@", pre.as_str());
        }
        for (key, val) in [("auth", "authval"), ("cookie", "cookieval"), ("flag", "flagval")] {
            if let (Some(pre), Some(val)) = (c.name(key), c.name(val)) {
                return keep_key(pre.as_str(), val.as_str());
            }
        }
        if let (Some(pre), Some(val)) = (c.name("auth"), c.name("authval")) {
            return keep_key(pre.as_str(), val.as_str());
        }
        if let (Some(pre), Some(val)) = (c.name("bearer"), c.name("bearerval")) {
            // `the bearer of good news` is prose, not a credential.
            if !token_like(val.as_str()) {
                return c[0].to_owned();
            }
            return format!("{}{SECRET}", pre.as_str());
        }
        SECRET.to_owned()
    })
}

/// Keeps `key=` and the quoting of the value, replacing only its content.
fn keep_key(pre: &str, val: &str) -> String {
    for q in ["\\\"", "\"", "'"] {
        if let Some(rest) = val.strip_prefix(q) {
            let closed = rest.ends_with(q) && !rest.is_empty();
            return format!("{pre}{q}{SECRET}{}", if closed { q } else { "" });
        }
    }
    format!("{pre}{SECRET}")
}

fn token_like(tok: &str) -> bool {
    tok.len() >= 20 || tok.bytes().any(|b| !b.is_ascii_alphabetic())
}

fn configured<'a>(text: &'a str, cfg: &RedactConfig) -> Cow<'a, str> {
    let mut out = Cow::Borrowed(text);
    // AEP-0003 §9.4 (b): the resolved values, wherever they appear.
    for v in &cfg.secret_values {
        if v.len() >= MIN_SECRET_VALUE_LEN && out.contains(v.as_str()) {
            out = Cow::Owned(out.replace(v.as_str(), SECRET));
        }
    }
    // ... and `NAME=value` / `NAME: value` assignments of the configured names.
    for name in &cfg.secret_names {
        if !name.is_empty()
            && out.contains(name.as_str())
            && let Some(s) = redact_assignments(&out, name)
        {
            out = Cow::Owned(s);
        }
    }
    out
}

/// Replaces the value after `name\s*[=:]\s*` (up to whitespace); `None` when none found.
fn redact_assignments(text: &str, name: &str) -> Option<String> {
    let mut out = String::new();
    let mut last = 0;
    for (at, _) in text.match_indices(name) {
        if at < last {
            continue;
        }
        let after = &text[at + name.len()..];
        let trimmed = after.trim_start_matches(['"', '\'']).trim_start();
        let Some(rest) = trimmed.strip_prefix(['=', ':']) else { continue };
        let mut value = rest.trim_start();
        // A quoted value is the quoted content, spaces included; quotes stay.
        let vlen = match value.chars().next() {
            Some(q @ ('"' | '\'')) => {
                value = &value[1..];
                value.find(q).unwrap_or(value.len())
            }
            _ => value.find(char::is_whitespace).unwrap_or(value.len()),
        };
        if vlen == 0 || value.starts_with(SECRET) {
            continue;
        }
        let value_start = text.len() - value.len();
        out.push_str(&text[last..value_start]);
        out.push_str(SECRET);
        last = value_start + vlen;
    }
    if last == 0 {
        return None;
    }
    out.push_str(&text[last..]);
    Some(out)
}

fn homes<'a>(text: &'a str, cfg: &RedactConfig) -> Cow<'a, str> {
    let mut out = Cow::Borrowed(text);
    // AEP-0003 §9.4 (c): the configured prefix, at a path boundary.
    if let Some(home) = cfg.home.as_deref().map(|h| h.trim_end_matches(['/', '\\']))
        && !home.is_empty()
        && out.contains(home)
        && let Some(s) = replace_home(&out, home)
    {
        out = Cow::Owned(s);
    }
    if let Cow::Owned(s) = HOMES.replace_all(&out, "${pre}~") {
        out = Cow::Owned(s);
    }
    out
}

fn replace_home(text: &str, home: &str) -> Option<String> {
    let mut out = String::new();
    let mut last = 0;
    for (at, _) in text.match_indices(home) {
        let next = text[at + home.len()..].chars().next();
        let boundary = match next {
            None => true,
            Some(c) => !(c.is_alphanumeric() || matches!(c, '_' | '-' | '.')),
        };
        if boundary && at >= last {
            out.push_str(&text[last..at]);
            out.push('~');
            last = at + home.len();
        }
    }
    if last == 0 {
        return None;
    }
    out.push_str(&text[last..]);
    Some(out)
}

fn pii(text: &str) -> Cow<'_, str> {
    let out = EMAIL.replace_all(text, |c: &Captures<'_>| {
        // `git@github.com:org/repo` is an SSH remote, not a person.
        if c.name("local").is_some_and(|m| m.as_str() == "git") { c[0].to_owned() } else { PII.to_owned() }
    });
    let phones = PHONE.replace_all(&out, |c: &Captures<'_>| {
        let m = c.get(0).map_or("", |m| m.as_str());
        if plausible_phone(&out, c) { PII.to_owned() } else { m.to_owned() }
    });
    match phones {
        Cow::Borrowed(_) => out,
        Cow::Owned(s) => Cow::Owned(s),
    }
}

/// A phone match must stand alone (no digits or letters glued to either side) and
/// carry 7 to 15 digits (E.164), so versions, ids and timestamps are left alone.
fn plausible_phone(text: &str, c: &Captures<'_>) -> bool {
    let Some(m) = c.get(0) else { return false };
    let mut back = text[..m.start()].chars().rev();
    let mut fwd = text[m.end()..].chars();
    let word = |ch: Option<char>| ch.is_some_and(|ch| ch.is_alphanumeric() || ch == '_');
    let digit = |ch: Option<char>| ch.is_some_and(|ch| ch.is_ascii_digit());
    // A `.` glues only when a digit sits behind it (`1.555-...`), not at a sentence end.
    let glued_before = match back.next() {
        Some('.') | Some('-') => digit(back.next()),
        other => word(other),
    };
    let glued_after = match fwd.next() {
        Some('.') | Some('-') => digit(fwd.next()),
        other => word(other),
    };
    let digits = m.as_str().bytes().filter(u8::is_ascii_digit).count();
    !glued_before && !glued_after && (7..=15).contains(&digits)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn red(s: &str) -> String {
        redact_text(s, &RedactConfig::default())
    }

    #[test]
    fn secrets_rule_a() {
        let pem = "x\n-----BEGIN EC PRIVATE KEY-----\nAAAAsecretbody\n-----END EC PRIVATE KEY-----\ny";
        let r = red(pem);
        assert!(!r.contains("AAAAsecretbody") && r.contains(SECRET) && r.starts_with("x\n") && r.ends_with("\ny"));
        assert_eq!(red("key AKIAABCDEFGHIJKLMNOP end"), format!("key {SECRET} end"));
        assert_eq!(red("Authorization: Bearer zz.99-x"), format!("Authorization: {SECRET}"));
        assert_eq!(red("use bearer qwertyuiop123"), format!("use bearer {SECRET}"));
        assert_eq!(red("a bearer of news"), "a bearer of news");
        assert_eq!(red("DB_PASSWORD=hunter22 ok"), format!("DB_PASSWORD={SECRET} ok"));
        assert_eq!(red(r#"{"token": "abc def"}"#), format!(r#"{{"token": "{SECRET}"}}"#));
        assert_eq!(red("secret:\n  v4lue"), format!("secret:\n  {SECRET}"));
        assert_eq!(red("t eyJhbGciOi.eyJzdWIiOi.sig_x y"), format!("t {SECRET} y"));
        assert_eq!(red("ghp_0123456789abcdefghijABCDEFGHIJ"), SECRET);
        assert_eq!(red("Authorization: Basic dXNlcjpwYXNz"), format!("Authorization: {SECRET}"));
        assert_eq!(red("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG"), format!("AWS_SECRET_ACCESS_KEY={SECRET}"));
        assert_eq!(red("max_tokens: 4096, input_tokens=12"), "max_tokens: 4096, input_tokens=12");
        assert_eq!(red("gh auth --with-token abc123 -x"), format!("gh auth --with-token {SECRET} -x"));
        assert_eq!(red("--token-file /p --max-tokens 5"), "--token-file /p --max-tokens 5");
        assert_eq!(red("postgres://app:pw0rd@db:5432/x"), format!("postgres://app:{SECRET}@db:5432/x"));
        assert_eq!(red("see https://example.com:8080/a@b"), "see https://example.com:8080/a@b");
        assert_eq!(red("Cookie: sid=abc; x=y\nnext"), format!("Cookie: {SECRET}\nnext"));
    }

    #[test]
    fn configured_rule_b_and_home_rule_c() {
        let cfg = RedactConfig {
            secret_names: vec!["DEPLOY_KEY".into()],
            secret_values: vec!["v@lue-9".into(), "ab".into()],
            home: Some("/home/op/".into()),
            pii: true,
        };
        assert_eq!(redact_text("x v@lue-9 y ab", &cfg), format!("x {SECRET} y ab"));
        assert_eq!(redact_text("DEPLOY_KEY=qq1 next", &cfg), format!("DEPLOY_KEY={SECRET} next"));
        assert_eq!(
            redact_text(r#"{"DEPLOY_KEY": "a b", "x": 1}"#, &cfg),
            format!(r#"{{"DEPLOY_KEY": "{SECRET}", "x": 1}}"#)
        );
        assert_eq!(redact_text("cd /home/op/src && ls /home/opx", &cfg), "cd ~/src && ls ~");
        assert_eq!(redact_text("/Users/amy/a and C:\\Users\\bo\\b", &cfg), "~/a and ~\\b");
        assert_eq!(redact_text("/mnt/home/zed/q", &cfg), "/mnt/home/zed/q");
    }

    #[test]
    fn pii_rule_d_and_order() {
        assert_eq!(red("mail a.b@ex.org now"), format!("mail {PII} now"));
        assert_eq!(red("git@github.com:o/r.git"), "git@github.com:o/r.git");
        assert_eq!(red("tel 555-123-4567."), format!("tel {PII}."));
        assert_eq!(red("+44 20 7946 0958"), PII);
        for keep in ["node 22.11.0", "ts 1751537704123", "v1.2.3-4567", "2026-07-03T10:15:04Z", "id 123.456.78901"] {
            assert_eq!(red(keep), keep);
        }
        let off = RedactConfig { pii: false, ..RedactConfig::default() };
        assert_eq!(redact_text("a@b.io", &off), "a@b.io");
        assert_eq!(red("passwd=me@x.com"), format!("passwd={SECRET}"));
    }

    #[test]
    fn untouched_text_is_borrowed() {
        let cfg = RedactConfig { home: Some("/home/q".into()), ..RedactConfig::default() };
        assert!(matches!(redact_cow("ran 42 tests in 3.1s, 0 failures", &cfg), Cow::Borrowed(_)));
    }

    #[test]
    fn values_recurse_and_respect_keys() {
        let cfg = RedactConfig { secret_names: vec!["MY_VAR".into()], ..RedactConfig::default() };
        let v = json!({"max_tokens": 5, "access_token": "plain", "nested": {"Api-Key": ["a", {"x": "b"}], "my_var": "c"},
            "argv": ["--k", "AKIAABCDEFGHIJKLMNOP"], "n": null, "ok": true, "text": "hi"});
        let r = redact_value(&v, &cfg);
        assert_eq!(
            r,
            json!({"max_tokens": 5, "access_token": SECRET, "nested": {"Api-Key": [SECRET, {"x": SECRET}], "my_var": SECRET},
                "argv": ["--k", SECRET], "n": null, "ok": true, "text": "hi"})
        );
        assert!(!is_credential_key("input_tokens") && is_credential_key("client_secret"));
    }
}
