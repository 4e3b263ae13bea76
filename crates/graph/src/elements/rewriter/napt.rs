//! The rewriter elements over one implementation: IPRewriter (TCP and UDP),
//! TCPRewriter, UDPRewriter, IPAddrRewriter and IPAddrPairRewriter differ in the
//! packets they take, the flow identifier they key on, their timeouts and their
//! handler names.

use super::flow::{self, FlowId, Parsed, TCP, UDP};
use super::input::{self, InputSpec, Resolver};
use super::table::{Entry, Flow, Key, Table, TimeoutKind, Timeouts, DEFAULT_CAPACITY};
use crate::args::{Args, Interval};
use crate::element::*;
use crate::elements::paint::Anno1;
use crate::elements::shared::{lock, SharedSettings};
use crate::error::ConfigError;
use packet::{Packet, PacketBatch};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Which rewriter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Ip,
    Tcp,
    Udp,
    Addr,
    AddrPair,
    Ping,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Ip => "IPRewriter",
            Kind::Tcp => "TCPRewriter",
            Kind::Udp => "UDPRewriter",
            Kind::Addr => "IPAddrRewriter",
            Kind::AddrPair => "IPAddrPairRewriter",
            Kind::Ping => "ICMPPingRewriter",
        }
    }

    fn addresses_only(self) -> bool {
        matches!(self, Kind::Addr | Kind::AddrPair)
    }

    /// Whether the rewriter maps packets of protocol `proto`.
    fn takes(self, proto: u8) -> bool {
        match self {
            Kind::Ip | Kind::Udp => proto == TCP || proto == UDP,
            Kind::Tcp => proto == TCP,
            Kind::Addr | Kind::AddrPair => true,
            Kind::Ping => proto == flow::ICMP,
        }
    }

    /// The map a packet's flows live in.
    fn map(self, proto: u8) -> u8 {
        if self.addresses_only() {
            0
        } else {
            proto
        }
    }
}

/// The class of one of the rewriters.
pub(crate) struct RewriterClass(pub Kind);

pub(crate) const IP_REWRITER: RewriterClass = RewriterClass(Kind::Ip);
pub(crate) const TCP_REWRITER: RewriterClass = RewriterClass(Kind::Tcp);
pub(crate) const UDP_REWRITER: RewriterClass = RewriterClass(Kind::Udp);
pub(crate) const IP_ADDR_REWRITER: RewriterClass = RewriterClass(Kind::Addr);
pub(crate) const IP_ADDR_PAIR_REWRITER: RewriterClass = RewriterClass(Kind::AddrPair);
pub(crate) const ICMP_PING_REWRITER: RewriterClass = RewriterClass(Kind::Ping);

/// Milliseconds of a configured interval.
fn ms(i: Interval) -> u64 {
    i.0 / 1_000_000
}

/// The clock of the mapping table: milliseconds of the time-stamp counter.
pub(crate) fn now_ms(tsc: u64) -> u64 {
    (tsc as f64 * 1000.0 / crate::tsc::tsc_hz()) as u64
}

/// The TSC reading `secs` seconds after the counter's zero (tests drive the table's
/// clock with it).
#[cfg(test)]
pub(crate) fn tsc_at(secs: f64) -> u64 {
    // Half a millisecond past the millisecond, so that `now_ms` reads it exactly.
    (((secs * 1000.0).round() + 0.5) * crate::tsc::tsc_hz() / 1000.0) as u64
}

/// A configured rewriter. Others find it among their peers: a rewriter whose
/// MAPPING_CAPACITY names it shares its table, ICMPRewriter looks flows up in it.
pub(crate) struct RewriterSpec {
    pub(crate) shared: Arc<Shared>,
}

