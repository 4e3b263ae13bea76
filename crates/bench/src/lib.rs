//! brickroute's measurement tools: the traffic model and generator, the sink and its
//! statistics, and the namespace testbed they run on.
//!
//! - [`traffic`]: frame sizes (fixed, IMIX, from a capture), flows, frames built from
//!   per-flow templates.
//! - [`stamp`]: the 16-byte stamp (magic, flow, sequence, send time) in each payload.
//! - [`gen`] / [`sink`]: the sending and receiving loops over [`net::PacketSocket`].
//! - [`stats`]: loss, duplicates, reordering and latency, as the sink reports them.
//! - [`testbed`]: `gen` — `dut` — `sink` network namespaces joined by veth pairs.

pub mod gen;
pub mod net;
pub mod sink;
pub mod stamp;
pub mod stats;
pub mod testbed;
pub mod traffic;
pub mod units;
