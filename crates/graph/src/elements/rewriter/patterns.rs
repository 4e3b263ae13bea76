//! `IPRewriterPatterns(NAME PATTERN, ...)`: named patterns that the rewriters' input
//! specs use as `pattern NAME FOUTPUT ROUTPUT`, sharing one pattern (and its port or
//! address allocation) between specs and elements. Configured before the rewriters
//! (Click's `CONFIGURE_PHASE_PATTERNS`).

use super::pattern::Pattern;
use crate::args::Args;
use crate::element::*;
use crate::error::ConfigError;
use packet::PacketBatch;
use std::sync::Arc;

pub(crate) struct IPRewriterPatternsClass;

pub(crate) struct PatternsSpec {
    pub patterns: Vec<(String, Arc<Pattern>)>,
}

impl ElementClass for IPRewriterPatternsClass {
    fn name(&self) -> &'static str {
        "IPRewriterPatterns"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("0/0")
    }
    fn configure_phase(&self) -> i32 {
        configure_phase::INFO
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let mut patterns: Vec<(String, Arc<Pattern>)> = Vec::new();
        let mut errors = Vec::new();
        for text in args.rest() {
            let words: Vec<&str> = text.split_whitespace().collect();
            let Some((&name, rest)) = words.split_first() else {
                continue;
            };
            let taken = patterns.iter().any(|(n, _)| n == name)
                || cx.peers_of_class("IPRewriterPatterns").any(|p| {
                    spec_as::<PatternsSpec>(p.spec.as_ref())
                        .is_some_and(|s| s.patterns.iter().any(|(n, _)| n == name))
                });
            if taken {
                errors.push(cx.error(format!("pattern name '{}' has already been defined", name)));
                continue;
            }
            let parsed = if rest.len() == 2 {
                Pattern::parse_addresses(rest)
            } else {
                Pattern::parse(rest)
            };
            match parsed {
                Ok(p) => patterns.push((name.to_string(), Arc::new(p))),
                Err(m) => errors.push(cx.error(format!("{}: {}", name, m))),
            }
        }
        if let Some(e) = ConfigError::all(errors) {
            return Err(e);
        }
        Ok(Arc::new(PatternsSpec { patterns }))
    }
}

impl ElementSpec for PatternsSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(NoPackets)
    }
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

/// An element with no ports.
pub(crate) struct NoPackets;

impl Element for NoPackets {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, _out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        batch.clear();
    }
}