/// What a rewriter's workers share: its table (perhaps with other rewriters), its
/// input specs (replaced by `patternN` writes, taken by each worker at its next
/// batch) and its settings.
pub(crate) struct Shared {
    kind: Kind,
    pub(crate) owner: u32,
    pub(crate) table: Arc<Mutex<Table>>,
    specs: SharedSettings<Vec<InputSpec>>,
    noutputs: usize,
    /// TCP flows' timeouts (and those of the address rewriters' flows).
    tcp: Timeouts,
    udp: Timeouts,
    reap: u64,
    next_reap: AtomicU64,
    dst_anno: bool,
    reply_anno: Option<usize>,
    resolver: Resolver,
    /// `pattern0`, `pattern1`, ...: one handler per input.
    pattern_names: Vec<&'static str>,
}

impl ElementClass for RewriterClass {
    fn name(&self) -> &'static str {
        self.0.name()
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1-/1-")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let kind = self.0;
        // The table's clock converts TSC ticks: measure their rate now rather than on
        // the first packet.
        let _ = crate::tsc::tsc_hz();
        let e = |m: String| cx.error(m);
        let secs = |args: &mut Args, kw: &str| -> Result<Option<u64>, ConfigError> {
            args.keyword::<Interval>(kw).map(|v| v.map(ms)).map_err(e)
        };
        let capacity_word = {
            let a = args.keyword::<String>("CAPACITY").map_err(e)?;
            let b = args.keyword::<String>("MAPPING_CAPACITY").map_err(e)?;
            b.or(a)
        };
        let timeout = secs(args, "TIMEOUT")?;
        let guarantee = secs(args, "GUARANTEE")?;
        let reap = secs(args, "REAP_INTERVAL")?
            .or(secs(args, "REAP_TIME")?)
            .unwrap_or(15 * 60 * 1000);
        let dst_anno = args.keyword::<bool>("DST_ANNO").map_err(e)?.unwrap_or(true);
        let reply_anno = args.keyword::<Anno1>("REPLY_ANNO").map_err(e)?.map(|a| a.0);
        let (mut tcp, mut udp) = (
            Timeouts {
                kind: TimeoutKind::Plain,
                // Click's address rewriters keep a mapping two hours; ICMPPingRewriter
                // five minutes.
                main: timeout.unwrap_or(if kind.addresses_only() { 7_200_000 } else { 300_000 }),
                done: 0,
                other: 0,
                guarantee: guarantee.unwrap_or(5_000),
            },
            Timeouts::udp(300_000, 300_000, 5_000),
        );
        if matches!(kind, Kind::Ip | Kind::Tcp) {
            // As Click's TCPRewriter (whose configuration IPRewriter's TCP side is):
            // TIMEOUT is the timeout of flows with data, TCP_TIMEOUT's other name;
            // GUARANTEE, read by the base after TCP_GUARANTEE, wins over it.
            let data = secs(args, "TCP_TIMEOUT")?.or(timeout).unwrap_or(24 * 3600 * 1000);
            let done = secs(args, "TCP_DONE_TIMEOUT")?.unwrap_or(240_000);
            let nodata = secs(args, "TCP_NODATA_TIMEOUT")?.unwrap_or(300_000);
            let g = guarantee.or(secs(args, "TCP_GUARANTEE")?).unwrap_or(5_000);
            tcp = Timeouts {
                kind: TimeoutKind::Tcp,
                main: data,
                done,
                other: nodata,
                guarantee: g,
            };
        }
        match kind {
            Kind::Ip => {
                let t = secs(args, "UDP_TIMEOUT")?.unwrap_or(300_000);
                let s = secs(args, "UDP_STREAMING_TIMEOUT")?.unwrap_or(t);
                let g = secs(args, "UDP_GUARANTEE")?.unwrap_or(5_000);
                udp = Timeouts::udp(t, s, g);
            }
            Kind::Udp => {
                // Click's UDPRewriter takes the UDP_ names as well (the plain ones
                // read after them win, GUARANTEE by the base).
                let t = timeout.or(secs(args, "UDP_TIMEOUT")?).unwrap_or(300_000);
                let s = secs(args, "STREAMING_TIMEOUT")?
                    .or(secs(args, "UDP_STREAMING_TIMEOUT")?)
                    .unwrap_or(t);
                let g = guarantee.or(secs(args, "UDP_GUARANTEE")?).unwrap_or(5_000);
                udp = Timeouts::udp(t, s, g);
                // UDPRewriter rewrites TCP too, with its one set of timeouts.
                tcp = udp;
            }
            _ => {}
        }
        let texts = args.rest();
        // Whatever still looks like `KEYWORD value` is no input spec: Args's refusal.
        let (specs_text, stray): (Vec<String>, Vec<String>) =
            texts.into_iter().partition(|t| !is_keyword_like(t));
        if !stray.is_empty() {
            let kws: Vec<String> = stray
                .iter()
                .map(|t| format!("'{}'", t.split_whitespace().next().unwrap_or("")))
                .collect();
            return Err(cx.error(format!(
                "bad keyword{} {}",
                if kws.len() > 1 { "s" } else { "" },
                kws.join(", ")
            )));
        }
        // The table: a new one, or that of the rewriter MAPPING_CAPACITY names.
        let (table, owner) = match capacity_word.as_deref().map(str::trim) {
            None => new_table(DEFAULT_CAPACITY, cx.ninputs),
            Some(w) => match w.parse::<u32>() {
                Ok(c) => new_table(c.min(DEFAULT_CAPACITY), cx.ninputs),
                Err(_) => {
                    let other = cx
                        .peer(w)
                        .and_then(|p| spec_as::<RewriterSpec>(p.spec.as_ref()))
                        .ok_or_else(|| cx.error("bad MAPPING_CAPACITY"))?;
                    let table = other.shared.table.clone();
                    let owner = lock(&table).add_owner(cx.ninputs);
                    (table, owner)
                }
            },
        };
        if specs_text.len() != cx.ninputs {
            return Err(cx.error(format!("need {} arguments, one per input port", cx.ninputs)));
        }
        let resolver = resolver(cx);
        let mut specs = Vec::with_capacity(specs_text.len());
        let mut errors = Vec::new();
        for (i, t) in specs_text.iter().enumerate() {
            let t = resolve_element_word(t, cx);
            match input::parse(&t, cx.noutputs, kind.addresses_only(), &resolver) {
                Ok(s) => specs.push(s),
                Err(m) => errors.push(cx.error(format!("input spec {}: {}", i, m))),
            }
        }
        if let Some(err) = ConfigError::all(errors) {
            return Err(err);
        }
        Ok(Arc::new(RewriterSpec {
            shared: Arc::new(Shared {
                kind,
                owner,
                table,
                specs: SharedSettings::new(specs),
                noutputs: cx.noutputs,
                tcp,
                udp,
                reap,
                next_reap: AtomicU64::new(0),
                dst_anno,
                reply_anno,
                resolver,
                pattern_names: (0..cx.ninputs).map(pattern_handler_name).collect(),
            }),
        }))
    }
}

