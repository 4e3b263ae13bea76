//! `FromDump(FILENAME [, TIMING, keywords STOP, ACTIVE, SAMPLE, FORCE_IP, START,
//! START_AFTER, END, END_AFTER, INTERVAL, FILEPOS, MMAP, BURST])`: reads packets from a
//! tcpdump file, as Click's FromDump (push mode).
//!
//! The file is opened and its header checked when the element is configured, so a
//! missing or corrupt file is a configuration error naming the file. Reading is tied to
//! one file, so only worker 0 gets a reading instance; the others get an idle one. One
//! packet leaves per `run` (Click's task emits one packet per scheduling), unless the
//! `BURST` keyword asks for more.
//!
//! As Click's, a FromDump replacing one of the same name and file on `hotconfig` reads
//! on from where the old one was ([`ElementSpec::take_state`]): the reading instance
//! gives its reader back to the spec when its worker stops, and the replacing spec takes
//! the open file, its position and the packet read ahead. Standard input is read by one
//! FromDump at a time: one built while another reads it (a replacing configuration's)
//! reads nothing itself unless it takes the other's.

use super::format::{self, FileHeader, FILE_HEADER_LEN, RECORD_HEADER_LEN};
use super::{strerror, Fixed28, TimeArg};
use crate::args::{Args, FromArg};
use crate::element::*;
use crate::elements::shared::lock;
use crate::elements::sources::IdleSource;
use crate::error::ConfigError;
use packet::{Packet, PacketBatch};
use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

const SAMPLING_SHIFT: u32 = 28;
const SAMPLING_ONE: u64 = 1 << SAMPLING_SHIFT;
/// Records Click's task looks at per emitted packet before it yields.
const RETRIES: usize = 16;
const READ_BUFFER: usize = 64 * 1024;

pub struct FromDumpClass;

enum Input {
    File(BufReader<File>),
    Stdin(BufReader<io::Stdin>, StdinClaim),
}

/// Standard input is being read by a FromDump (released when its input goes).
static STDIN_CLAIMED: AtomicBool = AtomicBool::new(false);

struct StdinClaim;

impl StdinClaim {
    /// The claim, unless another FromDump holds it.
    fn take() -> Option<StdinClaim> {
        (!STDIN_CLAIMED.swap(true, Ordering::AcqRel)).then_some(StdinClaim)
    }
}

impl Drop for StdinClaim {
    fn drop(&mut self) {
        STDIN_CLAIMED.store(false, Ordering::Release);
    }
}

impl Read for Input {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Input::File(f) => f.read(buf),
            Input::Stdin(s, _) => s.read(buf),
        }
    }
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// State visible to handlers, shared by the spec and the reading instance.
struct Shared {
    count: AtomicU64,
    active: AtomicBool,
    /// The `stop` handler was written: the reading instance asks the router to stop.
    stop_requested: AtomicBool,
    filepos: AtomicU64,
    packet_filepos: AtomicU64,
}

/// Start and end times, as Click's FromDump keeps them (nanoseconds).
struct Times {
    first: i128,
    have_first: bool,
    first_relative: bool,
    last: i128,
    have_last: bool,
    last_relative: bool,
    last_interval: bool,
    have_any: bool,
}

/// Everything the reading instance owns.
struct Reader {
    input: Input,
    pos: u64,
    header: FileHeader,
    filename: String,
    force_ip: bool,
    timing: bool,
    stop: bool,
    /// END, END_AFTER or INTERVAL was given: reaching it (or the end of the file)
    /// makes the element inactive, as Click's default end call `active false`.
    end_deactivates: bool,
    burst: usize,
    sampling_prob: u64,
    rng: u64,
    times: Times,
    timing_base: Option<(Instant, i128)>,
    pending: Option<Packet>,
    finished: bool,
    /// Built while another FromDump read standard input, and took nothing from it:
    /// says so once and reads nothing.
    stdin_busy: bool,
    shared: Arc<Shared>,
}

