//! The asks a vendor plugin's bus moment carries: a server's bus permission that nothing
//! holds open, seen by the hook receiver through the plugin that forwards the bus. When the
//! plugin names a loopback server they are raised on that server's reply route (the reply
//! book of [`crate::bridges::reply`], the route from the vendor's spec); any other card
//! claiming control is declared answered out of band.

use std::sync::Arc;

use aep_adapters::EventDraft;
use aep_adapters::spec::ReplyRoute;
use serde_json::json;

use crate::attention::{AttentionBook, Pending};
use crate::bridges::reply::{Ask, Replies};
use crate::control::ControlLoop;
use crate::pipeline::Pipeline;

/// The base URL of a plugin's `serverUrl` when it is a loopback `http(s)` server: the hook
/// receiver writes only there (a hook payload must not point the bridge's writes elsewhere).
pub fn loopback_base(server_url: &str) -> Option<String> {
    let u = url::Url::parse(server_url).ok()?;
    if !matches!(u.scheme(), "http" | "https") {
        return None;
    }
    let loopback = match u.host()? {
        url::Host::Domain(d) => d.eq_ignore_ascii_case("localhost"),
        url::Host::Ipv4(ip) => ip.is_loopback(),
        url::Host::Ipv6(ip) => ip.is_loopback(),
    };
    if !loopback || !u.username().is_empty() || u.password().is_some() {
        return None;
    }
    Some(server_url.trim_end_matches('/').to_owned())
}

/// What [`Replies::raise_plugin_asks`] needs from the hook receiver.
pub struct PluginAsks<'a> {
    /// The control loop the routes register with.
    pub control: &'a ControlLoop,
    /// The attention book (requests opened before publication).
    pub book: &'a AttentionBook,
    /// Mints the request ids.
    pub pipeline: &'a Pipeline,
    /// The hook's clock, Unix ms.
    pub now: u64,
}

impl Replies {
    /// The answerable permission cards among a plugin bus moment's drafts (bus asks which
    /// nothing holds open): raised on the
    /// server's reply `route` when the plugin names a loopback server (the route's bus
    /// moment says where); any other card claiming control is declared answered out of band
    /// (AEP-0008), since no answer sent here could reach the vendor.
    pub fn raise_plugin_asks(
        self: &Arc<Self>,
        route: &'static ReplyRoute,
        vendor: &str,
        payload: &serde_json::Value,
        drafts: &mut [EventDraft],
        at: &PluginAsks<'_>,
    ) {
        let base = route.server_of(payload).and_then(loopback_base);
        for d in drafts.iter_mut().filter(|d| {
            d.r#type == "attention.requested"
                && d.data
                    .get("respond_via")
                    .and_then(serde_json::Value::as_array)
                    .is_some_and(|v| v.iter().any(|x| x == "control"))
        }) {
            let vendor_id = d.correlation_key.as_deref().and_then(|k| k.strip_prefix("attention:")).map(str::to_owned);
            let permission = d.data.get("kind").and_then(serde_json::Value::as_str) == Some("permission");
            match (&base, d.session.clone(), vendor_id) {
                (Some(base), Some(session), Some(vendor_id)) if permission => {
                    let id = at.pipeline.mint_id();
                    d.id = Some(id.clone());
                    let p = Pending::from_request(
                        id,
                        vendor,
                        session.clone(),
                        d.run.clone(),
                        d.subject.clone(),
                        &d.data,
                        at.now,
                    );
                    at.book.open(p.clone());
                    self.raise(Ask::new(vendor_id, session, p, Some(base.clone()), route), at.control, at.book);
                }
                _ => {
                    d.data.insert("respond_via".into(), json!(["oob"]));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bridges::reply::segment;

    #[test]
    fn only_loopback_servers_are_written_to_and_ids_are_path_safe() {
        assert_eq!(loopback_base("http://127.0.0.1:4096/").as_deref(), Some("http://127.0.0.1:4096"));
        assert_eq!(loopback_base("http://localhost:4096").as_deref(), Some("http://localhost:4096"));
        assert_eq!(loopback_base("http://[::1]:4096/").as_deref(), Some("http://[::1]:4096"));
        for bad in ["http://10.0.0.1:4096", "https://example.com", "file:///etc/passwd", "http://u:p@127.0.0.1:1", "x"]
        {
            assert_eq!(loopback_base(bad), None, "{bad}");
        }
        assert_eq!(segment("per_1/../x y"), "per_1%2F..%2Fx%20y");
    }
}
