//! `FromIPSummaryDump(FILENAME [, keywords STOP, ACTIVE, ZERO, CHECKSUM, PROTO,
//! MULTIPACKET, FIELDS/CONTENTS, DEFAULT_FIELDS/DEFAULT_CONTENTS, FLOWID/DEFAULT_FLOWID,
//! DATA])`: makes a packet of each line of an IP summary dump (ASCII format), as Click's
//! element of the same name (push mode).
//!
//! The file is opened when the element is configured (a missing file is a configuration
//! error naming it) and read on worker 0 only, one packet a `run`, as FromDump reads.
//! With MULTIPACKET, a line standing for several packets keeps one packet (Click's work
//! packet) and gives copies of it a batch a `run`, so a count of billions takes no more
//! memory than 1 and the worker sees a stop between batches.
//! Lines starting with `!` set the fields (`!data`), the default protocol (`!proto`)
//! and the default addresses and ports (`!flowid`); `#` lines are comments. A data
//! line whose field text does not parse loses that field; a line of which no field
//! parses makes no packet. Click says so once (`packet parse error`); both are counted
//! (`bad_fields`, `bad_lines`).

use super::build::{build_packet, BuildSettings, FlowId};
use super::fields::{self, Field};
use super::Raw;
use crate::args::{split_words, unquote, Args, FromArg};
use crate::element::*;
use crate::elements::pcap::strerror;
use crate::elements::shared::lock;
use crate::elements::sources::{DataArg, IdleSource};
use crate::error::ConfigError;
use packet::anno::EXTRA_PACKETS_ANNO_OFFSET;
use packet::{Packet, PacketBatch};
use std::fs::File;
use std::io::{self, BufRead, BufReader, Cursor};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

pub struct FromIPSummaryDumpClass;

/// Lines a `run` reads at most while looking for a packet (comments, `!` lines, lines
/// that make none), so a long run of them does not hold the worker.
const LINES_PER_RUN: usize = 64;

/// The newest format version read: 1.3.
const MINOR_VERSION: u32 = 3;

enum Input {
    File(BufReader<File>),
    Stdin(BufReader<io::Stdin>),
    Data(Cursor<Vec<u8>>),
}

impl Input {
    fn reader(&mut self) -> &mut dyn BufRead {
        match self {
            Input::File(f) => f,
            Input::Stdin(s) => s,
            Input::Data(d) => d,
        }
    }
}

/// State the handlers see.
struct Shared {
    count: AtomicU64,
    bad_lines: AtomicU64,
    bad_fields: AtomicU64,
    active: AtomicBool,
    /// The `stop` handler was written: the reading instance asks the router to stop.
    stop_requested: AtomicBool,
    filepos: AtomicU64,
}

/// The columns of the data lines.
#[derive(Clone, Default)]
struct Columns {
    fields: Vec<Option<Field>>,
    /// Column indices in the order their fields apply.
    order: Vec<usize>,
}

impl Columns {
    fn new(fields: Vec<Option<Field>>) -> Columns {
        let mut order: Vec<usize> = (0..fields.len()).collect();
        // Stable: columns of one order keep theirs.
        order.sort_by_key(|&i| fields[i].map_or(0, Field::order));
        Columns { fields, order }
    }
}

/// Everything worker 0's instance owns.
struct Reader {
    input: Input,
    print_name: String,
    line_no: u64,
    pos: u64,
    line: Vec<u8>,
    ranges: Vec<std::ops::Range<usize>>,
    columns: Columns,
    settings: BuildSettings,
    stop: bool,
    multipacket: bool,
    /// The packet of the last line read, not yet sent.
    pending: Option<Packet>,
    /// The packets of a MULTIPACKET line still to go.
    multi: Option<Multi>,
    /// `packet parse error` was said (Click says it once).
    complained: bool,
    /// A `!binary` line came: the records after it are not text, and are not read.
    binary: bool,
    finished: bool,
    shared: Arc<Shared>,
}

impl Reader {
    fn warn(&self, msg: impl std::fmt::Display) {
        crate::warn!("{}:{}: {}", self.print_name, self.line_no, msg);
    }

