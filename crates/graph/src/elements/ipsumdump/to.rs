//! `ToIPSummaryDump(FILENAME [, keywords FIELDS/CONTENTS, VERBOSE, HEADER, BANNER,
//! MULTIPACKET, BAD_PACKETS, CAREFUL_TRUNC, EXTRA_LENGTH, BINARY])`: writes a line of
//! fields per packet, as Click's element of the same name (ASCII format), and passes
//! the packets on to its output if it has one.
//!
//! The file is created and its header written when the element is configured, through
//! [`crate::outfile`] as ToDump's capture is. Each worker's instance formats its batch
//! into its own buffer, then writes the buffer under the file's lock, once a batch and
//! whenever the buffer passes [`FLUSH_AT`] bytes (a MULTIPACKET packet standing for
//! billions of packets has a line for each), so the buffer stays small.

use super::fields::{self, Field};
use super::write::{summary, LineOptions};
use super::Raw;
use crate::args::Args;
use crate::element::*;
use crate::elements::pcap::strerror;
use crate::elements::shared::lock;
use crate::error::ConfigError;
use crate::outfile;
use packet::anno::EXTRA_PACKETS_ANNO_OFFSET;
use packet::{Packet, PacketBatch};
use std::io::{self, BufWriter, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

pub struct ToIPSummaryDumpClass;

/// Bytes of lines a worker's buffer holds before they go to the file in the middle of
/// a batch (it holds one line more at most).
const FLUSH_AT: usize = 64 * 1024;

struct Writer {
    out: Box<dyn Write + Send>,
    /// Cleared after a write error: nothing more is written.
    active: bool,
}

struct Shared {
    filename: String,
    fields: Vec<Field>,
    opts: LineOptions,
    multipacket: bool,
    /// Lines written (Click's `output_count`).
    count: AtomicU64,
    writer: Mutex<Writer>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        let _ = lock(&self.writer).out.flush();
    }
}

struct ToIPSummaryDumpSpec {
    /// The file, under a temporary name until the configuration commits.
    staged: Mutex<Option<outfile::Staged>>,
    /// The header of an output written at once (standard output, a FIFO), written at
    /// the commit so a configuration that never runs writes nothing into it.
    deferred_header: Mutex<Option<Vec<u8>>>,
    shared: Arc<Shared>,
}

impl ElementSpec for ToIPSummaryDumpSpec {
    fn instantiate(&self, _worker: WorkerInfo) -> Box<dyn Element> {
        Box::new(ToIPSummaryDump {
            shared: self.shared.clone(),
            text: Vec::with_capacity(4096),
            held: 0,
            bad: Vec::new(),
        })
    }

    fn commit(&self) -> Result<(), String> {
        if let Some(h) = lock(&self.deferred_header).take() {
            lock(&self.shared.writer)
                .out
                .write_all(&h)
                .map_err(|e| format!("{}: {}", self.shared.filename, strerror(&e)))?;
        }
        lock(&self.staged)
            .as_ref()
            .map_or(Ok(()), outfile::Staged::commit)
    }

    fn handlers(&self) -> Vec<HandlerInfo> {
        vec![
            HandlerInfo::read("filename"),
            HandlerInfo::read("count"),
            HandlerInfo::write("flush"),
        ]
    }

    fn read_handler(&self, name: &str) -> Option<String> {
        match name {
            "filename" => Some(self.shared.filename.clone()),
            "count" => Some(self.shared.count.load(Ordering::Relaxed).to_string()),
            _ => None,
        }
    }

    fn write_handler(&self, name: &str, _value: &str) -> Option<Result<(), String>> {
        (name == "flush").then(|| {
            lock(&self.shared.writer)
                .out
                .flush()
                .map_err(|e| format!("{}: {}", self.shared.filename, strerror(&e)))
        })
    }

    fn cleanup(&self) {
        let mut w = lock(&self.shared.writer);
        if let Err(e) = w.out.flush() {
            crate::warn!("ToIPSummaryDump({}): {}", self.shared.filename, strerror(&e));
            w.out = Box::new(io::sink());
            w.active = false;
        }
    }
}

/// A worker's instance: its own buffers, reused batch after batch.
struct ToIPSummaryDump {
    shared: Arc<Shared>,
    /// The batch's lines not yet written.
    text: Vec<u8>,
    /// How many lines `text` holds (`!bad` lines aside).
    held: u64,
    /// One packet's `!bad` line.
    bad: Vec<u8>,
}

impl ToIPSummaryDump {
    fn line(&mut self, p: &Packet) {
        self.held += 1;
        let s = &*self.shared;
        self.bad.clear();
        let start = self.text.len();
        summary(p, &s.fields, &s.opts, &mut self.text, &mut self.bad);
        if !self.bad.is_empty() {
            // The `!bad` line goes first.
            self.text.extend_from_slice(&self.bad);
            self.text[start..].rotate_right(self.bad.len());
        }
    }