fn new_table(capacity: u32, ninputs: usize) -> (Arc<Mutex<Table>>, u32) {
    let mut t = Table::new(capacity);
    let owner = t.add_owner(ninputs);
    (Arc::new(Mutex::new(t)), owner)
}

/// An argument of all capitals and underscores followed by a value: a keyword.
fn is_keyword_like(t: &str) -> bool {
    let t = t.trim();
    match t.split_once(|c: char| c.is_ascii_whitespace()) {
        Some((w, _)) => {
            w.len() > 1
                && w.bytes()
                    .all(|b| b.is_ascii_uppercase() || b == b'_' || b.is_ascii_digit())
                && w.as_bytes()[0].is_ascii_uppercase()
        }
        None => false,
    }
}

/// An `ELEMENTNAME` spec names an element as Click finds it (inside this element's
/// compound first): the spec's word becomes the element's full name.
fn resolve_element_word(text: &str, cx: &BuildContext) -> String {
    let t = text.trim();
    if t.contains(char::is_whitespace) {
        return t.to_string();
    }
    match cx.peer(t) {
        Some(p) => p.name.clone(),
        None => t.to_string(),
    }
}

/// The patterns and mappers of the elements configured before this one.
fn resolver(cx: &BuildContext) -> Resolver {
    let mut r = Resolver::default();
    for p in cx.peers_of_class("IPRewriterPatterns") {
        if let Some(s) = spec_as::<super::patterns::PatternsSpec>(p.spec.as_ref()) {
            r.patterns.extend(s.patterns.iter().cloned());
        }
    }
    for p in cx.peers_of_class("RoundRobinIPMapper") {
        if let Some(s) = spec_as::<super::rrmapper::RoundRobinSpec>(p.spec.as_ref()) {
            r.mappers.push((p.name.clone(), s.mapper.clone()));
        }
    }
    r.elements = cx.peers().iter().map(|p| p.name.clone()).collect();
    r
}

