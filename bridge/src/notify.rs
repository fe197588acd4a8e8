//! systemd's service notifications (`sd_notify(3)`), spoken directly: one datagram per
//! message on the socket named by `NOTIFY_SOCKET`, no library.
//!
//! Under a `Type=notify` unit with `WatchdogSec=` (what `aep-bridge service install`
//! writes), `serve` says `READY=1` once every listener is bound, `WATCHDOG=1` every half
//! watchdog interval while its loops turn ([`crate::health`]'s liveness, the same as
//! `/livez`), and `STOPPING=1` when it shuts down. A bridge that stops turning stops
//! petting the watchdog, and systemd restarts it; one whose export backend refuses a
//! signal, or whose disk is full, is not restarted for it. Without `NOTIFY_SOCKET` (a
//! terminal, launchd, a container) nothing is sent.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::env::Env;
use crate::health::Health;

/// `NOTIFY_SOCKET`: where systemd listens for this service's notifications.
pub const NOTIFY_SOCKET: &str = "NOTIFY_SOCKET";
/// `WATCHDOG_USEC`: the unit's watchdog interval, in microseconds.
pub const WATCHDOG_USEC: &str = "WATCHDOG_USEC";
/// `WATCHDOG_PID`: the process the watchdog interval is meant for, when set.
pub const WATCHDOG_PID: &str = "WATCHDOG_PID";

/// The notification socket of a service started by systemd.
#[derive(Debug)]
pub struct Notifier {
    socket: std::os::unix::net::UnixDatagram,
    addr: std::os::unix::net::SocketAddr,
    /// Half the watchdog interval, when the unit has one for this process.
    pet_every: Option<Duration>,
}

impl Notifier {
    /// The notifier `env` names, or `None` outside systemd (or with a socket it cannot use,
    /// which is logged: the service would then time out waiting for readiness).
    pub fn from_env(env: &Env) -> Option<Self> {
        let name = env.var(NOTIFY_SOCKET)?;
        let addr = match address(&name) {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(socket = %name, error = %e, "NOTIFY_SOCKET is not usable; systemd will not hear from serve.");
                return None;
            }
        };
        let socket = match std::os::unix::net::UnixDatagram::unbound() {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "No socket for systemd's notifications.");
                return None;
            }
        };
        let ours = env.var(WATCHDOG_PID).is_none_or(|p| p.trim() == std::process::id().to_string());
        let pet_every = env
            .var(WATCHDOG_USEC)
            .and_then(|u| u.trim().parse::<u64>().ok())
            .filter(|u| *u > 0 && ours)
            .map(|u| Duration::from_micros(u) / 2);
        Some(Self { socket, addr, pet_every })
    }

    /// Sends one message (`READY=1`, ...); a failure is logged, never fatal.
    pub fn send(&self, msg: &str) {
        if let Err(e) = self.socket.send_to_addr(msg.as_bytes(), &self.addr) {
            tracing::warn!(error = %e, msg, "systemd notification not sent.");
        }
    }

    /// Says `READY=1` now, then pets the watchdog while `health` has nothing stuck, and
    /// says `STOPPING=1` when `shutdown` comes.
    pub fn start(self, health: Arc<Health>, shutdown: CancellationToken) {
        self.send(&format!("READY=1\nMAINPID={}\nSTATUS=listening", std::process::id()));
        tokio::spawn(async move {
            loop {
                let every = self.pet_every.unwrap_or(Duration::from_secs(3600));
                tokio::select! {
                    () = tokio::time::sleep(every) => {}
                    () = shutdown.cancelled() => break,
                }
                if self.pet_every.is_none() {
                    continue;
                }
                let stalled = health.stalled();
                if stalled.is_empty() {
                    self.send("WATCHDOG=1");
                } else {
                    // Not petted: systemd restarts the service at the interval's end.
                    let what: Vec<String> = stalled.iter().map(|(k, v)| format!("{k}: {v}")).collect();
                    self.send(&format!("STATUS=stuck: {}", what.join("; ")));
                }
            }
            self.send("STOPPING=1");
        });
    }
}

/// A path, or `@name` for a Linux abstract socket.
fn address(name: &str) -> std::io::Result<std::os::unix::net::SocketAddr> {
    if let Some(abstract_name) = name.strip_prefix('@') {
        #[cfg(target_os = "linux")]
        {
            use std::os::linux::net::SocketAddrExt as _;
            return std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes());
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = abstract_name;
            return Err(std::io::Error::new(std::io::ErrorKind::Unsupported, "abstract sockets are Linux's"));
        }
    }
    std::os::unix::net::SocketAddr::from_pathname(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&'static str, String)]) -> Env {
        let pairs: Vec<(&'static str, String)> = pairs.to_vec();
        Env::from_fn(move |k| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone()))
    }

    fn recv(s: &std::os::unix::net::UnixDatagram) -> String {
        let mut buf = [0u8; 512];
        let n = s.recv(&mut buf).expect("a notification within the read timeout");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    #[test]
    fn outside_systemd_nothing_is_set_up() {
        assert!(Notifier::from_env(&env(&[])).is_none());
    }

    /// Ready, then petted while nothing is stuck, then stopping; over a real socket.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ready_then_watchdog_then_stopping() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let listener = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
        // A bounded wait: the notifications come within milliseconds; this only stops a hang.
        listener.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let e = env(&[
            (NOTIFY_SOCKET, path.display().to_string()),
            (WATCHDOG_USEC, "100000".into()),
            (WATCHDOG_PID, std::process::id().to_string()),
        ]);
        let n = Notifier::from_env(&e).unwrap();
        assert_eq!(n.pet_every, Some(Duration::from_millis(50)));
        let stop = CancellationToken::new();
        n.start(Arc::new(Health::default()), stop.clone());
        assert!(recv(&listener).starts_with("READY=1\n"));
        assert_eq!(recv(&listener), "WATCHDOG=1");
        assert_eq!(recv(&listener), "WATCHDOG=1");
        stop.cancel();
        loop {
            match recv(&listener).as_str() {
                "WATCHDOG=1" => continue,
                m => {
                    assert_eq!(m, "STOPPING=1");
                    break;
                }
            }
        }
        // Another process's watchdog is not ours to pet.
        let other = env(&[
            (NOTIFY_SOCKET, path.display().to_string()),
            (WATCHDOG_USEC, "100000".into()),
            (WATCHDOG_PID, "1".into()),
        ]);
        assert_eq!(Notifier::from_env(&other).unwrap().pet_every, None);
    }
}
