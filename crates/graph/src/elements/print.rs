//! `Print([LABEL, MAXLENGTH, KEYWORDS])`: prints one line per packet to standard error
//! in Click's format, then passes the packet on unchanged.
//!
//! The line is `LABEL: LEN | HEX`, where LEN is right-aligned in four columns and the
//! first MAXLENGTH bytes (24 by default, all when negative) are printed in lower-case
//! hex in groups of four bytes. Keywords as in Click: CONTENTS (NONE, HEX, ASCII or a
//! boolean), TIMESTAMP, PRINTANNO (the 48 annotation bytes), HEADROOM
//! (`(hN tN)`), ACTIVE, and CPU (the worker's index, as `(N)` after the label).

use crate::args::{Args, FromArg};
use crate::element::*;
use crate::error::ConfigError;
use packet::{Packet, PacketBatch};
use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub struct PrintClass;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Contents {
    None,
    Hex,
    Ascii,
}

#[derive(Clone, Debug)]
struct Format {
    label: String,
    maxlength: i32,
    contents: Contents,
    timestamp: bool,
    print_anno: bool,
    headroom: bool,
    cpu: bool,
}

impl Format {
    /// Appends Click's line for `p` (without the newline) to `sa`.
    fn line(&self, sa: &mut String, p: &Packet, worker: usize) {
        let mut sep = "";
        if !self.label.is_empty() {
            sa.push_str(&self.label);
            sep = ": ";
        }
        if self.cpu {
            let _ = write!(sa, "({})", worker);
            sep = ": ";
        }
        if self.timestamp {
            let _ = write!(sa, "{}{}", sep, p.anno().timestamp);
            sep = ": ";
        }
        let _ = write!(sa, "{}{:4}", sep, p.len());
        if self.headroom {
            let _ = write!(sa, " (h{} t{})", p.headroom(), p.tailroom());
        }
        if self.print_anno {
            sa.push_str(" | ");
            for b in p.anno().user.iter() {
                let _ = write!(sa, "{:02x}", b);
            }
        }
        let mut bytes = match self.contents {
            Contents::None => 0,
            _ => self.maxlength,
        };
        if bytes < 0 || (p.len() as i64) < bytes as i64 {
            bytes = p.len() as i32;
        }
        if bytes > 0 {
            sa.push_str(" | ");
            let data = &p.data()[..bytes as usize];
            match self.contents {
                Contents::Hex => {
                    for (i, b) in data.iter().enumerate() {
                        if i > 0 && i % 4 == 0 {
                            sa.push(' ');
                        }
                        let _ = write!(sa, "{:02x}", b);
                    }
                }
                Contents::Ascii => {
                    for (i, &b) in data.iter().enumerate() {
                        if i % 8 == 0 {
                            sa.push(' ');
                        }
                        sa.push(if (32..=126).contains(&b) { b as char } else { '.' });
                    }
                }
                Contents::None => {}
            }
        }
    }
}

fn parse_contents(s: &str) -> Option<Contents> {
    if let Some(b) = bool::from_arg(s) {
        return Some(if b { Contents::Hex } else { Contents::None });
    }
    match s.to_ascii_uppercase().as_str() {
        "NONE" => Some(Contents::None),
        "HEX" => Some(Contents::Hex),
        "ASCII" => Some(Contents::Ascii),
        _ => None,
    }
}

impl ElementClass for PrintClass {
    fn name(&self) -> &'static str {
        "Print"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        Ok(Arc::new(configure(args, cx)?))
    }
}

