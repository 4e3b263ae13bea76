//! `IP6NDSolicitor(IP6, ETH [, keywords])`: encapsulates IPv6 packets in Ethernet
//! headers addressed to their next hop, resolved with Neighbor Solicitations (RFC
//! 4861 7.2), as Click's element of the same name.
//!
//! The querier (table, per-worker cache, saved packets) is ARPQuerier's
//! ([`crate::elements::neighbor::querier`]); this is what neighbour discovery brings to
//! it: the solicitations it sends and the advertisements it reads.

use super::frame::{self, Outgoing, NEIGHBOR_ADVERTISEMENT, NEIGHBOR_SOLICITATION};
use crate::args::{Args, EtherAddr, FromArg};
use crate::element::*;
use crate::elements::neighbor::clock::Clock;
use crate::elements::neighbor::querier::{self as q, Config, Protocol, QuerierSpec};
use crate::error::ConfigError;
use packet::anno::VLAN_TCI_ANNO_OFFSET;
use packet::Packet;
use std::net::Ipv6Addr;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, RwLock};

#[derive(Default)]
pub(crate) struct IP6NDSolicitorClass {
    /// The milliseconds clock unit tests set; `None`: the TSC.
    manual_clock: Option<Arc<AtomicU64>>,
}

impl IP6NDSolicitorClass {
    /// The class with a clock that reads `ms` (milliseconds), for tests.
    #[cfg(test)]
    pub(crate) fn with_clock(ms: Arc<AtomicU64>) -> IP6NDSolicitorClass {
        IP6NDSolicitorClass {
            manual_clock: Some(ms),
        }
    }
}

impl ElementClass for IP6NDSolicitorClass {
    fn name(&self) -> &'static str {
        "IP6NDSolicitor"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("2/1-2")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let err = |e: String| cx.error(e);
        let ip = args.required::<Ipv6Addr>("IP").map_err(err)?;
        let eth = args.required::<EtherAddr>("ETH").map_err(err)?;
        let limits = q::limits(args, cx)?;
        args.finish().map_err(err)?;
        if !usable_source(ip) {
            return Err(cx.error(format!(
                "IP must be a unicast address, not {} (it is the source of solicitations)",
                ip
            )));
        }
        if !frame::is_unicast_eth(eth.0) {
            return Err(cx.error(format!("ETH must be a unicast Ethernet address, not {}", eth)));
        }
        let nd = Nd { ip: RwLock::new(ip) };
        Ok(Arc::new(QuerierSpec::new(
            nd,
            Config {
                limits,
                clock: Clock::new(&self.manual_clock),
                eth: eth.0,
                noutputs: cx.noutputs,
                workers: cx.workers,
            },
        )))
    }
}

fn usable_source(ip: Ipv6Addr) -> bool {
    !ip.is_unspecified() && !ip.is_multicast()
}

/// Neighbour discovery over Ethernet.
struct Nd {
    /// This host's IPv6 address: the source of solicitations (the `ipaddr` handler
    /// writes it; read only when a solicitation is sent).
    ip: RwLock<Ipv6Addr>,
}

impl Protocol for Nd {
    type Addr = u128;
    const ETHERTYPE: u16 = frame::ETHERTYPE_IP6;
    const ADDR_ARG: &'static str = "IP6";
    const ADDR_NAME: &'static str = "IPv6 address";
    const QUERIES_SENT: &'static str = "neighbor solicitations sent";
    const TABLE_FULL: &'static str = "neighbor table full: every entry has packets waiting";

    #[inline]
    fn next_hop(p: &Packet) -> u128 {
        u128::from_be_bytes(p.anno().dst_ip6())
    }

    fn is_unspecified(a: u128) -> bool {
        a == 0
    }

    fn parse_addr(s: &str) -> Option<u128> {
        Ipv6Addr::from_arg(s).map(u128::from)
    }

    #[inline]
    fn direct(&self, dst: u128) -> Option<[u8; 6]> {
        frame::is_multicast(dst).then(|| frame::multicast_eth(dst))
    }

    /// A Neighbor Solicitation for `target` with a source link-layer address option,
    /// carrying `trigger`'s VLAN annotation: to the target's solicited-node multicast
    /// address, or a poll (RFC 4861 7.3.3's unicast probe) to the target at the
    /// entry's Ethernet address.
    fn query(&self, eth: [u8; 6], target: u128, known: Option<[u8; 6]>, trigger: &Packet) -> Packet {
        let (ip_dst, eth_dst) = match known {
            Some(e) => (target, e),
            None => {
                let group = frame::solicited_node(target);
                (group, frame::multicast_eth(group))
            }
        };
        let ip_src = u128::from(*self.ip.read().unwrap_or_else(|e| e.into_inner()));
        let mut q = frame::build(&Outgoing {
            eth_dst,
            eth_src: eth,
            ip_src,
            ip_dst,
            kind: NEIGHBOR_SOLICITATION,
            flags: 0,
            target,
            link_addr: eth,
        });
        let at = VLAN_TCI_ANNO_OFFSET;
        let tci: [u8; 2] = trigger.anno().user[at..at + 2].try_into().expect("2 bytes");
        q.set_user_anno(at, &tci);
        q
    }

    /// A valid Neighbor Advertisement: the target is at the address its target
    /// link-layer address option gives, which must be unicast. Without the option (a
    /// node answering a unicast poll may leave it out, RFC 4861 7.2.4) it confirms the
    /// address recorded (7.2.5).
    fn response(&self, f: &[u8]) -> Option<(u128, Option<[u8; 6]>)> {
        let na = frame::parse(f, NEIGHBOR_ADVERTISEMENT)?;
        match na.link_addr {
            Some(eth) if !frame::is_unicast_eth(eth) => None,
            eth => (na.target != 0).then_some((na.target, eth)),
        }
    }

    fn same_host(&self, other: &Nd) -> bool {
        let ip = |n: &Nd| *n.ip.read().unwrap_or_else(|e| e.into_inner());
        ip(self) == ip(other)
    }

    fn handlers(&self) -> Vec<HandlerInfo> {
        vec![HandlerInfo::read_write("ipaddr")]
    }

    fn read_handler(&self, name: &str) -> Option<String> {
        (name == "ipaddr").then(|| self.ip.read().unwrap_or_else(|e| e.into_inner()).to_string())
    }

    fn write_handler(&self, name: &str, value: &str) -> Option<Result<(), String>> {
        (name == "ipaddr").then(|| match Ipv6Addr::from_arg(value) {
            Some(ip) if usable_source(ip) => {
                *self.ip.write().unwrap_or_else(|e| e.into_inner()) = ip;
                Ok(())
            }
            _ => Err("IP expects unicast IPv6 address".to_string()),
        })
    }
}
