//! `brickroute ctl`: a client of a running router's `ControlSocket`. It reads and writes
//! handlers in Click's ControlSocket protocol (`graph::control`), so an operator or a
//! script changes routes and reads counters without speaking the protocol through
//! `socat`.
//!
//! Values and parameters travel in the protocol's data blocks (`READDATA`,
//! `WRITEDATA`), never on the command line, so any bytes arrive as given: several lines
//! of routes for a `ctrl` handler, or a value that begins with a space.

use crate::run::strerror;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// The greeting's prefix: any 1.x version of the protocol speaks these commands.
const GREETING: &str = "Click::ControlSocket/1.";

/// The longest answer line taken from the router: well past any status line the
/// router writes, so a peer that is not a router cannot make the client hold an
/// endless line.
const MAX_LINE: usize = 64 << 10;

#[derive(clap::Args)]
#[command(group = clap::ArgGroup::new("socket").required(true).args(["unix", "tcp"]))]
pub struct CtlArgs {
    /// The router's UNIX control socket: `ControlSocket(unix, PATH)`.
    #[arg(long, value_name = "PATH")]
    unix: Option<PathBuf>,
    /// The router's TCP control socket: `ControlSocket(TCP, PORT)`, on 127.0.0.1 unless
    /// a host is given (`HOST:PORT`, `[IPV6]:PORT`).
    #[arg(long, value_name = "[HOST:]PORT")]
    tcp: Option<String>,
    /// Seconds to wait for the connection and for each answer; 0 waits for ever.
    #[arg(long, default_value_t = 60.0, value_name = "SECONDS")]
    timeout: f64,
    #[command(subcommand)]
    action: Action,
}

#[derive(clap::Subcommand)]
enum Action {
    /// Prints a read handler's value (`c.count`, `rt.table`, `rt.lookup 10.0.0.1`).
    #[command(allow_hyphen_values = true)]
    Read {
        /// `ELEMENT.HANDLER`, or a global handler (`list`, `version`).
        handler: String,
        /// The handler's parameter, its words joined by single spaces.
        #[arg(trailing_var_arg = true)]
        parameter: Vec<String>,
    },
    /// Calls a write handler (`rt.add 192.0.2.0/24 198.18.0.2 1`, `c.reset`).
    #[command(allow_hyphen_values = true)]
    Write {
        /// The value from this file instead (`-`: standard input), whole, lines
        /// included: many routes through a lookup element's `ctrl` handler at once.
        /// Give it before HANDLER.
        #[arg(long, value_name = "FILE")]
        file: Option<PathBuf>,
        /// `ELEMENT.HANDLER`, or the global `stop`.
        handler: String,
        /// The value, its words joined by single spaces (none: an empty value).
        #[arg(trailing_var_arg = true)]
        value: Vec<String>,
    },
    /// Lists the router's elements, one name a line (the global handler `list`).
    List,
    /// Lists an element's handlers with `r` and `w` for read and write.
    Handlers {
        /// The element's name.
        element: String,
    },
    /// Stops the router, as a source's `STOP true` does (writes the handler `stop`).
    Stop,
}

pub fn main(args: CtlArgs) -> ExitCode {
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            for line in message.lines() {
                eprintln!("brickroute ctl: {line}");
            }
            ExitCode::FAILURE
        }
    }
}

