//! Click's ARP elements: `ARPResponder` answers ARP requests for configured addresses,
//! `ARPQuerier` resolves next hops and encapsulates IP packets in Ethernet headers.

mod frame;
mod querier;
mod responder;
#[cfg(test)]
mod tests;

use crate::registry::Registry;
use std::net::Ipv4Addr;
use std::sync::Arc;

pub(crate) use querier::ARPQuerierClass;
pub(crate) use responder::ARPResponderClass;

pub(crate) fn register(reg: &mut Registry) {
    reg.add(Arc::new(ARPResponderClass));
    reg.add(Arc::new(ARPQuerierClass::default()));
}

/// A prefix as `ADDR/LEN`, or `ADDR/MASK` for a mask that is not contiguous.
fn prefix_text(addr: u32, mask: u32) -> String {
    if mask.leading_ones() + mask.trailing_zeros() == 32 {
        format!("{}/{}", Ipv4Addr::from(addr), mask.leading_ones())
    } else {
        format!("{}/{}", Ipv4Addr::from(addr), Ipv4Addr::from(mask))
    }
}
