//! The element interface.
//!
//! An element class ([`ElementClass`]) turns a configuration string into an
//! [`ElementSpec`]: the configured element, shared by every worker, which owns the
//! element's handlers and any state that must be seen router-wide (counters are summed
//! over workers, route tables are shared). Each worker then gets its own [`Element`]
//! instance from [`ElementSpec::instantiate`] and pushes batches through it without
//! locks.

use crate::args::{split_args, Args};
use crate::error::{ConfigError, Landmark};
use packet::{Packet, PacketBatch, Timestamp};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What an element class allows for its ports, in Click's `port_count` syntax:
/// `"1/1"`, `"1/1-2"`, `"1/-"`, `"-/-"`, `"0/1"`, `"1-/="` (outputs equal inputs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortCount {
    pub min_in: usize,
    pub max_in: usize,
    pub min_out: usize,
    pub max_out: usize,
    pub outputs_equal_inputs: bool,
}

impl PortCount {
    /// Parses Click's `port_count` syntax. Panics on a malformed literal: port counts
    /// are constants written by element authors, parsed whenever a router is built
    /// with their class.
    pub const fn parse(s: &'static str) -> PortCount {
        let b = s.as_bytes();
        let mut i = 0;
        let (min_in, max_in, ni) = parse_range(b, i);
        i = ni;
        assert!(i < b.len() && b[i] == b'/', "port count needs IN/OUT");
        i += 1;
        if i < b.len() && b[i] == b'=' {
            return PortCount {
                min_in,
                max_in,
                min_out: min_in,
                max_out: max_in,
                outputs_equal_inputs: true,
            };
        }
        let (min_out, max_out, ni) = parse_range(b, i);
        assert!(ni == b.len(), "trailing characters in port count");
        PortCount {
            min_in,
            max_in,
            min_out,
            max_out,
            outputs_equal_inputs: false,
        }
    }

    pub fn describe_inputs(&self) -> String {
        describe(self.min_in, self.max_in)
    }

    pub fn describe_outputs(&self) -> String {
        if self.outputs_equal_inputs {
            return "as many as inputs".to_string();
        }
        describe(self.min_out, self.max_out)
    }
}

fn describe(min: usize, max: usize) -> String {
    if min == max {
        format!("{}", min)
    } else if max == usize::MAX {
        format!("{} or more", min)
    } else {
        format!("{} to {}", min, max)
    }
}

const fn parse_num(b: &[u8], mut i: usize) -> (Option<usize>, usize) {
    let start = i;
    let mut n = 0usize;
    while i < b.len() && b[i].is_ascii_digit() {
        n = n * 10 + (b[i] - b'0') as usize;
        i += 1;
    }
    if i == start {
        (None, i)
    } else {
        (Some(n), i)
    }
}

const fn parse_range(b: &[u8], i: usize) -> (usize, usize, usize) {
    if i < b.len() && b[i] == b'-' {
        return (0, usize::MAX, i + 1);
    }
    let (lo, i) = parse_num(b, i);
    let lo = match lo {
        Some(v) => v,
        None => panic!("port count needs a number"),
    };
    if i < b.len() && b[i] == b'-' {
        let (hi, j) = parse_num(b, i + 1);
        match hi {
            Some(h) => (lo, h, j),
            None => (lo, usize::MAX, j),
        }
    } else {
        (lo, lo, i)
    }
}

/// What an element class sees while it is configured.
pub struct BuildContext<'a> {
    /// The element's name (`Class@N` for anonymous elements).
    pub name: &'a str,
    pub class: &'a str,
    pub landmark: &'a Landmark,
    /// Ports actually used by the configuration's connections.
    pub ninputs: usize,
    pub noutputs: usize,
    /// Directory relative file names are resolved against: the working directory,
    /// as in Click, unless the embedding program says otherwise.
    pub base_dir: &'a Path,
    /// Number of workers the router will run.
    pub workers: usize,
    /// The elements configured before this one (see [`ElementClass::configure_phase`]).
    pub peers: Peers<'a>,
}

/// Click's configure phases ([`ElementClass::configure_phase`]): elements of a lower
/// phase are configured first, those of one phase in declaration order.
pub mod configure_phase {
    /// Elements that give information to others (Click's `CONFIGURE_PHASE_INFO`):
    /// IPRewriterPatterns.
    pub const INFO: i32 = 20;
    /// Every element unless it says otherwise (Click's `CONFIGURE_PHASE_DEFAULT`).
    pub const DEFAULT: i32 = 100;
}

