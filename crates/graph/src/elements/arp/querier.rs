//! `ARPQuerier(IP, ETH [, keywords])`: encapsulates IP packets in Ethernet headers
//! addressed to their next hop, resolved with ARP, as Click's element of the same name.
//!
//! The querier itself (table, per-worker cache, saved packets) is the one
//! IP6NDSolicitor shares ([`crate::elements::neighbor::querier`]); this is what ARP
//! brings to it: the queries it sends and the replies it reads.

use super::frame::{self, Arp, BROADCAST_ETH, ETHERTYPE_IP, OP_REPLY, OP_REQUEST};
use crate::args::{Args, EtherAddr, FromArg, Ipv4Prefix};
use crate::element::*;
use crate::elements::neighbor::clock::Clock;
use crate::elements::neighbor::querier::{self as q, is_group, Config, Protocol, QuerierSpec};
use crate::error::ConfigError;
use packet::anno::VLAN_TCI_ANNO_OFFSET;
use packet::Packet;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

#[derive(Default)]
pub(crate) struct ARPQuerierClass {
    /// The milliseconds clock unit tests set; `None`: the TSC.
    manual_clock: Option<Arc<AtomicU64>>,
}

impl ARPQuerierClass {
    /// The class with a clock that reads `ms` (milliseconds), for tests.
    #[cfg(test)]
    pub(crate) fn with_clock(ms: Arc<AtomicU64>) -> ARPQuerierClass {
        ARPQuerierClass {
            manual_clock: Some(ms),
        }
    }
}

impl ElementClass for ARPQuerierClass {
    fn name(&self) -> &'static str {
        "ARPQuerier"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("2/1-2")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let err = |e: String| cx.error(e);
        if args.keyword::<String>("TABLE").map_err(err)?.is_some() {
            return Err(cx.error(
                "TABLE is not supported: brickroute has no ARPTable element; each ARPQuerier keeps its own table",
            ));
        }
        let ip_arg = args.required::<String>("IP").map_err(err)?;
        let eth_arg = args.positional::<String>("ETH").map_err(err)?;
        let prefix = Ipv4Prefix::from_arg(&ip_arg);
        let (prefix, eth) = match (prefix, eth_arg) {
            (None, None) => {
                return Err(cx.error(format!(
                "expected ARPQuerier(IP, ETH) or ARPQuerier(NAME) with an AddressInfo NAME of both, not '{}'",
                ip_arg
            )))
            }
            (None, Some(_)) => return Err(cx.error("IP expects IP address")),
            // ARPQuerier(NAME): an AddressInfo name of both.
            (Some(p), None) => match EtherAddr::from_arg(&ip_arg) {
                Some(e) => (p, e),
                None => return Err(cx.error("missing mandatory ETH argument")),
            },
            (Some(p), Some(e)) => (
                p,
                EtherAddr::from_arg(&e).ok_or_else(|| cx.error("ETH expects Ethernet address"))?,
            ),
        };
        let limits = q::limits(args, cx)?;
        let broadcast = args.keyword::<Ipv4Addr>("BROADCAST").map_err(err)?;
        let broadcast_poll = args
            .keyword::<bool>("BROADCAST_POLL")
            .map_err(err)?
            .unwrap_or(false);
        args.finish().map_err(err)?;