    /// Writes the lines `text` holds under the file's lock, and counts them; false
    /// once the file takes no more (after a write error).
    fn flush(&mut self) -> bool {
        let active = {
            let mut w = lock(&self.shared.writer);
            if w.active && !self.text.is_empty() {
                if let Err(e) = w.out.write_all(&self.text) {
                    w.active = false;
                    crate::warn!("ToIPSummaryDump({}): {}", self.shared.filename, strerror(&e));
                } else {
                    self.shared.count.fetch_add(self.held, Ordering::Relaxed);
                }
            }
            w.active
        };
        self.text.clear();
        self.held = 0;
        active
    }

    /// Click's MULTIPACKET: a packet standing for `1 + extra packets` packets gets a
    /// line for each, the length (with the extra length) shared out among them. The
    /// lines go to the file as the buffer fills, as Click writes them one by one.
    fn lines(&mut self, p: &mut Packet) {
        let extra_packets = p.anno().u32_at(EXTRA_PACKETS_ANNO_OFFSET);
        if !self.shared.multipacket || extra_packets == 0 {
            self.line(p);
            return;
        }
        let count = extra_packets.wrapping_add(1);
        let len = p.len() as u32;
        let saved_extra = p.anno().extra_length();
        let mut total = len;
        if self.shared.opts.extra_length {
            total = total.wrapping_add(saved_extra);
        }
        total = total.max(count.wrapping_mul(len));
        p.anno_mut().set_u32_at(EXTRA_PACKETS_ANNO_OFFSET, 0);
        for i in (1..=count).rev() {
            let l = total / i;
            p.anno_mut().set_extra_length(l.wrapping_sub(len));
            total -= l;
            self.line(p);
            if self.text.len() >= FLUSH_AT && !self.flush() {
                // Nothing more is written: the rest of the lines would go nowhere.
                break;
            }
        }
        // The packet goes on as it came.
        p.anno_mut().set_u32_at(EXTRA_PACKETS_ANNO_OFFSET, extra_packets);
        p.anno_mut().set_extra_length(saved_extra);
    }
}

impl Element for ToIPSummaryDump {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        self.text.clear();
        self.held = 0;
        for p in batch.as_mut_slice() {
            self.lines(p);
        }
        self.flush();
        out.push_batch(0, batch);
    }
}

fn arg<T>(r: Result<T, String>, cx: &BuildContext) -> Result<T, ConfigError> {
    r.map_err(|e| cx.error(e))
}

/// The host's name, for VERBOSE's `!host` line.
fn hostname() -> Option<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    Some(name.trim().to_string()).filter(|n| !n.is_empty())
}

/// The file's `!` lines, as Click's `initialize` writes them.
fn header(fields: &[Field], banner: Option<&str>, verbose: bool) -> Vec<u8> {
    let mut h = Vec::new();
    h.extend_from_slice(b"!IPSummaryDump 1.3\n");
    if let Some(b) = banner.filter(|b| !b.is_empty()) {
        h.extend_from_slice(b"!creator ");
        super::write::quote(b.as_bytes(), &mut h);
        h.push(b'\n');
    }
    if verbose {
        if let Some(host) = hostname() {
            let _ = writeln!(h, "!host {}", host);
        }
        let now = packet::Timestamp::now();
        let _ = writeln!(h, "!runtime {} ({})", now, ctime(now.sec));
    }
    h.extend_from_slice(b"!data");
    for f in fields {
        h.push(b' ');
        h.extend_from_slice(f.name().as_bytes());
    }
    h.push(b'\n');
    h
}

/// C's `ctime` without its newline, in UTC (`Tue Jul 24 17:53:30 2001`).
fn ctime(sec: i64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = sec.div_euclid(86_400);
    let secs = sec.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{} {} {:2} {:02}:{:02}:{:02} {}",
        DAYS[days.rem_euclid(7) as usize],
        MONTHS[(month - 1) as usize],
        day,
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        year
    )
}