/// An element configured before the one being configured, as [`BuildContext::peer`]
/// finds it.
pub struct Peer {
    pub name: String,
    pub class: &'static str,
    pub spec: Arc<dyn ElementSpec>,
}

/// The elements already configured, which an element configured later may look at
/// (Click's `cp_element` at configure time): IPRewriter finds its IPRewriterPatterns
/// and mappers this way. Empty outside a router.
#[derive(Clone, Copy, Default)]
pub struct Peers<'a> {
    list: &'a [Peer],
}

impl<'a> Peers<'a> {
    pub fn new(list: &'a [Peer]) -> Peers<'a> {
        Peers { list }
    }
}

impl<'a> BuildContext<'a> {
    /// Resolves a file name given in a configuration against `base_dir`; `-`
    /// (standard input or output) and absolute names are kept as they are.
    pub fn resolve_path(&self, name: &str) -> std::path::PathBuf {
        let p = Path::new(name);
        if name == "-" || p.is_absolute() {
            p.to_path_buf()
        } else {
            self.base_dir.join(p)
        }
    }

    /// The element called `name` among those configured before this one, the name
    /// resolved as Click's `cp_element` does: inside this element's compound first
    /// (`c/name` for an element `c/x`), then in each enclosing one, then at the top.
    pub fn peer(&self, name: &str) -> Option<&'a Peer> {
        let list = self.peers.list;
        let mut scope = self.name;
        while let Some(cut) = scope.rfind('/') {
            scope = &scope[..cut];
            let full = format!("{}/{}", scope, name);
            if let Some(p) = list.iter().find(|p| p.name == full) {
                return Some(p);
            }
        }
        list.iter().find(|p| p.name == name)
    }

    /// Every element configured before this one, in the order they were configured.
    pub fn peers(&self) -> &'a [Peer] {
        self.peers.list
    }

    /// The elements of class `class` configured before this one, in the order they
    /// were configured.
    pub fn peers_of_class(&self, class: &'a str) -> impl Iterator<Item = &'a Peer> + 'a {
        self.peers.list.iter().filter(move |p| p.class == class)
    }

    /// An error about this element's configuration, placed at its declaration, worded
    /// as Click words configuration errors.
    pub fn error(&self, msg: impl std::fmt::Display) -> ConfigError {
        ConfigError::at(self.landmark, format!("{} :: {}: {}", self.name, self.class, msg))
    }
}

/// A class of elements, as registered under its Click name.
pub trait ElementClass: Send + Sync {
    /// The class name, as in Click (`Counter`, `IPClassifier`).
    fn name(&self) -> &'static str;
    /// Ports this class accepts, in Click's syntax.
    fn port_count(&self) -> PortCount;
    /// Configures one element. Errors name the element (use [`BuildContext::error`]).
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError>;
    /// When this class's elements are configured, as Click's `configure_phase`:
    /// elements of lower phases first ([`configure_phase`]), so that an element can
    /// find those it names among [`BuildContext::peers`]. The router's elements stay
    /// in declaration order whatever the phases.
    fn configure_phase(&self) -> i32 {
        configure_phase::DEFAULT
    }
}

/// One worker's identity, given to [`ElementSpec::instantiate`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkerInfo {
    pub index: usize,
    pub count: usize,
}

/// A configured element, shared by all workers.
pub trait ElementSpec: Send + Sync {
    /// The per-worker instance. Elements tied to one resource (a file read) return a
    /// working instance on worker 0 only and an idle one elsewhere.
    fn instantiate(&self, worker: WorkerInfo) -> Box<dyn Element>;

    /// True if every instance is a pass-through element ([`Element::is_pass_through`]),
    /// so the router can refuse a cycle made only of them, in which packets would
    /// circle for ever without an element ever being called.
    fn is_pass_through(&self) -> bool {
        false
    }

    /// Names of this element's own handlers (the router adds Click's standard
    /// `name`, `class`, `config`, `ports`, `handlers`).
    fn handlers(&self) -> Vec<HandlerInfo> {
        Vec::new()
    }

    /// Reads handler `name`. `None` if there is no such readable handler.
    fn read_handler(&self, _name: &str) -> Option<String> {
        None
    }

    /// True if the element answers handlers of any name, beyond those it lists (a
    /// PROXY Script): every name is then readable and writable.
    fn answers_any_handler(&self) -> bool {
        false
    }

    /// Reads handler `name` (with `param`, if given) of an element whose handlers call
    /// other handlers of the router (a Script). Tried before the other read handlers.
    fn read_handler_in(
        &self,
        _name: &str,
        _param: Option<&str>,
        _router: &crate::router::RouterSpec,
    ) -> Option<Result<String, String>> {
        None
    }

