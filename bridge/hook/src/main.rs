//! `aep-hook <vendor> [event]`: the fail-open command shim an agent runs for each hook.
//!
//! Reads the hook payload on stdin, POSTs it to the bridge (`AEP_BRIDGE_URL`, default
//! `http://127.0.0.1:8787`; with `AEP_TOKEN`, a MAC under it, never the token itself) at
//! `/hooks/{vendor}[/{event}]`,
//! and writes the bridge's reply to stdout. Fail-open is absolute: whatever goes wrong
//! (bridge down, slow, erroring, not reading), the agent gets the vendor's neutral reply and
//! exit 0 within one budget for the whole exchange (`AEP_HOOK_TIMEOUT_MS`, 3 s; a held
//! permission moment `AEP_HOOK_HOLD_TIMEOUT_MS`, 65 s with a token).
//! A call another agent made through this vendor's wiring (the vendor's folder tells them
//! apart by the hook process's environment) gets the neutral reply and is not forwarded.
//! With a token the shim also sends a fresh nonce and relays a reply only when it carries
//! the bridge's proof over it (`x-aep-proof`, HMAC under the token): another program
//! listening on the port cannot answer for the bridge.
//! Plain blocking std I/O, no async runtime: start-up cost is what the agent pays on
//! every tool call.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use aep_adapters::spec::VendorSpec;

/// Largest payload forwarded; beyond it the shim answers neutrally without sending.
const MAX_PAYLOAD: usize = 16 * 1024 * 1024;

/// Largest reply read (status line, headers and body): a vendor reply is one small JSON
/// decision, so anything larger is not the bridge's and the shim answers neutrally.
const MAX_REPLY: usize = 1024 * 1024;

fn main() {
    let mut args = std::env::args().skip(1);
    let vendor = args.next().unwrap_or_default();
    let event = args.next();
    let mut payload = Vec::new();
    let _ = std::io::stdin().take(MAX_PAYLOAD as u64 + 1).read_to_end(&mut payload);
    let reply = if ran_by_other(&vendor, event.as_deref(), &payload) {
        None
    } else {
        forward(&vendor, event.as_deref(), &payload)
    };
    let reply = reply.unwrap_or_else(|| neutral(&vendor, event.as_deref(), &payload));
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(&reply);
    let _ = out.flush();
    std::process::exit(0);
}

/// The hook name of this call (the argv event, else the payload's own name field) and the
/// vendor's spec, when the vendor is built in.
fn moment(vendor: &str, event: Option<&str>, payload: &serde_json::Value) -> Option<(String, &'static VendorSpec)> {
    let spec = aep_adapters::vendors::spec(vendor)?;
    let call = aep_adapters::HookCall { event, payload };
    Some(((spec.adapter)().hook_name(&call).ok()?, spec))
}

/// The vendor's neutral reply (what it gets when nothing is decided).
fn neutral(vendor: &str, event: Option<&str>, payload: &[u8]) -> Vec<u8> {
    let value: serde_json::Value = serde_json::from_slice(payload).unwrap_or(serde_json::Value::Null);
    match moment(vendor, event, &value) {
        Some((hook, spec)) => (spec.adapter)().neutral_reply(&hook).as_bytes().to_vec(),
        None => Vec::new(),
    }
}

/// `true` for moments the bridge may hold open for a human (the vendor's folder says which).
fn is_held_moment(vendor: &str, event: Option<&str>, payload: &[u8]) -> bool {
    let value: serde_json::Value = serde_json::from_slice(payload).unwrap_or(serde_json::Value::Null);
    moment(vendor, event, &value).is_some_and(|(hook, spec)| spec.control.may_hold(&hook))
}

/// `true` when another agent ran this vendor's hook wiring (an agent that also runs another's
/// hook files; the vendor's folder says how to tell): the call is answered neutrally and not
/// forwarded, so one agent's session is never logged as another's.
fn ran_by_other(vendor: &str, event: Option<&str>, payload: &[u8]) -> bool {
    let Some(spec) = aep_adapters::vendors::spec(vendor) else { return false };
    let value: serde_json::Value = serde_json::from_slice(payload).unwrap_or(serde_json::Value::Null);
    let call = aep_adapters::HookCall { event, payload: &value };
    (spec.adapter)().ran_by_other(&call, &|name| std::env::var(name).ok()).is_some()
}

fn env_ms(name: &str, default: u64) -> Duration {
    Duration::from_millis(std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default))
}

