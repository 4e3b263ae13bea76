//! Click's NAT elements: the IPRewriter family.
//!
//! - `flow`: flow identifiers, and the rewriting of one packet with its checksums
//!   updated incrementally;
//! - `table`: the mapping table (flows and their two entries, timeouts, guarantees,
//!   capacity shared between rewriters, eviction), one per rewriter or per group of
//!   rewriters sharing a MAPPING_CAPACITY, behind a mutex every worker of those
//!   rewriters takes once per batch: the forward and reply packets of one flow may
//!   arrive on different workers;
//! - `pattern`: `SADDR SPORT DADDR DPORT` patterns and their port/address allocation;
//! - `input`: input specs (`drop`, `pass`, `keep`, `pattern`, `ELEMENTNAME`);
//! - `napt`: IPRewriter, TCPRewriter, UDPRewriter, IPAddrRewriter,
//!   IPAddrPairRewriter, ICMPPingRewriter over one implementation, and their handlers;
//! - `patterns`: IPRewriterPatterns; `rrmapper`: RoundRobinIPMapper;
//! - `icmprewriter`: ICMPRewriter, which rewrites ICMP errors about mapped flows.

pub(crate) mod flow;
pub(crate) mod icmprewriter;
pub(crate) mod input;
pub(crate) mod napt;
pub(crate) mod pattern;
pub(crate) mod patterns;
pub(crate) mod rrmapper;
pub(crate) mod table;
#[cfg(test)]
mod tests;

use crate::registry::Registry;
use std::sync::Arc;

pub(crate) fn register(reg: &mut Registry) {
    reg.add(Arc::new(napt::IP_REWRITER));
    reg.add(Arc::new(napt::TCP_REWRITER));
    reg.add(Arc::new(napt::UDP_REWRITER));
    reg.add(Arc::new(napt::IP_ADDR_REWRITER));
    reg.add(Arc::new(napt::IP_ADDR_PAIR_REWRITER));
    reg.add(Arc::new(napt::ICMP_PING_REWRITER));
    reg.add(Arc::new(patterns::IPRewriterPatternsClass));
    reg.add(Arc::new(rrmapper::RoundRobinIPMapperClass));
    reg.add(Arc::new(icmprewriter::ICMPRewriterClass));
}