/// What became of a packet: an output, or dropped.
const DROPPED: usize = usize::MAX;

impl Shared {
    fn timeouts(&self, proto: u8) -> Timeouts {
        if proto == UDP && !self.kind.addresses_only() {
            self.udp
        } else {
            self.tcp
        }
    }

    /// Looks the packet's flow up: its entry, if any. The address rewriter tries the
    /// source address, then the destination address.
    fn find(&self, table: &mut Table, parsed: &Parsed, now: u64) -> Option<Entry> {
        let map = self.kind.map(parsed.proto);
        let key = |flow| Key {
            owner: self.owner,
            map,
            flow,
        };
        let f = parsed.flow;
        match self.kind {
            Kind::Addr => table
                .lookup(&key(FlowId::new(f.saddr, 0, 0, 0)), now)
                .or_else(|| table.lookup(&key(FlowId::new(0, 0, f.daddr, 0)), now)),
            Kind::AddrPair => table.lookup(&key(FlowId::new(f.saddr, 0, f.daddr, 0)), now),
            _ => table.lookup(&key(f), now),
        }
    }

    /// The flow identifier a new mapping keys on.
    fn key_flow(&self, f: FlowId) -> FlowId {
        match self.kind {
            Kind::Addr => FlowId::new(f.saddr, 0, 0, 0),
            Kind::AddrPair => FlowId::new(f.saddr, 0, f.daddr, 0),
            _ => f,
        }
    }

    /// One packet: its output after rewriting, or [`DROPPED`].
    fn process(
        &self,
        table: &mut Table,
        specs: &[InputSpec],
        port: usize,
        p: &mut Packet,
        now: u64,
    ) -> usize {
        let Some(parsed) = flow::parse(p) else {
            return DROPPED;
        };
        let spec = &specs[port];
        let pass_or_drop = || match spec {
            InputSpec::Pass(o) => usize::from(*o),
            _ => DROPPED,
        };
        let mut parsed = parsed;
        let mut echo = None;
        if self.kind == Kind::Ping {
            // Echo requests key on (src, identifier, dst, identifier + 1), replies on
            // (src, identifier + 1, dst, identifier), as Click's ICMPPingRewriter: a
            // request's reply entry is then its replies' key, and no request's key is
            // ever a reply's (with identifier 0 the two had been one, so an outside
            // request was taken for the reply to an inside one).
            if parsed.proto != flow::ICMP || !parsed.has_ports() {
                return pass_or_drop();
            }
            let Some((ty, ident)) = flow::echo(p) else {
                return pass_or_drop();
            };
            let f = parsed.flow;
            parsed.flow = if ty == flow::ECHO {
                FlowId::new(f.saddr, ident, f.daddr, ident.wrapping_add(1))
            } else {
                FlowId::new(f.saddr, ident.wrapping_add(1), f.daddr, ident)
            };
            echo = Some(ty);
        } else if !self.kind.addresses_only() && (!self.kind.takes(parsed.proto) || !parsed.has_ports()) {
            return pass_or_drop();
        }
        let entry = match self.find(table, &parsed, now) {
            Some(e) => e,
            // Only an echo request makes a ping mapping.
            None if echo == Some(flow::ECHO_REPLY) => return pass_or_drop(),
            None => match self.create(table, spec, port, &parsed, p, now) {
                Ok(e) => e,
                Err(verdict) => return verdict,
            },
        };
        let tcp = if parsed.proto == TCP {
            flow::tcp_flags_and_payload(p)
        } else {
            None
        };
        let dir = usize::from(entry.dir);
        let f = table.flow_mut(entry.flow);
        let r = f.rewritten(dir);
        let to = if self.kind.addresses_only() {
            let mut to = parsed.flow;
            if r.saddr != 0 {
                to.saddr = r.saddr;
            }
            if r.daddr != 0 {
                to.daddr = r.daddr;
            }
            to
        } else {
            r
        };
        f.note_packet(dir, tcp);
        let out = usize::from(f.outputs[dir]);
        let reply_anno = f.reply_anno;
        match echo {
            Some(ty) => {
                flow::rewrite(p, &parsed, to, false, self.dst_anno);
                flow::set_echo_identifier(p, if ty == flow::ECHO { to.sport } else { to.dport });
            }
            None => flow::rewrite(p, &parsed, to, !self.kind.addresses_only(), self.dst_anno),
        }
        if dir == 1 {
            if let Some(off) = self.reply_anno {
                p.set_user_anno(off, &[reply_anno]);
            }
        }
        table.refresh(entry.flow, now);
        out
    }