    /// The next line, without its end of line; `false` at the end of the input.
    fn read_line(&mut self) -> bool {
        self.line.clear();
        match self.input.reader().read_until(b'\n', &mut self.line) {
            Ok(0) => false,
            Ok(n) => {
                self.pos += n as u64;
                self.line_no += 1;
                while matches!(self.line.last(), Some(b'\n' | b'\r')) {
                    self.line.pop();
                }
                true
            }
            Err(e) => {
                crate::warn!("{}: {}", self.print_name, strerror(&e));
                false
            }
        }
    }

    /// Click's `bang_data`: the fields of the lines that follow.
    fn bang_data(&mut self, text: &str) {
        let mut cols = Vec::new();
        for (i, word) in split_words(text).iter().enumerate() {
            let name = unquote(word);
            if i == 0 && (name == "!data" || name == "!contents") {
                continue;
            }
            let f = Field::find(&name);
            if f.is_none() {
                self.warn(format_args!("unknown content type '{}'", name));
            }
            cols.push(f);
        }
        if cols.is_empty() {
            self.warn("no contents specified");
        }
        self.columns = Columns::new(cols);
    }

    /// Click's `bang_proto`: the protocol of packets whose lines do not give one.
    fn bang_proto(&mut self, word: Option<&str>, what: &str) {
        match word.and_then(parse_proto) {
            Some(p) => self.settings.default_proto = p,
            None => self.warn(format_args!("bad protocol in {}", what)),
        }
    }

    fn bang_flowid(&mut self, text: &str) {
        match parse_flowid(text) {
            Some((flowid, proto)) => {
                self.settings.flowid = Some(flowid);
                if proto.is_some() {
                    self.bang_proto(proto.as_deref(), "!flowid");
                }
            }
            None => {
                self.warn("bad !flowid specification");
                self.settings.flowid = None;
            }
        }
    }

    /// The first line: a `!IPSummaryDump` banner gives the version (and goes).
    fn banner(&mut self, text: &str) -> bool {
        if let Some(rest) = text.strip_prefix("!IPSummaryDump") {
            let version = rest.trim().split_once('.').and_then(|(a, b)| {
                let minor: String = b.chars().take_while(char::is_ascii_digit).collect();
                Some((a.parse::<u32>().ok()?, minor.parse::<u32>().ok()?))
            });
            if let Some((major, minor)) = version {
                if major != 1 || minor > MINOR_VERSION {
                    self.warn(format_args!(
                        "unexpected IPSummaryDump version {}.{}",
                        major, minor
                    ));
                    self.settings.minor_version = MINOR_VERSION;
                } else {
                    self.settings.minor_version = minor;
                }
            }
            return true;
        }
        let known = ["!creator", "!data", "!contents", "!proto", "!flowid"];
        if !known.iter().any(|k| text.starts_with(k)) && self.columns.fields.is_empty() {
            self.warn("missing banner line; is this an IP summary dump?");
        }
        false
    }

    /// Reads lines until one makes packets (in `pending` or `multi`); false at the end
    /// or after [`LINES_PER_RUN`] lines.
    fn next_packets(&mut self) -> Option<bool> {
        for _ in 0..LINES_PER_RUN {
            if !self.read_line() {
                return None;
            }
            let line = String::from_utf8_lossy(&self.line).into_owned();
            if self.line_no == 1 && self.banner(&line) {
                continue;
            }
            if line.starts_with('#') {
                continue;
            }
            if line.starts_with('!') {
                self.bang_line(&line);
                if self.binary {
                    return None;
                }
                continue;
            }
            if line.trim().is_empty() {
                continue;
            }
            let built = build_packet(
                &line,
                &self.columns.fields,
                &self.columns.order,
                self.settings,
                &mut self.ranges,
            );
            if built.bad_fields > 0 {
                self.shared
                    .bad_fields
                    .fetch_add(u64::from(built.bad_fields), Ordering::Relaxed);
            }
            match built.packet {
                Some(p) => {
                    if self.multipacket {
                        match Multi::new(p) {
                            Ok(m) => self.multi = Some(m),
                            Err(p) => self.pending = Some(p),
                        }
                    } else {
                        self.pending = Some(p);
                    }
                    return Some(true);
                }
                None => {
                    self.shared.bad_lines.fetch_add(1, Ordering::Relaxed);
                    if !self.complained {
                        self.complained = true;
                        if self.columns.fields.is_empty() {
                            self.warn("no '!data' provided");
                        } else {
                            self.warn("packet parse error");
                        }
                    }
                }
            }
        }
        Some(false)
    }

