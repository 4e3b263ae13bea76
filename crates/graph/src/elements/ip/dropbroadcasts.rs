//! `DropBroadcasts`: keeps packets that arrived as link-level broadcasts or multicasts
//! (packet type annotation) off a router's forwarding path (RFC 1812 5.3.4), as Click's
//! DropBroadcasts. They go to output 1 if it is used, else they are dropped; the
//! `drops` handler counts them.

use crate::args::Args;
use crate::element::*;
use crate::error::ConfigError;
use packet::anno::PacketType;
use packet::PacketBatch;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub struct DropBroadcastsClass;

impl ElementClass for DropBroadcastsClass {
    fn name(&self) -> &'static str {
        "DropBroadcasts"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1-2")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        args.finish().map_err(|e| cx.error(e))?;
        Ok(Arc::new(DropBroadcastsSpec {
            drops: Arc::new(AtomicU64::new(0)),
        }))
    }
}

struct DropBroadcastsSpec {
    drops: Arc<AtomicU64>,
}

impl ElementSpec for DropBroadcastsSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(DropBroadcasts {
            drops: self.drops.clone(),
        })
    }
    fn handlers(&self) -> Vec<HandlerInfo> {
        vec![HandlerInfo::read("drops")]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        (name == "drops").then(|| self.drops.load(Ordering::Relaxed).to_string())
    }
}

struct DropBroadcasts {
    drops: Arc<AtomicU64>,
}

impl Element for DropBroadcasts {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        let mut drops = 0;
        out.route_each(batch, |p| match p.anno().packet_type {
            PacketType::Broadcast | PacketType::Multicast => {
                drops += 1;
                1
            }
            _ => 0,
        });
        // One shared write per batch that dropped something, none otherwise.
        if drops > 0 {
            self.drops.fetch_add(drops, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{build_error, Harness};
    use packet::Packet;

    fn typed(tag: u8, t: PacketType) -> Packet {
        let mut p = Packet::from_slice(&[tag, 0x45, 0]);
        p.anno_mut().packet_type = t;
        p
    }

    fn tags(v: &[Packet]) -> Vec<u8> {
        v.iter().map(|p| p.data()[0]).collect()
    }

    const ALL_TYPES: [PacketType; 7] = [
        PacketType::Host,
        PacketType::Broadcast,
        PacketType::Multicast,
        PacketType::OtherHost,
        PacketType::Outgoing,
        PacketType::Loopback,
        PacketType::FastRoute,
    ];

    #[test]
    fn each_packet_type() {
        let mut h = Harness::new(&DropBroadcastsClass, "", 1, 2);
        let pkts = ALL_TYPES
            .iter()
            .enumerate()
            .map(|(i, &t)| typed(i as u8, t))
            .collect();
        let out = h.push(0, pkts);
        assert_eq!(tags(&out[0]), vec![0, 3, 4, 5, 6]);
        assert_eq!(tags(&out[1]), vec![1, 2]);
        // Unchanged, annotation included.
        assert_eq!(out[1][0].data(), &[1, 0x45, 0]);
        assert_eq!(out[1][1].anno().packet_type, PacketType::Multicast);
        assert_eq!(out[0][0].data(), &[0, 0x45, 0]);
        assert_eq!(h.read("drops"), "2");
        // Counted across batches and workers.
        let mut w = h.another_worker();
        w.push(0, vec![typed(7, PacketType::Broadcast)]);
        assert_eq!(h.read("drops"), "3");
    }

    #[test]
    fn without_output_1_they_are_dropped_and_counted() {
        let mut h = Harness::new(&DropBroadcastsClass, "", 1, 1);
        let out = h.push(
            0,
            vec![
                typed(1, PacketType::Broadcast),
                typed(2, PacketType::Host),
                typed(3, PacketType::Multicast),
                typed(4, PacketType::OtherHost),
            ],
        );
        assert_eq!(tags(&out[0]), vec![2, 4]);
        assert_eq!(h.read("drops"), "2");
        let out = h.push(0, vec![typed(5, PacketType::Host)]);
        assert_eq!(tags(&out[0]), vec![5]);
        assert_eq!(h.read("drops"), "2");
    }

    #[test]
    fn takes_no_arguments() {
        assert_eq!(
            build_error(&DropBroadcastsClass, "1", 1, 1),
            "e :: DropBroadcasts: too many arguments"
        );
    }
}
