//! What the ARP and IPv6 neighbour discovery elements share, generic over the
//! protocol: ARPQuerier's and IP6NDSolicitor's address-to-Ethernet table, its clock
//! and the querier that saves packets for unresolved next hops; ARPResponder's and
//! IP6NDAdvertiser's table of answered prefixes.

pub(crate) mod clock;
pub(crate) mod querier;
pub(crate) mod responder;
pub(crate) mod table;
