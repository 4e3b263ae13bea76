//! Click's ControlSocket protocol, version 1.3, over a router's handlers: the part of
//! the `ControlSocket` element that turns a connection's bytes into handler calls and
//! answers, without the socket (which `brickroute run` owns), so that it can be tested
//! and fuzzed on its own.
//!
//! A command is one line (ended by CR, LF or CRLF) of words separated by white space;
//! every answer is one or more lines of a three-digit code and a message, ended by
//! CRLF, the last with a space after the code and the others with a hyphen. `READ`
//! answers are followed by `DATA n` and the n bytes. The codes are Click's: 200 OK, 220
//! OK with warnings, 500 syntax error, 501 unimplemented command, 510 no such element,
//! 511 no such handler, 520 handler error, 521 data too large, 530 permission denied.

use crate::router::RouterSpec;
use std::sync::Arc;

/// The line a connection opens with.
pub const GREETING: &str = "Click::ControlSocket/1.3\r\n";

/// The longest command line taken (a handler's value belongs in a data block, which
/// may be longer): a longer one is refused and the connection closed, since where
/// the next command starts is then unknown.
pub const MAX_LINE: usize = 65_536;

/// The largest data block a `READDATA`/`WRITEDATA` may announce (64 MiB): room for a
/// full routing table in one write.
pub const MAX_DATA: usize = 64 << 20;

const OK: u16 = 200;
const SYNTAX: u16 = 500;
const UNIMPLEMENTED: u16 = 501;
const NO_SUCH_ELEMENT: u16 = 510;
const NO_SUCH_HANDLER: u16 = 511;
const HANDLER_ERROR: u16 = 520;
const DATA_TOO_BIG: u16 = 521;
const PERMISSION: u16 = 530;

/// The router a session calls: one for its whole life, or whichever one `current`
/// returns when a command starts (a driver that replaces its configuration while
/// connections stay open).
enum Serving<'a> {
    Fixed(&'a RouterSpec),
    Live {
        current: &'a (dyn Fn() -> Arc<RouterSpec> + Sync),
        now: Option<Arc<RouterSpec>>,
    },
}

/// One connection's protocol state: the bytes received and not yet taken by a command.
pub struct Session<'a> {
    serving: Serving<'a>,
    read_only: bool,
    input: Vec<u8>,
    /// Where a `READUNTIL`/`WRITEUNTIL` still waiting for its terminator resumes its
    /// search (the command starts the input then): the start of its unfinished line,
    /// and how far that line was searched for its end.
    until_scan: usize,
    until_searched: usize,
    closed: bool,
}

/// What a handler name refers to.
enum Target {
    Global(String),
    Element(String, String),
}

impl Target {
    fn path(&self) -> String {
        match self {
            Target::Global(h) => h.clone(),
            Target::Element(e, h) => format!("{}.{}", e, h),
        }
    }
}

/// A command's line, split.
struct Line<'b> {
    /// The line's text, without its terminator.
    text: &'b str,
    /// Where the bytes after the terminator start in the input.
    next: usize,
    /// The terminator is a CR at the end of the input so far: a data block must wait
    /// to see whether an LF belongs to it.
    open: bool,
}