    fn bang_line(&mut self, line: &str) {
        // (Click's lines keep their newline, so a word alone still ends in a space.)
        let word = line.split(|c: char| c.is_ascii_whitespace()).next().unwrap_or("");
        match word {
            "!data" | "!contents" => self.bang_data(line),
            "!proto" => {
                let words = split_words(line);
                if words.len() != 2 {
                    self.warn("bad !proto");
                } else {
                    self.bang_proto(Some(&words[1]), "!proto");
                }
            }
            "!flowid" => self.bang_flowid(line),
            "!binary" => {
                self.warn("binary IP summary dumps are not supported; reading stops here");
                self.binary = true;
            }
            _ => {}
        }
    }
}

/// A protocol: a number below 256, `T`, `U`, `I`, or a name.
fn parse_proto(w: &str) -> Option<u8> {
    match w {
        "T" | "tcp" => Some(6),
        "U" | "udp" => Some(17),
        "I" | "icmp" => Some(1),
        _ => u8::from_arg(w),
    }
}

/// `[!flowid] SRC SPORT DST DPORT [PROTO]`, `-` for any part not given.
fn parse_flowid(text: &str) -> Option<(FlowId, Option<String>)> {
    let words = split_words(text);
    let words: Vec<&str> = words
        .iter()
        .map(String::as_str)
        .skip(usize::from(text.starts_with('!')))
        .collect();
    if words.len() < 4 {
        return None;
    }
    let addr = |w: &str| -> Option<[u8; 4]> {
        if w == "-" {
            Some([0; 4])
        } else {
            crate::args::parse_ipv4(w).map(|a| a.octets())
        }
    };
    let port = |w: &str| -> Option<u16> {
        if w == "-" {
            Some(0)
        } else {
            u16::from_arg(w)
        }
    };
    let flowid = FlowId {
        src: addr(words[0])?,
        sport: port(words[1])?,
        dst: addr(words[2])?,
        dport: port(words[3])?,
    };
    Some((flowid, words.get(4).map(|s| s.to_string())))
}

/// Packets a `run` sends at most of a MULTIPACKET line.
const MULTI_BATCH: u32 = packet::MAX_BATCH as u32;

/// Click's MULTIPACKET: a line standing for several packets (`count` above 1) makes
/// that many, the length (with the extra length) shared out among them. Like Click's
/// work packet, one packet is kept and the others are copies of it made as they go.
struct Multi {
    /// The line's packet, as long as each copy (its own length is set at the end).
    work: Packet,
    /// The bytes the line's packet holds.
    len: u32,
    /// Each copy's length.
    each: u32,
    /// The extra length not yet given to copies: the last packet's, once they are made.
    extra: u32,
    /// Copies still to make before the last packet (the work packet itself).
    copies: u32,
}

impl Multi {
    /// The packets of `p`; `Err(p)` for a packet standing for itself only (or with no
    /// IP header to share a length in), which goes as it is.
    fn new(mut p: Packet) -> Result<Multi, Packet> {
        let extra_packets = p.anno().u32_at(EXTRA_PACKETS_ANNO_OFFSET);
        let count = match extra_packets.checked_add(1) {
            Some(c) if c > 1 && p.network_header().is_some_and(|ip| ip.len() >= 20) => c,
            _ => return Err(p),
        };
        let len = p.len() as u32;
        let mut extra = p.anno().extra_length();
        let mut each = len.wrapping_add(extra) / count;
        if each < len {
            each = len;
            extra = len.wrapping_mul(count - 1);
        }
        set_packet_length(&mut p, each);
        Ok(Multi {
            work: p,
            len,
            each,
            extra,
            copies: count - 1,
        })
    }

    /// The next packet: a copy, or the work packet itself once no copy is left (with
    /// `None`: the line is done).
    fn next(mut self) -> (Packet, Option<Multi>) {
        if self.copies == 0 {
            let mut p = self.work;
            set_packet_length(&mut p, self.len.wrapping_add(self.extra));
            p.anno_mut().set_u32_at(EXTRA_PACKETS_ANNO_OFFSET, 0);
            p.anno_mut().set_extra_length(self.extra);
            return (p, None);
        }
        let mut c = self.work.clone();
        c.anno_mut().set_u32_at(EXTRA_PACKETS_ANNO_OFFSET, 0);
        c.anno_mut().set_extra_length(self.each - self.len);
        self.extra = self.extra.wrapping_sub(self.each);
        self.copies -= 1;
        (c, Some(self))
    }
}