    /// Writes handler `name` of an element whose handlers call other handlers of the
    /// router (a Script). Tried before [`ElementSpec::write_handler`].
    fn write_handler_in(
        &self,
        _name: &str,
        _value: &str,
        _router: &crate::router::RouterSpec,
    ) -> Option<Result<(), String>> {
        None
    }

    /// Reads handler `name` with a parameter (Click's read handlers with parameters,
    /// such as a route table's `lookup ADDR`). `None` if there is no such handler.
    fn read_handler_with(&self, _name: &str, _param: &str) -> Option<Result<String, String>> {
        None
    }

    /// Writes handler `name`. `None` if there is no such writable handler; `Some(Err)`
    /// with Click's error text when the value is refused.
    fn write_handler(&self, _name: &str, _value: &str) -> Option<Result<(), String>> {
        None
    }

    /// Called once when the router stops, after every worker has finished: flush files.
    fn cleanup(&self) {}
    /// The configuration became the router's: files the element created under a
    /// temporary name go in place ([`crate::outfile`]). Called once, before the
    /// workers start; `Err` says what could not be done.
    fn commit(&self) -> Result<(), String> {
        Ok(())
    }

    /// The configuration is the router's and every element is committed: an element
    /// whose initialization reads other elements' handlers (a Script's `init`) does
    /// it here, before any packet moves, as Click's `initialize`.
    fn initialize(&self, _router: &crate::router::RouterSpec) {}

    /// This element, for another element that finds it among its
    /// [`BuildContext::peers`] and downcasts it ([`spec_as`]): `Some(self)` for an
    /// element others look at (IPRewriterPatterns, a mapper, a rewriter).
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        None
    }

    /// This element as state a configuration replacing its own may take over
    /// ([`ElementSpec::take_state`]): `Some(self)` for an element that has any.
    fn state(&self) -> Option<&dyn std::any::Any> {
        None
    }
    /// Takes over the state of `old`, the element of the same name and class in the
    /// configuration this one replaces (Click's `take_state`, on a `hotconfig`
    /// write): called once `old`'s workers have stopped and before this one's start.
    /// An element takes nothing from one configured for something else (another
    /// address, another key): true if it took anything.
    fn take_state(&self, _old: &dyn ElementSpec) -> bool {
        false
    }
}

/// `old`'s state as a `T`, if `old` offers state and is one (for
/// [`ElementSpec::take_state`]).
pub fn state_of<T: 'static>(old: &dyn ElementSpec) -> Option<&T> {
    old.state().and_then(|s| s.downcast_ref::<T>())
}

/// `spec` as a `T`, if it offers itself ([`ElementSpec::as_any`]) and is one.
pub fn spec_as<T: 'static>(spec: &dyn ElementSpec) -> Option<&T> {
    spec.as_any().and_then(|s| s.downcast_ref::<T>())
}

/// A handler an element offers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HandlerInfo {
    pub name: &'static str,
    pub read: bool,
    pub write: bool,
    /// The configuration argument a successful write replaces in the element's `config`
    /// (see [`HandlerInfo::reconfiguring`]), or `None` when writing it leaves `config`
    /// as it is.
    pub reconfigures: Option<ConfigArgument>,
}

impl HandlerInfo {
    pub const fn read(name: &'static str) -> HandlerInfo {
        HandlerInfo {
            name,
            read: true,
            write: false,
            reconfigures: None,
        }
    }
    pub const fn write(name: &'static str) -> HandlerInfo {
        HandlerInfo {
            name,
            read: false,
            write: true,
            reconfigures: None,
        }
    }
    pub const fn read_write(name: &'static str) -> HandlerInfo {
        HandlerInfo {
            name,
            read: true,
            write: true,
            reconfigures: None,
        }
    }

    /// This write handler as one of Click's `reconfigure_keyword_handler`s declared
    /// with `"POSITION KEYWORD"`: once a write succeeds, the router puts the written
    /// value into the element's configuration string in place of that argument, so the
    /// standard `config` handler shows it (see [`ConfigArgument::replace_in`]).
    pub const fn reconfiguring(self, position: usize, keyword: &'static str) -> HandlerInfo {
        HandlerInfo {
            reconfigures: Some(ConfigArgument { keyword, position }),
            ..self
        }
    }
}

/// A configuration argument that a handler write replaces: given as `KEYWORD value`, or
/// as the positional argument at `position`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConfigArgument {
    pub keyword: &'static str,
    pub position: usize,
}

