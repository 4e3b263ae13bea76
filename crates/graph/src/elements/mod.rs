//! The element library. Each module registers its classes in [`register_all`].

use crate::registry::Registry;
use std::sync::Arc;

pub(crate) mod discard;
pub mod pcap;
pub mod sources;

pub fn register_all(reg: &mut Registry) {
    reg.add(Arc::new(discard::DiscardClass));
    reg.add(Arc::new(pcap::fromdump::FromDumpClass));
    reg.add(Arc::new(pcap::todump::ToDumpClass));
    reg.add(Arc::new(sources::InfiniteSourceClass));
    reg.add(Arc::new(sources::RatedSourceClass));
}
