//! Helpers shared by the policies' unit tests.

use super::{Action, Event, Policy};
use crate::request::Nanos;

/// Feeds one event at `now` and returns the actions.
pub(crate) fn feed<P: Policy + ?Sized>(p: &mut P, now: Nanos, ev: Event) -> Vec<Action> {
    let mut out = Vec::new();
    p.on_event(now, ev, &mut out);
    out
}