fn run(args: CtlArgs) -> Result<(), String> {
    if !(args.timeout >= 0.0 && args.timeout <= 1e9) {
        return Err(format!(
            "--timeout {}: expected seconds from 0 to 1e9",
            args.timeout
        ));
    }
    let timeout = (args.timeout > 0.0).then(|| Duration::from_secs_f64(args.timeout));
    let (stream, name) = match (&args.unix, &args.tcp) {
        (Some(path), _) => (connect_unix(path, timeout)?, path.display().to_string()),
        (None, Some(tcp)) => (connect_tcp(tcp, timeout)?, tcp.clone()),
        (None, None) => unreachable!("clap requires --unix or --tcp"),
    };
    let mut router = Router::new(stream).map_err(|e| format!("{name}: {e}"))?;
    let lost = |e: io::Error| format!("{name}: {e}");
    match args.action {
        Action::Read { handler, parameter } => {
            let value = router
                .read(&handler, parameter.join(" ").as_bytes())
                .map_err(lost)??;
            print(&value)
        }
        Action::Write { file, handler, value } => {
            let value = match file {
                Some(path) => {
                    if !value.is_empty() {
                        return Err(format!(
                            "write {handler}: a value on the command line and --file {} \
                             both; give one",
                            path.display()
                        ));
                    }
                    read_file(&path)?
                }
                None => value.join(" ").into_bytes(),
            };
            router.write(&handler, &value).map_err(lost)?
        }
        Action::List => {
            let list = router.read("list", b"").map_err(lost)??;
            // The handler's first line is the number of elements; the names follow.
            let names: Vec<u8> = list
                .split_inclusive(|&b| b == b'\n')
                .skip(1)
                .flatten()
                .copied()
                .collect();
            print(&names)
        }
        Action::Handlers { element } => {
            let value = router.read(&format!("{element}.handlers"), b"").map_err(lost)??;
            print(&value)
        }
        Action::Stop => router.write("stop", b"").map_err(lost)?,
    }
}

/// Writes a value to standard output, ended by a newline if it has none (as `brickroute
/// run -h` prints handlers).
fn print(value: &[u8]) -> Result<(), String> {
    let mut out = io::stdout().lock();
    let result = out
        .write_all(value)
        .and_then(|()| match value.last() {
            Some(b'\n') | None => Ok(()),
            Some(_) => out.write_all(b"\n"),
        })
        .and_then(|()| out.flush());
    result.map_err(|e| format!("standard output: {}", strerror(&e)))
}

fn read_file(path: &PathBuf) -> Result<Vec<u8>, String> {
    let mut value = Vec::new();
    let result = if path.as_os_str() == "-" {
        io::stdin().lock().read_to_end(&mut value).map(drop)
    } else {
        std::fs::File::open(path).and_then(|mut f| f.read_to_end(&mut value).map(drop))
    };
    result.map_err(|e| format!("{}: {}", path.display(), strerror(&e)))?;
    Ok(value)
}

/// Either kind of control socket.
enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(buf),
            Stream::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.write(buf),
            Stream::Tcp(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.flush(),
            Stream::Tcp(s) => s.flush(),
        }
    }
}

fn connect_unix(path: &PathBuf, timeout: Option<Duration>) -> Result<Stream, String> {
    let s = UnixStream::connect(path).map_err(|e| {
        let hint = match e.kind() {
            io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused => {
                format!(
                    " (is a router running with ControlSocket(unix, {})?)",
                    path.display()
                )
            }
            _ => String::new(),
        };
        format!("{}: {}{hint}", path.display(), strerror(&e))
    })?;
    s.set_read_timeout(timeout)
        .and_then(|()| s.set_write_timeout(timeout))
        .map_err(|e| format!("{}: {}", path.display(), strerror(&e)))?;
    Ok(Stream::Unix(s))
}

/// `PORT` (on 127.0.0.1, where a ControlSocket listens by default), `HOST:PORT` or
/// `[IPV6]:PORT`.
fn tcp_addresses(spec: &str) -> Result<Vec<SocketAddr>, String> {
    let with_host = if spec.parse::<u16>().is_ok() {
        format!("127.0.0.1:{spec}")
    } else {
        spec.to_string()
    };
    let addrs: Vec<SocketAddr> = with_host
        .to_socket_addrs()
        .map_err(|e| format!("--tcp {spec}: expected [HOST:]PORT ({e})"))?
        .collect();
    if addrs.is_empty() {
        return Err(format!("--tcp {spec}: the host has no address"));
    }
    Ok(addrs)
}

fn connect_tcp(spec: &str, timeout: Option<Duration>) -> Result<Stream, String> {
    let mut last = None;
    for addr in tcp_addresses(spec)? {
        let attempt = match timeout {
            Some(t) => TcpStream::connect_timeout(&addr, t),
            None => TcpStream::connect(addr),
        };
        match attempt {
            Ok(s) => {
                s.set_read_timeout(timeout)
                    .and_then(|()| s.set_write_timeout(timeout))
                    .map_err(|e| format!("{addr}: {}", strerror(&e)))?;
                return Ok(Stream::Tcp(s));
            }
            Err(e) => last = Some((addr, e)),
        }
    }
    let (addr, e) = last.expect("at least one address");
    let hint = if e.kind() == io::ErrorKind::ConnectionRefused {
        " (is a router running with a ControlSocket(TCP, ...) on that port?)"
    } else {
        ""
    };
    Err(format!("{addr}: {}{hint}", strerror(&e)))
}