/// Click's `set_packet_lengths`: the IP length (and a UDP length) of a packet that
/// stands for `length` bytes.
fn set_packet_length(p: &mut Packet, length: u32) {
    let Some(ip) = p.network_header_mut() else {
        return;
    };
    if ip.len() < 20 {
        return;
    }
    if ip[2..4] == (length as u16).to_be_bytes() {
        return;
    }
    ip[2..4].copy_from_slice(&(length as u16).to_be_bytes());
    let hl = u32::from(ip[0] & 0xf) * 4;
    let udp = ip[9] == 17;
    if udp {
        if let Some(t) = p.transport_header_mut().filter(|t| t.len() >= 6) {
            t[4..6].copy_from_slice(&(length.wrapping_sub(hl) as u16).to_be_bytes());
        }
    }
}

/// Worker 0's instance.
struct Reading {
    reader: Reader,
}

impl Element for Reading {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, _out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        batch.clear();
    }

    fn is_source(&self) -> bool {
        true
    }

    fn run(&mut self, out: &mut Outputs<'_>, cx: &mut Context<'_>) -> TaskStatus {
        let r = &mut self.reader;
        if r.shared.stop_requested.swap(false, Ordering::AcqRel) {
            cx.request_stop();
        }
        if r.finished {
            return TaskStatus::Done;
        }
        if !r.shared.active.load(Ordering::Relaxed) {
            return TaskStatus::Idle;
        }
        if r.pending.is_none() && r.multi.is_none() {
            match r.next_packets() {
                Some(_) => {}
                None => {
                    r.finished = true;
                    r.shared.filepos.store(r.pos, Ordering::Relaxed);
                    if r.stop {
                        cx.request_stop();
                    }
                    return TaskStatus::Done;
                }
            }
        }
        r.shared.filepos.store(r.pos, Ordering::Relaxed);
        if let Some(p) = r.pending.take() {
            out.push(0, p);
            r.shared.count.fetch_add(1, Ordering::Relaxed);
        } else {
            // A batch at most, so the worker gets to see a stop between two.
            let mut sent = 0;
            while sent < MULTI_BATCH {
                let Some(m) = r.multi.take() else {
                    break;
                };
                let (p, rest) = m.next();
                out.push(0, p);
                r.multi = rest;
                sent += 1;
            }
            r.shared.count.fetch_add(u64::from(sent), Ordering::Relaxed);
        }
        TaskStatus::Busy
    }
}

struct FromIPSummaryDumpSpec {
    print_name: String,
    filesize: Option<u64>,
    shared: Arc<Shared>,
    reader: Mutex<Option<Reader>>,
}

impl ElementSpec for FromIPSummaryDumpSpec {
    fn instantiate(&self, worker: WorkerInfo) -> Box<dyn Element> {
        if worker.index == 0 {
            if let Some(reader) = lock(&self.reader).take() {
                return Box::new(Reading { reader });
            }
        }
        Box::new(IdleSource)
    }

    fn handlers(&self) -> Vec<HandlerInfo> {
        vec![
            HandlerInfo::read("count"),
            HandlerInfo::read("bad_lines"),
            HandlerInfo::read("bad_fields"),
            HandlerInfo::read_write("active"),
            HandlerInfo::write("stop"),
            HandlerInfo::read("encap"),
            HandlerInfo::read("sampling_prob"),
            HandlerInfo::read("filename"),
            HandlerInfo::read("filesize"),
            HandlerInfo::read("filepos"),
        ]
    }

    fn read_handler(&self, name: &str) -> Option<String> {
        let s = &self.shared;
        Some(match name {
            "count" => s.count.load(Ordering::Relaxed).to_string(),
            "bad_lines" => s.bad_lines.load(Ordering::Relaxed).to_string(),
            "bad_fields" => s.bad_fields.load(Ordering::Relaxed).to_string(),
            "active" => s.active.load(Ordering::Relaxed).to_string(),
            "encap" => "IP".to_string(),
            "sampling_prob" => "1".to_string(),
            "filename" => self.print_name.clone(),
            "filesize" => self.filesize.map_or_else(|| "-".to_string(), |n| n.to_string()),
            "filepos" => s.filepos.load(Ordering::Relaxed).to_string(),
            _ => return None,
        })
    }