impl ElementClass for ToIPSummaryDumpClass {
    fn name(&self) -> &'static str {
        "ToIPSummaryDump"
    }

    fn port_count(&self) -> PortCount {
        PortCount::parse("1/0-1")
    }

    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let filename: String = arg(args.required("FILENAME"), cx)?;
        let mut contents: Option<Raw> = None;
        for kw in ["FIELDS", "CONTENTS", "DATA"] {
            if let Some(v) = arg(args.keyword::<Raw>(kw), cx)? {
                contents = Some(v);
            }
        }
        let verbose = arg(args.keyword::<bool>("VERBOSE"), cx)?.unwrap_or(false);
        let header_on = arg(args.keyword::<bool>("HEADER"), cx)?.unwrap_or(true);
        let banner = arg(args.keyword::<String>("BANNER"), cx)?;
        let multipacket = arg(args.keyword::<bool>("MULTIPACKET"), cx)?.unwrap_or(false);
        let bad_packets = arg(args.keyword::<bool>("BAD_PACKETS"), cx)?.unwrap_or(false);
        let careful_trunc = arg(args.keyword::<bool>("CAREFUL_TRUNC"), cx)?.unwrap_or(true);
        let extra_length = arg(args.keyword::<bool>("EXTRA_LENGTH"), cx)?.unwrap_or(true);
        let binary = arg(args.keyword::<bool>("BINARY"), cx)?.unwrap_or(false);
        arg(args.finish(), cx)?;
        if binary {
            return Err(cx.error("BINARY is not supported (only the ASCII format)"));
        }
        let fields = arg(
            fields::parse_list(contents.as_ref().map_or("timestamp ip_src", |Raw(text)| text)),
            cx,
        )?;
        // A line per packet already counts the packets a line stands for.
        let multipacket = multipacket && !fields.contains(&Field::Count);

        let header = if header_on {
            header(&fields, banner.as_deref(), verbose)
        } else {
            Vec::new()
        };
        let mut staged = None;
        let mut deferred_header = None;
        let (print_name, out): (String, Box<dyn Write + Send>) = if filename == "-" {
            deferred_header = Some(header);
            ("<stdout>".to_string(), Box::new(BufWriter::new(io::stdout())))
        } else {
            let path = cx.resolve_path(&filename);
            let (f, s) =
                outfile::create(&path).map_err(|e| cx.error(format!("{}: {}", filename, strerror(&e))))?;
            let mut o: Box<dyn Write + Send> = Box::new(BufWriter::with_capacity(64 * 1024, f));
            if s.is_staged() {
                o.write_all(&header)
                    .map_err(|e| cx.error(format!("{}: {}", filename, strerror(&e))))?;
            } else {
                deferred_header = Some(header);
            }
            staged = Some(s);
            (filename, o)
        };
        Ok(Arc::new(ToIPSummaryDumpSpec {
            staged: Mutex::new(staged),
            deferred_header: Mutex::new(deferred_header),
            shared: Arc::new(Shared {
                filename: print_name,
                fields,
                opts: LineOptions {
                    bad_packets,
                    careful_trunc,
                    extra_length,
                },
                multipacket,
                count: AtomicU64::new(0),
                writer: Mutex::new(Writer { out, active: true }),
            }),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elements::ipsumdump::fields::parse_list;

    /// An output that keeps what is written, and the longest single write.
    #[derive(Clone, Default)]
    struct Recorder(Arc<Mutex<(Vec<u8>, usize)>>);

    impl Write for Recorder {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let mut r = lock(&self.0);
            r.0.extend_from_slice(buf);
            r.1 = r.1.max(buf.len());
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_huge_multipacket_packet_is_written_as_its_lines_fill_the_buffer() {
        let rec = Recorder::default();
        let mut e = ToIPSummaryDump {
            shared: Arc::new(Shared {
                filename: "rec".to_string(),
                fields: parse_list("wire_len ip_len").unwrap(),
                opts: LineOptions {
                    bad_packets: false,
                    careful_trunc: true,
                    extra_length: true,
                },
                multipacket: true,
                count: AtomicU64::new(0),
                writer: Mutex::new(Writer {
                    out: Box::new(rec.clone()),
                    active: true,
                }),
            }),
            text: Vec::with_capacity(4096),
            held: 0,
            bad: Vec::new(),
        };
        // 200,000 packets of 20 bytes (an IP header, protocol 0, IP length 20).
        let mut ip = [0u8; 20];
        ip[0] = 0x45;
        ip[3] = 20;
        let mut p = Packet::from_slice(&ip);
        p.set_network_header(0, 20);
        p.anno_mut().set_u32_at(EXTRA_PACKETS_ANNO_OFFSET, 199_999);
        let mut batch: PacketBatch = std::iter::once(p).collect();
        let mut outs = vec![PacketBatch::new()];
        let stop = StopFlag::new();
        let mut cx = Context::new(WorkerInfo { index: 0, count: 1 }, &stop);
        e.push(0, &mut batch, &mut Outputs::new(&mut outs), &mut cx);
        let (text, longest) = lock(&rec.0).clone();
        assert_eq!(text, "20 20\n".repeat(200_000).into_bytes());
        assert_eq!(e.shared.count.load(Ordering::Relaxed), 200_000);
        // Every write was a buffer of one line past FLUSH_AT at most (the last less),
        // and the buffer never grew past that.
        assert!(longest <= FLUSH_AT + 6, "a write of {} bytes", longest);
        assert!(e.text.is_empty());
        assert!(e.text.capacity() <= 2 * FLUSH_AT, "{}", e.text.capacity());
        // The packet went on as it came.
        let p = outs[0].iter().next().unwrap();
        assert_eq!(p.anno().u32_at(EXTRA_PACKETS_ANNO_OFFSET), 199_999);
        assert_eq!(p.anno().extra_length(), 0);
    }

    #[test]
    fn ctime_reads_as_cs() {
        assert_eq!(ctime(0), "Thu Jan  1 00:00:00 1970");
        assert_eq!(ctime(996_022_410), "Wed Jul 25 00:53:30 2001");
        assert_eq!(ctime(951_782_400), "Tue Feb 29 00:00:00 2000");
    }
}
