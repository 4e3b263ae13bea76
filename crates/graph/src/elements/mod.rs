//! The element library. Each module registers its classes in [`register_all`].

use crate::registry::Registry;
use std::sync::Arc;

pub(crate) mod arp;
pub(crate) mod averagecounter;
pub(crate) mod checklength;
pub(crate) mod classifier;
pub(crate) mod counter;
pub(crate) mod discard;
pub(crate) mod esp;
pub(crate) mod ether;
pub(crate) mod hopindex;
pub(crate) mod icmpping;
pub(crate) mod idle;
pub(crate) mod ip;
pub(crate) mod ip6;
pub mod iplookup;
pub mod ipsumdump;
pub(crate) mod meter;
pub mod multipath;
pub(crate) mod nd;
pub(crate) mod neighbor;
pub(crate) mod null;
pub(crate) mod outputswitch;
pub(crate) mod pad;
pub(crate) mod paint;
pub mod pcap;
pub(crate) mod print;
pub(crate) mod queue;
pub(crate) mod random;
pub(crate) mod ratedsplitter;
pub(crate) mod rewriter;
pub(crate) mod script;
pub(crate) mod settimestamp;
pub mod shared;
pub(crate) mod slots;
pub mod sources;
pub(crate) mod strip;
pub(crate) mod striptonet;
pub(crate) mod switch;
pub(crate) mod timedsource;
pub(crate) mod tokenbucket;
pub(crate) mod truncate;
pub(crate) mod vlan;

pub fn register_all(reg: &mut Registry) {
    reg.add(Arc::new(discard::DiscardClass));
    reg.add(Arc::new(script::ScriptClass));
    reg.add(Arc::new(counter::CounterClass));
    reg.add(Arc::new(strip::StripClass));
    reg.add(Arc::new(strip::UnstripClass));
    reg.add(Arc::new(paint::PaintClass));
    reg.add(Arc::new(paint::PaintSwitchClass));
    reg.add(Arc::new(switch::TeeClass));
    reg.add(Arc::new(switch::HashSwitchClass));
    reg.add(Arc::new(switch::RoundRobinSwitchClass));
    reg.add(Arc::new(ratedsplitter::RatedSplitterClass));
    reg.add(Arc::new(ratedsplitter::BandwidthRatedSplitterClass));
    reg.add(Arc::new(meter::METER));
    reg.add(Arc::new(meter::BANDWIDTH_METER));
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
    reg.add(Arc::new(ip::checktransport::CHECK_UDP_HEADER));
    reg.add(Arc::new(ip::checktransport::CHECK_TCP_HEADER));
    reg.add(Arc::new(ip::checktransport::CHECK_ICMP_HEADER));
    reg.add(Arc::new(ip::getipaddress::GetIPAddressClass));
    reg.add(Arc::new(ip::setipaddress::SetIPAddressClass));
    reg.add(Arc::new(ip::decipttl::DecIPTTLClass));
    reg.add(Arc::new(ip::icmperror::ICMPErrorClass));
    reg.add(Arc::new(ip::ipfragmenter::IPFragmenterClass));
    reg.add(Arc::new(pcap::fromdump::FromDumpClass));
    reg.add(Arc::new(pcap::todump::ToDumpClass));
    reg.add(Arc::new(ipsumdump::to::ToIPSummaryDumpClass));
    reg.add(Arc::new(ipsumdump::from::FromIPSummaryDumpClass));
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
    reg.add(Arc::new(ip6::icmp6ping::ICMP6_PING_RESPONDER));
    reg.add(Arc::new(ip6::lookupip6route::LookupIP6RouteClass));
    reg.add(Arc::new(icmpping::ICMP_PING_RESPONDER));
    reg.add(Arc::new(ip::icmppingencap::ICMPPingEncapClass));
    reg.add(Arc::new(esp::encap::ESPEncapClass));
    reg.add(Arc::new(esp::decap::ESPDecapClass));
    arp::register(reg);
    nd::register(reg);
    ip::register_gateway(reg);
    reg.add(Arc::new(idle::IdleClass));
    reg.add(Arc::new(averagecounter::AverageCounterClass));
    reg.add(Arc::new(ip::ipencap::IPEncapClass));
    reg.add(Arc::new(ip::udpipencap::UDPIPEncapClass));
    reg.add(Arc::new(ip::setipchecksum::SetIPChecksumClass));
    reg.add(Arc::new(ip::settransportchecksum::SET_UDP_CHECKSUM));
    reg.add(Arc::new(ip::settransportchecksum::SET_TCP_CHECKSUM));
    reg.add(Arc::new(ip::ipprint::IPPrintClass));
    reg.add(Arc::new(ip::markipheader::MarkIPHeaderClass));
    reg.add(Arc::new(ip::stripipheader::StripIPHeaderClass));
    reg.add(Arc::new(ip::stripipheader::UnstripIPHeaderClass));
    reg.add(Arc::new(ip::storeipaddress::StoreIPAddressClass));
    reg.add(Arc::new(striptonet::StripToNetworkHeaderClass));
    reg.add(Arc::new(truncate::TruncateClass));
    reg.add(Arc::new(pad::PadClass));
    reg.add(Arc::new(checklength::CheckLengthClass));
    reg.add(Arc::new(settimestamp::SetTimestampClass));
    reg.add(Arc::new(outputswitch::SwitchClass));
    reg.add(Arc::new(outputswitch::StaticSwitchClass));
    reg.add(Arc::new(random::RandomSwitchClass));
    reg.add(Arc::new(random::RandomSampleClass));
    reg.add(Arc::new(ip::setipdscp::SetIPDSCPClass));
    reg.add(Arc::new(ip::setipdscp::SetIPECNClass));
    reg.add(Arc::new(vlan::VLANEncapClass));
    reg.add(Arc::new(vlan::VLANDecapClass));
    reg.add(Arc::new(vlan::SET_VLAN_ANNO));
    reg.add(Arc::new(vlan::SET_VLAN_ANNO_ALIAS));
    reg.add(Arc::new(vlan::ETHER_VLAN_ENCAP));
    reg.add(Arc::new(vlan::ETHER_VLAN_ENCAP_ALIAS));
    reg.add(Arc::new(timedsource::TimedSourceClass));
    reg.add(Arc::new(crate::addressinfo::AddressInfoClass));
    rewriter::register(reg);
}

#[cfg(test)]
mod tests {
    #[test]
    fn header_length_and_timestamp_elements_build_from_the_library() {
        let router = crate::testing::router(
            "InfiniteSource(LIMIT 1) -> Strip(14) -> MarkIPHeader -> StripIPHeader
               -> UnstripIPHeader -> StripToNetworkHeader -> st :: StoreIPAddress(10.0.0.1, src)
               -> t :: Truncate(60) -> Pad -> cl :: CheckLength(1500) -> SetTimestamp
               -> Discard;
             st[1] -> Discard; cl[1] -> Discard",
        )
        .unwrap();
        assert_eq!(router.read_handler("t.length").unwrap(), "60");
        assert_eq!(router.read_handler("cl.length").unwrap(), "1500");
        for class in [
            "MarkIPHeader",
            "StripIPHeader",
            "UnstripIPHeader",
            "StripToNetworkHeader",
            "StoreIPAddress",
            "Truncate",
            "Pad",
            "CheckLength",
            "SetTimestamp",
        ] {
            assert_eq!(router.elements_of_class(class).len(), 1, "{}", class);
        }
    }
}