enum Read1 {
    Packet(Packet),
    Skipped,
    /// The END time was reached; the element went inactive.
    Inactive,
    /// No more packets.
    End,
}

impl Reader {
    fn skip(&mut self, n: u64) -> bool {
        if n == 0 {
            return true;
        }
        match io::copy(&mut (&mut self.input).take(n), &mut io::sink()) {
            Ok(k) => {
                self.pos += k;
                true
            }
            Err(e) => {
                crate::warn!("{}: {}", self.filename, strerror(&e));
                false
            }
        }
    }

    fn read_bytes(&mut self, buf: &mut [u8]) -> Option<usize> {
        match read_full(&mut self.input, buf) {
            Ok(n) => {
                self.pos += n as u64;
                Some(n)
            }
            Err(e) => {
                crate::warn!("{}: {}", self.filename, strerror(&e));
                None
            }
        }
    }

    fn random(&mut self) -> u64 {
        // xorshift64*
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32
    }

    fn prepare_times(&mut self, ts: i128) {
        let t = &mut self.times;
        if t.first_relative {
            t.first += ts;
        }
        if t.last_relative {
            t.last += ts;
        } else if t.last_interval {
            t.last += t.first;
        }
        if self.timing {
            self.timing_base = Some((Instant::now(), ts));
        }
        t.have_any = true;
    }

    /// Click's end call: `stop` with STOP, `active false` with an END time.
    fn call_end(&mut self) {
        if self.stop {
            self.shared.active.store(false, Ordering::Relaxed);
            self.shared.stop_requested.store(true, Ordering::Release);
        } else if self.end_deactivates {
            self.shared.active.store(false, Ordering::Relaxed);
        }
    }

    /// Reads one record, as Click's `FromDump::read_packet`.
    fn read_record(&mut self) -> Read1 {
        self.shared.packet_filepos.store(self.pos, Ordering::Relaxed);
        let mut h = [0u8; RECORD_HEADER_LEN];
        match self.read_bytes(&mut h) {
            Some(RECORD_HEADER_LEN) => {}
            _ => return Read1::End,
        }
        let rh = match format::parse_record_header(&self.header, &h) {
            Ok(rh) => rh,
            Err(e) => {
                crate::warn!("{}: {}", self.filename, e);
                return Read1::End;
            }
        };
        if !self.skip(self.header.record_extra as u64) {
            return Read1::End;
        }
        let body = rh.caplen as u64 + rh.skip as u64;
        let ts = rh.ts.as_nanos();
        if !self.times.have_any {
            self.prepare_times(ts);
        }
        if self.times.have_first {
            if ts < self.times.first {
                return if self.skip(body) {
                    Read1::Skipped
                } else {
                    Read1::End
                };
            }
            self.times.have_first = false;
        }
        if self.times.have_last && ts >= self.times.last {
            self.times.have_last = false;
            self.call_end();
            if !self.shared.active.load(Ordering::Relaxed) {
                return if self.skip(body) {
                    Read1::Inactive
                } else {
                    Read1::End
                };
            }
        }
        if self.sampling_prob < SAMPLING_ONE && (self.random() & (SAMPLING_ONE - 1)) >= self.sampling_prob {
            return if self.skip(body) {
                Read1::Skipped
            } else {
                Read1::End
            };
        }
        let mut p = Packet::alloc(rh.caplen as usize);
        match self.read_bytes(p.data_mut()) {
            Some(n) if n == rh.caplen as usize => {}
            // A truncated last record: Click stops reading there, silently.
            _ => return Read1::End,
        }
        p.anno_mut().timestamp = rh.ts;
        p.anno_mut().set_extra_length(rh.extra_length());
        p.set_mac_header(0);
        if !self.skip(rh.skip as u64) {
            return Read1::End;
        }
        Read1::Packet(p)
    }

    fn due(&self, p: &Packet) -> bool {
        match self.timing_base {
            Some((start, base_ts)) => {
                let wait = p.anno().timestamp.as_nanos() - base_ts;
                wait <= start.elapsed().as_nanos() as i128
            }
            None => true,
        }
    }