        let mask = u32::from(prefix.mask);
        // The prefix's broadcast address, for a prefix that has one (not /31 or /32).
        let broadcast = match broadcast {
            Some(b) => u32::from(b),
            None if mask.count_zeros() >= 2 => u32::from(prefix.addr) | !mask,
            None => u32::MAX,
        };
        let arp = Arp4 {
            ip: AtomicU32::new(u32::from(prefix.addr)),
            broadcast,
            broadcast_poll,
        };
        Ok(Arc::new(QuerierSpec::new(
            arp,
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

/// ARP for IPv4 over Ethernet.
struct Arp4 {
    /// This host's IP address: the sender of queries (the `ipaddr` handler writes it).
    ip: AtomicU32,
    /// Sent to the Ethernet broadcast address, as 255.255.255.255 is.
    broadcast: u32,
    /// Polls go to the broadcast address rather than the known one.
    broadcast_poll: bool,
}

fn is_multicast(ip: u32) -> bool {
    ip >> 28 == 0xe
}

impl Protocol for Arp4 {
    type Addr = u32;
    const ETHERTYPE: u16 = ETHERTYPE_IP;
    const ADDR_ARG: &'static str = "IP";
    const ADDR_NAME: &'static str = "IP address";
    const QUERIES_SENT: &'static str = "ARP queries sent";
    const TABLE_FULL: &'static str = "ARP table full: every entry has packets waiting";

    #[inline]
    fn next_hop(p: &Packet) -> u32 {
        u32::from_be_bytes(p.anno().dst_ip())
    }

    fn is_unspecified(a: u32) -> bool {
        a == 0
    }

    fn parse_addr(s: &str) -> Option<u32> {
        Ipv4Addr::from_arg(s).map(u32::from)
    }

    #[inline]
    fn direct(&self, dst: u32) -> Option<[u8; 6]> {
        if dst == u32::MAX || dst == self.broadcast {
            return Some(BROADCAST_ETH);
        }
        // RFC 1112: 01-00-5E and the address's low 23 bits.
        let [_, b, c, d] = dst.to_be_bytes();
        is_multicast(dst).then_some([0x01, 0x00, 0x5e, b & 0x7f, c, d])
    }

    /// An ARP request for `target`, carrying `trigger`'s VLAN annotation and
    /// timestamp: broadcast, or a poll to the entry's address.
    fn query(&self, eth: [u8; 6], target: u32, known: Option<[u8; 6]>, trigger: &Packet) -> Packet {
        let to = match known {
            Some(e) if !self.broadcast_poll => e,
            _ => BROADCAST_ETH,
        };
        let arp = Arp {
            op: OP_REQUEST,
            sha: eth,
            spa: self.ip.load(Ordering::Relaxed).to_be_bytes(),
            tha: [0; 6],
            tpa: target.to_be_bytes(),
        };
        let mut q = frame::build(to, eth, &arp);
        let at = VLAN_TCI_ANNO_OFFSET;
        let tci: [u8; 2] = trigger.anno().user[at..at + 2].try_into().expect("2 bytes");
        q.set_user_anno(at, &tci);
        // As Click's: the query is stamped with the trigger's time, which a capture
        // of the queries then shows.
        q.anno_mut().timestamp = trigger.anno().timestamp;
        q
    }

    /// An ARP reply whose sender may be recorded: a unicast Ethernet address for a
    /// unicast IP address.
    fn response(&self, f: &[u8]) -> Option<(u32, Option<[u8; 6]>)> {
        let a = frame::parse(f).filter(|a| a.op == OP_REPLY)?;
        let ip = u32::from_be_bytes(a.spa);
        let recordable =
            !is_group(a.sha) && ip != 0 && ip != u32::MAX && ip != self.broadcast && !is_multicast(ip);
        recordable.then_some((ip, Some(a.sha)))
    }

    fn same_host(&self, other: &Arp4) -> bool {
        self.ip.load(Ordering::Relaxed) == other.ip.load(Ordering::Relaxed)
            && self.broadcast == other.broadcast
    }

    fn handlers(&self) -> Vec<HandlerInfo> {
        vec![HandlerInfo::read("broadcast"), HandlerInfo::read_write("ipaddr")]
    }

    fn read_handler(&self, name: &str) -> Option<String> {
        Some(match name {
            "broadcast" => Ipv4Addr::from(self.broadcast).to_string(),
            "ipaddr" => Ipv4Addr::from(self.ip.load(Ordering::Relaxed)).to_string(),
            _ => return None,
        })
    }

    fn write_handler(&self, name: &str, value: &str) -> Option<Result<(), String>> {
        (name == "ipaddr").then(|| match Ipv4Addr::from_arg(value) {
            Some(ip) => {
                self.ip.store(u32::from(ip), Ordering::Relaxed);
                Ok(())
            }
            None => Err("IP expects IP address".to_string()),
        })
    }
}
