//! The observers' registry: every observer of an agent server, the vendors' (in the vendor
//! list's order) then the protocols', found by id or deprecated kind. Above both the vendor
//! list and the protocols, so neither names the other for it.

use crate::observer::ObserverSpec;

/// Every observer: the vendors' in the vendor list's order, then the protocols'.
pub fn observers() -> impl Iterator<Item = &'static ObserverSpec> {
    crate::vendors::SPECS.iter().filter_map(|s| s.server?.observer).chain(crate::protocols::OBSERVERS.iter().copied())
}

/// The observer `id` (`vendor = "<id>"`).
pub fn observer(id: &str) -> Option<&'static ObserverSpec> {
    observers().find(|o| o.id == id)
}

/// The observer a deprecated `kind = "<name>"` names.
pub fn observer_by_kind(kind: &str) -> Option<&'static ObserverSpec> {
    observers().find(|o| o.kinds.contains(&kind))
}

/// The reply route of the server `observer` attaches to (its vendor's spec), if it takes
/// answers.
pub fn observer_route(observer: &ObserverSpec) -> Option<&'static crate::spec::ReplyRoute> {
    crate::vendors::spec(observer.id)?.reply_route()
}
