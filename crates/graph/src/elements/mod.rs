//! The element library. Each module registers its classes in [`register_all`].

use crate::registry::Registry;
use std::sync::Arc;

pub(crate) mod classifier;
pub(crate) mod counter;
pub(crate) mod discard;
pub(crate) mod ether;
pub(crate) mod hopindex;
pub(crate) mod ip;
pub(crate) mod ip6;
pub mod iplookup;
pub(crate) mod null;
pub(crate) mod paint;
pub mod pcap;
pub(crate) mod print;
pub(crate) mod queue;
pub(crate) mod slots;
pub mod sources;
pub(crate) mod strip;
pub(crate) mod switch;

pub fn register_all(reg: &mut Registry) {
    reg.add(Arc::new(discard::DiscardClass));
    reg.add(Arc::new(counter::CounterClass));
    reg.add(Arc::new(strip::StripClass));
    reg.add(Arc::new(strip::UnstripClass));
    reg.add(Arc::new(paint::PaintClass));
    reg.add(Arc::new(paint::PaintSwitchClass));
    reg.add(Arc::new(switch::TeeClass));
    reg.add(Arc::new(switch::HashSwitchClass));
    reg.add(Arc::new(switch::RoundRobinSwitchClass));
    reg.add(Arc::new(print::PrintClass));
    reg.add(Arc::new(null::NullClass::NULL));
    reg.add(Arc::new(null::NullClass::PUSH));
    reg.add(Arc::new(null::NullClass::PULL));
    reg.add(Arc::new(queue::QueueClass::QUEUE));
    reg.add(Arc::new(queue::QueueClass::SIMPLE));
    reg.add(Arc::new(queue::QueueClass::THREAD_SAFE));
    reg.add(Arc::new(ether::EtherEncapClass));
    reg.add(Arc::new(ether::EtherRewriteClass));
    reg.add(Arc::new(ether::EtherMirrorClass));
    reg.add(Arc::new(ip::checkipheader::CHECK_IP_HEADER));
    reg.add(Arc::new(ip::checkipheader::CHECK_IP_HEADER2));
    reg.add(Arc::new(ip::getipaddress::GetIPAddressClass));
    reg.add(Arc::new(ip::setipaddress::SetIPAddressClass));
    reg.add(Arc::new(ip::decipttl::DecIPTTLClass));
    reg.add(Arc::new(ip::icmperror::ICMPErrorClass));
    reg.add(Arc::new(ip::ipfragmenter::IPFragmenterClass));
    reg.add(Arc::new(pcap::fromdump::FromDumpClass));
    reg.add(Arc::new(pcap::todump::ToDumpClass));
    reg.add(Arc::new(sources::InfiniteSourceClass));
    reg.add(Arc::new(sources::RatedSourceClass));
    reg.add(Arc::new(classifier::ClassifierClass));
    reg.add(Arc::new(classifier::IPClassifierClass));
    reg.add(Arc::new(classifier::IPFilterClass));
    reg.add(Arc::new(iplookup::IpLookupClass::RADIX));
    reg.add(Arc::new(iplookup::IpLookupClass::DIRECT));
    reg.add(Arc::new(iplookup::IpLookupClass::STATIC));
    reg.add(Arc::new(iplookup::IpLookupClass::LINEAR));
    reg.add(Arc::new(ip6::checkip6header::CheckIP6HeaderClass));
    reg.add(Arc::new(ip6::checkip6header::MarkIP6HeaderClass));
    reg.add(Arc::new(ip6::decip6hlim::DecIP6HLIMClass));
    reg.add(Arc::new(ip6::getip6address::GetIP6AddressClass));
    reg.add(Arc::new(ip6::icmp6error::ICMP6ErrorClass));
    reg.add(Arc::new(ip6::lookupip6route::LookupIP6RouteClass));
}
