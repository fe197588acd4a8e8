//! The real `aep-bridge serve` binary against what a careless user or a hostile local
//! client does: a second `serve` on one data directory, and a thousand guessed tokens at
//! the web view's login.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use aep_testkit::Output;

const WAIT: Duration = Duration::from_secs(30);

/// A running `serve`, killed when the test ends however it ends.
struct Serve {
    child: Child,
    out: Output,
    addr: String,
}

impl Serve {
    fn start(data: &Path, listen: &str, token: Option<&str>) -> Serve {
        let mut child = command(data, listen, token).spawn().unwrap();
        let out = Output::follow(&mut child);
        assert!(
            out.wait_blocking(WAIT, |t| t.contains("aep-bridge listening:")),
            "serve did not start: {}",
            out.text()
        );
        let addr = out.text().split_whitespace().find_map(|w| w.strip_prefix("http=")).unwrap().to_owned();
        Serve { child, out, addr }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGTERM, as a user's Ctrl-C; waits for the exit.
    fn stop(&mut self) {
        use rustix::process::{Pid, Signal, kill_process};
        kill_process(Pid::from_raw(i32::try_from(self.child.id()).unwrap()).unwrap(), Signal::TERM).unwrap();
        let status = self.child.wait().unwrap();
        assert!(status.success(), "serve exited with {status}: {}", self.out.text());
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn command(data: &Path, listen: &str, token: Option<&str>) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_aep-bridge"));
    cmd.env_clear()
        .env("HOME", data)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("AEP_BRIDGE_LOG", "info")
        .args(["serve", "--listen", listen, "--otlp-grpc", "", "--otlp-http", "", "--data-dir"])
        .arg(data)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(t) = token {
        cmd.env("AEP_BRIDGE_TOKEN", t);
    }
    cmd
}

/// Two bridges on one data directory would both write its session logs: the second is
/// refused, naming the first one's pid, before it even tries the port (so the port-clash
/// hint never sends the user to another port on the same directory). A bridge killed
/// outright leaves no lock behind.
#[test]
fn a_second_serve_on_one_data_dir_is_refused_naming_the_holder() {
    let data = tempfile::tempdir().unwrap();
    let mut first = Serve::start(data.path(), "127.0.0.1:0", None);
    for listen in ["127.0.0.1:0", first.addr.as_str()] {
        let out = command(data.path(), listen, None).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "--listen {listen}: {err}");
        assert!(err.contains(&format!("is in use by another aep-bridge serve (pid {})", first.pid())), "{err}");
        assert!(err.contains("--data-dir") && !err.contains("cannot listen"), "{err}");
        assert!(out.stdout.is_empty(), "it never said it listens: {}", String::from_utf8_lossy(&out.stdout));
    }
    // Another data directory on the taken port: the port is the problem, and said to be.
    let other = tempfile::tempdir().unwrap();
    let out = command(other.path(), &first.addr, None).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot listen") && err.contains("its own data directory"), "{err}");

    // SIGKILL: no chance to clean up. The kernel drops the lock with the process.
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    let mut second = Serve::start(data.path(), "127.0.0.1:0", None);
    let lock = std::fs::read_to_string(data.path().join("serve.lock")).unwrap();
    assert_eq!(lock.trim(), second.pid().to_string());
    second.stop();
}

/// One login attempt over `agent`: its status.
fn login(agent: &ureq::Agent, addr: &str, token: &str) -> (u16, Option<String>) {
    let resp = agent
        .post(&format!("http://{addr}/ui/login"))
        .header("origin", &format!("http://{addr}"))
        .header("content-type", "application/x-www-form-urlencoded")
        .send(format!("token={token}"))
        .unwrap();
    let retry = resp.headers().get("retry-after").and_then(|v| v.to_str().ok()).map(str::to_owned);
    (resp.status().as_u16(), retry)
}

/// 1,000 wrong tokens as fast as the bridge answers: a handful are compared, the rest are
/// told to wait without their token being looked at, the log gets a line per 10 s at most,
/// and the right token works again once the wait is over. The figures are printed.
#[test]
fn a_thousand_guessed_tokens_are_mostly_made_to_wait() {
    let data = tempfile::tempdir().unwrap();
    let token = "the-right-token-3f9a";
    let mut bridge = Serve::start(data.path(), "127.0.0.1:0", Some(token));
    let agent = ureq::Agent::config_builder().http_status_as_error(false).build().new_agent();
    let began = Instant::now();
    let (mut compared, mut waited, mut other) = (0u32, 0u32, Vec::new());
    for i in 0..1000 {
        match login(&agent, &bridge.addr, &format!("guess-{i}")) {
            (403, _) => compared += 1,
            (429, Some(_)) => waited += 1,
            s => other.push(s),
        }
    }
    let elapsed = began.elapsed();
    assert!(other.is_empty(), "{other:?}");
    // 3 free failures, then waits of 1 s, 2 s, 4 s, ...: within `elapsed` at most this many.
    let mut bound = 3;
    let mut spent = Duration::ZERO;
    let mut wait = Duration::from_secs(1);
    while spent <= elapsed {
        bound += 1;
        spent += wait;
        wait = (wait * 2).min(Duration::from_secs(60));
    }
    assert!(compared <= bound, "{compared} compared in {elapsed:?} (at most {bound})");
    assert!(compared >= 3, "the free attempts were compared: {compared}");
    // The right token during the wait is made to wait too (the answer says nothing about it).
    let (status, retry) = login(&agent, &bridge.addr, token);
    assert_eq!(status, 429);
    // Waiting out the `Retry-After` it was given (a few seconds) lets the user in.
    let secs: u64 = retry.unwrap().parse().unwrap();
    assert!(secs <= 60, "{secs}");
    std::thread::sleep(Duration::from_secs(secs));
    let (status, _) = login(&agent, &bridge.addr, token);
    assert_eq!(status, 204, "the right token after the wait");
    bridge.stop();
    let text = bridge.out.text();
    let lines = text.lines().filter(|l| l.contains("Web view login refused")).count();
    let most = 1 + usize::try_from(began.elapsed().as_secs() / 10).unwrap();
    assert!((1..=most).contains(&lines), "{lines} log lines (at most {most}):\n{text}");
    eprintln!(
        "1000 wrong tokens in {:.2} s: {compared} compared (403), {waited} made to wait (429), {lines} log line(s)",
        elapsed.as_secs_f64()
    );
}

/// Under systemd (`Type=notify`, `WatchdogSec=`): the real binary says it is ready once it
/// listens, pets the watchdog while its loops turn, and says it is stopping on SIGTERM;
/// `/livez`, `/readyz` and `/healthz` answer beside it.
#[test]
fn under_systemd_serve_says_ready_pets_the_watchdog_and_says_stopping() {
    let data = tempfile::tempdir().unwrap();
    let path = data.path().join("notify.sock");
    let sock = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
    // A bounded wait: each notification comes within a second; this only stops a hang.
    sock.set_read_timeout(Some(WAIT)).unwrap();
    let recv = || {
        let mut buf = [0u8; 512];
        let n = sock.recv(&mut buf).expect("a notification");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    };
    let mut cmd = command(data.path(), "127.0.0.1:0", None);
    cmd.env("NOTIFY_SOCKET", &path).env("WATCHDOG_USEC", "400000");
    let mut child = cmd.spawn().unwrap();
    let out = Output::follow(&mut child);
    let mut bridge = Serve { child, out, addr: String::new() };
    let ready = recv();
    assert!(ready.starts_with("READY=1\n"), "{ready}");
    assert!(ready.contains(&format!("MAINPID={}", bridge.pid())), "{ready}");
    // The bridge printed its listening line (flushed: stdout is line-buffered) before it
    // said ready; the reader thread may not have taken it from the pipe yet.
    let listening = bridge.out.wait_blocking(WAIT, |t| t.contains("aep-bridge listening:"));
    assert!(listening, "ready only once listening: {}", bridge.out.text());
    bridge.addr = bridge.out.text().split_whitespace().find_map(|w| w.strip_prefix("http=")).unwrap().to_owned();
    assert_eq!(recv(), "WATCHDOG=1");
    assert_eq!(recv(), "WATCHDOG=1");
    let agent = ureq::Agent::config_builder().http_status_as_error(false).build().new_agent();
    for probe in ["livez", "readyz", "healthz"] {
        let resp = agent.get(&format!("http://{}/{probe}", bridge.addr)).call().unwrap();
        assert_eq!(resp.status().as_u16(), 200, "/{probe}");
    }
    bridge.stop();
    let rest: Vec<String> = std::iter::from_fn(|| {
        let mut buf = [0u8; 512];
        sock.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
        sock.recv(&mut buf).ok().map(|n| String::from_utf8_lossy(&buf[..n]).into_owned())
    })
    .collect();
    assert_eq!(rest.iter().filter(|m| *m != "WATCHDOG=1").collect::<Vec<_>>(), ["STOPPING=1"], "{rest:?}");
}
