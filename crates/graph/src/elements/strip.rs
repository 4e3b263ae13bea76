//! `Strip(LENGTH)` and `Unstrip(LENGTH)`: remove or restore bytes at the front of each
//! packet, as Click's elements of the same names. Unstrip's handler `drops` (read)
//! counts packets too large to grow by LENGTH, which it drops.

use crate::args::Args;
use crate::element::*;
use crate::error::ConfigError;
use packet::{Packet, PacketBatch};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub struct StripClass;
pub struct UnstripClass;

/// The most bytes an Unstrip restores: the largest IP datagram. Click takes any
/// unsigned number, but a packet pushed past its headroom gets a buffer of that size
/// of its own, so a length beyond any stack of headers is refused at configuration
/// rather than costing up to gigabytes per packet (or, past a buffer's limit, every
/// packet).
const MAX_UNSTRIP: u32 = 65_535;

fn length(args: &mut Args, cx: &BuildContext) -> Result<u32, ConfigError> {
    let n = args.required::<u32>("LENGTH").map_err(|e| cx.error(e))?;
    args.finish().map_err(|e| cx.error(e))?;
    Ok(n)
}

impl ElementClass for StripClass {
    fn name(&self) -> &'static str {
        "Strip"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        Ok(Arc::new(StripSpec {
            n: length(args, cx)? as usize,
        }))
    }
}

impl ElementClass for UnstripClass {
    fn name(&self) -> &'static str {
        "Unstrip"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let n = length(args, cx)?;
        if n > MAX_UNSTRIP {
            return Err(cx.error(format!("LENGTH must be at most {}", MAX_UNSTRIP)));
        }
        Ok(Arc::new(UnstripSpec {
            n: n as usize,
            drops: Arc::new(AtomicU64::new(0)),
        }))
    }
}

struct StripSpec {
    n: usize,
}

impl ElementSpec for StripSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(Strip { n: self.n })
    }
}

struct UnstripSpec {
    n: usize,
    drops: Arc<AtomicU64>,
}

impl ElementSpec for UnstripSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(Unstrip {
            n: self.n,
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

struct Strip {
    n: usize,
}

impl Element for Strip {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        // Click's `pull`: a packet shorter than LENGTH becomes empty. Testing the
        // length first lets the compiler drop `pull`'s own clamp on the usual path.
        let n = self.n;
        let strip = |p: &mut Packet| {
            if p.len() >= n {
                p.pull(n);
            } else {
                empty(p);
            }
        };
        // Two packets a round: the out-of-line call keeps the compiler from
        // unrolling, and the loop's own instructions are a third of the work.
        let (pairs, rest) = batch.as_mut_slice().as_chunks_mut::<2>();
        for [a, b] in pairs {
            strip(a);
            strip(b);
        }
        rest.iter_mut().for_each(strip);
        out.push_batch(0, batch);
    }
}

/// Strip's rare case, out of line so the usual one stays a branch, an add and a
/// subtract: a packet shorter than LENGTH loses all its bytes.
#[cold]
#[inline(never)]
fn empty(p: &mut Packet) {
    p.pull(p.len());
}

struct Unstrip {
    n: usize,
    drops: Arc<AtomicU64>,
}

impl Element for Unstrip {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        // Moves the data start back into the headroom: the bytes a Strip removed
        // reappear (Click's `push`).
        let n = self.n;
        if let Some(failed) = batch.iter_mut().position(|p| !p.try_push(n)) {
            self.drop_ungrowable(batch, failed);
        }
        out.push_batch(0, batch);
    }
}

