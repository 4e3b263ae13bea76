//! The port interface and per-queue counters.

use packet::PacketBatch;
use std::ops::Deref;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::DeviceError;
use classify::RssSettings;

/// Why a port without RSS settings of its own has none to read or change.
const NO_RSS: &str = "this port does not spread frames over its queues by settings of its own";

/// A port with [`Port::queues`] receive/transmit queue pairs.
///
/// Queue `q` is driven by one worker at a time (RouteBricks' rule: each queue is touched
/// by one core). Calls for a queue that does not exist receive nothing and transmit
/// nothing (the packets handed to such a call are dropped).
pub trait Port: Send + Sync {
    /// Number of RX/TX queue pairs.
    fn queues(&self) -> usize;

    /// Appends up to `max` received packets to `batch`; returns how many.
    fn rx_burst(&self, queue: usize, batch: &mut PacketBatch, max: usize) -> usize;

    /// True once `queue` will never receive another packet (a finite source ran out).
    fn rx_finished(&self, queue: usize) -> bool;

    /// Transmits every packet of `batch` on `queue` (the batch is empty on return);
    /// returns how many were accepted.
    fn tx_burst(&self, queue: usize, batch: &mut PacketBatch) -> usize;

    /// Counters of `queue` (zero for a queue that does not exist).
    fn stats(&self, queue: usize) -> QueueStats;

    /// Frames lost on receive on `queue` before the port could deliver them, as the
    /// kernel counts them (a full ring, and for AF_XDP its socket's other drops); 0 for
    /// ports that cannot lose any or cannot tell.
    fn rx_dropped(&self, _queue: usize) -> u64 {
        0
    }

    /// Frames handed to `tx_burst` on `queue` that the device refused and that were
    /// dropped; 0 for ports that cannot lose any or cannot tell.
    fn tx_dropped(&self, _queue: usize) -> u64 {
        0
    }

    /// A descriptor that polls readable (`poll(2)`, `POLLIN`) when `queue` has frames
    /// to receive, so an idle worker can sleep until traffic comes; `None` for ports
    /// that cannot be waited on (the worker keeps polling them).
    fn wait_fd(&self, _queue: usize) -> Option<RawFd> {
        None
    }

    /// Why the port would not receive everything its interface gets, if it would not:
    /// an AF_XDP port with fewer queues than the interface receives on, whose other
    /// queues' frames the program hands to the kernel. A port that only transmits may
    /// still be used; the router refuses to receive from one ([`None`] otherwise).
    fn receive_problem(&self) -> Option<String> {
        None
    }

    /// Something the operator should hear when the port opens: it works, but less
    /// well than it could (an AF_XDP port whose program cannot put stripped VLAN tags
    /// back).
    fn warning(&self) -> Option<String> {
        None
    }

    /// How the port moves frames, when there is more to say than its kind (AF_XDP:
    /// "copy mode, native XDP"); `None` otherwise.
    fn mode(&self) -> Option<String> {
        None
    }

    /// Asks the port to deliver the ARP the router answers and sends itself (`on`: its
    /// configuration has ARP elements), or to leave ARP to the kernel again: an AF_XDP
    /// port then takes ARP for addresses other than its interface's own from the
    /// kernel (see `xdp::program`). Ports that deliver every frame anyway (AF_PACKET,
    /// pcap files) have nothing to change.
    fn deliver_router_arp(&self, _on: bool) -> Result<(), DeviceError> {
        Ok(())
    }

    /// As [`Port::deliver_router_arp`], for the IPv6 neighbour discovery the router
    /// does itself (neighbour solicitations and advertisements).
    fn deliver_router_nd(&self, _on: bool) -> Result<(), DeviceError> {
        Ok(())
    }

    /// Re-reads the interface's own addresses where the port keeps them (an AF_XDP
    /// port's program passes frames for them to the kernel), after the kernel's
    /// addresses changed. Ports that keep none have nothing to do.
    fn refresh_addresses(&self) -> Result<(), DeviceError> {
        Ok(())
    }

