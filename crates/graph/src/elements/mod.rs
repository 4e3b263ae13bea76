//! The element library. Each module registers its classes in [`register_all`].

use crate::registry::Registry;
use std::sync::Arc;

pub(crate) mod discard;
pub mod iplookup;

pub fn register_all(reg: &mut Registry) {
    reg.add(Arc::new(discard::DiscardClass));
    reg.add(Arc::new(iplookup::IpLookupClass::RADIX));
    reg.add(Arc::new(iplookup::IpLookupClass::DIRECT));
    reg.add(Arc::new(iplookup::IpLookupClass::STATIC));
    reg.add(Arc::new(iplookup::IpLookupClass::LINEAR));
}