impl ConfigArgument {
    /// `config` with this argument set to `value`, as Click's `configuration_handler`
    /// (lib/element.cc) rewrites an element's configuration: every `KEYWORD ...`
    /// argument is removed; if there was none and the argument at `position` is
    /// positional, that argument becomes `value`; otherwise `KEYWORD value` is
    /// appended. The arguments are joined with `", "` (Click's `cp_unargvec`), so
    /// comments and line breaks of the original configuration do not survive.
    pub fn replace_in(&self, config: &str, value: &str) -> String {
        // As the arguments around it: a newline ending a written value is no part of it.
        let value = value.trim();
        let mut args = split_args(config);
        let before = args.len();
        args.retain(|arg| !has_keyword(arg, self.keyword));
        let given_by_keyword = args.len() < before;
        let at = self.position;
        if !given_by_keyword && at < args.len() && !is_keyword_argument(&args[at]) {
            args[at] = value.to_string();
        } else {
            args.push(format!("{} {}", self.keyword, value));
        }
        args.join(", ")
    }
}

/// Whether `arg`, one configuration argument, is `keyword value`.
fn has_keyword(arg: &str, keyword: &str) -> bool {
    // A value that does not parse as a string (bad escapes) still came with the keyword.
    !matches!(Args::new(arg).keyword::<String>(keyword), Ok(None))
}

/// Whether `arg`, one configuration argument, is a keyword argument (`KEYWORD value`)
/// rather than a positional one: [`Args`] hands it out by position only in the second
/// case (asked for a parameter no keyword argument can name). An empty argument is
/// positional, as in Click.
fn is_keyword_argument(arg: &str) -> bool {
    !arg.is_empty() && matches!(Args::new(arg).positional::<String>(""), Ok(None))
}

/// What a source's [`Element::run`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskStatus {
    /// Produced packets; call again soon.
    Busy,
    /// Nothing to do now (waiting for time or input); call again later.
    Idle,
    /// Nothing to do before the time-stamp counter reads this value, except for what
    /// packets pushed into the element bring. The worker may then skip the source in
    /// passes before that time in which another source moved packets; it still runs it
    /// in every pass that moves nothing and in the pass that sees a stop request. (A
    /// `ToDevice` between flush deadlines: polling its timer in every busy pass cost
    /// about 2.5 cycles a packet on the route path.)
    IdleUntil(u64),
    /// Finished what keeps the router running, but still to be called as a source that
    /// only serves (see [`Element::keeps_router_running`]): a Script whose instructions
    /// ended may be run again by a handler and then wait on its timer.
    Released,
    /// Finished for good.
    Done,
}

/// A per-worker element instance.
pub trait Element: Send {
    /// Processes a batch that arrived on input `port`. Every packet must be either
    /// pushed to an output with `out` or dropped; the batch is empty on return as far
    /// as the element is concerned (see [`Outputs::push_batch`]).
    fn push(&mut self, port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, cx: &mut Context<'_>);

    /// For sources: produce packets (a batch at most). Non-sources never get called.
    fn run(&mut self, _out: &mut Outputs<'_>, _cx: &mut Context<'_>) -> TaskStatus {
        TaskStatus::Done
    }

    /// True for elements the worker must poll with [`Element::run`].
    fn is_source(&self) -> bool {
        false
    }

    /// For sources: whether the router runs until this source is done. False for a
    /// source that only serves what other sources bring (an ARPQuerier polled to send
    /// packets it saved when another worker learns their address): once every source
    /// that keeps the router running is done, the worker finishes without waiting for
    /// it.
    fn keeps_router_running(&self) -> bool {
        true
    }

    /// For a source that does not keep the router running (or no longer does, having
    /// said [`TaskStatus::Released`]): whether it has work coming all the same (a
    /// Script's wait that a handler started). A worker whose other sources are done
    /// keeps running while one has. Asked only once no source keeps it running.
    fn is_pending(&self) -> bool {
        false
    }

    /// True if this element, with one input and one output, sends every batch pushed
    /// into it to its output unchanged and keeps no per-worker state (a full-push
    /// `Queue`). The graph then connects its upstream straight to its downstream and
    /// never calls it; its handlers, which live on the spec, are unaffected.
    fn is_pass_through(&self) -> bool {
        false
    }

    /// For sources: what the worker may wait on when this source has had nothing to do
    /// for a while (see [`IdleWait`]). Called when the worker is about to sleep, so a
    /// source may finish work it was holding for more input first (a transmit group
    /// waiting to fill up). The default keeps the worker polling.
    fn idle_wait(&mut self) -> IdleWait {
        IdleWait::Poll
    }
}

/// What an idle source lets its worker do, so a router without traffic sleeps instead
/// of spinning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdleWait {
    /// Keep polling (the source cannot be waited on, or has work pending).
    Poll,
    /// Nothing comes from this source until the descriptor polls readable.
    Readable(std::os::fd::RawFd),
    /// The source has nothing to do until packets are pushed into it.
    Nothing,
}

