//! Helpers to drive one element outside a router, for unit tests of the library.

use crate::args::Args;
use crate::element::*;
use crate::error::{ConfigError, Landmark};
use packet::{Packet, PacketBatch};
use std::path::Path;
use std::sync::Arc;

/// Configures `class` with `config` and the given port counts, and commits it, as the
/// router would.
pub fn build(
    class: &dyn ElementClass,
    config: &str,
    ninputs: usize,
    noutputs: usize,
) -> Result<Arc<dyn ElementSpec>, ConfigError> {
    let spec = build_staged(class, config, ninputs, noutputs)?;
    spec.commit()
        .map_err(|e| ConfigError::at(&Landmark::unknown(), format!("e :: {}: {}", class.name(), e)))?;
    Ok(spec)
}

/// A router of Click text `text` with every class of the library, one worker, file
/// names relative to the working directory.
pub fn router(text: &str) -> Result<crate::router::RouterSpec, ConfigError> {
    let flat = crate::lang::parse(text, "t.click", &Default::default())?;
    crate::router::RouterSpec::build(
        &flat,
        &crate::registry::Registry::with_library(),
        Path::new("."),
        1,
    )
}

/// [`build`] without the commit, as `hotconfig` builds a configuration that may take
/// over a running one's state first ([`ElementSpec::take_state`]).
pub fn build_staged(
    class: &dyn ElementClass,
    config: &str,
    ninputs: usize,
    noutputs: usize,
) -> Result<Arc<dyn ElementSpec>, ConfigError> {
    let lm = Landmark::unknown();
    let cx = BuildContext {
        name: "e",
        class: class.name(),
        landmark: &lm,
        ninputs,
        noutputs,
        base_dir: Path::new("."),
        workers: 1,
        peers: Default::default(),
    };
    let mut args = Args::new(config);
    class.build(&mut args, &cx)
}

/// The error message `class` gives for `config` (panics if it is accepted).
pub fn build_error(class: &dyn ElementClass, config: &str, ninputs: usize, noutputs: usize) -> String {
    match build(class, config, ninputs, noutputs) {
        Ok(_) => panic!("configuration {:?} was accepted", config),
        Err(e) => e.message,
    }
}

/// One worker's instance of a configured element plus its output batches.
pub struct Harness {
    pub spec: Arc<dyn ElementSpec>,
    pub element: Box<dyn Element>,
    outs: Vec<PacketBatch>,
    stop: StopFlag,
}

impl Harness {
    pub fn new(class: &dyn ElementClass, config: &str, ninputs: usize, noutputs: usize) -> Harness {
        let spec = build(class, config, ninputs, noutputs).unwrap_or_else(|e| panic!("{}", e));
        Harness::of(spec, noutputs)
    }

    /// The element built but not committed: its output files keep temporary names
    /// until the test calls `spec.commit()` (or it takes a running one's state).
    pub fn staged(class: &dyn ElementClass, config: &str, ninputs: usize, noutputs: usize) -> Harness {
        let spec = build_staged(class, config, ninputs, noutputs).unwrap_or_else(|e| panic!("{}", e));
        Harness::of(spec, noutputs)
    }

    /// Worker 0's instance of `spec` (built with [`build_staged`], say, and given a
    /// replaced element's state first).
    pub fn of(spec: Arc<dyn ElementSpec>, noutputs: usize) -> Harness {
        let element = spec.instantiate(WorkerInfo { index: 0, count: 1 });
        Harness {
            spec,
            element,
            outs: (0..noutputs).map(|_| PacketBatch::new()).collect(),
            stop: StopFlag::new(),
        }
    }

    /// Another worker's instance of the same configured element: handler state and
    /// anything else the spec shares is shared with this one.
    pub fn another_worker(&self) -> Harness {
        Harness {
            spec: self.spec.clone(),
            element: self.spec.instantiate(WorkerInfo { index: 1, count: 2 }),
            outs: (0..self.outs.len()).map(|_| PacketBatch::new()).collect(),
            stop: StopFlag::new(),
        }
    }

    /// Pushes `pkts` as one batch into input `port`; returns the packets that came out
    /// of each output, in order.
    pub fn push(&mut self, port: usize, pkts: Vec<Packet>) -> Vec<Vec<Packet>> {
        self.push_in(port, pkts, None)
    }

    /// [`Harness::push`] in a pass whose clock reads `now` (TSC ticks), for elements
    /// with timers or timeouts.
    pub fn push_at(&mut self, port: usize, pkts: Vec<Packet>, now: u64) -> Vec<Vec<Packet>> {
        self.push_in(port, pkts, Some(now))
    }

    fn push_in(&mut self, port: usize, pkts: Vec<Packet>, now: Option<u64>) -> Vec<Vec<Packet>> {
        let mut b: PacketBatch = pkts.into_iter().collect();
        let w = WorkerInfo { index: 0, count: 1 };
        let mut cx = match now {
            Some(now) => Context::at(w, &self.stop, now),
            None => Context::new(w, &self.stop),
        };
        let mut outs = Outputs::for_input(&mut self.outs, &b);
        self.element.push(port, &mut b, &mut outs, &mut cx);
        assert!(
            outs.passes() || b.is_empty(),
            "element left packets in its input batch"
        );
        outs.settle(&mut b);
        self.take_outputs()
    }

    /// Pushes one packet built from `bytes`; returns what came out of each output.
    pub fn push_bytes(&mut self, port: usize, bytes: &[u8]) -> Vec<Vec<Packet>> {
        self.push(port, vec![Packet::from_slice(bytes)])
    }

    /// Runs a source once; returns its status and what came out of each output.
    pub fn run(&mut self) -> (TaskStatus, Vec<Vec<Packet>>) {
        let mut cx = Context::new(WorkerInfo { index: 0, count: 1 }, &self.stop);
        let st = self.element.run(&mut Outputs::new(&mut self.outs), &mut cx);
        (st, self.take_outputs())
    }

    /// Whether the element asked the router to stop.
    pub fn stop_requested(&self) -> bool {
        self.stop.is_requested()
    }

    pub fn read(&self, handler: &str) -> String {
        self.spec
            .read_handler(handler)
            .unwrap_or_else(|| panic!("no read handler {}", handler))
    }

    /// A read handler that takes a parameter (as `lookup ADDR`).
    pub fn read_with(&self, handler: &str, param: &str) -> Result<String, String> {
        self.spec
            .read_handler_with(handler, param)
            .unwrap_or_else(|| panic!("no read handler {} with a parameter", handler))
    }

    pub fn write(&self, handler: &str, value: &str) -> Result<(), String> {
        self.spec
            .write_handler(handler, value)
            .unwrap_or_else(|| panic!("no write handler {}", handler))
    }

    fn take_outputs(&mut self) -> Vec<Vec<Packet>> {
        self.outs.iter_mut().map(|b| b.drain().collect()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elements::discard::DiscardClass;

    #[test]
    fn discard_counts_and_drops() {
        let mut h = Harness::new(&DiscardClass, "", 1, 0);
        let out = h.push(0, vec![Packet::from_slice(&[1]), Packet::from_slice(&[2])]);
        assert!(out.is_empty());
        assert_eq!(h.read("count"), "2");
        h.write("reset_counts", "").unwrap();
        assert_eq!(h.read("count"), "0");
        assert_eq!(
            build_error(&DiscardClass, "1", 1, 0),
            "e :: Discard: too many arguments"
        );
    }
}
