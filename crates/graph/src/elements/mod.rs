//! The element library. Each module registers its classes in [`register_all`].

use crate::registry::Registry;
use std::sync::Arc;

pub(crate) mod discard;
pub(crate) mod ip;

pub fn register_all(reg: &mut Registry) {
    reg.add(Arc::new(discard::DiscardClass));
    reg.add(Arc::new(ip::checkipheader::CHECK_IP_HEADER));
    reg.add(Arc::new(ip::checkipheader::CHECK_IP_HEADER2));
    reg.add(Arc::new(ip::getipaddress::GetIPAddressClass));
    reg.add(Arc::new(ip::setipaddress::SetIPAddressClass));
    reg.add(Arc::new(ip::decipttl::DecIPTTLClass));
    reg.add(Arc::new(ip::icmperror::ICMPErrorClass));
    reg.add(Arc::new(ip::ipfragmenter::IPFragmenterClass));
}
