//! `aep-hook <vendor> [event]`: the fail-open command shim an agent runs for each hook.
//!
//! Reads the hook payload on stdin, POSTs it to the bridge (`AEP_BRIDGE_URL`, default
//! `http://127.0.0.1:8787`; with `AEP_TOKEN`, a MAC under it, never the token itself) at
//! `/hooks/{vendor}[/{event}]`, and writes the bridge's reply to stdout. Fail-open is
//! absolute: whatever goes wrong (bridge down, hung, erroring, not reading), the agent gets
//! the vendor's neutral reply and exit 0. A call another agent made through this vendor's
//! wiring (the vendor's folder tells them apart by the hook process's environment) gets the
//! neutral reply and is not forwarded.
//!
//! Deadlines. The reply's headers must arrive within one budget for the whole exchange
//! (`AEP_HOOK_TIMEOUT_MS`, 3 s): the bridge acknowledges a hook once its events are in the
//! log, in about a millisecond. A bridge that lets that budget pass (its socket accepts,
//! nothing answers: stopped, in a debugger, swapping) is remembered for a cool-down
//! ([`breaker`]: 30 s, doubling while it stays hung), during which hooks wait
//! `AEP_HOOK_FAST_TIMEOUT_MS` (250 ms) only; the first answer ends it. A moment the bridge
//! holds for a human says so in its headers, sent at once (`x-aep-hold`: the budget, and
//! with a token its proof): only then does the shim wait for the body, up to
//! `AEP_HOOK_HOLD_TIMEOUT_MS` (65 s; without a token only when that is set, for relay-only
//! set-ups). Each call carries when it was sent and when the shim stops waiting
//! (`x-aep-sent`, `x-aep-deadline`), so a bridge reading a backlog late keeps the session's
//! order or drops the call, never writes it after what followed it.
//!
//! With a token the shim sends a fresh nonce and relays a reply only when it carries the
//! bridge's proof over it (`x-aep-proof`, HMAC under the token; a trailer on a held reply):
//! another program listening on the port cannot answer, or make the agent wait, for the
//! bridge. Plain blocking std I/O, no async runtime: start-up cost is what the agent pays
//! on every tool call.

mod breaker;
mod http;

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use crate::breaker::{Breaker, millis};

/// Largest payload forwarded; beyond it the shim answers neutrally without sending.
const MAX_PAYLOAD: usize = 16 * 1024 * 1024;

/// Largest reply read (status line, headers and body): a vendor reply is one small JSON
/// decision, so anything larger is not the bridge's and the shim answers neutrally.
const MAX_REPLY: usize = 1024 * 1024;

/// The shim's settings, read from the environment once.
struct Settings {
    url: String,
    token: Option<String>,
    timeout: Duration,
    fast: Duration,
    cooldown_ms: u64,
    /// `AEP_HOOK_HOLD_TIMEOUT_MS`, when set.
    hold: Option<Duration>,
    connect: Duration,
    state_dir: Option<PathBuf>,
}

impl Settings {
    fn from_env() -> Self {
        let var = |name: &str| std::env::var(name).ok();
        let ms = |name: &str| var(name).and_then(|v| v.trim().parse::<u64>().ok());
        let path = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        Self {
            url: var("AEP_BRIDGE_URL").unwrap_or_else(|| "http://127.0.0.1:8787".into()),
            token: var("AEP_TOKEN").filter(|t| !t.is_empty()),
            timeout: Duration::from_millis(ms("AEP_HOOK_TIMEOUT_MS").unwrap_or(3_000)),
            fast: Duration::from_millis(ms("AEP_HOOK_FAST_TIMEOUT_MS").unwrap_or(250)),
            cooldown_ms: ms("AEP_HOOK_COOLDOWN_MS").unwrap_or(breaker::COOLDOWN_MS),
            hold: ms("AEP_HOOK_HOLD_TIMEOUT_MS").map(Duration::from_millis),
            connect: Duration::from_millis(ms("AEP_HOOK_CONNECT_TIMEOUT_MS").unwrap_or(500)),
            state_dir: breaker::state_dir(path("AEP_HOOK_STATE_DIR"), path("XDG_RUNTIME_DIR"), path("HOME")),
        }
    }
}

fn main() {
    let mut args = std::env::args_os().skip(1).map(|a| a.to_string_lossy().into_owned());
    let vendor = args.next().unwrap_or_default();
    let event = args.next();
    let mut payload = Vec::new();
    let _ = std::io::stdin().lock().take(MAX_PAYLOAD as u64 + 1).read_to_end(&mut payload);
    let settings = Settings::from_env();
    let reply = if ran_by_other(&vendor, event.as_deref(), &payload) {
        None
    } else {
        forward(&settings, &vendor, event.as_deref(), &payload)
    };
    let reply = reply.unwrap_or_else(|| neutral(&vendor, event.as_deref(), &payload));
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(&reply);
    let _ = out.flush();
    std::process::exit(0);
}