    fn flush_counters(&self, emitted: u64) {
        if emitted > 0 {
            self.shared.count.fetch_add(emitted, Ordering::Relaxed);
        }
        self.shared.filepos.store(self.pos, Ordering::Relaxed);
    }
}

/// How one `run` ended.
enum Stop {
    Burst,
    Wait,
    Inactive,
    End,
}

impl Element for Reader {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, _out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        batch.clear();
    }

    fn is_source(&self) -> bool {
        true
    }

    fn run(&mut self, out: &mut Outputs<'_>, cx: &mut Context<'_>) -> TaskStatus {
        if self.shared.stop_requested.swap(false, Ordering::AcqRel) {
            cx.request_stop();
        }
        if self.stdin_busy {
            self.stdin_busy = false;
            crate::warn!("{}: standard input is read by another FromDump", self.filename);
        }
        if self.finished {
            return TaskStatus::Done;
        }
        if !self.shared.active.load(Ordering::Relaxed) {
            return TaskStatus::Idle;
        }
        let mut emitted = 0u64;
        let why = 'outer: loop {
            if emitted as usize >= self.burst {
                break Stop::Burst;
            }
            let mut tries = 0;
            loop {
                if tries == RETRIES {
                    break 'outer Stop::Burst;
                }
                tries += 1;
                let mut p = match self.pending.take() {
                    Some(p) => p,
                    None => match self.read_record() {
                        Read1::Packet(p) => p,
                        Read1::Skipped => continue,
                        Read1::Inactive => break 'outer Stop::Inactive,
                        Read1::End => break 'outer Stop::End,
                    },
                };
                if self.timing && !self.due(&p) {
                    self.pending = Some(p);
                    break 'outer Stop::Wait;
                }
                if self.force_ip {
                    match format::force_ip(p.data(), self.header.linktype) {
                        Some(ip) => {
                            p.set_network_header(ip.offset as isize, ip.header_len);
                            if let Some(d) = ip.dst {
                                p.anno_mut().set_dst_ip(d);
                            }
                        }
                        None => {
                            // Non-IP packets leave on output 1 (dropped if it is absent).
                            out.push(1, p);
                            continue;
                        }
                    }
                }
                out.push(0, p);
                emitted += 1;
                break;
            }
        };
        self.flush_counters(emitted);
        if self.shared.stop_requested.swap(false, Ordering::AcqRel) {
            cx.request_stop();
        }
        match why {
            Stop::Burst => TaskStatus::Busy,
            Stop::Wait | Stop::Inactive if emitted > 0 => TaskStatus::Busy,
            Stop::Wait | Stop::Inactive => TaskStatus::Idle,
            Stop::End => {
                self.call_end();
                if self.shared.stop_requested.swap(false, Ordering::AcqRel) {
                    cx.request_stop();
                }
                self.finished = true;
                if emitted > 0 {
                    TaskStatus::Busy
                } else {
                    TaskStatus::Done
                }
            }
        }
    }
}

struct FromDumpSpec {
    print_name: String,
    /// The file read (`None`: standard input): a replacing FromDump reading the same
    /// one takes this one's reader.
    path: Option<std::path::PathBuf>,
    filesize: Option<u64>,
    /// The file's link type (a FromDump that took another's reader has its file's).
    linktype: AtomicU32,
    sampling_prob: u64,
    shared: Arc<Shared>,
    /// The reader, while no worker's instance holds it (it comes back when the
    /// instance goes).
    reader: Arc<Mutex<Option<Reader>>>,
}

/// Worker 0's instance: the reader, given back to the spec when the instance goes.
struct Reading {
    reader: Option<Reader>,
    home: Arc<Mutex<Option<Reader>>>,
}

impl Drop for Reading {
    fn drop(&mut self) {
        *lock(&self.home) = self.reader.take();
    }
}

