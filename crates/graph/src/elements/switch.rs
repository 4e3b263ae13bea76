//! `Tee([N])`, `HashSwitch(OFFSET, LENGTH)` and `RoundRobinSwitch`: elements that
//! spread packets over their outputs, as Click's elements of the same names.

use crate::args::Args;
use crate::element::*;
use crate::error::ConfigError;
use packet::PacketBatch;
use std::sync::Arc;

/// `Tee([N])`: every packet goes to every output. As in Click, outputs 0 to n-2 get
/// copies and the last output gets the original; each output sees the batch's
/// packets in their order.
pub struct TeeClass;

impl ElementClass for TeeClass {
    fn name(&self) -> &'static str {
        "Tee"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1-")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let n = args.positional::<u32>("N").map_err(|e| cx.error(e))?;
        args.finish().map_err(|e| cx.error(e))?;
        if let Some(n) = n {
            if n as usize != cx.noutputs {
                // Click's wording, which names the output count twice.
                return Err(cx.error(format!("{} outputs implies {} arms", cx.noutputs, cx.noutputs)));
            }
        }
        Ok(Arc::new(TeeSpec))
    }
}

struct TeeSpec;

impl ElementSpec for TeeSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(Tee)
    }
}

struct Tee;

impl Element for Tee {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        let n = out.len();
        if n == 0 {
            batch.clear();
            return;
        }
        for i in 0..n - 1 {
            for p in batch.iter() {
                out.push(i, p.clone());
            }
        }
        out.push_batch(n - 1, batch);
    }
}

/// `HashSwitch(OFFSET, LENGTH)`: the output is Click's hash of LENGTH bytes at OFFSET,
/// so a packet takes the same output number it takes in Click: the bytes are summed
/// into `d`; with 2, 4 or 8 outputs the output is `(d ^ (d >> 4)) & (n - 1)`,
/// otherwise `d % n`. Packets too short for the field go to output 0.
pub struct HashSwitchClass;

impl ElementClass for HashSwitchClass {
    fn name(&self) -> &'static str {
        "HashSwitch"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1-")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let offset = args.required::<u32>("OFFSET").map_err(|e| cx.error(e))?;
        let length = args.required::<u32>("LENGTH").map_err(|e| cx.error(e))?;
        args.finish().map_err(|e| cx.error(e))?;
        if length == 0 {
            return Err(cx.error("length must be > 0"));
        }
        Ok(Arc::new(HashSwitchSpec {
            offset: offset as usize,
            length: length as usize,
        }))
    }
}

struct HashSwitchSpec {
    offset: usize,
    length: usize,
}

impl ElementSpec for HashSwitchSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(HashSwitch {
            offset: self.offset,
            length: self.length,
        })
    }
}

struct HashSwitch {
    offset: usize,
    length: usize,
}

/// Click's HashSwitch output for `field` among `n` outputs.
fn hash_output(field: &[u8], n: usize) -> usize {
    let d: usize = field.iter().map(|&b| b as usize).sum();
    if matches!(n, 2 | 4 | 8) {
        (d ^ (d >> 4)) & (n - 1)
    } else {
        d % n
    }
}

impl Element for HashSwitch {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        let n = out.len().max(1);
        let end = self.offset + self.length;
        for p in batch.drain() {
            let port = match p.data().get(self.offset..end) {
                Some(field) => hash_output(field, n),
                None => 0,
            };
            out.push(port, p);
        }
    }
}

/// `RoundRobinSwitch`: packets go to outputs 0, 1, ..., n-1, 0, ... in turn. Each
/// worker keeps its own position (Click's multithreaded build also only promises a
/// best-effort rotation), so with several workers the rotation holds per worker.
pub struct RoundRobinSwitchClass;

impl ElementClass for RoundRobinSwitchClass {
    fn name(&self) -> &'static str {
        "RoundRobinSwitch"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1-")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        args.finish().map_err(|e| cx.error(e))?;
        Ok(Arc::new(RoundRobinSwitchSpec))
    }
}

struct RoundRobinSwitchSpec;

impl ElementSpec for RoundRobinSwitchSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(RoundRobinSwitch { next: 0 })
    }
}

struct RoundRobinSwitch {
    next: usize,
}