/// The vendor's neutral reply (what it gets when nothing is decided), from the adapters'
/// neutral table alone: the shim links no mapping code.
fn neutral(vendor: &str, event: Option<&str>, payload: &[u8]) -> Vec<u8> {
    let value: serde_json::Value = serde_json::from_slice(payload).unwrap_or(serde_json::Value::Null);
    let call = aep_adapters::HookCall { event, payload: &value };
    aep_adapters::vendors::neutral_reply(vendor, &call).map(|r| r.as_bytes().to_vec()).unwrap_or_default()
}

fn unix(d: fn(Duration) -> u128) -> u64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |t| u64::try_from(d(t)).unwrap_or(u64::MAX))
}

/// `true` when another agent ran this vendor's hook wiring (an agent that also runs another's
/// hook files; the vendor's folder says how to tell): the call is answered neutrally and not
/// forwarded, so one agent's session is never logged as another's. From the adapters'
/// direct table, as [`neutral`]: no mapping code.
fn ran_by_other(vendor: &str, event: Option<&str>, payload: &[u8]) -> bool {
    let value: serde_json::Value = serde_json::from_slice(payload).unwrap_or(serde_json::Value::Null);
    let call = aep_adapters::HookCall { event, payload: &value };
    aep_adapters::vendors::ran_by_other(vendor, &call, &|name| std::env::var(name).ok()).is_some()
}

/// How an exchange ended without a reply.
enum Failed {
    /// The deadline for the reply's headers passed (a hung bridge).
    TimedOut,
    /// Anything else (refused, reset, not HTTP, not the bridge's, too large).
    Other,
}

fn forward(s: &Settings, vendor: &str, event: Option<&str>, payload: &[u8]) -> Option<Vec<u8>> {
    if vendor.is_empty()
        || payload.len() > MAX_PAYLOAD
        || !vendor.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    {
        return None;
    }
    let rest = s.url.strip_prefix("http://")?.trim_end_matches('/');
    let (hostport, prefix) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let mut path = format!("{prefix}/hooks/{vendor}");
    if let Some(e) = event {
        path.push('/');
        path.push_str(&aep_schemas::ids::percent_encode(e));
    }
    let mut breaker = Breaker::load(s.state_dir.clone(), &s.url);
    let now_ms = unix(|d| d.as_millis());
    let cooling = breaker.state.is_some_and(|t| t.cooling(now_ms, s.cooldown_ms));
    let budget = if cooling { s.fast } else { s.timeout };
    match exchange(s, hostport, &path, payload, budget, &mut breaker) {
        Ok(body) => Some(body),
        Err(Failed::TimedOut) => {
            if !cooling {
                breaker.trip(now_ms, s.cooldown_ms);
                eprintln!(
                    "aep-hook: the bridge at {} did not answer within {budget:?}; hooks wait {:?} for it during the next {} s",
                    s.url,
                    s.fast,
                    breaker.state.map_or(0, |t| t.cooldown_ms(s.cooldown_ms) / 1000)
                );
            }
            None
        }
        Err(Failed::Other) => None,
    }
}