impl<'a> Session<'a> {
    /// A session on `router`; with `read_only`, write handlers are refused (Click's
    /// READONLY).
    pub fn new(router: &'a RouterSpec, read_only: bool) -> Session<'a> {
        Session::serving(Serving::Fixed(router), read_only)
    }

    /// A session whose every command calls the router `current` returns as the
    /// command starts.
    pub fn live(current: &'a (dyn Fn() -> Arc<RouterSpec> + Sync), read_only: bool) -> Session<'a> {
        Session::serving(Serving::Live { current, now: None }, read_only)
    }

    fn serving(serving: Serving<'a>, read_only: bool) -> Session<'a> {
        Session {
            serving,
            read_only,
            input: Vec::new(),
            until_scan: 0,
            until_searched: 0,
            closed: false,
        }
    }

    /// True once the client asked to close (QUIT) or sent what cannot be parsed on
    /// from; the connection should be closed after the answers are sent.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Takes `bytes` received from the client and appends to `out` the answers to
    /// every command they complete. `eof`: the client has closed its side, so a
    /// command still waiting for data is answered as incomplete.
    pub fn feed(&mut self, bytes: &[u8], eof: bool, out: &mut Vec<u8>) {
        if self.closed {
            return;
        }
        self.input.extend_from_slice(bytes);
        let mut pos = 0;
        while !self.closed {
            match self.step(pos, eof, out) {
                Some(next) => {
                    pos = next;
                    self.until_scan = 0;
                    self.until_searched = 0;
                }
                None => break,
            }
        }
        let pos = pos.min(self.input.len());
        self.input.drain(..pos);
        // The search position of a command still waiting is relative to the input.
        self.until_scan = self.until_scan.saturating_sub(pos);
        self.until_searched = self.until_searched.saturating_sub(pos);
        if self.closed {
            self.input.clear();
        }
    }

    /// Answers the command at `pos`; returns where the next one starts, or `None`
    /// when the command is not complete yet.
    fn step(&mut self, pos: usize, eof: bool, out: &mut Vec<u8>) -> Option<usize> {
        let rest = &self.input[pos..];
        if rest.is_empty() {
            return None;
        }
        let (len, term, open) = match line_end(rest) {
            Some(end) => end,
            // A last line without a terminator.
            None if eof => (rest.len(), 0, false),
            None => (rest.len(), 0, true),
        };
        if len > MAX_LINE {
            message(out, SYNTAX, "Command line too long", false);
            self.closed = true;
            return None;
        }
        if term == 0 && !eof {
            return None;
        }
        let Ok(text) = std::str::from_utf8(&rest[..len]) else {
            message(out, SYNTAX, "Command is not UTF-8 text", false);
            return Some(pos + len + term);
        };
        // The command may read on in the input, so it takes its line as its own.
        let text = text.to_string();
        let line = Line {
            text: &text,
            next: pos + len + term,
            open: open && !eof,
        };
        self.run(&line, eof, out)
    }

    /// The router the command being answered calls.
    fn router(&self) -> &RouterSpec {
        match &self.serving {
            Serving::Fixed(r) => r,
            Serving::Live { now, .. } => now
                .as_deref()
                .expect("a live session's router is taken as each command starts"),
        }
    }

    fn run(&mut self, line: &Line<'_>, eof: bool, out: &mut Vec<u8>) -> Option<usize> {
        if let Serving::Live { current, now } = &mut self.serving {
            *now = Some(current());
        }
        let next = self.run_command(line, eof, out);
        // An idle connection holds no router: a replaced one goes when its last command
        // ends.
        if let Serving::Live { now, .. } = &mut self.serving {
            *now = None;
        }
        next
    }

    fn run_command(&mut self, line: &Line<'_>, eof: bool, out: &mut Vec<u8>) -> Option<usize> {
        let words: Vec<&str> = line.text.split(is_space).filter(|w| !w.is_empty()).collect();
        let Some(first) = words.first() else {
            return Some(line.next);
        };
        // Everything after the handler name, as typed (inner spaces kept).
        let tail = |from: usize| -> String {
            words
                .get(from)
                .map(|w| {
                    let start = w.as_ptr() as usize - line.text.as_ptr() as usize;
                    line.text[start..].trim_end_matches(is_space).to_string()
                })
                .unwrap_or_default()
        };
        let command = first.to_ascii_uppercase();
        match command.as_str() {
            "READ" | "GET" | "WRITE" | "SET" => {
                if words.len() < 2 {
                    message(out, SYNTAX, "Wrong number of arguments", false);
                } else if command.starts_with('R') || command.starts_with('G') {
                    self.read(words[1], &tail(2), out);
                } else {
                    self.write(words[1], &tail(2), out);
                }
                Some(line.next)
            }
            "READDATA" | "WRITEDATA" | "SETDATA" => {
                if words.len() != 3 {
                    message(out, SYNTAX, "Wrong number of arguments", false);
                    return Some(line.next);
                }
                let Ok(n) = words[2].parse::<usize>() else {
                    message(out, SYNTAX, &format!("Syntax error in '{}'", command), false);
                    return Some(line.next);
                };
                if n > MAX_DATA {
                    // The data cannot be skipped without holding it: the stream is lost.
                    message(
                        out,
                        DATA_TOO_BIG,
                        &format!(
                            "Data too large for handler '{}' (at most {} bytes)",
                            words[1], MAX_DATA
                        ),
                        false,
                    );
                    self.closed = true;
                    return None;
                }
                if line.open {
                    return None;
                }
                let data = self.data(line.next, n, eof, out)?;
                match data {
                    Ok(value) if command.starts_with('R') => self.read(words[1], &value, out),
                    Ok(value) => self.write(words[1], &value, out),
                    Err(()) => message(out, SYNTAX, "Data is not UTF-8 text", false),
                }
                Some(line.next + n)
            }
            "READUNTIL" | "WRITEUNTIL" => {
                if words.len() < 2 {
                    message(out, SYNTAX, "Wrong number of arguments", false);
                    return Some(line.next);
                }
                if line.open {
                    return None;
                }
                let until = tail(2);
                let (data, next) = self.until(line.next, &until, eof, out)?;
                match data {
                    Ok(value) if command.starts_with('R') => self.read(words[1], &value, out),
                    Ok(value) => self.write(words[1], &value, out),
                    Err(()) => message(out, SYNTAX, "Data is not UTF-8 text", false),
                }
                Some(next)
            }
            "CHECKREAD" | "CHECKWRITE" => {
                if words.len() != 2 {
                    message(out, SYNTAX, "Wrong number of arguments", false);
                } else {
                    self.check(words[1], command == "CHECKWRITE", out);
                }
                Some(line.next)
            }
            "LLRPC" => {
                // Click's binary element calls: none of brickroute's elements has one.
                // The data block, if any, is skipped so the next command parses.
                let n = match words.len() {
                    2 => 0,
                    3 => match words[2].parse::<usize>() {
                        Ok(n) if n <= MAX_DATA => n,
                        _ => {
                            message(out, SYNTAX, "Syntax error in 'llrpc'", false);
                            return Some(line.next);
                        }
                    },
                    _ => {
                        message(out, SYNTAX, "Wrong number of arguments", false);
                        return Some(line.next);
                    }
                };
                if line.open {
                    return None;
                }
                // Whatever the block holds, it is skipped.
                let _ = self.data(line.next, n, eof, out)?;
                message(
                    out,
                    UNIMPLEMENTED,
                    &format!("Cannot call LLRPC '{}' remotely", words[1]),
                    false,
                );
                Some(line.next + n)
            }
            "QUIT" | "CLOSE" => {
                if words.len() != 1 {
                    message(out, SYNTAX, "Bad command syntax", false);
                }
                message(out, OK, "Goodbye!", false);
                self.closed = true;
                None
            }
            "HELP" => {
                let lines = [
                    "Commands supported:",
                    "READ handler [arg...]   call read handler, return DATA",
                    "READDATA handler len    call read handler with len data bytes, return DATA",
                    "READUNTIL handler term  call read handler, take data until term, return DATA",
                    "WRITE handler [arg...]  call write handler",
                    "WRITEDATA handler len   call write handler, pass len data bytes",
                    "WRITEUNTIL handler term call write handler, take data until term",
                    "CHECKREAD handler       check if read handler is valid",
                    "CHECKWRITE handler      check if write handler is valid",
                    "QUIT                    close connection",
                ];
                for (i, l) in lines.iter().enumerate() {
                    message(out, OK, l, i + 1 < lines.len());
                }
                Some(line.next)
            }
            _ => {
                message(
                    out,
                    UNIMPLEMENTED,
                    &format!("Command '{}' unimplemented", command),
                    false,
                );
                Some(line.next)
            }
        }
    }

    /// The `n` bytes at `at` as text: `None` when they have not all arrived (at end of
    /// input: answered "Not enough data" and the session closed).
    fn data(&mut self, at: usize, n: usize, eof: bool, out: &mut Vec<u8>) -> Option<Result<String, ()>> {
        if self.input.len() < at + n {
            if eof {
                message(out, SYNTAX, "Not enough data", false);
                self.closed = true;
            }
            return None;
        }
        Some(String::from_utf8(self.input[at..at + n].to_vec()).map_err(|_| ()))
    }

    /// The lines from `at` up to the first whose text, trailing white space removed,
    /// equals `until` (a blank line when `until` is empty), and where the input goes on
    /// after that line.
    fn until(
        &mut self,
        at: usize,
        until: &str,
        eof: bool,
        out: &mut Vec<u8>,
    ) -> Option<(Result<String, ()>, usize)> {
        // Lines already seen in an earlier call for this command are not scanned again,
        // nor the part of an unfinished line searched for its end already.
        let mut pos = at.max(self.until_scan);
        loop {
            let from = if pos == self.until_scan {
                self.until_searched.max(pos)
            } else {
                pos
            };
            let found = self.input[from..]
                .iter()
                .position(|&b| b == b'\n' || b == b'\r')
                .map(|i| from + i);
            // The line's end, and its terminator's length: a CR that ends the input
            // waits for a possible LF unless the input has ended.
            let end = match found {
                Some(i) if self.input[i] == b'\r' && i + 1 == self.input.len() && !eof => None,
                Some(i) if self.input[i] == b'\r' && self.input.get(i + 1) == Some(&b'\n') => Some((i, 2)),
                Some(i) => Some((i, 1)),
                None => None,
            };
            let Some((line_end, term)) = end else {
                if eof {
                    // Click reads the terminator only as a whole line.
                    message(out, SYNTAX, "Not enough data", false);
                    self.closed = true;
                } else if self.input.len() - at > MAX_DATA {
                    message(out, DATA_TOO_BIG, "Data too large", false);
                    self.closed = true;
                }
                self.until_scan = pos;
                self.until_searched = found.unwrap_or(self.input.len());
                return None;
            };
            if trim_space_end(&self.input[pos..line_end]) == until.as_bytes() {
                let data = String::from_utf8(self.input[at..pos].to_vec()).map_err(|_| ());
                return Some((data, line_end + term));
            }
            pos = line_end + term;
        }
    }

    /// Resolves a handler name as Click does: `ELEMENT.HANDLER`, `NUMBER.HANDLER`
    /// (elements counted from 1), or a global `HANDLER` (also written `.HANDLER` or
    /// `0.HANDLER`). Answers the error itself when the element does not exist.
    fn resolve(&self, name: &str, out: &mut Vec<u8>) -> Option<Target> {
        let canonical = name
            .strip_prefix('.')
            .or_else(|| name.strip_prefix("0."))
            .unwrap_or(name);
        let Some((ename, hname)) = canonical.split_once('.') else {
            return Some(Target::Global(canonical.to_string()));
        };
        if self.router().has_element(ename) {
            return Some(Target::Element(ename.to_string(), hname.to_string()));
        }
        let numbered = ename
            .parse::<usize>()
            .ok()
            .and_then(|n| self.router().element_name(n));
        match numbered {
            Some(e) => Some(Target::Element(e.to_string(), hname.to_string())),
            None => {
                message(
                    out,
                    NO_SUCH_ELEMENT,
                    &format!("No element named '{}'", ename),
                    false,
                );
                None
            }
        }
    }

    /// Whether the handler can be read and written.
    fn access(&self, target: &Target) -> (bool, bool) {
        match target {
            Target::Global(h) => (
                self.router().read_global_handler(h).is_some(),
                self.router().has_global_write_handler(h),
            ),
            Target::Element(e, h) => self.router().handler_access(e, h).unwrap_or((false, false)),
        }
    }

    /// The handler `name` names if it can be read (`write` false) or written (true);
    /// otherwise answers why not.
    fn callable(&self, name: &str, write: bool, out: &mut Vec<u8>) -> Option<Target> {
        let target = self.resolve(name, out)?;
        let (r, w) = self.access(&target);
        let why = match (write, r, w) {
            (false, true, _) | (true, _, true) => return Some(target),
            (false, false, true) => (PERMISSION, format!("Handler '{}' write-only", name)),
            (true, true, false) => (PERMISSION, format!("Handler '{}' read-only", name)),
            _ => (NO_SUCH_HANDLER, format!("No handler named '{}'", name)),
        };
        message(out, why.0, &why.1, false);
        None
    }

    fn read(&self, name: &str, param: &str, out: &mut Vec<u8>) {
        let Some(target) = self.callable(name, false, out) else {
            return;
        };
        let result = match &target {
            Target::Global(h) if param.is_empty() => self
                .router()
                .read_global_handler(h)
                .ok_or_else(|| format!("no '{}' handler", h)),
            Target::Global(_) => Err(format!("read handler '{}' does not take parameters", name)),
            Target::Element(..) if param.is_empty() => self.router().read_handler(&target.path()),
            Target::Element(..) => self
                .router()
                .read_handler(&format!("{} {}", target.path(), param)),
        };
        match result {
            Ok(data) => {
                message(out, OK, &format!("Read handler '{}' OK", name), false);
                out.extend_from_slice(format!("DATA {}\r\n", data.len()).as_bytes());
                out.extend_from_slice(data.as_bytes());
            }
            Err(e) => error_messages(out, &format!("Read handler '{}' error", name), &e),
        }
    }

    fn write(&self, name: &str, value: &str, out: &mut Vec<u8>) {
        let Some(target) = self.callable(name, true, out) else {
            return;
        };
        if self.read_only {
            message(
                out,
                PERMISSION,
                &format!("Permission denied for '{}'", name),
                false,
            );
            return;
        }
        let result = match &target {
            Target::Global(h) => self
                .router()
                .write_global_handler(h, value)
                .unwrap_or_else(|| Err(format!("no '{}' handler", h))),
            Target::Element(..) => self.router().write_handler(&target.path(), value),
        };
        match result {
            Ok(()) => message(out, OK, &format!("Write handler '{}' OK", name), false),
            Err(e) => error_messages(out, &format!("Write handler '{}' error", name), &e),
        }
    }

    fn check(&self, name: &str, write: bool, out: &mut Vec<u8>) {
        let Some(target) = self.resolve(name, out) else {
            return;
        };
        let (r, w) = self.access(&target);
        let ok = if write { w } else { r };
        let (kind, able) = if write {
            ("Write", "writable")
        } else {
            ("Read", "readable")
        };
        if ok && write && self.read_only {
            message(
                out,
                PERMISSION,
                &format!("Permission denied for '{}'", name),
                false,
            );
        } else if ok {
            message(out, OK, &format!("{} handler '{}' OK", kind, name), false);
        } else if r || w {
            message(
                out,
                NO_SUCH_HANDLER,
                &format!("Handler '{}' not {}", name, able),
                false,
            );
        } else {
            // As Click, whose "No read handler named" answer only a proxy gives.
            message(
                out,
                NO_SUCH_HANDLER,
                &format!("No handler named '{}'", name),
                false,
            );
        }
    }
}

/// The length of the line at the start of `bytes`, of its terminator (CR, LF or
/// CRLF), and whether that terminator is a CR that ends the input (the LF of a CRLF
/// may still be on its way); `None` when no terminator has arrived.
fn line_end(bytes: &[u8]) -> Option<(usize, usize, bool)> {
    let i = bytes.iter().position(|&b| b == b'\n' || b == b'\r')?;
    Some(match (bytes[i], bytes.get(i + 1)) {
        (b'\r', Some(b'\n')) => (i, 2, false),
        (b'\r', None) => (i, 1, true),
        _ => (i, 1, false),
    })
}

/// C's `isspace`, which Click splits commands with: ASCII white space and the
/// vertical tab.
fn is_space(c: char) -> bool {
    c.is_ascii_whitespace() || c == '\x0b'
}

fn trim_space_end(b: &[u8]) -> &[u8] {
    let n = b
        .iter()
        .rposition(|&c| !is_space(char::from(c)))
        .map_or(0, |i| i + 1);
    &b[..n]
}

/// A client's text as Click's `String::printable` shows it in an answer: a control
/// character as `^X` (DEL as `^?`), so an answer is always one line.
fn printable(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\x7f' => out.push_str("^?"),
            c if (c as u32) < 0x20 => {
                out.push('^');
                out.push(char::from(c as u8 + 64));
            }
            c => out.push(c),
        }
    }
    out
}

/// One answer line: `CODE MESSAGE` or, when more lines follow, `CODE-MESSAGE`.
fn message(out: &mut Vec<u8>, code: u16, text: &str, more: bool) {
    let sep = if more { '-' } else { ' ' };
    out.extend_from_slice(format!("{}{}{}\r\n", code, sep, printable(text)).as_bytes());
}

/// A handler's error: `520-HEADLINE:` then each line of the error, the last with a
/// space after the code.
fn error_messages(out: &mut Vec<u8>, headline: &str, error: &str) {
    let lines: Vec<&str> = error.lines().filter(|l| !l.is_empty()).collect();
    if lines.is_empty() {
        message(out, HANDLER_ERROR, headline, false);
        return;
    }
    message(out, HANDLER_ERROR, &format!("{}:", headline), true);
    for (i, l) in lines.iter().enumerate() {
        message(out, HANDLER_ERROR, l, i + 1 < lines.len());
    }
}

#[cfg(test)]
mod tests;