    /// A new flow by the input's spec: its forward entry, or what to do with the packet.
    fn create(
        &self,
        table: &mut Table,
        spec: &InputSpec,
        port: usize,
        parsed: &Parsed,
        p: &Packet,
        now: u64,
    ) -> Result<Entry, usize> {
        let map = self.kind.map(parsed.proto);
        let flow = self.key_flow(parsed.flow);
        let owner = self.owner;
        let ping = self.kind == Kind::Ping;
        let (mut rewritten, fout, rout) = {
            let taken = |reply: FlowId| {
                // A ping's reply key carries the identifier + 1 as its source port
                // (the candidate's is still the request's).
                let reply = if ping {
                    FlowId::new(reply.saddr, reply.dport.wrapping_add(1), reply.daddr, reply.dport)
                } else {
                    reply
                };
                table.contains(&Key {
                    owner,
                    map,
                    flow: reply,
                })
            };
            match spec {
                InputSpec::Drop => return Err(DROPPED),
                InputSpec::Pass(o) => return Err(usize::from(*o)),
                InputSpec::Keep(f, r) => (flow, *f, *r),
                // An address rewriter's pattern with ports, or IPAddrRewriter's with a
                // destination (its keys have none), makes no mapping (Click's add_flow).
                InputSpec::Pattern(pat, ..)
                    if self.kind.addresses_only()
                        && (pat.names_ports() || (self.kind == Kind::Addr && pat.names_destination())) =>
                {
                    table.count_failure(owner, port);
                    return Err(DROPPED);
                }
                InputSpec::Pattern(pat, f, r) => match pat.rewrite(flow, &taken) {
                    Some(rw) => (rw, *f, *r),
                    None => {
                        table.count_failure(owner, port);
                        return Err(DROPPED);
                    }
                },
                InputSpec::Mapper(m) => match m.rewrite(flow, &taken) {
                    Some(x) => x,
                    None => {
                        table.count_failure(owner, port);
                        return Err(DROPPED);
                    }
                },
            }
        };
        if usize::from(fout) >= self.noutputs || usize::from(rout) >= self.noutputs {
            return Err(DROPPED);
        }
        if ping {
            rewritten.dport = rewritten.sport.wrapping_add(1);
        }
        let mut f = Flow::new(
            owner,
            map,
            flow,
            self.key_flow(rewritten),
            [fout, rout],
            port as u16,
            self.timeouts(parsed.proto),
        );
        f.proto = if self.kind.addresses_only() {
            0
        } else {
            parsed.proto
        };
        if let Some(off) = self.reply_anno {
            f.reply_anno = p.anno().user[off];
        }
        let i = table.insert(f, now).ok_or(DROPPED)?;
        Ok(Entry { flow: i, dir: 0 })
    }

