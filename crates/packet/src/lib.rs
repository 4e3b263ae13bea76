//! Packet buffers for brickroute.
//!
//! A [`Packet`] is a handle to a frame taken from the current thread's [`pool`]; dropping
//! it returns the frame to the pool of the thread that drops it, so the fast path never
//! allocates once the pool is warm. Packets move through the element graph in
//! [`PacketBatch`]es. Each packet carries Click's annotations ([`Anno`]).
//!
//! A packet's buffer may instead be a chunk of a device's memory (an AF_XDP UMEM,
//! [`chunk`]): the device's bytes are the packet, and dropping it returns the chunk.

pub mod anno;
pub mod batch;
pub mod checksum;
pub mod chunk;
pub mod frame;
pub mod gso;
pub mod pool;
mod split;
pub mod views;

pub use anno::{Anno, Timestamp};
pub use batch::{PacketBatch, DEFAULT_BATCH, MAX_BATCH};
pub use chunk::{ChunkCounts, ChunkPool, ChunkPoolError, Chunks};
pub use frame::{Packet, DEFAULT_HEADROOM, FRAME_DATA, MAX_BUFFER};
