//! `Classifier`, `IPClassifier` and `IPFilter`: classify packets by contents.
//!
//! Patterns are parsed once at configuration time ([`bytes`] for `Classifier`,
//! [`ipexpr`] for the IP pattern language) and compiled into one decision
//! [`program::Program`]; per packet only the program runs. The first matching pattern
//! wins; a packet matching none is dropped.
//!
//! `IPClassifier` and `IPFilter` examine the network header annotation (set by
//! CheckIPHeader, or FromDump with FORCE_IP) and the transport header that follows it;
//! when the annotation is not set, the IP header is taken to start at the data start and
//! the transport header to follow it after IHL*4 bytes.

pub(crate) mod bytes;
pub(crate) mod ipexpr;
pub(crate) mod program;

#[cfg(test)]
mod tests;

use crate::args::Args;
use crate::element::*;
use crate::elements::shared::SharedSettings;
use crate::error::ConfigError;
use ipexpr::Action;
use packet::{Packet, PacketBatch};
use program::{Program, Target, View};
use std::sync::Arc;

/// The regions an IP pattern examines.
#[inline]
fn ip_view(p: &Packet) -> View<'_> {
    let data = p.data();
    match p.network_header() {
        Some(net) => View {
            data,
            net,
            transp: p.transport_header().unwrap_or(&[]),
        },
        None => {
            let ihl = data.first().map_or(0, |b| (b & 0x0F) as usize * 4);
            View {
                data,
                net: data,
                transp: data.get(ihl..).unwrap_or(&[]),
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Offsets from the data start.
    Bytes,
    /// Offsets from the network and transport headers.
    Ip,
}

/// Which of the three classes, for compiling its patterns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Classifier,
    IPClassifier,
    IPFilter,
}

impl Kind {
    fn mode(self) -> Mode {
        match self {
            Kind::Classifier => Mode::Bytes,
            Kind::IPClassifier | Kind::IPFilter => Mode::Ip,
        }
    }

    /// The decision program of a configuration's patterns, for an element with
    /// `noutputs` outputs; or why the patterns are refused.
    fn compile(self, patterns: &[String], noutputs: usize) -> Result<Program, String> {
        Ok(Program::compile(&self.parse(patterns, noutputs)?))
    }

    /// A configuration's patterns as expressions, each with where its matches go.
    fn parse(self, patterns: &[String], noutputs: usize) -> Result<Vec<(program::Expr, Target)>, String> {
        if self != Kind::IPFilter && patterns.len() != noutputs {
            return Err(format!("need {} arguments, one per output port", noutputs));
        }
        let mut compiled = Vec::with_capacity(patterns.len());
        for (slot, pat) in patterns.iter().enumerate() {
            compiled.push(match self {
                Kind::Classifier => (bytes::parse_pattern(slot, pat)?, Target::Out(slot as u32)),
                Kind::IPClassifier => {
                    let (action, e) =
                        ipexpr::parse_filter_pattern(slot, &format!("{} {}", slot, pat), noutputs)?;
                    (e, target(action))
                }
                Kind::IPFilter => {
                    let (action, e) = ipexpr::parse_filter_pattern(slot, pat, noutputs)?;
                    (e, target(action))
                }
            });
        }
        Ok(compiled)
    }
}

/// The program every worker runs, replaced as a whole by a write to `config` (a
/// worker takes the new one at its next batch: each batch is classified by one
/// program, the old or the new).
type SharedProgram = SharedSettings<Arc<Program>>;

struct ClassifierSpec {
    shared: Arc<SharedProgram>,
    kind: Kind,
    noutputs: usize,
}

impl ElementSpec for ClassifierSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        let (generation, program) = self.shared.snapshot();
        let mut e = ClassifierElement {
            shared: self.shared.clone(),
            generation,
            single: None,
            program,
            mode: self.kind.mode(),
        };
        e.single = e.single_test();
        Box::new(e)
    }
    fn handlers(&self) -> Vec<HandlerInfo> {
        vec![HandlerInfo::read("program"), HandlerInfo::write("config")]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        (name == "program").then(|| self.shared.read().unparse())
    }
    fn write_handler(&self, name: &str, value: &str) -> Option<Result<(), String>> {
        (name == "config").then(|| {
            let patterns = Args::new(value).rest();
            let program = Arc::new(self.kind.compile(&patterns, self.noutputs)?);
            self.shared.write(|p| *p = program);
            Ok(())
        })
    }
}

struct ClassifierElement {
    shared: Arc<SharedProgram>,
    /// The generation of the shared program `program` is.
    generation: u64,
    program: Arc<Program>,
    /// The program as one test, when it is that simple.
    single: Option<SingleTest>,
    mode: Mode,
}

impl ClassifierElement {
    fn single_test(&self) -> Option<SingleTest> {
        self.program.single_test().map(|(test, yes, no)| SingleTest {
            test: test.native(),
            base: test.base,
            yes: verdict_of(yes),
            no: verdict_of(no),
        })
    }

    /// Takes the program a write to `config` published.
    #[cold]
    fn reload(&mut self) {
        (self.generation, self.program) = self.shared.snapshot();
        self.single = self.single_test();
    }
}

/// A program that is one test, prepared once per worker for the per-packet loop.
#[derive(Clone, Copy)]
struct SingleTest {
    test: program::NativeTest,
    base: program::Base,
    /// The verdicts for a match and a mismatch.
    yes: u8,
    no: u8,
}

