//! Click's IPv6 neighbour discovery elements (RFC 4861): `IP6NDAdvertiser` answers
//! Neighbor Solicitations for configured addresses, `IP6NDSolicitor` resolves next
//! hops and encapsulates IPv6 packets in Ethernet headers.

mod advertiser;
mod frame;
mod solicitor;
#[cfg(test)]
mod tests;

use crate::registry::Registry;
use std::sync::Arc;

pub(crate) use advertiser::IP6NDAdvertiserClass;
pub(crate) use solicitor::IP6NDSolicitorClass;

pub(crate) fn register(reg: &mut Registry) {
    reg.add(Arc::new(IP6NDAdvertiserClass));
    reg.add(Arc::new(IP6NDSolicitorClass::default()));
}
