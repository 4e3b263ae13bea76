//! `brickroute ctl`: a client of a running router's `ControlSocket`. It reads and writes
//! handlers in Click's ControlSocket protocol (`graph::control`), so an operator or a
//! script changes routes and reads counters without speaking the protocol through
//! `socat`.
//!
//! Values and parameters travel in the protocol's data blocks (`READDATA`,
//! `WRITEDATA`, protocol version 1.3), not on the command's line, so text of any shape
//! arrives as given: several lines of routes for a `ctrl` handler, or a value that
//! begins with a space. (The router takes UTF-8 text, and trims a read's parameter.)

use crate::run::strerror;
use graph::control::MAX_DATA;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// The greeting's prefix. The data-block commands came with version 1.3; an older
/// server answers them `501`, which is reported as its refusal.
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
    /// Seconds to wait for the connection, the greeting and the answer, each; 0 waits
    /// for ever.
    #[arg(long, default_value_t = 60.0, value_name = "SECONDS")]
    timeout: f64,
    #[command(subcommand)]
    action: Action,
}

#[derive(clap::Subcommand)]
enum Action {
    /// Prints a read handler's value (`c.count`, `rt.table`, `rt.lookup 10.0.0.1`).
    /// (`-h` and `--help` are part of the parameter here: `brickroute ctl help read`.)
    #[command(allow_hyphen_values = true, disable_help_flag = true)]
    Read {
        /// `ELEMENT.HANDLER`, or a global handler (`list`, `version`).
        handler: String,
        /// The handler's parameter, its words joined by single spaces.
        #[arg(trailing_var_arg = true)]
        parameter: Vec<String>,
    },
    /// Calls a write handler (`rt.add 192.0.2.0/24 198.18.0.2 1`, `c.reset`).
    /// (`-h` and `--help` are part of the value here: `brickroute ctl help write`.)
    #[command(allow_hyphen_values = true, disable_help_flag = true)]
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
        Err(Failure(message, code)) => {
            for line in message.lines() {
                eprintln!("brickroute ctl: {line}");
            }
            ExitCode::from(code)
        }
    }
}

/// Why `ctl` failed, and its exit status: 2 for a request refused before connecting
/// (the command line, the value), 1 for the router's refusal or a failed connection.
struct Failure(String, u8);

fn usage(message: String) -> Failure {
    Failure(message, 2)
}

fn failed(message: String) -> Failure {
    Failure(message, 1)
}

/// One handler call.
enum Request {
    Read { handler: String, parameter: Vec<u8> },
    Write { handler: String, value: Vec<u8> },
}

/// What the action asks of the router, checked before connecting; and how the value
/// read is printed (`list` drops the count line).
fn request(action: Action) -> Result<(Request, bool), Failure> {
    let (request, names_only) = match action {
        Action::Read { handler, parameter } => (
            Request::Read {
                handler,
                parameter: parameter.join(" ").into_bytes(),
            },
            false,
        ),
        Action::Write { file, handler, value } => {
            let value = match file {
                Some(path) if !value.is_empty() => {
                    return Err(usage(format!(
                        "write {handler}: a value on the command line and --file {} both; \
                         give one",
                        path.display()
                    )))
                }
                Some(path) => read_file(&path).map_err(failed)?,
                None => value.join(" ").into_bytes(),
            };
            (Request::Write { handler, value }, false)
        }
        Action::List => (
            Request::Read {
                handler: "list".into(),
                parameter: Vec::new(),
            },
            true,
        ),
        Action::Handlers { element } => (
            Request::Read {
                handler: format!("{element}.handlers"),
                parameter: Vec::new(),
            },
            false,
        ),
        Action::Stop => (
            Request::Write {
                handler: "stop".into(),
                value: Vec::new(),
            },
            false,
        ),
    };
    let (Request::Read {
        handler,
        parameter: data,
    }
    | Request::Write { handler, value: data }) = &request;
    if handler.is_empty() || handler.contains(|c: char| c.is_whitespace()) {
        return Err(usage(format!("{handler:?}: a handler's name is one word")));
    }
    if data.len() > MAX_DATA {
        return Err(usage(format!(
            "{handler}: {} bytes, where a control socket takes at most {MAX_DATA} (64 MiB) a call",
            data.len()
        )));
    }
    Ok((request, names_only))
}