/// One exchange: the reply's headers within `budget`, its body within the same deadline or,
/// when the bridge said it holds the moment, within the hold budget.
fn exchange(
    s: &Settings,
    hostport: &str,
    path: &str,
    payload: &[u8],
    budget: Duration,
    breaker: &mut Breaker,
) -> Result<Vec<u8>, Failed> {
    use Failed::{Other, TimedOut};
    let sent_us = unix(|d| d.as_micros());
    let start = Instant::now();
    let mut deadline = start + budget;
    let left = |deadline: Instant| deadline.checked_duration_since(Instant::now()).filter(|d| !d.is_zero());
    let addr = resolve(hostport).ok_or(Other)?;
    let connect = s.connect.min(left(deadline).ok_or(TimedOut)?);
    let mut stream = TcpStream::connect_timeout(&addr, connect).map_err(|e| match e.kind() {
        std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => TimedOut,
        _ => Other,
    })?;
    let _ = stream.set_nodelay(true);
    let mut req = format!(
        "POST {path} HTTP/1.1\r\nHost: {hostport}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close, TE\r\nTE: trailers\r\nX-AEP-Sent: {sent_us}\r\nX-AEP-Deadline: {}\r\n",
        payload.len(),
        sent_us / 1000 + millis(budget)
    );
    // The token never leaves the shim: the request carries a MAC under it over a fresh
    // nonce and the body, so whatever listens on the port learns nothing it can reuse.
    let nonce = s.token.as_ref().map(|t| {
        let nonce = ulid::Ulid::new().to_string();
        let mac = aep_schemas::digest::request_mac(t, &nonce, payload);
        req.push_str(&format!("Authorization: AEP-HMAC {mac}\r\nX-AEP-Nonce: {nonce}\r\n"));
        nonce
    });
    req.push_str("\r\n");
    let mut buf = req.into_bytes();
    buf.extend_from_slice(payload);
    let mut sent = 0;
    while sent < buf.len() {
        stream.set_write_timeout(Some(left(deadline).ok_or(TimedOut)?)).map_err(|_| Other)?;
        match stream.write(&buf[sent..]) {
            Ok(0) => return Err(Other),
            Ok(n) => sent += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                return Err(TimedOut);
            }
            Err(_) => return Err(Other),
        }
    }
    let mut resp = Vec::with_capacity(1024);
    let mut chunk = [0u8; 16 * 1024];
    let mut head: Option<http::Head> = None;
    let mut eof = false;
    loop {
        if let Some(h) = &head
            && let Some((body, trailers)) = http::body(h, &resp, eof)
        {
            return accept(s, h, body, &trailers, nonce.as_deref());
        }
        if eof {
            return Err(Other);
        }
        let Some(wait) = left(deadline) else {
            // No headers by the deadline: a hung bridge. Headers but no body: a held moment
            // (or a slow writer) that ran out of its budget; the bridge did answer.
            return Err(if head.is_none() { TimedOut } else { Other });
        };
        stream.set_read_timeout(Some(wait)).map_err(|_| Other)?;
        match stream.read(&mut chunk) {
            Ok(0) => eof = true,
            Ok(n) => {
                if resp.len() + n > MAX_REPLY {
                    return Err(Other);
                }
                resp.extend_from_slice(&chunk[..n]);
                if head.is_none()
                    && let Some(h) = http::head(&resp)
                {
                    // The bridge answers: whatever it says, it is not hung.
                    breaker.recover();
                    if let Some(hold) = hold_budget(s, &h, nonce.as_deref()) {
                        deadline = Instant::now() + hold;
                    }
                    head = Some(h);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                return Err(if head.is_none() { TimedOut } else { Other });
            }
            Err(_) => return Err(Other),
        }
    }
}

/// The bridge's address. `localhost` is 127.0.0.1 without the resolver: a static build's
/// resolver loads glibc's name-service modules at run time, for a name that never changes.
fn resolve(hostport: &str) -> Option<std::net::SocketAddr> {
    if let Some(port) = hostport.strip_prefix("localhost:") {
        return Some(std::net::SocketAddr::from(([127, 0, 0, 1], port.parse().ok()?)));
    }
    hostport.to_socket_addrs().ok()?.next()
}

/// How long to wait for the body of a reply whose headers say the bridge holds the moment:
/// its announced budget, capped by `AEP_HOOK_HOLD_TIMEOUT_MS` (65 s). With a token only
/// when the hold carries the bridge's proof; without one only when that cap is set.
fn hold_budget(s: &Settings, head: &http::Head, nonce: Option<&str>) -> Option<Duration> {
    let ms: u64 = head.get("x-aep-hold")?.parse().ok()?;
    let cap = match (&s.token, nonce) {
        (Some(t), Some(n)) => {
            let want = aep_schemas::digest::reply_proof(t, n, aep_schemas::digest::hold_proof_body(ms).as_bytes());
            if head.get("x-aep-hold-proof") != Some(want.as_str()) {
                return None;
            }
            s.hold.unwrap_or(Duration::from_millis(65_000))
        }
        _ => s.hold?,
    };
    Some(Duration::from_millis(ms).min(cap))
}

/// The body of a complete 200 reply, relayed only with the bridge's proof when the shim
/// holds a token (a neutral reply needs none).
fn accept(
    s: &Settings,
    head: &http::Head,
    body: Vec<u8>,
    trailers: &[(String, String)],
    nonce: Option<&str>,
) -> Result<Vec<u8>, Failed> {
    if head.status != 200 {
        return Err(Failed::Other);
    }
    if let (Some(t), Some(n)) = (&s.token, nonce)
        && !body.is_empty()
    {
        let proof = head
            .get("x-aep-proof")
            .or_else(|| trailers.iter().find(|(k, _)| k == "x-aep-proof").map(|(_, v)| v.as_str()));
        let want = aep_schemas::digest::reply_proof(t, n, &body);
        if proof != Some(want.as_str()) {
            eprintln!(
                "aep-hook: ignoring a reply without the bridge's proof (is something else listening on {}?)",
                s.url
            );
            return Err(Failed::Other);
        }
    }
    Ok(body)
}