impl Element for Reading {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, _out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        batch.clear();
    }

    fn is_source(&self) -> bool {
        true
    }

    fn run(&mut self, out: &mut Outputs<'_>, cx: &mut Context<'_>) -> TaskStatus {
        match &mut self.reader {
            Some(r) => r.run(out, cx),
            None => TaskStatus::Done,
        }
    }
}

impl ElementSpec for FromDumpSpec {
    fn instantiate(&self, worker: WorkerInfo) -> Box<dyn Element> {
        if worker.index == 0 {
            if let Some(r) = lock(&self.reader).take() {
                return Box::new(Reading {
                    reader: Some(r),
                    home: self.reader.clone(),
                });
            }
        }
        Box::new(IdleSource)
    }

    fn state(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    /// Click's hotswap: the same file (or standard input): this element reads on
    /// from the old one's position, with the packet it read ahead, under its own
    /// settings (times, sampling, TIMING, STOP, BURST).
    fn take_state(&self, old: &dyn ElementSpec) -> bool {
        let Some(old) = state_of::<FromDumpSpec>(old) else {
            return false;
        };
        if self.path != old.path {
            return false;
        }
        let mut mine = lock(&self.reader);
        let Some(r) = mine.as_mut() else {
            return false;
        };
        let mut slot = lock(&old.reader);
        // FORCE_IP needs a link type it can find IP in (checked at the build against
        // the file this element opened; standard input held by the other one it could
        // not read).
        let linktype = match slot.as_ref() {
            Some(theirs) => theirs.header.linktype,
            None => return false,
        };
        if r.force_ip && linktype != format::dlt::RAW && !format::dlt_force_ipable(linktype) {
            return false;
        }
        let theirs = slot.take().expect("checked above");
        drop(slot);
        self.linktype.store(linktype, Ordering::Relaxed);
        r.input = theirs.input;
        r.pos = theirs.pos;
        r.header = theirs.header;
        r.pending = theirs.pending;
        r.finished = theirs.finished;
        r.stdin_busy = false;
        if r.header.linktype == format::dlt::RAW {
            r.force_ip = true;
        }
        if r.timing {
            r.timing_base = theirs.timing_base;
        }
        let s = &self.shared;
        s.filepos.store(r.pos, Ordering::Relaxed);
        s.packet_filepos.store(
            old.shared.packet_filepos.load(Ordering::Relaxed),
            Ordering::Relaxed,
        );
        true
    }

    fn handlers(&self) -> Vec<HandlerInfo> {
        vec![
            HandlerInfo::read("count"),
            HandlerInfo::write("reset_counts"),
            HandlerInfo::read("sampling_prob"),
            HandlerInfo::read_write("active"),
            HandlerInfo::read("encap"),
            HandlerInfo::write("stop"),
            HandlerInfo::read("packet_filepos"),
            HandlerInfo::read("filename"),
            HandlerInfo::read("filesize"),
            HandlerInfo::read("filepos"),
        ]
    }

    fn read_handler(&self, name: &str) -> Option<String> {
        let s = &self.shared;
        Some(match name {
            "count" => s.count.load(Ordering::Relaxed).to_string(),
            "sampling_prob" => format::unparse_fixed(self.sampling_prob as u32, SAMPLING_SHIFT),
            "active" => s.active.load(Ordering::Relaxed).to_string(),
            "encap" => format::unparse_dlt(self.linktype.load(Ordering::Relaxed)),
            "packet_filepos" => s.packet_filepos.load(Ordering::Relaxed).to_string(),
            "filename" => self.print_name.clone(),
            "filesize" => match self.filesize {
                Some(n) => n.to_string(),
                None => "-".to_string(),
            },
            "filepos" => s.filepos.load(Ordering::Relaxed).to_string(),
            _ => return None,
        })
    }

    fn write_handler(&self, name: &str, value: &str) -> Option<Result<(), String>> {
        let s = &self.shared;
        if let Some(r) = write_reading_switch(name, value, &s.active, &s.stop_requested) {
            return Some(r);
        }
        Some(match name {
            "reset_counts" => {
                s.count.store(0, Ordering::Relaxed);
                Ok(())
            }
            _ => return None,
        })
    }
}

/// The `active` and `stop` write handlers of an element reading a file (FromDump,
/// FromIPSummaryDump), as Click's: `active` pauses or resumes the reading, `stop`
/// ends it and asks the router to stop. `None` for other handlers.
pub(crate) fn write_reading_switch(
    name: &str,
    value: &str,
    active: &std::sync::atomic::AtomicBool,
    stop_requested: &std::sync::atomic::AtomicBool,
) -> Option<Result<(), String>> {
    Some(match name {
        "active" => match bool::from_arg(crate::args::uncomment(value).trim()) {
            Some(b) => {
                active.store(b, Ordering::Relaxed);
                Ok(())
            }
            None => Err("type mismatch".to_string()),
        },
        "stop" => {
            active.store(false, Ordering::Relaxed);
            stop_requested.store(true, Ordering::Release);
            Ok(())
        }
        _ => return None,
    })
}

fn arg<T>(r: Result<T, String>, cx: &BuildContext) -> Result<T, ConfigError> {
    r.map_err(|e| cx.error(e))
}

impl ElementClass for FromDumpClass {
    fn name(&self) -> &'static str {
        "FromDump"
    }