/// The output ports of an element during one call: one batch per port.
///
/// An element that sends its whole input batch to one port (`push_batch(q, input)`,
/// the usual last line of a one-in-one-out element) does not move it: the batch is
/// marked as passing to port `q` and the graph carries it on as it is. Moving it into
/// the port's batch and back out costs two swaps and a scan of every port per call.
pub struct Outputs<'a> {
    ports: &'a mut [PacketBatch],
    /// The batch the element was called with, compared by address only (null for a
    /// source's `run`).
    input: *const PacketBatch,
    /// The port the input batch passes to whole, untouched, or [`NO_PASS`].
    pass: usize,
    /// Some port's batch may hold packets.
    dirty: bool,
}

/// [`Outputs`]'s `pass` when the input batch does not pass whole to a port.
const NO_PASS: usize = usize::MAX;

impl<'a> Outputs<'a> {
    /// Outputs whose batches take every packet pushed (a source's `run`).
    pub fn new(ports: &'a mut [PacketBatch]) -> Outputs<'a> {
        Outputs {
            ports,
            input: std::ptr::null(),
            pass: NO_PASS,
            dirty: false,
        }
    }

    /// Outputs for a `push` of `input`: pushing all of `input` to an empty port leaves
    /// the packets in `input`; [`Outputs::settle`] (or the graph) moves them on.
    pub fn for_input(ports: &'a mut [PacketBatch], input: &PacketBatch) -> Outputs<'a> {
        Outputs {
            ports,
            input,
            pass: NO_PASS,
            dirty: false,
        }
    }

    /// Number of output ports.
    #[inline]
    pub fn len(&self) -> usize {
        self.ports.len()
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.ports.is_empty()
    }

    /// Emits `p` on `port`. A packet sent to a port that does not exist is dropped
    /// (Click's `checked_output_push`).
    #[inline]
    pub fn push(&mut self, port: usize, p: Packet) {
        if let Some(b) = self.ports.get_mut(port) {
            b.push(p);
            self.dirty = true;
        }
    }

    /// Emits every packet of `batch` on `port`, in order; `batch` is empty afterwards
    /// as far as the element is concerned (it must not touch it again).
    #[inline(always)]
    pub fn push_batch(&mut self, port: usize, batch: &mut PacketBatch) {
        match self.ports.get_mut(port) {
            Some(b) => {
                let is_input = std::ptr::eq(batch, self.input);
                // The passed packets are still in the input: pushing it again would
                // move them to a second port.
                debug_assert!(
                    !(is_input && self.pass != NO_PASS),
                    "an element pushed its input batch twice"
                );
                if is_input && self.pass == NO_PASS && b.is_empty() {
                    self.pass = port;
                } else {
                    b.append(batch);
                    self.dirty = true;
                }
            }
            None => batch.clear(),
        }
    }

    /// Emits packet `i` of `batch` on port `ports[i]`, in order; a packet whose port
    /// does not exist (or that has no entry in `ports`) is dropped.
    #[inline]
    pub fn push_each(&mut self, batch: &mut PacketBatch, ports: &[u32]) {
        // Marked once for the batch: a store per packet is not hoisted out of the loop.
        self.dirty = true;
        batch.distribute_to(self.ports, ports);
    }

    /// The port `input` passes to whole when no other port got a packet: the caller
    /// carries `input` on to that port's destination as it is.
    #[inline]
    pub(crate) fn only_pass(&self) -> Option<usize> {
        (!self.dirty && self.pass != NO_PASS).then_some(self.pass)
    }

    /// Whether the input batch passes whole to a port (with or without other packets
    /// pushed elsewhere).
    #[inline]
    pub(crate) fn passes(&self) -> bool {
        self.pass != NO_PASS
    }

    /// Whether no port got a packet, passed or pushed.
    #[inline]
    pub(crate) fn nothing_out(&self) -> bool {
        !self.dirty && self.pass == NO_PASS
    }

    /// Ends the call: the packets of `input` that pass go into their port's batch,
    /// ahead of any pushed there after them; whatever else is left in `input` is
    /// dropped. Afterwards every port's batch holds exactly what it emitted.
    pub fn settle(&mut self, input: &mut PacketBatch) {
        match self.ports.get_mut(self.pass) {
            Some(b) => {
                std::mem::swap(b, input);
                b.append(input);
                self.pass = NO_PASS;
                self.dirty = true;
            }
            None => input.clear(),
        }
    }
}

/// A per-packet decision for [`Outputs::route_each`]: the output a packet takes, or
/// [`DROP`]. Closures are one; an element whose decision is too large for the
/// compiler to inline on its own implements it on a struct with `#[inline(always)]`,
/// so the per-packet loop makes no call.
pub trait PerPacket {
    fn verdict(&mut self, p: &mut Packet) -> u8;
}

impl<F: FnMut(&mut Packet) -> u8> PerPacket for F {
    #[inline(always)]
    fn verdict(&mut self, p: &mut Packet) -> u8 {
        self(p)
    }
}

/// The verdict of [`Outputs::route_each`] that drops a packet.
pub const DROP: u8 = u8::MAX;

impl Outputs<'_> {
    /// Runs `f` on every packet of `batch`, in place, and sends each packet to the
    /// output `f` returns (or drops it for [`DROP`]), keeping order per output. When
    /// every packet goes to output 0, as most do on a router's main path, the whole
    /// batch moves at once instead of packet by packet.
    #[inline]
    pub fn route_each(&mut self, batch: &mut PacketBatch, f: impl FnMut(&mut Packet) -> u8) {
        self.route_each_by(batch, f)
    }

    /// [`Outputs::route_each`] with the decision given as a [`PerPacket`].
    #[inline]
    pub fn route_each_by(&mut self, batch: &mut PacketBatch, f: impl PerPacket) {
        // Verdicts live in a stack array sized for the batch: most batches are at most
        // the default size, and zeroing 256 bytes per call costs more than the
        // per-packet work of a small batch (8 instructions a packet on the route path).
        if batch.len() <= packet::DEFAULT_BATCH {
            self.route_each_upto::<{ packet::DEFAULT_BATCH }>(batch, f)
        } else {
            self.route_each_upto::<{ packet::MAX_BATCH }>(batch, f)
        }
    }

    /// [`Outputs::route_each`] for a batch of at most `N` packets (packet by packet
    /// beyond that).
    #[inline(always)]
    fn route_each_upto<const N: usize>(&mut self, batch: &mut PacketBatch, mut f: impl PerPacket) {
        if batch.len() > N {
            for mut p in batch.drain() {
                match f.verdict(&mut p) {
                    DROP => drop(p),
                    port => self.push(port as usize, p),
                }
            }
            return;
        }
        // Nearly every batch goes to output 0 whole: run the decisions with nothing
        // recorded until the first packet that does not, and only from there on keep
        // a verdict per packet (a stored byte and an OR per packet less, and no array
        // to clear, in the usual case).
        let pkts = batch.as_mut_slice();
        let n = pkts.len();
        let mut first = 0;
        let mut other = 0u8;
        while first < n {
            other = f.verdict(&mut pkts[first]);
            if other != 0 {
                break;
            }
            first += 1;
        }
        if first == n {
            self.push_batch(0, batch);
            return;
        }
        let mut verdicts = [0u8; N];
        verdicts[first % N] = other;
        for (v, p) in verdicts.iter_mut().zip(pkts.iter_mut()).skip(first + 1) {
            *v = f.verdict(p);
        }
        self.dirty = true;
        // (`batch.len() <= N`: every packet has a verdict.)
        batch.distribute(self.ports, |i, _| match verdicts[i % N] {
            DROP => usize::MAX,
            v => usize::from(v),
        });
    }
}

/// Router-wide stop request, set by an element (a source's `STOP true`, a Counter's
/// `COUNT_CALL`) or by the program running the router (a signal, a time limit).
#[derive(Debug, Default)]
pub struct StopFlag {
    stop: AtomicBool,
    /// The stop was asked for (a source's STOP, the `stop` handler, a worker's panic),
    /// not only the end of a run the driver set ([`StopFlag::end_run`]).
    asked: AtomicBool,
}

impl StopFlag {
    pub fn new() -> StopFlag {
        StopFlag {
            stop: AtomicBool::new(false),
            asked: AtomicBool::new(false),
        }
    }
    /// Asks the router to stop.
    pub fn request(&self) {
        self.asked.store(true, Ordering::Release);
        self.stop.store(true, Ordering::Release);
    }
    /// Ends the workers' run, as the driver does at a time limit or before another
    /// configuration takes over: the workers stop as for [`StopFlag::request`], but
    /// the stop does not count as asked for.
    pub fn end_run(&self) {
        self.stop.store(true, Ordering::Release);
    }
    pub fn is_requested(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }
    /// Whether the stop was asked for ([`StopFlag::request`]).
    pub fn was_asked(&self) -> bool {
        self.asked.load(Ordering::Acquire)
    }
    /// Withdraws the request, for another run of the same router.
    pub fn clear(&self) {
        self.asked.store(false, Ordering::Release);
        self.stop.store(false, Ordering::Release);
    }
}

/// What an element can reach while it runs on a worker.
pub struct Context<'a> {
    pub worker: WorkerInfo,
    stop: &'a StopFlag,
    /// The pass's time-stamp counter reading, once something asked for it.
    now: Option<u64>,
    /// The router the worker runs, for elements that call its handlers (a Script);
    /// `None` in a graph run without one (unit tests).
    router: Option<&'a crate::router::RouterSpec>,
}

