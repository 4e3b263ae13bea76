//! `IPPrint([LABEL], keywords CONTENTS, PAYLOAD, MAXLENGTH, NBYTES, ETHER, ID, TTL, TOS,
//! LENGTH, TIMESTAMP, AGGREGATE, PAINT, SWAP, OUTFILE, ACTIVE)`: prints a tcpdump-like
//! line for each IPv4 packet (the header at the network header annotation) to standard
//! error or OUTFILE, as Click's `IPPrint`, then passes the packet on unchanged.
//!
//! The line is `[LABEL: ][TIMESTAMP: ][ETHER-SRC > ETHER-DST: ][#AGG ][paint N ][id N ]
//! [ttl N ][tos N ][length N ]SUMMARY[ | CONTENTS]`; the summary is
//! `SRC.PORT > DST.PORT: FLAGS [SEQ:END(LEN)] [ack N] win N [urg N]` for TCP,
//! `SRC.PORT > DST.PORT: udp LEN` for UDP, `SRC > DST: icmp TYPE[ code N][ (ID, SEQ)]`
//! for ICMP and `SRC > DST: ip-proto-N LEN` otherwise, with fragments and truncated
//! headers marked as tcpdump marks them (see `summary.rs`).

mod summary;

use crate::args::{Args, FromArg};
use crate::element::*;
use crate::error::ConfigError;
use packet::PacketBatch;
use std::fs::File;
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use summary::{Contents, Format};

pub struct IPPrintClass;

/// Where the lines go.
#[derive(Clone)]
enum Sink {
    Stderr,
    Stdout,
    /// OUTFILE, shared by every worker: one locked write per batch.
    File(Arc<Mutex<File>>),
}

impl Sink {
    fn write(&self, text: &[u8]) {
        // A closed or full output is not the router's problem: the packet still passes.
        let _ = match self {
            Sink::Stderr => std::io::stderr().lock().write_all(text),
            Sink::Stdout => std::io::stdout().lock().write_all(text),
            Sink::File(f) => f.lock().unwrap_or_else(|e| e.into_inner()).write_all(text),
        };
    }
}

fn parse_contents(kw: &str, s: &str) -> Result<Contents, String> {
    if let Some(b) = bool::from_arg(s) {
        return Ok(if b { Contents::Hex } else { Contents::None });
    }
    match s.trim().to_ascii_uppercase().as_str() {
        "NONE" => Ok(Contents::None),
        "HEX" => Ok(Contents::Hex),
        "ASCII" => Ok(Contents::Ascii),
        other => Err(format!(
            "bad {} value '{}'; should be 'NONE', 'HEX', or 'ASCII'",
            kw, other
        )),
    }
}

impl ElementClass for IPPrintClass {
    fn name(&self) -> &'static str {
        "IPPrint"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        Ok(Arc::new(configure(args, cx)?))
    }
}

fn configure(args: &mut Args, cx: &BuildContext) -> Result<IPPrintSpec, ConfigError> {
    let e = |m: String| cx.error(m);
    let flag = |args: &mut Args, kw: &str, default: bool| -> Result<bool, ConfigError> {
        Ok(args
            .keyword::<bool>(kw)
            .map_err(|m| cx.error(m))?
            .unwrap_or(default))
    };
    let label = args.positional::<String>("LABEL").map_err(e)?.unwrap_or_default();
    let contents = args.keyword::<String>("CONTENTS").map_err(e)?;
    let payload = args.keyword::<String>("PAYLOAD").map_err(e)?;
    let mut maxlength = args.keyword::<i32>("MAXLENGTH").map_err(e)?;
    // Click's older name for MAXLENGTH.
    if let Some(n) = args.keyword::<i32>("NBYTES").map_err(e)? {
        maxlength = Some(n);
    }
    let ether = flag(args, "ETHER", false)?;
    let id = flag(args, "ID", false)?;
    let ttl = flag(args, "TTL", false)?;
    let tos = flag(args, "TOS", false)?;
    let length = flag(args, "LENGTH", false)?;
    let timestamp = flag(args, "TIMESTAMP", true)?;
    let aggregate = flag(args, "AGGREGATE", false)?;
    let paint = flag(args, "PAINT", false)?;
    let swap = flag(args, "SWAP", false)?;
    let active = flag(args, "ACTIVE", true)?;
    let outfile = args.keyword::<String>("OUTFILE").map_err(e)?;
    args.finish().map_err(e)?;
    // Both may be given as long as at most one asks for a dump (as Click checks).
    let contents = match contents {
        Some(c) => parse_contents("CONTENTS", &c).map_err(e)?,
        None => Contents::None,
    };
    let payload_dump = match payload {
        Some(c) => parse_contents("PAYLOAD", &c).map_err(e)?,
        None => Contents::None,
    };
    let (contents, payload) = match (contents, payload_dump) {
        (Contents::None, Contents::None) => (Contents::None, false),
        (c, Contents::None) => (c, false),
        (Contents::None, c) => (c, true),
        _ => return Err(cx.error("specify at most one of CONTENTS and PAYLOAD")),
    };
    let mut staged = None;
    let sink = match outfile.as_deref() {
        None => Sink::Stderr,
        Some("-") => Sink::Stdout,
        Some(name) => {
            let path = cx.resolve_path(name);
            let (f, s) = crate::outfile::create(&path)
                .map_err(|err| cx.error(format!("OUTFILE: {}: {}", path.display(), err)))?;
            staged = Some(s);
            Sink::File(Arc::new(Mutex::new(f)))
        }
    };
    Ok(IPPrintSpec {
        format: Format {
            label,
            contents,
            payload,
            maxlength: maxlength.unwrap_or(1500),
            ether,
            id,
            ttl,
            tos,
            length,
            timestamp,
            aggregate,
            paint,
            swap,
        },
        sink,
        staged,
        active: Arc::new(AtomicBool::new(active)),
    })
}

struct IPPrintSpec {
    format: Format,
    sink: Sink,
    /// OUTFILE, under a temporary name until the configuration commits.
    staged: Option<crate::outfile::Staged>,
    active: Arc<AtomicBool>,
}

impl ElementSpec for IPPrintSpec {
    fn commit(&self) -> Result<(), String> {
        self.staged
            .as_ref()
            .map_or(Ok(()), crate::outfile::Staged::commit)
    }

    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(IPPrint {
            format: self.format.clone(),
            sink: self.sink.clone(),
            active: self.active.clone(),
            buf: String::new(),
        })
    }
    fn handlers(&self) -> Vec<HandlerInfo> {
        vec![HandlerInfo::read_write("active")]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        crate::elements::print::read_active(&self.active, name)
    }
    fn write_handler(&self, name: &str, value: &str) -> Option<Result<(), String>> {
        crate::elements::print::write_active(&self.active, name, value)
    }
}

struct IPPrint {
    format: Format,
    sink: Sink,
    active: Arc<AtomicBool>,
    /// The batch's lines, reused from batch to batch.
    buf: String,
}

impl Element for IPPrint {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        if self.active.load(Ordering::Relaxed) && !batch.is_empty() {
            self.buf.clear();
            for p in batch.iter() {
                self.format.line(&mut self.buf, p);
                self.buf.push('\n');
            }
            self.sink.write(self.buf.as_bytes());
        }
        out.push_batch(0, batch);
    }
}

#[cfg(test)]
mod tests;