    fn port_count(&self) -> PortCount {
        PortCount::parse("0/1-2")
    }

    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let filename: String = arg(args.required("FILENAME"), cx)?;
        let timing = arg(args.positional::<bool>("TIMING"), cx)?.unwrap_or(false);
        let stop = arg(args.keyword::<bool>("STOP"), cx)?.unwrap_or(false);
        let active = arg(args.keyword::<bool>("ACTIVE"), cx)?.unwrap_or(true);
        let sample = arg(args.keyword::<Fixed28>("SAMPLE"), cx)?.map_or(SAMPLING_ONE, |f| f.0);
        let mut force_ip = arg(args.keyword::<bool>("FORCE_IP"), cx)?.unwrap_or(false);
        let start = arg(args.keyword::<TimeArg>("START"), cx)?;
        let start_after = arg(args.keyword::<TimeArg>("START_AFTER"), cx)?;
        let end = arg(args.keyword::<TimeArg>("END"), cx)?;
        let end_after = arg(args.keyword::<TimeArg>("END_AFTER"), cx)?;
        let interval = arg(args.keyword::<TimeArg>("INTERVAL"), cx)?;
        let filepos = arg(args.keyword::<u64>("FILEPOS"), cx)?.unwrap_or(0);
        // MMAP only changes how Click reads the file; reading is buffered here either way.
        arg(args.keyword::<bool>("MMAP"), cx)?;
        let burst = arg(args.keyword::<u32>("BURST"), cx)?.unwrap_or(1);
        arg(args.finish(), cx)?;

        if burst < 1 {
            return Err(cx.error("burst size must be >= 1"));
        }
        // Click: a SAMPLE above 1 is reduced to 1 (with a warning).
        let sampling_prob = sample.min(SAMPLING_ONE);

        // Click treats a zero time as "not given".
        let nz = |t: Option<TimeArg>| t.map(|t| t.0).filter(|&v| v != 0);
        let (start, start_after) = (nz(start), nz(start_after));
        let (end, end_after, interval) = (nz(end), nz(end_after), nz(interval));
        if start.is_some() && start_after.is_some() {
            return Err(cx.error("START and START_AFTER are mutually exclusive"));
        }
        if end.is_some() as u8 + end_after.is_some() as u8 + interval.is_some() as u8 > 1 {
            return Err(cx.error("END, END_AFTER, and INTERVAL are mutually exclusive"));
        }
        let times = Times {
            first: start.or(start_after).unwrap_or(0),
            have_first: start.is_some() || start_after.is_some(),
            first_relative: start.is_none(),
            last: end.or(end_after).or(interval).unwrap_or(0),
            have_last: end.is_some() || end_after.is_some() || interval.is_some(),
            last_relative: end_after.is_some(),
            last_interval: interval.is_some(),
            have_any: false,
        };
        let end_deactivates = times.have_last;