    fn write_handler(&self, name: &str, value: &str) -> Option<Result<(), String>> {
        let s = &self.shared;
        crate::elements::pcap::fromdump::write_reading_switch(name, value, &s.active, &s.stop_requested)
    }
}

fn arg<T>(r: Result<T, String>, cx: &BuildContext) -> Result<T, ConfigError> {
    r.map_err(|e| cx.error(e))
}

impl ElementClass for FromIPSummaryDumpClass {
    fn name(&self) -> &'static str {
        "FromIPSummaryDump"
    }

    fn port_count(&self) -> PortCount {
        PortCount::parse("0/1")
    }

    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let filename: Option<String> = arg(args.positional("FILENAME"), cx)?;
        let stop = arg(args.keyword::<bool>("STOP"), cx)?.unwrap_or(false);
        let active = arg(args.keyword::<bool>("ACTIVE"), cx)?.unwrap_or(true);
        // The buffer is always zero-filled: ZERO false lets Click leave whatever its
        // buffer held, which zeros are one case of.
        arg(args.keyword::<bool>("ZERO"), cx)?;
        let checksum = arg(args.keyword::<bool>("CHECKSUM"), cx)?.unwrap_or(false);
        let default_proto = arg(args.keyword::<u8>("PROTO"), cx)?.unwrap_or(6);
        let multipacket = arg(args.keyword::<bool>("MULTIPACKET"), cx)?.unwrap_or(false);
        let mut contents: Option<Raw> = None;
        for kw in ["DEFAULT_CONTENTS", "DEFAULT_FIELDS", "CONTENTS", "FIELDS"] {
            if let Some(v) = arg(args.keyword::<Raw>(kw), cx)? {
                contents = Some(v);
            }
        }
        let mut flowid_text: Option<Raw> = None;
        for kw in ["DEFAULT_FLOWID", "FLOWID"] {
            if let Some(v) = arg(args.keyword::<Raw>(kw), cx)? {
                flowid_text = Some(v);
            }
        }
        let data = arg(args.keyword::<DataArg>("DATA"), cx)?;
        arg(args.finish(), cx)?;

        let columns = match &contents {
            Some(Raw(text)) => {
                Columns::new(arg(fields::parse_list(text), cx)?.into_iter().map(Some).collect())
            }
            None => Columns::default(),
        };
        let mut settings = BuildSettings {
            default_proto,
            flowid: None,
            minor_version: MINOR_VERSION,
            checksum,
        };
        if let Some(Raw(text)) = &flowid_text {
            let (flowid, proto) = parse_flowid(text).ok_or_else(|| cx.error("bad !flowid specification"))?;
            settings.flowid = Some(flowid);
            if let Some(p) = proto {
                settings.default_proto =
                    parse_proto(&p).ok_or_else(|| cx.error("bad protocol in !flowid"))?;
            }
        }

        let (input, print_name, filesize) = match (filename, data) {
            (Some(_), Some(_)) => return Err(cx.error("FILENAME and DATA conflict")),
            (None, None) => return Err(cx.error("FILENAME: required argument missing")),
            (None, Some(DataArg(bytes))) => {
                let n = bytes.len() as u64;
                (Input::Data(Cursor::new(bytes)), "<data>".to_string(), Some(n))
            }
            (Some(name), None) if name == "-" => (
                Input::Stdin(BufReader::new(io::stdin())),
                "<stdin>".to_string(),
                None,
            ),
            (Some(name), None) => {
                let path = cx.resolve_path(&name);
                let f = File::open(&path).map_err(|e| cx.error(format!("{}: {}", name, strerror(&e))))?;
                let size = f.metadata().ok().filter(|m| m.is_file()).map(|m| m.len());
                (Input::File(BufReader::with_capacity(64 * 1024, f)), name, size)
            }
        };
        let shared = Arc::new(Shared {
            count: AtomicU64::new(0),
            bad_lines: AtomicU64::new(0),
            bad_fields: AtomicU64::new(0),
            active: AtomicBool::new(active),
            stop_requested: AtomicBool::new(false),
            filepos: AtomicU64::new(0),
        });
        let reader = Reader {
            input,
            print_name: print_name.clone(),
            line_no: 0,
            pos: 0,
            line: Vec::new(),
            ranges: Vec::new(),
            columns,
            settings,
            stop,
            multipacket,
            pending: None,
            multi: None,
            complained: false,
            binary: false,
            finished: false,
            shared: shared.clone(),
        };
        Ok(Arc::new(FromIPSummaryDumpSpec {
            print_name,
            filesize,
            shared,
            reader: Mutex::new(Some(reader)),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Worker 0's instance reading `data`, with MULTIPACKET.
    fn reading(data: &str) -> Reading {
        let (fields, lines) = data.split_once('\n').unwrap();
        let mut r = Reading {
            reader: Reader {
                input: Input::Data(Cursor::new(lines.as_bytes().to_vec())),
                print_name: "<data>".to_string(),
                line_no: 1,
                pos: 0,
                line: Vec::new(),
                ranges: Vec::new(),
                columns: Columns::default(),
                settings: BuildSettings {
                    default_proto: 6,
                    flowid: None,
                    minor_version: MINOR_VERSION,
                    checksum: false,
                },
                stop: false,
                multipacket: true,
                pending: None,
                multi: None,
                complained: false,
                binary: false,
                finished: false,
                shared: Arc::new(Shared {
                    count: AtomicU64::new(0),
                    bad_lines: AtomicU64::new(0),
                    bad_fields: AtomicU64::new(0),
                    active: AtomicBool::new(true),
                    stop_requested: AtomicBool::new(false),
                    filepos: AtomicU64::new(0),
                }),
            },
        };
        r.reader.bang_data(fields);
        r
    }

    /// Runs `r` once: its status and the packets it sent.
    fn run(r: &mut Reading, stop: &StopFlag) -> (TaskStatus, PacketBatch) {
        let mut outs = vec![PacketBatch::new()];
        let mut cx = Context::new(WorkerInfo { index: 0, count: 1 }, stop);
        let st = r.run(&mut Outputs::new(&mut outs), &mut cx);
        (st, outs.pop().unwrap())
    }

    #[test]
    fn a_huge_count_holds_one_packet_and_goes_a_batch_a_run() {
        let mut r = reading("!data ip_src ip_len count\n1.2.3.4 100 4000000000\n");
        let stop = StopFlag::new();
        for i in 1..=3u32 {
            let (st, sent) = run(&mut r, &stop);
            assert_eq!(st, TaskStatus::Busy);
            assert_eq!(sent.len(), MULTI_BATCH as usize);
            // 100 bytes is less than a byte a packet: each is the 40 bytes made.
            assert!(sent
                .iter()
                .all(|p| p.len() == 40 && p.data()[3] == 40 && p.anno().extra_length() == 0));
            // What is held: the one work packet and what is left to make of it.
            assert!(r.reader.pending.is_none());
            let m = r.reader.multi.as_ref().expect("the line is not done");
            assert_eq!(m.copies, 4_000_000_000 - 1 - i * MULTI_BATCH);
            assert_eq!(m.work.len(), 40);
            assert_eq!(
                r.reader.shared.count.load(Ordering::Relaxed),
                u64::from(i * MULTI_BATCH)
            );
        }
        // The stop handler: the next run asks the router to stop and sends nothing.
        r.reader.shared.active.store(false, Ordering::Relaxed);
        r.reader.shared.stop_requested.store(true, Ordering::Release);
        let (st, sent) = run(&mut r, &stop);
        assert!(stop.is_requested());
        assert_eq!(st, TaskStatus::Idle);
        assert!(sent.is_empty());
    }

    #[test]
    fn the_last_packet_of_a_line_ends_its_batch() {
        // 3 packets of 200 bytes: 66, 66 and 68 (IP lengths), as one batch.
        let mut r = reading("!data ip_src ip_len count\n1.0.0.1 200 3\n1.0.0.2 -\n");
        let stop = StopFlag::new();
        let (_, sent) = run(&mut r, &stop);
        let lens: Vec<(u8, u32, usize)> = sent
            .iter()
            .map(|p| (p.data()[3], p.anno().extra_length(), p.len()))
            .collect();
        assert_eq!(lens, vec![(66, 26, 40), (66, 26, 40), (68, 28, 40)]);
        assert!(r.reader.multi.is_none());
        // The next line is the next run's.
        let (_, sent) = run(&mut r, &stop);
        assert_eq!(sent.len(), 1);
        assert_eq!(&sent.iter().next().unwrap().data()[12..16], &[1, 0, 0, 2]);
        assert_eq!(run(&mut r, &stop).0, TaskStatus::Done);
        assert_eq!(r.reader.shared.count.load(Ordering::Relaxed), 4);
    }
}