    /// The key and indirection table by which the port spreads received frames over
    /// its queues, where the port applies them itself (AF_PACKET); why not otherwise.
    fn rss(&self) -> Result<RssSettings, String> {
        Err(NO_RSS.to_string())
    }

    /// Changes the settings with `change`, which sees the settings in force, under the
    /// port's lock (so two changes of different parts never undo each other): every
    /// frame received from then on is steered by the new settings, none by a mix of old
    /// and new. The table and the rules must name only queues the port has; if they do
    /// not, or `change` fails, nothing changes.
    fn update_rss(
        &self,
        _change: &mut dyn FnMut(&mut RssSettings) -> Result<(), String>,
    ) -> Result<(), String> {
        Err(NO_RSS.to_string())
    }

    /// Replaces the settings (see [`Port::update_rss`]).
    fn set_rss(&self, settings: &RssSettings) -> Result<(), String> {
        self.update_rss(&mut |s| {
            *s = settings.clone();
            Ok(())
        })
    }

    /// Counters summed over all queues.
    fn totals(&self) -> QueueStats {
        (0..self.queues()).fold(QueueStats::default(), |a, q| a.add(&self.stats(q)))
    }
}

/// A snapshot of one queue's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueStats {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
}

impl QueueStats {
    pub fn add(&self, o: &QueueStats) -> QueueStats {
        QueueStats {
            rx_packets: self.rx_packets + o.rx_packets,
            rx_bytes: self.rx_bytes + o.rx_bytes,
            tx_packets: self.tx_packets + o.tx_packets,
            tx_bytes: self.tx_bytes + o.tx_bytes,
        }
    }
}

/// A value alone on its cache lines (128 bytes: two lines, since adjacent-line
/// prefetchers pull pairs), so counters of different queues never share a line.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct CachePadded<T>(pub T);

impl<T> Deref for CachePadded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// One queue's counters, updated once per burst, never per packet. The receive side
/// has one writer: a receive queue is polled by one worker only (queue q by worker q,
/// or by worker `q mod workers` for a `FromDevice` with `QUEUE q`), so it adds with a
/// plain load and store. The transmit side may have several (a `ToDevice` with `QUEUE
/// q` transmits on queue q from every worker), so it adds with locked instructions.
#[derive(Debug, Default)]
pub(crate) struct QueueCounters {
    pub rx_packets: AtomicU64,
    pub rx_bytes: AtomicU64,
    pub tx_packets: AtomicU64,
    pub tx_bytes: AtomicU64,
}

impl QueueCounters {
    /// Counts a receive burst of `n` packets, `bytes` in all (once per burst).
    #[inline]
    pub fn count_rx(&self, n: usize, bytes: u64) {
        if n > 0 {
            // The only writer (see above): no locked add (about 8 cycles each here).
            let (p, b) = (&self.rx_packets, &self.rx_bytes);
            p.store(
                p.load(Ordering::Relaxed).wrapping_add(n as u64),
                Ordering::Relaxed,
            );
            b.store(b.load(Ordering::Relaxed).wrapping_add(bytes), Ordering::Relaxed);
        }
    }

    /// Counts a transmit burst of `n` packets, `bytes` in all (once per burst).
    #[inline]
    pub fn count_tx(&self, n: usize, bytes: u64) {
        if n > 0 {
            self.tx_packets.fetch_add(n as u64, Ordering::Relaxed);
            self.tx_bytes.fetch_add(bytes, Ordering::Relaxed);
        }
    }

    pub fn snapshot(&self) -> QueueStats {
        QueueStats {
            rx_packets: self.rx_packets.load(Ordering::Relaxed),
            rx_bytes: self.rx_bytes.load(Ordering::Relaxed),
            tx_packets: self.tx_packets.load(Ordering::Relaxed),
            tx_bytes: self.tx_bytes.load(Ordering::Relaxed),
        }
    }
}
