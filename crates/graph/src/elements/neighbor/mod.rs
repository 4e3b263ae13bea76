//! What ARPQuerier and IP6NDSolicitor share: the address-to-Ethernet table, its clock,
//! and the querier that saves packets for unresolved next hops, generic over the
//! resolution protocol (ARP, IPv6 neighbour discovery).

pub(crate) mod clock;
pub(crate) mod querier;
pub(crate) mod table;