    /// For ICMPRewriter: the packet an ICMP error quotes, `quoted` (its protocol and
    /// flow; an echo request's identifier as its source port), was rewritten by a
    /// mapping of this rewriter: the flow it had before. `None` if no mapping of this
    /// rewriter's covers it.
    pub(crate) fn original_of(&self, proto: u8, quoted: FlowId) -> Option<FlowId> {
        if !self.kind.takes(proto) {
            return None;
        }
        let q = quoted;
        let sent = match self.kind {
            Kind::Ping => FlowId::new(q.saddr, q.sport, q.daddr, q.sport.wrapping_add(1)),
            _ => self.key_flow(q),
        };
        let t = lock(&self.table);
        let e = t.get(&Key {
            owner: self.owner,
            map: self.kind.map(proto),
            flow: sent.reverse(),
        })?;
        let orig = t.flow(e.flow).rewritten(usize::from(e.dir)).reverse();
        Some(match self.kind {
            Kind::Addr | Kind::AddrPair => FlowId::new(
                if orig.saddr != 0 { orig.saddr } else { q.saddr },
                q.sport,
                if orig.daddr != 0 { orig.daddr } else { q.daddr },
                q.dport,
            ),
            Kind::Ping => FlowId::new(orig.saddr, orig.sport, orig.daddr, q.dport),
            _ => orig,
        })
    }

    fn maybe_reap(&self, table: &mut Table, now: u64) {
        if self.reap > 0 && now >= self.next_reap.load(Ordering::Relaxed) {
            let cap = table.capacity as usize;
            table.shrink(now, cap);
            self.next_reap.store(now + self.reap, Ordering::Relaxed);
        }
    }

    /// The mappings of one map, a line per entry (Click's `unparse`), at `now`.
    fn table_text(&self, map: Option<u8>, now: u64) -> String {
        let t = lock(&self.table);
        let mut s = String::new();
        for (i, f) in t.live(self.owner) {
            if map.is_some_and(|m| f.keys[0].map != m) {
                continue;
            }
            for d in 0..2 {
                if !t.entry_mapped(i, d) {
                    continue;
                }
                let exp = (f.expiry + 500).saturating_sub(now) / 1000;
                s.push_str(&format!(
                    "{} => {} [{}{} {}{}] i{} exp{}\n",
                    f.keys[d].flow,
                    f.rewritten(d),
                    if d == 0 { "*" } else { "" },
                    f.outputs[0],
                    if d == 1 { "*" } else { "" },
                    f.outputs[1],
                    f.input,
                    exp
                ));
            }
        }
        s
    }

    fn patterns_text(&self, only: Option<usize>) -> String {
        let specs = self.specs.read();
        let t = lock(&self.table);
        let counts = &t.counts[self.owner as usize].count;
        let mut s = String::new();
        for (i, spec) in specs.iter().enumerate() {
            if only.is_some_and(|o| o != i) {
                continue;
            }
            s.push_str(&spec.unparse());
            if counts[i] > 0 {
                s.push_str(&format!(" [{}]", counts[i]));
            }
            s.push('\n');
        }
        s
    }

    fn handler_maps(&self) -> &'static [(&'static str, Option<u8>)] {
        match self.kind {
            Kind::Ip => &[
                ("tcp_table", Some(TCP)),
                ("udp_table", Some(UDP)),
                ("tcp_mappings", Some(TCP)),
                ("udp_mappings", Some(UDP)),
            ],
            Kind::Tcp => &[("table", Some(TCP)), ("mappings", Some(TCP))],
            _ => &[("table", None), ("mappings", None)],
        }
    }
}

