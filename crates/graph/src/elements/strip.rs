//! `Strip(LENGTH)` and `Unstrip(LENGTH)`: remove or restore bytes at the front of each
//! packet, as Click's elements of the same names.

use crate::args::Args;
use crate::element::*;
use crate::error::ConfigError;
use packet::{Packet, PacketBatch};
use std::sync::Arc;

pub struct StripClass;
pub struct UnstripClass;

fn length(args: &mut Args, cx: &BuildContext) -> Result<usize, ConfigError> {
    let n = args.required::<u32>("LENGTH").map_err(|e| cx.error(e))?;
    args.finish().map_err(|e| cx.error(e))?;
    Ok(n as usize)
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
            n: length(args, cx)?,
            unstrip: false,
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
        Ok(Arc::new(StripSpec {
            n: length(args, cx)?,
            unstrip: true,
        }))
    }
}

struct StripSpec {
    n: usize,
    unstrip: bool,
}

impl ElementSpec for StripSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(Strip {
            n: self.n,
            unstrip: self.unstrip,
        })
    }
}

struct Strip {
    n: usize,
    unstrip: bool,
}

impl Element for Strip {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        if self.unstrip {
            // Moves the data start back into the headroom: the bytes a Strip removed
            // reappear (Click's `push`).
            for p in batch.iter_mut() {
                p.push(self.n);
            }
        } else {
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
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{build_error, Harness};

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
    }
}