impl Unstrip {
    /// Packet `failed` of the batch could not grow by LENGTH (the packets before it
    /// did, the ones after it are untried): drops it and every later packet that cannot
    /// grow either, as Click drops a packet whose `push` fails to reallocate.
    #[cold]
    #[inline(never)]
    fn drop_ungrowable(&self, batch: &mut PacketBatch, failed: usize) {
        let before = batch.len();
        let mut i = 0;
        batch.retain_mut(|p| {
            let keep = i < failed || (i > failed && p.try_push(self.n));
            i += 1;
            keep
        });
        self.drops
            .fetch_add((before - batch.len()) as u64, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{build, build_error, Harness};

    #[test]
    fn strip_removes_front_bytes() {
        let mut h = Harness::new(&StripClass, "14", 1, 1);
        let mut frame = vec![0xaa; 14];
        frame.extend_from_slice(&[0x45, 0x00, 0x00, 0x14]);
        let out = h.push_bytes(0, &frame);
        assert_eq!(out[0].len(), 1);
        assert_eq!(out[0][0].data(), &[0x45, 0x00, 0x00, 0x14]);
        // Shorter than LENGTH: emptied, still emitted.
        let out = h.push_bytes(0, &[1, 2, 3]);
        assert_eq!(out[0][0].len(), 0);
    }

    #[test]
    fn strip_a_batch_of_mixed_lengths() {
        let mut h = Harness::new(&StripClass, "3", 1, 1);
        let out = h.push(
            0,
            vec![
                Packet::from_slice(&[1, 2, 3, 4, 5]),
                Packet::from_slice(&[1, 2, 3]),
                Packet::from_slice(&[1, 2]),
                Packet::from_slice(&[]),
                Packet::from_slice(&[9, 9, 9, 7]),
            ],
        );
        let got: Vec<&[u8]> = out[0].iter().map(|p| p.data()).collect();
        assert_eq!(got, vec![&[4u8, 5][..], &[], &[], &[], &[7]]);
        // The bytes went to the headroom: Unstrip gives them back (the short packet
        // keeps the 2 bytes it had).
        let mut u = Harness::new(&UnstripClass, "3", 1, 1);
        let back = u.push(0, out.into_iter().next().unwrap());
        assert_eq!(back[0][0].data(), &[1, 2, 3, 4, 5]);
        assert_eq!(&back[0][2].data()[1..], &[1, 2]);
    }

    #[test]
    fn unstrip_restores_stripped_bytes() {
        let mut s = Harness::new(&StripClass, "LENGTH 4", 1, 1);
        let mut u = Harness::new(&UnstripClass, "4", 1, 1);
        let stripped = s.push_bytes(0, &[1, 2, 3, 4, 5, 6]).remove(0);
        assert_eq!(stripped[0].data(), &[5, 6]);
        let out = u.push(0, stripped);
        assert_eq!(out[0][0].data(), &[1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn unstrip_grows_a_packet_without_headroom() {
        let mut u = Harness::new(&UnstripClass, "200", 1, 1);
        let out = u.push_bytes(0, &[9, 8, 7]);
        assert_eq!(out[0][0].len(), 203);
        assert_eq!(&out[0][0].data()[200..], &[9, 8, 7]);
    }

    #[test]
    fn unstrip_past_the_headroom_brings_back_the_stripped_header() {
        // Ethernet (dst 00:11:22:33:44:55, src 66:77:88:99:aa:bb, IPv4) and 4 bytes of IP.
        let eth = [
            0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0x08, 0x00,
        ];
        let mut frame = eth.to_vec();
        frame.extend_from_slice(&[0x45, 0x00, 0x00, 0x14]);
        let mut s = Harness::new(&StripClass, "14", 1, 1);
        let stripped = s.push_bytes(0, &frame).remove(0);
        // 129 more bytes than the 128 + 14 of headroom: the packet moves to a new buffer.
        let mut u = Harness::new(&UnstripClass, "143", 1, 1);
        let out = u.push(0, stripped).remove(0);
        let d = out[0].data();
        assert_eq!(d.len(), 147);
        assert_eq!(&d[129..], &frame[..]);
        assert_eq!(u.read("drops"), "0");
    }

    #[test]
    fn unstrip_drops_a_packet_too_large_to_grow() {
        // Grown by 200 bytes (72 past its headroom) this packet would need a buffer
        // larger than any packet may have.
        let huge = Packet::alloc(packet::MAX_BUFFER - packet::DEFAULT_HEADROOM - 10);
        let mut u = Harness::new(&UnstripClass, "200", 1, 1);
        let out = u.push(
            0,
            vec![Packet::from_slice(&[1]), huge, Packet::from_slice(&[2, 3])],
        );
        let got: Vec<(usize, &[u8])> = out[0].iter().map(|p| (p.len(), &p.data()[200..])).collect();
        assert_eq!(got, vec![(201, &[1u8][..]), (202, &[2, 3][..])]);
        assert_eq!(u.read("drops"), "1");
    }

    #[test]
    fn bad_arguments() {
        assert_eq!(
            build_error(&StripClass, "", 1, 1),
            "e :: Strip: missing mandatory LENGTH argument"
        );
        assert_eq!(
            build_error(&UnstripClass, "-1", 1, 1),
            "e :: Unstrip: LENGTH expects unsigned integer"
        );
        assert_eq!(
            build_error(&StripClass, "1, 2", 1, 1),
            "e :: Strip: too many arguments"
        );
        // The length a review found panicking, and the first one past the bound.
        for too_long in ["4294967295", "65536"] {
            assert_eq!(
                build_error(&UnstripClass, too_long, 1, 1),
                "e :: Unstrip: LENGTH must be at most 65535"
            );
        }
        assert!(build(&UnstripClass, "65535", 1, 1).is_ok());
    }
}