impl ElementSpec for RewriterSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        let (generation, specs) = self.shared.specs.snapshot();
        Box::new(Rewriter {
            shared: self.shared.clone(),
            specs,
            generation,
        })
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    fn state(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    /// brickroute's own (Click's rewriters take no state on a hot swap): a rewriter of
    /// the same class, outputs and input specs takes its predecessor's mappings, so a
    /// configuration written to `hotconfig` keeps the connections through the NAT.
    /// Each rewriter must own its table alone (no MAPPING_CAPACITY sharing on either
    /// side). The flows keep the timeouts they were made with until their next packet;
    /// a smaller capacity evicts at once, as a `capacity` write does.
    fn take_state(&self, old: &dyn ElementSpec) -> bool {
        let Some(old) = state_of::<RewriterSpec>(old) else {
            return false;
        };
        let (s, o) = (&self.shared, &old.shared);
        if s.kind != o.kind || s.noutputs != o.noutputs || Arc::ptr_eq(&s.table, &o.table) {
            return false;
        }
        let (mine, theirs) = (s.specs.read(), o.specs.read());
        if mine.len() != theirs.len() || mine.iter().zip(&theirs).any(|(a, b)| !a.same_as(b)) {
            return false;
        }
        let mut table = lock(&s.table);
        let mut old_table = lock(&o.table);
        if table.counts.len() != 1 || old_table.counts.len() != 1 || table.size() != 0 {
            return false;
        }
        let capacity = table.capacity;
        std::mem::swap(&mut *table, &mut *old_table);
        table.capacity = capacity;
        table.shrink(now_ms(crate::tsc::rdtsc()), capacity as usize);
        true
    }

    fn handlers(&self) -> Vec<HandlerInfo> {
        let mut v: Vec<HandlerInfo> = self
            .shared
            .handler_maps()
            .iter()
            .map(|(n, _)| HandlerInfo::read(n))
            .collect();
        match self.shared.kind {
            Kind::Ip => v.push(HandlerInfo::read("tcp_lookup")),
            Kind::Tcp | Kind::Udp => v.push(HandlerInfo::read("lookup")),
            _ => {}
        }
        v.extend([
            HandlerInfo::read("nmappings"),
            HandlerInfo::read("table_size"),
            HandlerInfo::read("mapping_failures"),
            HandlerInfo::read("patterns"),
            HandlerInfo::read("size"),
            HandlerInfo::read_write("capacity"),
            HandlerInfo::write("clear"),
        ]);
        v.extend(
            self.shared
                .pattern_names
                .iter()
                .map(|n| HandlerInfo::read_write(n)),
        );
        v
    }

    fn read_handler(&self, name: &str) -> Option<String> {
        let s = &self.shared;
        let now = now_ms(crate::tsc::rdtsc());
        if let Some((_, map)) = s.handler_maps().iter().find(|(n, _)| *n == name) {
            return Some(s.table_text(*map, now));
        }
        // This rewriter's per-input counts, added up.
        let total = |which: fn(&super::table::InputCounts) -> &Vec<u32>| {
            let t = lock(&s.table);
            let sum: u64 = which(&t.counts[s.owner as usize])
                .iter()
                .map(|&c| u64::from(c))
                .sum();
            Some(sum.to_string())
        };
        match name {
            "nmappings" | "table_size" => total(|c| &c.count),
            "mapping_failures" => total(|c| &c.failures),
            "patterns" => Some(s.patterns_text(None)),
            "size" => Some(lock(&s.table).size().to_string()),
            "capacity" => Some(lock(&s.table).capacity.to_string()),
            _ => {
                let i = pattern_handler_index(name)?;
                (i < s.specs.read().len()).then(|| s.patterns_text(Some(i)))
            }
        }
    }

    fn read_handler_with(&self, name: &str, param: &str) -> Option<Result<String, String>> {
        let s = &self.shared;
        let proto = match (s.kind, name) {
            (Kind::Ip, "tcp_lookup") | (Kind::Tcp, "lookup") => TCP,
            (Kind::Udp, "lookup") => UDP,
            _ => return None,
        };
        let Some(flow) = FlowId::parse_words(param) else {
            return Some(Err("syntax error".to_string()));
        };
        let t = lock(&s.table);
        let key = Key {
            owner: s.owner,
            map: proto,
            flow,
        };
        Some(Ok(match t.get(&key) {
            // Either direction, as Click's tcp_lookup_handler: a reply flow gives the
            // inside flow it is rewritten to.
            Some(e) => {
                let r = t.flow(e.flow).rewritten(usize::from(e.dir));
                format!(
                    "{} {} {} {}",
                    std::net::Ipv4Addr::from(r.saddr),
                    r.sport,
                    std::net::Ipv4Addr::from(r.daddr),
                    r.dport
                )
            }
            _ => String::new(),
        }))
    }

    fn write_handler(&self, name: &str, value: &str) -> Option<Result<(), String>> {
        let s = &self.shared;
        let now = now_ms(crate::tsc::rdtsc());
        match name {
            "capacity" => Some(match value.trim().parse::<u32>() {
                Ok(c) => {
                    let mut t = lock(&s.table);
                    t.capacity = c.min(DEFAULT_CAPACITY);
                    let cap = t.capacity as usize;
                    t.shrink(now, cap);
                    Ok(())
                }
                Err(_) => Err("CAPACITY expects integer".to_string()),
            }),
            // Every flow of the table, those of the rewriters sharing it too (Click's
            // shrink_heap(true) on the shared heap).
            "clear" => {
                lock(&s.table).shrink(now, 0);
                Some(Ok(()))
            }
            _ => {
                let i = pattern_handler_index(name)?;
                let n = s.specs.read().len();
                if i >= n {
                    return None;
                }
                Some(
                    match input::parse(value, s.noutputs, s.kind.addresses_only(), &s.resolver) {
                        Ok(spec) => {
                            // Under the table's lock, which a worker holds while it
                            // checks for new specs and uses them: no batch makes a flow
                            // by the old spec after its flows are gone.
                            let mut t = lock(&s.table);
                            s.specs.write(|v| v[i] = spec);
                            t.destroy_input(s.owner, i);
                            Ok(())
                        }
                        Err(m) => Err(format!("input spec {}: {}", i, m)),
                    },
                )
            }
        }
    }
}

