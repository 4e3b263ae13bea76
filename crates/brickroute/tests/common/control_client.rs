//! A client of a router's ControlSocket for the tests: one command at a time, with
//! bounded waits. (The test crate declares `router_process` beside it.)

#![allow(dead_code)]

use crate::router_process::RouterProcess;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

/// A client speaking the protocol line by line.
pub struct Client<S: Read + Write> {
    reader: BufReader<S>,
}

impl<S: Read + Write> Client<S> {
    pub fn new(stream: S) -> Self {
        let mut c = Client {
            reader: BufReader::new(stream),
        };
        assert_eq!(c.line(), "Click::ControlSocket/1.3\r\n");
        c
    }

    /// The connection itself (to write from another thread through a clone).
    pub fn stream(&self) -> &S {
        self.reader.get_ref()
    }

    pub fn line(&mut self) -> String {
        let mut l = String::new();
        self.reader.read_line(&mut l).unwrap();
        l
    }

    pub fn send(&mut self, command: &str) {
        self.reader.get_mut().write_all(command.as_bytes()).unwrap();
    }

    /// Sends one command and returns its status line.
    pub fn status(&mut self, command: &str) -> String {
        self.send(command);
        self.line()
    }

    /// The lines of one answer (`CODE-...` lines up to the `CODE ...` one).
    pub fn answer(&mut self) -> Vec<String> {
        let mut lines = vec![self.line()];
        while lines.last().unwrap().as_bytes().get(3) == Some(&b'-') {
            lines.push(self.line());
        }
        lines
    }

    /// Writes `text` to the global `hotconfig` handler: the answer's lines.
    pub fn hotconfig(&mut self, text: &str) -> Vec<String> {
        self.send(&write_data("hotconfig", text));
        self.answer()
    }

    /// Reads a handler (`NAME` or `NAME PARAMETER`): its data.
    pub fn read(&mut self, handler: &str) -> String {
        let status = self.status(&format!("READ {}\n", handler));
        let name = handler.split(' ').next().unwrap();
        assert_eq!(status, format!("200 Read handler '{}' OK\r\n", name));
        let data = self.line();
        let n: usize = data
            .strip_prefix("DATA ")
            .and_then(|d| d.trim_end().parse().ok())
            .unwrap_or_else(|| panic!("{data:?}"));
        let mut buf = vec![0; n];
        self.reader.read_exact(&mut buf).unwrap();
        String::from_utf8(buf).unwrap()
    }

    /// A route table handler's (`rt.table`) routes, see [`route_lines`].
    pub fn routes(&mut self, handler: &str) -> Vec<String> {
        route_lines(&self.read(handler))
    }

    pub fn count(&mut self, counter: &str) -> u64 {
        self.read(&format!("{}.count", counter)).trim().parse().unwrap()
    }
}

/// The command writing `value` to `handler` in a data block.
pub fn write_data(handler: &str, value: &str) -> String {
    format!("WRITEDATA {} {}\n{}", handler, value.len(), value)
}

/// A route table's lines with their fields joined by one space, sorted, without
/// LookupIP6Route's heading, the link-local networks (`fe80::/64` on every IPv6
/// interface, one of which a kernel-fed table holds) or lines that are no route.
pub fn route_lines(text: &str) -> Vec<String> {
    let mut v: Vec<String> = text
        .lines()
        .filter(|l| l.contains('/') && !l.starts_with('#') && !l.starts_with("fe80::/64"))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    v.sort();
    v
}

/// Connects once the router has bound and serves the socket (bounded wait).
pub fn connect_unix(path: &Path, p: &mut RouterProcess) -> Client<UnixStream> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(s) = UnixStream::connect(path) {
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            return Client::new(s);
        }
        if let Some(s) = p.exited() {
            panic!("router exited ({}): {:?}", s, p.output());
        }
        assert!(Instant::now() < deadline, "socket never served");
        std::thread::sleep(Duration::from_millis(20));
    }
}