        // Open the file and check its header now, so errors name the file at startup.
        let print_name = if filename == "-" {
            "<stdin>".to_string()
        } else {
            filename.clone()
        };
        let fail = |msg: String| cx.error(format!("{}: {}", print_name, msg));
        let path = (filename != "-").then(|| cx.resolve_path(&filename));
        let claim = if path.is_none() { StdinClaim::take() } else { None };
        let stdin_busy = path.is_none() && claim.is_none();
        let (mut input, filesize) = match (&path, claim) {
            (None, Some(claim)) => (
                Input::Stdin(BufReader::with_capacity(READ_BUFFER, io::stdin()), claim),
                None,
            ),
            (None, None) => (
                Input::File(BufReader::new(
                    File::open("/dev/null").map_err(|e| fail(strerror(&e)))?,
                )),
                None,
            ),
            (Some(path), _) => {
                let f = File::open(path).map_err(|e| fail(strerror(&e)))?;
                let size = f.metadata().ok().filter(|m| m.is_file()).map(|m| m.len());
                (Input::File(BufReader::with_capacity(READ_BUFFER, f)), size)
            }
        };
        let header = if stdin_busy {
            // Nothing is read: the header of the FromDump it may take over is its.
            format::parse_file_header(&format::encode_file_header(false, 0, format::dlt::EN10MB))
                .expect("a well-formed header")
        } else {
            let mut hbuf = [0u8; FILE_HEADER_LEN];
            let got = read_full(&mut input, &mut hbuf).map_err(|e| fail(strerror(&e)))?;
            format::parse_file_header(&hbuf[..got]).map_err(|e| fail(e.to_string()))?
        };
        if force_ip {
            if !format::dlt_force_ipable(header.linktype) {
                return Err(fail(format!(
                    "unknown linktype {}; can't force IP packets",
                    header.linktype
                )));
            }
        } else if header.linktype == format::dlt::RAW {
            force_ip = true;
        }
        let mut pos = FILE_HEADER_LEN as u64;
        if filepos != 0 {
            match &mut input {
                Input::File(f) => {
                    if filesize.is_some_and(|n| n > 0 && filepos > n) {
                        return Err(cx.error("FILEPOS out of range"));
                    }
                    f.seek(SeekFrom::Start(filepos)).map_err(|e| fail(strerror(&e)))?;
                    pos = filepos;
                }
                Input::Stdin(s, _) => {
                    let skip = filepos.saturating_sub(pos);
                    let k = io::copy(&mut s.take(skip), &mut io::sink()).map_err(|e| fail(strerror(&e)))?;
                    pos += k;
                }
            }
        }

        let shared = Arc::new(Shared {
            count: AtomicU64::new(0),
            active: AtomicBool::new(active),
            stop_requested: AtomicBool::new(false),
            filepos: AtomicU64::new(pos),
            packet_filepos: AtomicU64::new(pos),
        });
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0x9E37_79B9_7F4A_7C15, |d| d.as_nanos() as u64)
            | 1;
        let reader = Reader {
            input,
            pos,
            header,
            filename: print_name.clone(),
            force_ip,
            timing,
            stop,
            end_deactivates,
            burst: burst.min(packet::MAX_BATCH as u32) as usize,
            sampling_prob,
            rng: seed,
            times,
            timing_base: None,
            pending: None,
            finished: stdin_busy,
            stdin_busy,
            shared: shared.clone(),
        };
        Ok(Arc::new(FromDumpSpec {
            print_name,
            path,
            filesize,
            linktype: AtomicU32::new(header.linktype),
            sampling_prob,
            shared,
            reader: Arc::new(Mutex::new(Some(reader))),
        }))
    }
}