/// A handler call the router refused: its answer's lines, each with its code.
type Refusal = String;

/// One connection to a router's control socket.
struct Router<S: Read + Write> {
    conn: BufReader<S>,
}

impl<S: Read + Write> Router<S> {
    /// Takes the router's greeting.
    fn new(stream: S) -> io::Result<Self> {
        let mut r = Router {
            conn: BufReader::new(stream),
        };
        let greeting = r.line()?;
        if !greeting.starts_with(GREETING) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "not a Click control socket (it said {:?}, expected {GREETING}x)",
                    shorten(&greeting)
                ),
            ));
        }
        Ok(r)
    }

    /// Calls a read handler with a parameter (empty: none); its value, or the
    /// router's refusal.
    fn read(&mut self, handler: &str, parameter: &[u8]) -> io::Result<Result<Vec<u8>, Refusal>> {
        self.send("READDATA", handler, parameter)?;
        let (code, lines) = self.answer()?;
        if code != 200 {
            return Ok(Err(refusal(code, &lines)));
        }
        let data = self.line()?;
        let n: usize = data
            .strip_prefix("DATA ")
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| unexpected(&data))?;
        let mut value = Vec::new();
        (&mut self.conn).take(n as u64).read_to_end(&mut value)?;
        if value.len() < n {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "the router closed the connection after {} of the {n} bytes of {handler}",
                    value.len()
                ),
            ));
        }
        Ok(Ok(value))
    }

    /// Calls a write handler; the router's refusal as the error.
    fn write(&mut self, handler: &str, value: &[u8]) -> io::Result<Result<(), Refusal>> {
        self.send("WRITEDATA", handler, value)?;
        let (code, lines) = self.answer()?;
        Ok(if code == 200 {
            Ok(())
        } else {
            Err(refusal(code, &lines))
        })
    }

    fn send(&mut self, command: &str, handler: &str, data: &[u8]) -> io::Result<()> {
        if handler.is_empty() || handler.contains(|c: char| c.is_whitespace()) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{handler:?}: a handler's name is one word"),
            ));
        }
        let conn = self.conn.get_mut();
        conn.write_all(format!("{command} {handler} {}\r\n", data.len()).as_bytes())?;
        conn.write_all(data)?;
        conn.flush()
    }

    /// One answer: its code and its lines' messages (`CODE-MESSAGE` lines, then the
    /// last, `CODE MESSAGE`).
    fn answer(&mut self) -> io::Result<(u16, Vec<String>)> {
        let mut lines = Vec::new();
        loop {
            let line = self.line()?;
            let code = line
                .get(..3)
                .filter(|c| c.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|c| c.parse::<u16>().ok())
                .ok_or_else(|| unexpected(&line))?;
            let (more, message) = match line.as_bytes().get(3) {
                Some(b'-') => (true, &line[4..]),
                Some(b' ') => (false, &line[4..]),
                None => (false, ""),
                Some(_) => return Err(unexpected(&line)),
            };
            lines.push(message.to_string());
            if !more {
                return Ok((code, lines));
            }
        }
    }

    /// One line of the router's, without its line end.
    fn line(&mut self) -> io::Result<String> {
        let mut line = Vec::new();
        (&mut self.conn)
            .take(MAX_LINE as u64)
            .read_until(b'\n', &mut line)?;
        if line.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the router closed the connection",
            ));
        }
        if line.last() != Some(&b'\n') {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                if line.len() >= MAX_LINE {
                    format!("an answer line longer than {MAX_LINE} bytes")
                } else {
                    "the router closed the connection in the middle of a line".to_string()
                },
            ));
        }
        line.pop();
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        String::from_utf8(line).map_err(|_| unexpected("(bytes that are not UTF-8)"))
    }
}

fn refusal(code: u16, lines: &[String]) -> Refusal {
    lines
        .iter()
        .map(|l| format!("{code} {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn unexpected(line: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("unexpected answer from the router: {:?}", shorten(line)),
    )
}

fn shorten(s: &str) -> String {
    match s.char_indices().nth(64) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests;