/// The name of input `i`'s pattern handler (handler names are static: the first 16
/// are spelled out, later ones made once when the element is configured).
fn pattern_handler_name(i: usize) -> &'static str {
    const NAMES: [&str; 16] = [
        "pattern0",
        "pattern1",
        "pattern2",
        "pattern3",
        "pattern4",
        "pattern5",
        "pattern6",
        "pattern7",
        "pattern8",
        "pattern9",
        "pattern10",
        "pattern11",
        "pattern12",
        "pattern13",
        "pattern14",
        "pattern15",
    ];
    match NAMES.get(i) {
        Some(n) => n,
        None => Box::leak(format!("pattern{}", i).into_boxed_str()),
    }
}

fn pattern_handler_index(name: &str) -> Option<usize> {
    let n = name.strip_prefix("pattern")?;
    if n.is_empty() || (n.len() > 1 && n.starts_with('0')) {
        return None;
    }
    n.parse().ok()
}

struct Rewriter {
    shared: Arc<Shared>,
    specs: Vec<InputSpec>,
    generation: u64,
}

impl Element for Rewriter {
    fn push(&mut self, port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, cx: &mut Context<'_>) {
        let s = &*self.shared;
        let now = now_ms(cx.now_tsc());
        let mut table = lock(&s.table);
        // Checked under the table's lock, which a `patternN` write holds while it
        // replaces a spec and removes its flows.
        if s.specs.generation() != self.generation {
            (self.generation, self.specs) = s.specs.snapshot();
        }
        s.maybe_reap(&mut table, now);
        let specs = &self.specs;
        if s.noutputs < usize::from(DROP) {
            // Most batches go to one output whole.
            out.route_each(batch, |p| match s.process(&mut table, specs, port, p, now) {
                DROPPED => DROP,
                o => o as u8,
            });
        } else {
            for mut p in batch.drain() {
                match s.process(&mut table, specs, port, &mut p, now) {
                    DROPPED => drop(p),
                    o => out.push(o, p),
                }
            }
        }
    }
}