impl<'a> Context<'a> {
    pub fn new(worker: WorkerInfo, stop: &'a StopFlag) -> Context<'a> {
        Context {
            worker,
            stop,
            now: None,
            router: None,
        }
    }

    /// A context whose clock reads `now` (TSC ticks) for the whole pass: the worker
    /// loop has just read the counter, and timers of elements (a transmit group's
    /// flush, a rate estimate) need no finer clock than one pass.
    pub fn at(worker: WorkerInfo, stop: &'a StopFlag, now: u64) -> Context<'a> {
        Context {
            worker,
            stop,
            now: Some(now),
            router: None,
        }
    }

    /// This context, able to reach `router`'s handlers.
    pub fn in_router(mut self, router: Option<&'a crate::router::RouterSpec>) -> Context<'a> {
        self.router = router;
        self
    }

    /// The router this worker runs, if the caller gave it.
    pub fn router(&self) -> Option<&'a crate::router::RouterSpec> {
        self.router
    }

    /// The time-stamp counter at this pass: read once per context, so the elements of
    /// one pass share one reading (an RDTSC costs about 40 cycles here, as much as an
    /// element's whole per-packet work).
    #[inline]
    pub fn now_tsc(&mut self) -> u64 {
        *self.now.get_or_insert_with(crate::tsc::rdtsc)
    }

    /// Asks the router to stop (Click's `please_stop_driver`).
    pub fn request_stop(&self) {
        self.stop.request();
    }

    pub fn stop_requested(&self) -> bool {
        self.stop.is_requested()
    }

    /// Wall-clock time now.
    pub fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbered(n: usize) -> PacketBatch {
        (0..n)
            .map(|i| Packet::from_slice(&(i as u16).to_be_bytes()))
            .collect()
    }

    fn firsts(b: &PacketBatch) -> Vec<u16> {
        b.iter()
            .map(|p| u16::from_be_bytes([p.data()[0], p.data()[1]]))
            .collect()
    }

    #[test]
    fn route_each_keeps_order_per_output_and_drops() {
        for n in [0, 5, packet::MAX_BATCH, packet::MAX_BATCH + 3] {
            let mut ports = [PacketBatch::new(), PacketBatch::new()];
            let mut b = numbered(n);
            Outputs::new(&mut ports).route_each(&mut b, |p| match p.data()[1] % 3 {
                0 => 0,
                1 => 1,
                _ => DROP,
            });
            assert!(b.is_empty());
            let all: Vec<u16> = (0..n as u16).collect();
            let want0: Vec<u16> = all.iter().copied().filter(|i| (i & 0xff) % 3 == 0).collect();
            let want1: Vec<u16> = all.iter().copied().filter(|i| (i & 0xff) % 3 == 1).collect();
            assert_eq!(firsts(&ports[0]), want0, "n = {}", n);
            assert_eq!(firsts(&ports[1]), want1, "n = {}", n);
        }
    }

    #[test]
    fn route_each_decides_each_packet_once_wherever_the_first_other_verdict_is() {
        // Packets before `first` go to 0; packet `first` is dropped or goes to 1; after
        // it, odd packets go to 1 and even ones to 0.
        for n in [1usize, 2, 7, 32] {
            for first in [0, n / 2, n - 1] {
                for first_verdict in [1, DROP] {
                    let mut ports = [PacketBatch::new(), PacketBatch::new()];
                    let mut b = numbered(n);
                    let mut calls = vec![0; n];
                    Outputs::new(&mut ports).route_each(&mut b, |p| {
                        let i = usize::from(p.data()[1]);
                        calls[i] += 1;
                        match i {
                            i if i < first => 0,
                            i if i == first => first_verdict,
                            i => (i % 2) as u8,
                        }
                    });
                    assert!(
                        calls.iter().all(|&c| c == 1),
                        "n {} first {}: {:?}",
                        n,
                        first,
                        calls
                    );
                    let want = |port: u8| -> Vec<u16> {
                        (0..n)
                            .filter(|&i| match i {
                                i if i < first => port == 0,
                                i if i == first => first_verdict == port,
                                i => (i % 2) as u8 == port,
                            })
                            .map(|i| i as u16)
                            .collect()
                    };
                    assert_eq!(firsts(&ports[0]), want(0), "n {} first {}", n, first);
                    assert_eq!(firsts(&ports[1]), want(1), "n {} first {}", n, first);
                }
            }
        }
    }

    #[test]
    fn a_context_reads_the_clock_once_per_pass() {
        let stop = StopFlag::new();
        let w = WorkerInfo { index: 0, count: 1 };
        let mut cx = Context::at(w, &stop, 12_345);
        assert_eq!(cx.now_tsc(), 12_345);
        let mut cx = Context::new(w, &stop);
        let first = cx.now_tsc();
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert_eq!(cx.now_tsc(), first, "a second reading in the same pass");
        assert!(
            Context::new(w, &stop).now_tsc() > first,
            "a new pass reads the clock again"
        );
    }

    #[test]
    fn route_each_moves_an_all_zero_batch_whole() {
        let mut ports = [PacketBatch::new()];
        let mut b = numbered(7);
        let mut seen = 0;
        Outputs::new(&mut ports).route_each(&mut b, |_| {
            seen += 1;
            0
        });
        assert_eq!(seen, 7);
        assert_eq!(firsts(&ports[0]), (0..7).collect::<Vec<u16>>());
    }

    #[test]
    fn a_passed_input_stays_put_until_settled_and_keeps_its_place_in_order() {
        // Passed whole, nothing else: the packets stay in the input.
        let mut ports = [PacketBatch::new(), PacketBatch::new()];
        let mut b = numbered(3);
        let mut out = Outputs::for_input(&mut ports, &b);
        out.push_batch(1, &mut b);
        assert_eq!(out.only_pass(), Some(1));
        assert_eq!(b.len(), 3);
        out.settle(&mut b);
        assert!(b.is_empty());
        assert_eq!(firsts(&ports[1]), vec![0, 1, 2]);
        assert!(ports[0].is_empty());

        // Passed, then more pushed to the same port: the input comes first.
        let mut ports = [PacketBatch::new()];
        let mut b = numbered(2);
        let mut out = Outputs::for_input(&mut ports, &b);
        out.push_batch(0, &mut b);
        out.push(0, Packet::from_slice(&[0, 9]));
        assert_eq!(out.only_pass(), None);
        out.settle(&mut b);
        assert_eq!(firsts(&ports[0]), vec![0, 1, 9]);

        // A port that already holds packets takes the input behind them (no pass).
        let mut ports = [PacketBatch::new()];
        let mut b = numbered(2);
        let mut out = Outputs::for_input(&mut ports, &b);
        out.push(0, Packet::from_slice(&[0, 7]));
        out.push_batch(0, &mut b);
        assert!(!out.passes());
        assert!(b.is_empty());
        out.settle(&mut b);
        assert_eq!(firsts(&ports[0]), vec![7, 0, 1]);

        // Another batch than the input is always moved.
        let mut ports = [PacketBatch::new()];
        let input = numbered(1);
        let mut other = numbered(4);
        let mut out = Outputs::for_input(&mut ports, &input);
        out.push_batch(0, &mut other);
        assert!(other.is_empty() && !out.passes());
        assert_eq!(ports[0].len(), 4);

        // Nothing emitted: whatever the element left in its input is dropped.
        let mut ports = [PacketBatch::new()];
        let mut b = numbered(2);
        let mut out = Outputs::for_input(&mut ports, &b);
        assert!(out.nothing_out());
        out.settle(&mut b);
        assert!(b.is_empty() && ports[0].is_empty());
    }

    #[test]
    fn port_count_syntax() {
        let p = PortCount::parse("1/1-2");
        assert_eq!((p.min_in, p.max_in, p.min_out, p.max_out), (1, 1, 1, 2));
        let p = PortCount::parse("-/-");
        assert_eq!(
            (p.min_in, p.max_in, p.min_out, p.max_out),
            (0, usize::MAX, 0, usize::MAX)
        );
        let p = PortCount::parse("1-/=");
        assert!(p.outputs_equal_inputs);
        assert_eq!((p.min_in, p.max_in), (1, usize::MAX));
        let p = PortCount::parse("0/1");
        assert_eq!((p.min_in, p.max_in, p.min_out, p.max_out), (0, 0, 1, 1));
        assert_eq!(PortCount::parse("1/2-").describe_outputs(), "2 or more");
    }
}
