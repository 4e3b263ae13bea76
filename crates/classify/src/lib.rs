//! Packet classification for brickroute.
//!
//! [`rss`] is receive-side scaling as a multi-queue NIC does it: the Toeplitz hash of a
//! frame's addresses (and ports) picks an entry of a 128-entry indirection table, which
//! names the queue, and so the core, that receives the frame.

pub mod rss;

pub use rss::{rss_queue_for_frame, Reta, RssSettings, Toeplitz, MS_RSS_KEY, RETA_SIZE};
