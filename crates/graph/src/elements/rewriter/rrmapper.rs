//! `RoundRobinIPMapper(PATTERN1, ..., PATTERNn)`: a mapper for the rewriters'
//! `ELEMENTNAME` input spec. Each argument is `SADDR SPORT DADDR DPORT FOUTPUT
//! ROUTPUT` (or a named pattern, `PATNAME FOUTPUT ROUTPUT`); each new flow takes the
//! next pattern in turn, and a pattern that finds no free port or address passes the
//! flow on to the next, as Click's. Configured before the rewriters (Click's
//! `CONFIGURE_PHASE_MAPPER`).

use super::flow::FlowId;
use super::input::{self, InputSpec, Mapper, Resolver};
use super::pattern::Pattern;
use super::patterns::{NoPackets, PatternsSpec};
use crate::args::Args;
use crate::element::*;
use crate::error::ConfigError;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

pub(crate) struct RoundRobinIPMapperClass;

pub(crate) struct RoundRobin {
    patterns: Vec<(Arc<Pattern>, u16, u16)>,
    next: AtomicUsize,
}

impl Mapper for RoundRobin {
    fn rewrite(&self, flow: FlowId, taken: &dyn Fn(FlowId) -> bool) -> Option<(FlowId, u16, u16)> {
        let n = self.patterns.len();
        let start = self.next.load(Ordering::Relaxed) % n;
        for k in 0..n {
            let i = (start + k) % n;
            let (p, f, r) = &self.patterns[i];
            if let Some(rw) = p.rewrite(flow, taken) {
                self.next.store(i + 1, Ordering::Relaxed);
                return Some((rw, *f, *r));
            }
        }
        None
    }
}

pub(crate) struct RoundRobinSpec {
    pub mapper: Arc<RoundRobin>,
}

impl ElementClass for RoundRobinIPMapperClass {
    fn name(&self) -> &'static str {
        "RoundRobinIPMapper"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("0/0")
    }
    fn configure_phase(&self) -> i32 {
        configure_phase::DEFAULT - 1
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let mut resolver = Resolver::default();
        for p in cx.peers_of_class("IPRewriterPatterns") {
            if let Some(s) = spec_as::<PatternsSpec>(p.spec.as_ref()) {
                resolver.patterns.extend(s.patterns.iter().cloned());
            }
        }
        let texts = args.rest();
        if texts.is_empty() {
            return Err(cx.error("no patterns given"));
        }
        let mut patterns = Vec::with_capacity(texts.len());
        let mut errors = Vec::new();
        for (i, t) in texts.iter().enumerate() {
            // Outputs are checked by the rewriter that uses the mapping.
            match input::parse(&format!("pattern {}", t), usize::MAX, false, &resolver) {
                Ok(InputSpec::Pattern(p, f, r)) => patterns.push((p, f, r)),
                Ok(_) => errors.push(cx.error(format!("pattern {}: syntax error", i))),
                Err(m) => errors.push(cx.error(format!("pattern {}: {}", i, m))),
            }
        }
        if let Some(e) = ConfigError::all(errors) {
            return Err(e);
        }
        Ok(Arc::new(RoundRobinSpec {
            mapper: Arc::new(RoundRobin {
                patterns,
                next: AtomicUsize::new(0),
            }),
        }))
    }
}

impl ElementSpec for RoundRobinSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(NoPackets)
    }
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}