fn configure(args: &mut Args, cx: &BuildContext) -> Result<PrintSpec, ConfigError> {
    let e = |m: String| cx.error(m);
    let label = args.positional::<String>("LABEL").map_err(e)?.unwrap_or_default();
    let mut maxlength = args.positional::<i32>("MAXLENGTH").map_err(e)?;
    // Deprecated synonyms Click still accepts.
    for kw in ["LENGTH", "NBYTES"] {
        if let Some(v) = args.keyword::<i32>(kw).map_err(e)? {
            maxlength = Some(v);
        }
    }
    let contents = args.keyword::<String>("CONTENTS").map_err(e)?;
    let timestamp = args.keyword::<bool>("TIMESTAMP").map_err(e)?.unwrap_or(false);
    let print_anno = args.keyword::<bool>("PRINTANNO").map_err(e)?.unwrap_or(false);
    let active = args.keyword::<bool>("ACTIVE").map_err(e)?.unwrap_or(true);
    let headroom = args.keyword::<bool>("HEADROOM").map_err(e)?.unwrap_or(false);
    let cpu = args.keyword::<bool>("CPU").map_err(e)?.unwrap_or(false);
    args.finish().map_err(e)?;
    let contents = match contents {
        None => Contents::Hex,
        Some(c) => parse_contents(&c).ok_or_else(|| {
            cx.error(format!(
                "bad contents value '{}'; should be 'NONE', 'HEX', or 'ASCII'",
                c.to_ascii_uppercase()
            ))
        })?,
    };
    Ok(PrintSpec {
        format: Format {
            label,
            maxlength: maxlength.unwrap_or(24),
            contents,
            timestamp,
            print_anno,
            headroom,
            cpu,
        },
        active: Arc::new(AtomicBool::new(active)),
    })
}

struct PrintSpec {
    format: Format,
    active: Arc<AtomicBool>,
}

impl ElementSpec for PrintSpec {
    fn instantiate(&self, w: WorkerInfo) -> Box<dyn Element> {
        Box::new(Print {
            format: self.format.clone(),
            active: self.active.clone(),
            worker: w.index,
            buf: String::new(),
        })
    }
    fn handlers(&self) -> Vec<HandlerInfo> {
        vec![HandlerInfo::read_write("active")]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        read_active(&self.active, name)
    }
    fn write_handler(&self, name: &str, value: &str) -> Option<Result<(), String>> {
        write_active(&self.active, name, value)
    }
}

/// The `active` read handler of Print and IPPrint.
pub(crate) fn read_active(active: &AtomicBool, name: &str) -> Option<String> {
    (name == "active").then(|| active.load(Ordering::Relaxed).to_string())
}

/// The `active` write handler of Print and IPPrint.
pub(crate) fn write_active(active: &AtomicBool, name: &str, value: &str) -> Option<Result<(), String>> {
    (name == "active").then(|| match bool::from_arg(value.trim()) {
        Some(b) => {
            active.store(b, Ordering::Relaxed);
            Ok(())
        }
        None => Err("expected boolean".to_string()),
    })
}

struct Print {
    format: Format,
    active: Arc<AtomicBool>,
    worker: usize,
    /// The batch's lines, reused from batch to batch.
    buf: String,
}

impl Print {
    fn render(&mut self, batch: &PacketBatch) {
        self.buf.clear();
        for p in batch.iter() {
            self.format.line(&mut self.buf, p, self.worker);
            self.buf.push('\n');
        }
    }
}