fn forward(vendor: &str, event: Option<&str>, payload: &[u8]) -> Option<Vec<u8>> {
    if vendor.is_empty()
        || payload.len() > MAX_PAYLOAD
        || !vendor.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    {
        return None;
    }
    let base = std::env::var("AEP_BRIDGE_URL").unwrap_or_else(|_| "http://127.0.0.1:8787".into());
    let rest = base.strip_prefix("http://")?.trim_end_matches('/');
    let (hostport, prefix) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let mut path = format!("{prefix}/hooks/{vendor}");
    if let Some(e) = event {
        path.push('/');
        path.push_str(&aep_schemas::ids::percent_encode(e));
    }
    // Short bounds normally; held permission moments wait longer, but bounded above the
    // bridge's own attention window (55 s by default) so the agent's dialog takes over.
    // A moment is held only when an answer can arrive, which needs an authenticated
    // binding: without a token (and without an explicit hold budget, for relay-only
    // set-ups) nothing can answer, so a bridge that never replies costs the short bound.
    let token = std::env::var("AEP_TOKEN").ok().filter(|t| !t.is_empty());
    let hold_budget = std::env::var("AEP_HOOK_HOLD_TIMEOUT_MS").ok().and_then(|v| v.parse().ok());
    let total = match (hold_budget, token.is_some()) {
        (Some(ms), _) if is_held_moment(vendor, event, payload) => Duration::from_millis(ms),
        (None, true) if is_held_moment(vendor, event, payload) => Duration::from_millis(65_000),
        _ => env_ms("AEP_HOOK_TIMEOUT_MS", 3_000),
    };
    // One deadline for the whole exchange: connect, write (however many partial writes a
    // large payload to a slow reader takes), read.
    let deadline = Instant::now() + total;
    let left = || deadline.checked_duration_since(Instant::now()).filter(|d| !d.is_zero());
    let addr = hostport.to_socket_addrs().ok()?.next()?;
    let connect = env_ms("AEP_HOOK_CONNECT_TIMEOUT_MS", 500).min(left()?);
    let mut stream = TcpStream::connect_timeout(&addr, connect).ok()?;
    let _ = stream.set_nodelay(true);
    let mut req = format!(
        "POST {path} HTTP/1.1\r\nHost: {hostport}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        payload.len()
    );
    // The token never leaves the shim: the request carries a MAC under it over a fresh
    // nonce and the body, so whatever listens on the port learns nothing it can reuse.
    let nonce = ulid::Ulid::new().to_string();
    if let Some(t) = &token {
        let mac = aep_schemas::digest::request_mac(t, &nonce, payload);
        req.push_str(&format!("Authorization: AEP-HMAC {mac}\r\nX-AEP-Nonce: {nonce}\r\n"));
    }
    req.push_str("\r\n");
    let mut buf = req.into_bytes();
    buf.extend_from_slice(payload);
    let mut sent = 0;
    while sent < buf.len() {
        stream.set_write_timeout(Some(left()?)).ok()?;
        match stream.write(&buf[sent..]) {
            Ok(0) => return None,
            Ok(n) => sent += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return None,
        }
    }
    let mut resp = Vec::with_capacity(1024);
    let mut chunk = [0u8; 16 * 1024];
    loop {
        stream.set_read_timeout(Some(left()?)).ok()?;
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                if resp.len() + n > MAX_REPLY {
                    return None;
                }
                resp.extend_from_slice(&chunk[..n]);
                if complete(&resp) {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return None,
        }
    }
    let body = parse_ok_body(&resp)?;
    if let Some(t) = &token {
        // Only a bridge that knows the token can prove its reply (a neutral reply needs no proof).
        let proof = header(&resp, "x-aep-proof");
        let want = aep_schemas::digest::reply_proof(t, &nonce, &body);
        if !body.is_empty() && proof.as_deref() != Some(want.as_str()) {
            eprintln!(
                "aep-hook: ignoring a reply without the bridge's proof (is something else listening on {hostport}?)"
            );
            return None;
        }
    }
    Some(body)
}

/// A response header's value.
fn header(resp: &[u8], name: &str) -> Option<String> {
    let end = header_end(resp)?;
    String::from_utf8_lossy(&resp[..end]).lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
    })
}

fn header_end(resp: &[u8]) -> Option<usize> {
    resp.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

fn content_length(head: &str) -> Option<usize> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case("content-length").then(|| v.trim().parse().ok())?
    })
}

/// `true` once a response with a Content-Length is fully read.
fn complete(resp: &[u8]) -> bool {
    let Some(end) = header_end(resp) else { return false };
    let head = String::from_utf8_lossy(&resp[..end]);
    content_length(&head).is_some_and(|n| resp.len() >= end + n)
}

/// The body of a 200 response (Content-Length or chunked); `None` for anything else.
fn parse_ok_body(resp: &[u8]) -> Option<Vec<u8>> {
    let end = header_end(resp)?;
    let head = String::from_utf8_lossy(&resp[..end]);
    let status: u16 = head.split_whitespace().nth(1)?.parse().ok()?;
    if status != 200 {
        return None;
    }
    let body = &resp[end..];
    if let Some(n) = content_length(&head) {
        return (body.len() >= n).then(|| body[..n].to_vec());
    }
    if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        let mut out = Vec::new();
        let mut rest = body;
        loop {
            let line_end = rest.windows(2).position(|w| w == b"\r\n")?;
            let size =
                usize::from_str_radix(std::str::from_utf8(&rest[..line_end]).ok()?.split(';').next()?.trim(), 16)
                    .ok()?;
            rest = &rest[line_end + 2..];
            if size == 0 {
                return Some(out);
            }
            out.extend_from_slice(rest.get(..size)?);
            rest = rest.get(size + 2..)?;
        }
    }
    Some(body.to_vec())
}
