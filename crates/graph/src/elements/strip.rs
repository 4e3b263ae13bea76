//! `Strip(LENGTH)` and `Unstrip(LENGTH)`: remove or restore bytes at the front of each
//! packet, as Click's elements of the same names.

use crate::args::Args;
use crate::element::*;
use crate::error::ConfigError;
use packet::PacketBatch;
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
            // Click's `pull`: a packet shorter than LENGTH becomes empty.
            for p in batch.iter_mut() {
                p.pull(self.n);
            }
        }
        out.push_batch(0, batch);
    }
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