impl Element for Print {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        if self.active.load(Ordering::Relaxed) && !batch.is_empty() {
            self.render(batch);
            // One write per batch; a closed stderr is not the router's problem.
            let _ = std::io::stderr().lock().write_all(self.buf.as_bytes());
        }
        out.push_batch(0, batch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Landmark;
    use crate::testing::{build_error, Harness};
    use packet::Timestamp;
    use std::path::Path;

    /// The line Print writes for `p` with `config`, on worker 3.
    fn line(config: &str, p: &Packet) -> String {
        let lm = Landmark::unknown();
        let cx = BuildContext {
            name: "e",
            class: "Print",
            landmark: &lm,
            ninputs: 1,
            noutputs: 1,
            base_dir: Path::new("."),
            workers: 4,
            peers: Default::default(),
        };
        let spec = configure(&mut Args::new(config), &cx).unwrap_or_else(|e| panic!("{}", e));
        let mut s = String::new();
        spec.format.line(&mut s, p, 3);
        s
    }

    fn bytes(n: u8) -> Packet {
        Packet::from_slice(&(0..n).collect::<Vec<u8>>())
    }

    #[test]
    fn default_format() {
        assert_eq!(
            line("", &bytes(30)),
            "  30 | 00010203 04050607 08090a0b 0c0d0e0f 10111213 14151617"
        );
        assert_eq!(line("x", &bytes(5)), "x:    5 | 00010203 04");
        assert_eq!(line("\"in put\"", &bytes(2)), "in put:    2 | 0001");
        assert_eq!(line("x", &bytes(0)), "x:    0");
        assert_eq!(line("x, 3", &bytes(5)), "x:    5 | 000102");
        assert_eq!(line("x, -1", &bytes(26)).len(), "x:   26 | ".len() + 52 + 6);
        assert_eq!(line("x, 0", &bytes(5)), "x:    5");
        assert_eq!(line("x, NBYTES 2", &bytes(5)), "x:    5 | 0001");
        assert_eq!(line("", &Packet::zeroed(12345)).len(), "12345 | ".len() + 48 + 5);
    }

    #[test]
    fn keyword_options() {
        assert_eq!(line("x, CONTENTS NONE", &bytes(5)), "x:    5");
        assert_eq!(line("x, CONTENTS false", &bytes(5)), "x:    5");
        assert_eq!(
            line("x, CONTENTS ascii", &Packet::from_slice(b"hello\x00world!!!")),
            "x:   14 |  hello.wo rld!!!"
        );
        assert_eq!(line("x, CPU true", &bytes(1)), "x(3):    1 | 00");
        assert_eq!(line("CPU true", &bytes(1)), "(3):    1 | 00");
        let mut p = bytes(1);
        p.anno_mut().timestamp = Timestamp::new(1000, 5_000);
        assert_eq!(line("TIMESTAMP true", &p), "1000.000005:    1 | 00");
        assert_eq!(line("x, TIMESTAMP true", &p), "x: 1000.000005:    1 | 00");
        let mut p = Packet::alloc_with_headroom(10, 2);
        p.data_mut().copy_from_slice(&[0xab, 0xcd]);
        let text = line("HEADROOM true", &p);
        assert!(text.starts_with("   2 (h10 t"), "{}", text);
        assert!(text.ends_with(") | abcd"), "{}", text);
        let mut p = bytes(1);
        p.anno_mut().set_paint(0xee);
        let mut anno = "00".repeat(48);
        anno.replace_range(32..34, "ee");
        assert_eq!(line("PRINTANNO true", &p), format!("   1 | {} | 00", anno));
    }

    #[test]
    fn passes_packets_and_handler() {
        let mut h = Harness::new(&PrintClass, "x, ACTIVE false", 1, 1);
        let out = h.push_bytes(0, &[1, 2, 3]);
        assert_eq!(out[0][0].data(), &[1, 2, 3]);
        assert_eq!(h.read("active"), "false");
        h.write("active", "true").unwrap();
        assert_eq!(h.read("active"), "true");
        assert_eq!(h.write("active", "maybe").unwrap_err(), "expected boolean");
    }

    #[test]
    fn bad_arguments() {
        assert_eq!(
            build_error(&PrintClass, "x, CONTENTS binary", 1, 1),
            "e :: Print: bad contents value 'BINARY'; should be 'NONE', 'HEX', or 'ASCII'"
        );
        assert_eq!(
            build_error(&PrintClass, "x, y", 1, 1),
            "e :: Print: MAXLENGTH expects integer"
        );
        assert_eq!(
            build_error(&PrintClass, "x, BOGUS 1", 1, 1),
            "e :: Print: bad keyword 'BOGUS'"
        );
    }
}