impl Element for ClassifierElement {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        if self.shared.generation() != self.generation {
            self.reload();
        }
        let prog = &*self.program;
        if out.len() >= crate::element::DROP as usize {
            for p in batch.drain() {
                let port = match self.mode {
                    Mode::Bytes => prog.run(&View {
                        data: p.data(),
                        net: &[],
                        transp: &[],
                    }),
                    Mode::Ip => prog.run(&ip_view(&p)),
                };
                if let Some(port) = port {
                    out.push(port as usize, p);
                }
            }
            return;
        }
        if let Some(single) = &self.single {
            let SingleTest { test, base, yes, no } = *single;
            return match self.mode {
                Mode::Bytes => route_single_bytes(out, batch, *single),
                Mode::Ip => route_single(out, batch, yes, no, |p| {
                    let v = ip_view(p);
                    test.eval_on(match base {
                        program::Base::Data => v.data,
                        program::Base::Net => v.net,
                        program::Base::Transp => v.transp,
                    })
                }),
            };
        }
        match self.mode {
            Mode::Bytes => out.route_each(batch, |p| {
                let v = View {
                    data: p.data(),
                    net: &[],
                    transp: &[],
                };
                verdict(prog.run(&v))
            }),
            Mode::Ip => out.route_each(batch, |p| verdict(prog.run(&ip_view(p)))),
        }
    }
}

/// [`route_single`] for a `Classifier` test on the data: a function of its own, so
/// its loop keeps the test's offset, mask and value in registers.
#[inline(never)]
fn route_single_bytes(out: &mut Outputs<'_>, batch: &mut PacketBatch, single: SingleTest) {
    let SingleTest { test, yes, no, .. } = single;
    route_single(out, batch, yes, no, move |p| test.eval_on(p.data()))
}

/// Routes by one test: `yes` for the packets that match, `no` for the others. The
/// usual single test sends one answer to output 0 (`12/0800, -`): the batch is then
/// scanned for the other answer only.
#[inline(always)]
fn route_single(
    out: &mut Outputs<'_>,
    batch: &mut PacketBatch,
    yes: u8,
    no: u8,
    matches: impl Fn(&Packet) -> bool + Copy,
) {
    let verdict = |p: &Packet| if matches(p) { yes } else { no };
    match (yes, no) {
        (0, 0) => out.push_batch(0, batch),
        (0, _) => route_mostly_zero(out, batch, matches, verdict),
        (_, 0) => route_mostly_zero(out, batch, |p| !matches(p), verdict),
        _ => out.route_each(batch, |p| verdict(p)),
    }
}

/// [`Outputs::route_each`] for a decision that sends nearly every packet to output 0
/// (a router's IP path): the batch is scanned with `to_zero` only until a packet goes
/// elsewhere, with no per-packet verdict kept, and passes on whole when none does.
/// From the first packet that does not go to output 0, the rest is routed packet by
/// packet by `verdict` (which must agree with `to_zero`).
#[inline(always)]
fn route_mostly_zero(
    out: &mut Outputs<'_>,
    batch: &mut PacketBatch,
    to_zero: impl Fn(&Packet) -> bool,
    verdict: impl Fn(&Packet) -> u8,
) {
    match batch.iter().position(|p| !to_zero(p)) {
        None => out.push_batch(0, batch),
        Some(first) => route_from(out, batch, first, verdict),
    }
}

/// The rest of [`route_mostly_zero`]: packets before `first` go to output 0.
#[cold]
#[inline(never)]
fn route_from(out: &mut Outputs<'_>, batch: &mut PacketBatch, first: usize, verdict: impl Fn(&Packet) -> u8) {
    for (i, p) in batch.drain().enumerate() {
        let v = if i < first { 0 } else { verdict(&p) };
        if v != crate::element::DROP {
            out.push(v as usize, p);
        }
    }
}

/// A final target as a [`Outputs::route_each`] verdict.
fn verdict_of(t: Target) -> u8 {
    verdict(match t {
        Target::Out(p) => Some(p),
        _ => None,
    })
}

/// A program's answer as a [`Outputs::route_each`] verdict (for fewer than 255
/// outputs; `push` routes packet by packet beyond that).
#[inline]
fn verdict(port: Option<u32>) -> u8 {
    match port {
        Some(p) if p < crate::element::DROP as u32 => p as u8,
        _ => crate::element::DROP,
    }
}

fn spec(kind: Kind, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
    let program = kind.compile(&args.rest(), cx.noutputs).map_err(|e| cx.error(e))?;
    Ok(Arc::new(ClassifierSpec {
        shared: Arc::new(SharedSettings::new(Arc::new(program))),
        kind,
        noutputs: cx.noutputs,
    }))
}

/// `Classifier(PATTERN_1, ..., PATTERN_N)`: byte patterns, one output per pattern.
pub struct ClassifierClass;

impl ElementClass for ClassifierClass {
    fn name(&self) -> &'static str {
        "Classifier"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/-")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        spec(Kind::Classifier, args, cx)
    }
}

/// `IPClassifier(PATTERN_1, ..., PATTERN_N)`: tcpdump-like patterns, one output each.
pub struct IPClassifierClass;

impl ElementClass for IPClassifierClass {
    fn name(&self) -> &'static str {
        "IPClassifier"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/-")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        spec(Kind::IPClassifier, args, cx)
    }
}

/// `IPFilter(ACTION_1 PATTERN_1, ..., ACTION_N PATTERN_N)`: actions `allow` (output
/// 0), `deny`/`drop`, or an output number.
pub struct IPFilterClass;

impl ElementClass for IPFilterClass {
    fn name(&self) -> &'static str {
        "IPFilter"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/-")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        spec(Kind::IPFilter, args, cx)
    }
}

fn target(a: Action) -> Target {
    match a {
        Action::Output(p) => Target::Out(p),
        Action::Drop => Target::Drop,
    }
}
