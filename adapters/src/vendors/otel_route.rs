//! Which profile maps an OTLP log record: detection by `service.name` over the vendor
//! list's profiles, overridden per service by configuration (a built-in profile forced, or
//! the generic profile of a vendor name no profile knows). Pure: the receiver hands an
//! export's records in and gets the drafts and what to report of the rest.

use std::collections::HashMap;

use super::{OtelVendor, otel_selector};
use crate::MapContext;
use crate::otel::generic::{self, GenericOtel, VendorName};
use crate::otel::{MappedDraft, Mode, OtelRecord, map_batch};

/// How records choose a profile beyond detection by `service.name`: a built-in profile per
/// service, and the opt-in generic profile (a vendor name per service no profile knows,
/// mapped to `x.<vendor>.otel.*`).
#[derive(Debug, Clone, Default)]
pub struct ProfileOverrides {
    /// `service.name` -> built-in profile.
    pub forced: HashMap<String, OtelVendor>,
    /// `service.name` -> the generic profile of a configured vendor name.
    pub generic: HashMap<String, GenericOtel>,
}

/// An export's records mapped: the drafts, and what the answer must say of the rest.
#[derive(Debug, Default)]
pub struct Mapped {
    /// The drafts, in record order.
    pub drafts: Vec<MappedDraft>,
    /// Records mapped so far.
    pub total: usize,
    /// Records no profile matched.
    pub unmatched: u64,
    /// The `service.name` of the first of them.
    pub first_unmatched: Option<String>,
    /// Records of a known vendor that name no session (dropped: an AEP event belongs to one).
    pub sessionless: u64,
    /// OTel event names the vendors' profiles do not know, for the drift counter.
    pub drift: Vec<crate::otel::OtelDrift>,
    /// Each vendor and agent version seen, so drift is counted against the right version.
    pub versions: Vec<(&'static str, String)>,
}

impl ProfileOverrides {
    /// From the two tables (a service in both takes its built-in profile).
    pub fn new<'a>(
        forced: impl IntoIterator<Item = (&'a String, &'a OtelVendor)>,
        generic: impl IntoIterator<Item = (&'a String, &'a VendorName)>,
    ) -> Self {
        Self {
            forced: forced.into_iter().map(|(svc, v)| (svc.clone(), *v)).collect(),
            generic: generic.into_iter().map(|(svc, name)| (svc.clone(), GenericOtel::leak(name))).collect(),
        }
    }

    fn is_empty(&self) -> bool {
        self.forced.is_empty() && self.generic.is_empty()
    }

    fn covers(&self, rec: &OtelRecord) -> bool {
        rec.service_name().is_some_and(|s| self.forced.contains_key(s) || self.generic.contains_key(s))
    }

    /// Maps `records` onto `m`, in record order: a record whose `service.name` has an
    /// override goes through it, a run of the rest through detection at once. Returns how
    /// many of them named no session (added to `m.sessionless`).
    pub fn map_into(&self, records: &[OtelRecord], cx: &MapContext, mode: Mode, m: &mut Mapped) -> u64 {
        m.total += records.len();
        let mut rest = records;
        let mut sessionless = 0;
        let covered = |r: &OtelRecord| !self.is_empty() && self.covers(r);
        while let Some(first) = rest.first() {
            let out = if covered(first) {
                let one = std::slice::from_ref(first);
                let svc = first.service_name().unwrap_or("");
                rest = &rest[1..];
                match (self.forced.get(svc), self.generic.get(svc)) {
                    (None, Some(generic)) => generic::map_batch(one, generic, cx, mode),
                    (vendor, _) => map_batch(one, &otel_selector(vendor.copied()), cx, mode),
                }
            } else {
                let (run, tail) = rest.split_at(rest.iter().position(covered).unwrap_or(rest.len()));
                rest = tail;
                map_batch(run, &otel_selector(None), cx, mode)
            };
            sessionless += out.sessionless;
            m.drift.extend(out.drift);
            m.versions.extend(out.versions);
            m.unmatched += out.unmatched;
            if m.first_unmatched.is_none() {
                m.first_unmatched = out.first_unmatched_service;
            }
            if m.drafts.is_empty() {
                m.drafts = out.drafts;
            } else {
                m.drafts.extend(out.drafts);
            }
        }
        m.sessionless += sessionless;
        sessionless
    }
}