fn run(args: CtlArgs) -> Result<(), Failure> {
    if !(args.timeout >= 0.0 && args.timeout <= 1e9) {
        return Err(usage(format!(
            "--timeout {}: expected seconds from 0 to 1e9",
            args.timeout
        )));
    }
    // (At least a microsecond: a timeout of zero means none to the socket calls.)
    let timeout =
        (args.timeout > 0.0).then(|| Duration::from_secs_f64(args.timeout).max(Duration::from_micros(1)));
    let (request, names_only) = request(args.action)?;
    let (stream, name) = match (&args.unix, &args.tcp) {
        (Some(path), _) => (connect_unix(path, timeout), path.display().to_string()),
        (None, Some(tcp)) => (connect_tcp(tcp, timeout), tcp.clone()),
        (None, None) => unreachable!("clap requires --unix or --tcp"),
    };
    let lost = |e: io::Error| {
        failed(match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => format!(
                "{name}: no answer from the router within {} s (--timeout)",
                args.timeout
            ),
            _ => format!("{name}: {}", strerror(&e)),
        })
    };
    let mut stream = stream.map_err(failed)?;
    stream.start();
    let mut router = Router::new(stream).map_err(|e| match e {
        Greeting::Refused(answer) => failed(answer),
        Greeting::Lost(e) => lost(e),
    })?;
    router.conn.get_mut().start();
    match request {
        Request::Read { handler, parameter } => {
            let value = router.read(&handler, &parameter).map_err(lost)?.map_err(failed)?;
            if names_only {
                // The `list` handler's first line is the number of elements.
                let names: Vec<u8> = value
                    .split_inclusive(|&b| b == b'\n')
                    .skip(1)
                    .flatten()
                    .copied()
                    .collect();
                print(&names).map_err(failed)
            } else {
                print(&value).map_err(failed)
            }
        }
        Request::Write { handler, value } => router.write(&handler, &value).map_err(lost)?.map_err(failed),
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
enum Socket {
    Unix(UnixStream),
    Tcp(TcpStream),
}

/// A control socket whose exchanges each have a deadline: `--timeout` bounds a whole
/// answer, however its bytes trickle in, not each read.
struct Stream {
    socket: Socket,
    timeout: Option<Duration>,
    deadline: Option<Instant>,
}

impl Stream {
    fn new(socket: Socket, timeout: Option<Duration>) -> Stream {
        Stream {
            socket,
            timeout,
            deadline: None,
        }
    }

    /// Starts an exchange (the greeting, or a request and its answer): it has the
    /// timeout from now.
    fn start(&mut self) {
        self.deadline = self.timeout.map(|t| Instant::now() + t);
    }

    /// The time left of the exchange; an error once it is over.
    fn left(&self) -> io::Result<Option<Duration>> {
        let Some(deadline) = self.deadline else {
            return Ok(None);
        };
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the exchange's time is up",
            ));
        }
        Ok(Some(left))
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.left()?;
        match &mut self.socket {
            Socket::Unix(s) => {
                s.set_read_timeout(left)?;
                s.read(buf)
            }
            Socket::Tcp(s) => {
                s.set_read_timeout(left)?;
                s.read(buf)
            }
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let left = self.left()?;
        match &mut self.socket {
            Socket::Unix(s) => {
                s.set_write_timeout(left)?;
                s.write(buf)
            }
            Socket::Tcp(s) => {
                s.set_write_timeout(left)?;
                s.write(buf)
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.socket {
            Socket::Unix(s) => s.flush(),
            Socket::Tcp(s) => s.flush(),
        }
    }
}

fn connect_unix(path: &std::path::Path, timeout: Option<Duration>) -> Result<Stream, String> {
    // A router that accepts nothing (stopped, or its queue of connections full)
    // leaves a UNIX connect blocked for good: the connect runs on a thread of its own,
    // given up after the timeout (the process ends soon after, and the thread with it).
    let (tx, rx) = std::sync::mpsc::channel();
    let to = path.to_path_buf();
    std::thread::spawn(move || {
        let _ = tx.send(UnixStream::connect(&to));
    });
    let connected = match timeout {
        Some(t) => rx.recv_timeout(t).map_err(|_| {
            format!(
                "{}: the router took no connection within {} s (--timeout)",
                path.display(),
                t.as_secs_f64()
            )
        })?,
        None => rx.recv().expect("the connecting thread sends"),
    };
    let s = connected.map_err(|e| {
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
    Ok(Stream::new(Socket::Unix(s), timeout))
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
    // A host name's lookup may hang on an unreachable resolver: it runs on a thread of
    // its own, given up after the timeout.
    let (tx, rx) = std::sync::mpsc::channel();
    let owned = spec.to_string();
    std::thread::spawn(move || {
        let _ = tx.send(tcp_addresses(&owned));
    });
    let addrs = match timeout {
        Some(t) => rx.recv_timeout(t).map_err(|_| {
            format!(
                "--tcp {spec}: no address for the host within {} s (--timeout)",
                t.as_secs_f64()
            )
        })?,
        None => rx.recv().expect("the resolving thread sends"),
    }?;
    let mut last = None;
    for addr in addrs {
        let attempt = match timeout {
            Some(t) => TcpStream::connect_timeout(&addr, t),
            None => TcpStream::connect(addr),
        };
        match attempt {
            Ok(s) => return Ok(Stream::new(Socket::Tcp(s), timeout)),
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

/// Why a connection did not start: the router refused it with an answer, or what
/// came was no greeting (or nothing came).
#[derive(Debug)]
enum Greeting {
    Refused(String),
    Lost(io::Error),
}

/// One connection to a router's control socket.
struct Router<S: Read + Write> {
    conn: BufReader<S>,
}

impl<S: Read + Write> Router<S> {
    /// Takes the router's greeting.
    fn new(stream: S) -> Result<Self, Greeting> {
        let mut r = Router {
            conn: BufReader::new(stream),
        };
        let greeting = r.line().map_err(Greeting::Lost)?;
        if greeting.starts_with(GREETING) {
            return Ok(r);
        }
        // A router that serves no more connections says why instead (`590 Too many
        // connections`).
        let code = greeting
            .get(..3)
            .filter(|c| c.bytes().all(|b| b.is_ascii_digit()));
        if code.is_some() && greeting.as_bytes().get(3).is_none_or(|&b| b == b' ') {
            return Err(Greeting::Refused(greeting));
        }
        Err(Greeting::Lost(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "not a Click control socket (it said {:?}, expected {GREETING}x)",
                shorten(&greeting)
            ),
        )))
    }

    /// Calls a read handler with a parameter (empty: none); its value, or the
    /// router's refusal.
    fn read(&mut self, handler: &str, parameter: &[u8]) -> io::Result<Result<Vec<u8>, Refusal>> {
        self.send("READDATA", handler, parameter)?;
        let (code, lines) = self.answer()?;
        if !(200..300).contains(&code) {
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
        Ok(if (200..300).contains(&code) {
            Ok(())
        } else {
            Err(refusal(code, &lines))
        })
    }

    fn send(&mut self, command: &str, handler: &str, data: &[u8]) -> io::Result<()> {
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