impl Element for RoundRobinSwitch {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        let n = out.len().max(1);
        for p in batch.drain() {
            if self.next >= n {
                self.next = 0;
            }
            out.push(self.next, p);
            self.next += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{build_error, Harness};
    use packet::Packet;

    fn firsts(v: &[Packet]) -> Vec<u8> {
        v.iter().map(|p| p.data()[0]).collect()
    }

    #[test]
    fn tee_copies_to_every_output_in_order() {
        let mut h = Harness::new(&TeeClass, "", 1, 3);
        let out = h.push(
            0,
            vec![Packet::from_slice(&[1, 10]), Packet::from_slice(&[2, 20])],
        );
        for o in &out {
            assert_eq!(o.len(), 2);
            assert_eq!(o[0].data(), &[1, 10]);
            assert_eq!(o[1].data(), &[2, 20]);
        }
        let mut h = Harness::new(&TeeClass, "2", 1, 2);
        let out = h.push_bytes(0, &[5]);
        assert_eq!((out[0].len(), out[1].len()), (1, 1));
    }

    #[test]
    fn tee_copies_are_independent() {
        let mut h = Harness::new(&TeeClass, "", 1, 2);
        let mut out = h.push_bytes(0, &[1, 2]);
        out[0][0].data_mut()[0] = 99;
        assert_eq!(out[1][0].data(), &[1, 2]);
    }

    #[test]
    fn tee_arms_must_match_outputs() {
        assert_eq!(
            build_error(&TeeClass, "3", 1, 2),
            "e :: Tee: 2 outputs implies 2 arms"
        );
        assert_eq!(
            build_error(&TeeClass, "x", 1, 2),
            "e :: Tee: N expects unsigned integer"
        );
    }

    #[test]
    fn hash_switch_picks_clicks_output() {
        // IPv4 destination hash, HashSwitch(16, 4), as in Click's documentation.
        let mut ip = [0u8; 20];
        ip[16..20].copy_from_slice(&[10, 0, 0, 1]);
        // d = 11: with 4 outputs (11 ^ 0) & 3 = 3; with 3 outputs 11 % 3 = 2.
        let mut h = Harness::new(&HashSwitchClass, "16, 4", 1, 4);
        let out = h.push_bytes(0, &ip);
        assert_eq!(out[3].len(), 1);
        let mut h = Harness::new(&HashSwitchClass, "16, 4", 1, 3);
        let out = h.push_bytes(0, &ip);
        assert_eq!(out[2].len(), 1);
        // d = 192+168+1+7 = 368 = 0x170: (0x170 ^ 0x17) & 7 = 0x167 & 7 = 7.
        ip[16..20].copy_from_slice(&[192, 168, 1, 7]);
        let mut h = Harness::new(&HashSwitchClass, "OFFSET 16, LENGTH 4", 1, 8);
        let out = h.push_bytes(0, &ip);
        assert_eq!(out[7].len(), 1);
        // Too short for the field: output 0.
        let out = h.push_bytes(0, &ip[..19]);
        assert_eq!(out[0].len(), 1);
    }

    #[test]
    fn hash_switch_arguments() {
        assert_eq!(
            build_error(&HashSwitchClass, "16, 0", 1, 2),
            "e :: HashSwitch: length must be > 0"
        );
        assert_eq!(
            build_error(&HashSwitchClass, "16", 1, 2),
            "e :: HashSwitch: missing mandatory LENGTH argument"
        );
    }

    #[test]
    fn round_robin_rotates() {
        let mut h = Harness::new(&RoundRobinSwitchClass, "", 1, 3);
        let out = h.push(0, (0..5).map(|i| Packet::from_slice(&[i])).collect());
        assert_eq!(firsts(&out[0]), vec![0, 3]);
        assert_eq!(firsts(&out[1]), vec![1, 4]);
        assert_eq!(firsts(&out[2]), vec![2]);
        // The rotation continues across batches.
        let out = h.push_bytes(0, &[5]);
        assert_eq!(firsts(&out[2]), vec![5]);
        assert_eq!(
            build_error(&RoundRobinSwitchClass, "1", 1, 2),
            "e :: RoundRobinSwitch: too many arguments"
        );
    }
}
