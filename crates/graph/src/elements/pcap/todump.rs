//! `ToDump(FILENAME [, SNAPLEN, ENCAP, keywords EXTRA_LENGTH, UNBUFFERED, NANO])`:
//! writes packets to a tcpdump file exactly as Click's ToDump writes it, and passes them
//! on to its output if it has one.
//!
//! The file is created and its header written when the element is configured. Every
//! worker's instance writes into the same file through one lock taken once per batch.
//! As Click's, a ToDump replacing one of the same name, file and encapsulation on
//! `hotconfig` goes on writing the capture the old one wrote ([`ElementSpec::take_state`]).

use super::format;
use super::strerror;
use crate::args::Args;
use crate::element::*;
use crate::elements::shared::lock;
use crate::error::ConfigError;
use crate::outfile;
use packet::{PacketBatch, Timestamp};
use std::io::{self, BufWriter, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

const DEFAULT_SNAPLEN: u32 = 2000;

pub struct ToDumpClass;

struct Writer {
    out: Box<dyn Write + Send>,
    /// Cleared after a write error, as Click's ToDump stops writing.
    active: bool,
    /// `out` keeps what is written until flushed (not UNBUFFERED).
    buffered: bool,
    /// UNBUFFERED over a buffered writer taken from a replaced ToDump: flushed after
    /// each batch.
    flush_each: bool,
}

struct Inner {
    filename: String,
    /// Where the records go: the file's path, or `None` for standard output; with the
    /// link type and NANO, what a replacing ToDump must share to go on writing them.
    target: Option<std::path::PathBuf>,
    linktype: u32,
    snaplen: u32,
    nano: bool,
    extra_length: bool,
    count: AtomicU64,
    writer: Mutex<Writer>,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, Writer> {
        match self.writer.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        let _ = self.lock().out.flush();
    }
}

struct ToDumpSpec {
    /// The file, under a temporary name until the configuration commits (none once
    /// this element took a replaced one's file).
    staged: Mutex<Option<outfile::Staged>>,
    /// The file header of an output written at once (standard output, a FIFO, a
    /// device), until the commit writes it.
    deferred_header: Mutex<Option<[u8; 24]>>,
    inner: Arc<Inner>,
    unbuffered: bool,
}

impl ElementSpec for ToDumpSpec {
    fn commit(&self) -> Result<(), String> {
        let header = lock(&self.deferred_header).take();
        if let Some(h) = header {
            let mut w = self.inner.lock();
            w.out
                .write_all(&h)
                .and_then(|_| if self.unbuffered { w.out.flush() } else { Ok(()) })
                .map_err(|_| format!("{}: unable to write file header", self.inner.filename))?;
        }
        let staged = lock(&self.staged);
        staged.as_ref().map_or(Ok(()), outfile::Staged::commit)
    }

    fn state(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    /// Click's hotswap: the same file (and standard output), link type and timestamp
    /// resolution: this element writes on into the old one's file, whose records stay,
    /// and its own (the header it wrote under a temporary name, or would write at the
    /// commit) goes. A writer that stopped on an error is not taken: this element's
    /// own output starts afresh (a FIFO's new reader gets a whole capture).
    fn take_state(&self, old: &dyn ElementSpec) -> bool {
        let Some(old) = state_of::<ToDumpSpec>(old) else {
            return false;
        };
        let (mine, theirs) = (&self.inner, &old.inner);
        if mine.target != theirs.target || mine.linktype != theirs.linktype || mine.nano != theirs.nano {
            return false;
        }
        let (out, buffered) = {
            let mut w = theirs.lock();
            if !w.active {
                return false;
            }
            (std::mem::replace(&mut w.out, Box::new(io::sink())), w.buffered)
        };
        let own = {
            let mut w = mine.lock();
            w.buffered = buffered;
            w.flush_each = self.unbuffered && buffered;
            std::mem::replace(&mut w.out, out)
        };
        drop(own);
        drop(lock(&self.staged).take());
        lock(&self.deferred_header).take();
        true
    }

    fn instantiate(&self, _worker: WorkerInfo) -> Box<dyn Element> {
        Box::new(ToDump {
            inner: self.inner.clone(),
        })
    }

    fn handlers(&self) -> Vec<HandlerInfo> {
        vec![
            HandlerInfo::read("filename"),
            HandlerInfo::read("count"),
            HandlerInfo::write("reset_counts"),
        ]
    }

    fn read_handler(&self, name: &str) -> Option<String> {
        match name {
            "filename" => Some(self.inner.filename.clone()),
            "count" => Some(self.inner.count.load(Ordering::Relaxed).to_string()),
            _ => None,
        }
    }

    fn write_handler(&self, name: &str, _value: &str) -> Option<Result<(), String>> {
        (name == "reset_counts").then(|| {
            self.inner.count.store(0, Ordering::Relaxed);
            Ok(())
        })
    }

    fn cleanup(&self) {
        let mut w = self.inner.lock();
        if let Err(e) = w.out.flush() {
            crate::warn!("ToDump({}): {}", self.inner.filename, strerror(&e));
            // What could not be written goes: flushed later (when the element is
            // dropped, after a replacing configuration emptied a file written in place)
            // it would land at this writer's old offset in the new capture.
            w.out = Box::new(io::sink());
            w.active = false;
        }
    }
}

struct ToDump {
    inner: Arc<Inner>,
}

impl Element for ToDump {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        let inner = &*self.inner;
        let mut written = 0u64;
        {
            let mut w = inner.lock();
            if w.active {
                for p in batch.iter() {
                    // Click stamps packets without a timestamp with the current time.
                    let mut ts = p.anno().timestamp;
                    if ts.is_zero() {
                        ts = Timestamp::now();
                    }
                    let data = p.data();
                    let len = (data.len() as u32).wrapping_add(if inner.extra_length {
                        p.anno().extra_length()
                    } else {
                        0
                    });
                    let caplen = (data.len() as u64).min(inner.snaplen as u64) as usize;
                    let h = format::encode_record_header(ts, inner.nano, caplen as u32, len);
                    let r = w.out.write_all(&h).and_then(|_| w.out.write_all(&data[..caplen]));
                    match r {
                        Ok(()) => written += 1,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                        Err(e) => {
                            w.active = false;
                            crate::warn!("ToDump({}): {}", inner.filename, strerror(&e));
                            break;
                        }
                    }
                }
                if w.flush_each {
                    if let Err(e) = w.out.flush() {
                        w.active = false;
                        crate::warn!("ToDump({}): {}", inner.filename, strerror(&e));
                    }
                }
            }
        }
        if written > 0 {
            inner.count.fetch_add(written, Ordering::Relaxed);
        }
        out.push_batch(0, batch);
    }
}

fn arg<T>(r: Result<T, String>, cx: &BuildContext) -> Result<T, ConfigError> {
    r.map_err(|e| cx.error(e))
}

impl ElementClass for ToDumpClass {
    fn name(&self) -> &'static str {
        "ToDump"
    }

    fn port_count(&self) -> PortCount {
        PortCount::parse("1/0-1")
    }

    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let filename: String = arg(args.required("FILENAME"), cx)?;
        let snaplen = arg(args.positional::<u32>("SNAPLEN"), cx)?.unwrap_or(DEFAULT_SNAPLEN);
        let encap = arg(args.positional::<String>("ENCAP"), cx)?;
        let extra_length = arg(args.keyword::<bool>("EXTRA_LENGTH"), cx)?.unwrap_or(true);
        let unbuffered = arg(args.keyword::<bool>("UNBUFFERED"), cx)?.unwrap_or(false);
        let nano = arg(args.keyword::<bool>("NANO"), cx)?.unwrap_or(false);
        arg(args.finish(), cx)?;

        // Click: SNAPLEN 0 means whole packets, stored as 0xFFFFFFFF in the header.
        let snaplen = if snaplen == 0 { u32::MAX } else { snaplen };
        let linktype = match encap.as_deref() {
            None | Some("") => format::dlt::EN10MB,
            Some(e) => format::parse_dlt(e).ok_or_else(|| cx.error("bad encapsulation type"))?,
        };

        let header = format::encode_file_header(nano, snaplen, linktype);
        let mut staged = None;
        let mut deferred_header = None;
        let (print_name, target, out): (String, _, Box<dyn Write + Send>) = if filename == "-" {
            let o: Box<dyn Write + Send> = if unbuffered {
                Box::new(io::stdout())
            } else {
                Box::new(BufWriter::new(io::stdout()))
            };
            // Written at the commit: standard output cannot be staged, and a
            // configuration that never runs (or that takes a running ToDump's output)
            // must not write a header into it.
            deferred_header = Some(header);
            ("<stdout>".to_string(), None, o)
        } else {
            let path = cx.resolve_path(&filename);
            let (f, s) =
                outfile::create(&path).map_err(|e| cx.error(format!("{}: {}", filename, strerror(&e))))?;
            let mut o: Box<dyn Write + Send> = if unbuffered {
                Box::new(f)
            } else {
                Box::new(BufWriter::with_capacity(64 * 1024, f))
            };
            if s.is_staged() {
                o.write_all(&header)
                    .and_then(|_| if unbuffered { o.flush() } else { Ok(()) })
                    .map_err(|_| cx.error(format!("{}: unable to write file header", filename)))?;
            } else {
                // A FIFO or device: as standard output.
                deferred_header = Some(header);
            }
            staged = Some(s);
            (filename.clone(), Some(path), o)
        };

        Ok(Arc::new(ToDumpSpec {
            staged: Mutex::new(staged),
            deferred_header: Mutex::new(deferred_header),
            unbuffered,
            inner: Arc::new(Inner {
                filename: print_name,
                target,
                linktype,
                snaplen,
                nano,
                extra_length,
                count: AtomicU64::new(0),
                writer: Mutex::new(Writer {
                    out,
                    active: true,
                    buffered: !unbuffered,
                    flush_each: false,
                }),
            }),
        }))
    }
}
