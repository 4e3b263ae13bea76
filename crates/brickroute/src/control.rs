//! `ControlSocket`: Click's control socket for `brickroute run`. Other programs call
//! the running router's read and write handlers through it (a routing daemon adding
//! routes to `RadixIPLookup` while traffic flows, a monitor reading counters), in
//! Click's ControlSocket protocol (`graph::control`).
//!
//! The socket is bound while the configuration is built, so that a port in use fails
//! the configuration with the element's name; it is served by threads of its own (an
//! acceptor, and one thread per connection) from the moment the workers start until
//! the router stops, and a UNIX socket's file is removed when it closes.

use crate::run::strerror;
use crate::services::{CurrentRouter, ServiceThreads};
use graph::args::Args;
use graph::control::{Session, GREETING};
use graph::element::*;
use graph::error::ConfigError;
use graph::registry::Registry;
use packet::PacketBatch;
use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Connections served at once by one socket; more are refused with a message.
pub const MAX_CONNECTIONS: usize = 64;

/// How often idle threads look at the stop flag: the longest a stop waits for them.
const POLL: Duration = Duration::from_millis(50);

/// The most answer bytes held for a client that sends commands without reading the
/// answers: beyond it the server reads no more commands until the client reads (so
/// neither waits on the other, and memory stays bounded).
const MAX_PENDING: usize = 16 << 20;

/// The configuration's control sockets: those bound while a configuration is built,
/// waiting to be served, and those served.
///
/// A configuration that replaces the running one (`hotconfig`) takes over each served
/// socket its ControlSocket elements name again (same type and address): the socket
/// stays open and its connections stay up, calling the new configuration's handlers
/// from their next command. Sockets the new configuration does not name close when it
/// takes over; new ones are bound as it is built.
#[derive(Default)]
pub struct Sockets {
    bound: Mutex<Vec<Bound>>,
    /// Served sockets that the configuration being built names again (by
    /// [`Served::id`]), with its READONLY and VERBOSE.
    kept: Mutex<Vec<(u64, bool, bool)>>,
    served: Mutex<Vec<Served>>,
    next_id: AtomicU64,
    /// Threads closing the sockets a configuration that took over did not name (their
    /// connections' threads are joined there, not on the thread switching the
    /// configurations).
    closing: Mutex<Vec<JoinHandle<()>>>,
}

/// One bound socket and its settings.
struct Bound {
    /// `name :: ControlSocket`, for messages.
    declaration: String,
    /// The socket's type and address as configured ([`socket_key`]).
    key: String,
    address: Address,
    listener: Listener,
    read_only: bool,
    verbose: bool,
}

/// A socket being served, and its settings, which a configuration that takes it over
/// may change (for the connections it accepts from then on).
struct Served {
    id: u64,
    key: String,
    address: Address,
    read_only: Arc<AtomicBool>,
    verbose: Arc<AtomicBool>,
    /// The socket, shared with its accept loop: taken (closed) as the configuration
    /// that does not name it takes over, so a later one may bind its address at once.
    listener: Arc<Mutex<Option<Listener>>>,
    _threads: ServiceThreads,
}

/// What an accept loop serves: the socket and its current settings.
struct Serving {
    declaration: String,
    listener: Arc<Mutex<Option<Listener>>>,
    read_only: Arc<AtomicBool>,
    verbose: Arc<AtomicBool>,
}

enum Listener {
    Tcp(TcpListener),
    /// The file goes after the listener closes (fields drop in order).
    Unix {
        listener: UnixListener,
        _file: SocketFile,
    },
}

/// A UNIX socket's file, removed when the socket closes (also when the configuration
/// fails after it was bound).
struct SocketFile(PathBuf);

impl Drop for SocketFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    fn set_nonblocking(&self) -> std::io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_nonblocking(true),
            Stream::Unix(s) => s.set_nonblocking(true),
        }
    }
    fn fd(&self) -> RawFd {
        match self {
            Stream::Tcp(s) => s.as_raw_fd(),
            Stream::Unix(s) => s.as_raw_fd(),
        }
    }
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
        }
    }
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
        }
    }
}

impl Listener {
    /// A connection waiting to be accepted, with the peer's address for messages.
    fn accept(&self) -> std::io::Result<(Stream, String)> {
        match self {
            Listener::Tcp(l) => l
                .accept()
                .map(|(s, a)| (Stream::Tcp(s), format!(" from {}.{}", a.ip(), a.port()))),
            Listener::Unix { listener: l, .. } => l.accept().map(|(s, _)| (Stream::Unix(s), String::new())),
        }
    }
}

impl Sockets {
    pub fn new() -> Arc<Sockets> {
        Arc::new(Sockets::default())
    }

    /// Serves the sockets of the configuration last built with the handlers of the
    /// router `current` holds: starts serving those it bound, keeps those it took
    /// over (with its settings), and closes the served ones it did not name (their
    /// connections close within [`POLL`], after the answers they had ready are
    /// offered, and UNIX sockets' files go).
    pub fn serve(&self, current: &Arc<CurrentRouter>) {
        let bound = std::mem::take(&mut *lock(&self.bound));
        let kept = std::mem::take(&mut *lock(&self.kept));
        let mut served = lock(&self.served);
        let (stay, gone): (Vec<Served>, Vec<Served>) = std::mem::take(&mut *served)
            .into_iter()
            .partition(|s| kept.iter().any(|k| k.0 == s.id));
        *served = stay;
        for s in served.iter() {
            if let Some(&(_, read_only, verbose)) = kept.iter().find(|k| k.0 == s.id) {
                s.read_only.store(read_only, Ordering::SeqCst);
                s.verbose.store(verbose, Ordering::SeqCst);
            }
        }
        for s in &gone {
            drop(lock(&s.listener).take());
        }
        if !gone.is_empty() {
            match std::thread::Builder::new()
                .name("control-close".into())
                .spawn(move || drop(gone))
            {
                Ok(t) => lock(&self.closing).push(t),
                Err(e) => graph::warn!("ControlSocket: closing sockets: {}", e),
            }
        }
        for b in bound {
            let (read_only, verbose) = (
                Arc::new(AtomicBool::new(b.read_only)),
                Arc::new(AtomicBool::new(b.verbose)),
            );
            let listener = Arc::new(Mutex::new(Some(b.listener)));
            let serving = Serving {
                declaration: b.declaration,
                listener: listener.clone(),
                read_only: read_only.clone(),
                verbose: verbose.clone(),
            };
            served.push(Served {
                id: self.next_id.fetch_add(1, Ordering::SeqCst),
                key: b.key,
                address: b.address,
                read_only,
                verbose,
                listener,
                _threads: ServiceThreads::spawn("control", vec![serving], current, accept_loop),
            });
        }
    }

    /// Forgets what the configuration being built bound (those sockets close) and
    /// took over (those stay as they are): it was refused.
    pub fn abort(&self) {
        lock(&self.bound).clear();
        lock(&self.kept).clear();
    }

    /// Whether a socket is served: the router then runs until stopped.
    pub fn is_serving(&self) -> bool {
        !lock(&self.served).is_empty()
    }

    /// Closes every socket (see [`Sockets::serve`]).
    pub fn close(&self) {
        let served = std::mem::take(&mut *lock(&self.served));
        drop(served);
        let closing = std::mem::take(&mut *lock(&self.closing));
        for t in closing {
            let _ = t.join();
        }
    }

    /// The address of a served socket `key` that the configuration being built has
    /// not taken over yet (two elements may name one `PORT+`): it takes it over now,
    /// with `read_only` and `verbose`.
    fn take_over(&self, key: &str, read_only: bool, verbose: bool) -> Option<Address> {
        let served = lock(&self.served);
        let mut kept = lock(&self.kept);
        let s = served
            .iter()
            .find(|s| s.key == key && !kept.iter().any(|k| k.0 == s.id))?;
        kept.push((s.id, read_only, verbose));
        Some(s.address.clone())
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What identifies a ControlSocket's socket across configurations: its type and
/// address as configured (a TCP `PORT+` is the same socket whichever port it got).
fn socket_key(kind: &str, address: &str, localhost: Option<bool>, base_dir: &Path) -> String {
    if kind.eq_ignore_ascii_case("tcp") {
        format!("tcp {} {}", address, localhost.unwrap_or(true))
    } else {
        format!("unix {}", base_dir.join(address).display())
    }
}

fn accept_loop(b: Serving, current: Arc<CurrentRouter>, stop: Arc<AtomicBool>) {
    let open = Arc::new(AtomicUsize::new(0));
    let mut connections: Vec<JoinHandle<()>> = Vec::new();
    let mut serial = 0u64;
    let mut last_error: Option<String> = None;
    while !stop.load(Ordering::SeqCst) {
        connections.retain(|c| !c.is_finished());
        let accepted = match lock(&b.listener).as_ref() {
            Some(l) => l.accept(),
            // Closed by the configuration that took over.
            None => break,
        };
        let (mut stream, peer) = match accepted {
            Ok(c) => c,
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {
                std::thread::sleep(POLL / 5);
                continue;
            }
            Err(e) => {
                // Said once while it lasts (a full descriptor table fails every try).
                let e = strerror(&e);
                if last_error.as_ref() != Some(&e) {
                    graph::warn!("{}: accept: {}", b.declaration, e);
                    last_error = Some(e);
                }
                std::thread::sleep(POLL);
                continue;
            }
        };
        last_error = None;
        serial += 1;
        if stream.set_nonblocking().is_err() {
            continue;
        }
        if open.load(Ordering::SeqCst) >= MAX_CONNECTIONS {
            // A short answer into an empty socket buffer: whole, or nothing lost.
            let msg = format!("590 Too many connections ({} open)\r\n", MAX_CONNECTIONS);
            let _ = stream.write(msg.as_bytes());
            continue;
        }
        let (read_only, verbose) = (
            b.read_only.load(Ordering::SeqCst),
            b.verbose.load(Ordering::SeqCst),
        );
        if verbose {
            graph::warn!("{}: opened connection {}{}", b.declaration, serial, peer);
        }
        open.fetch_add(1, Ordering::SeqCst);
        let (current, stop, open) = (current.clone(), stop.clone(), open.clone());
        let declaration = b.declaration.clone();
        let spawned = std::thread::Builder::new()
            .name("control-conn".into())
            .spawn(move || {
                serve_connection(stream, &current, read_only, &stop);
                open.fetch_sub(1, Ordering::SeqCst);
                if verbose {
                    graph::warn!("{}: closed connection {}", declaration, serial);
                }
            });
        match spawned {
            Ok(t) => connections.push(t),
            Err(e) => graph::warn!("{}: connection {}: {}", b.declaration, serial, e),
        }
    }
    for c in connections {
        let _ = c.join();
    }
    // The listener (and a UNIX socket's file) goes with `b`.
}

/// Answers one client's commands until it quits or goes away, or the router stops.
/// Reading and writing go on side by side: a client may send many commands before it
/// reads their answers (as Click's ControlSocket allows), up to [`MAX_PENDING`] bytes
/// of unread answers.
fn serve_connection(mut stream: Stream, current: &CurrentRouter, read_only: bool, stop: &AtomicBool) {
    let router = || current.get();
    let mut session = Session::live(&router, read_only);
    let mut pending: Vec<u8> = GREETING.as_bytes().to_vec();
    let mut sent = 0;
    let mut buf = vec![0u8; 64 * 1024];
    let mut eof = false;
    while !stop.load(Ordering::SeqCst) {
        let want_read = !eof && !session.is_closed() && pending.len() - sent < MAX_PENDING;
        let want_write = sent < pending.len();
        if !want_read && !want_write {
            return;
        }
        let mut pfd = libc::pollfd {
            fd: stream.fd(),
            events: (if want_read { libc::POLLIN } else { 0 }) | (if want_write { libc::POLLOUT } else { 0 }),
            revents: 0,
        };
        // SAFETY: one valid pollfd for a descriptor this thread owns.
        let r = unsafe { libc::poll(&mut pfd, 1, POLL.as_millis() as i32) };
        if r <= 0 {
            continue;
        }
        if pfd.revents & libc::POLLNVAL != 0 {
            return;
        }
        if want_write && pfd.revents & (libc::POLLOUT | libc::POLLERR | libc::POLLHUP) != 0 {
            match stream.write(&pending[sent..]) {
                Ok(n) => sent += n,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
                Err(_) => return,
            }
            if sent == pending.len() {
                pending.clear();
                sent = 0;
            } else if sent >= 1 << 20 {
                pending.drain(..sent);
                sent = 0;
            }
        }
        if want_read && pfd.revents & (libc::POLLIN | libc::POLLERR | libc::POLLHUP) != 0 {
            match stream.read(&mut buf) {
                Ok(0) => {
                    eof = true;
                    session.feed(&[], true, &mut pending);
                }
                Ok(n) => session.feed(&buf[..n], false, &mut pending),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
                Err(_) => return,
            }
        }
    }
    // Stopped: the answers already made (a `hotconfig` write's, whose configuration
    // closed this socket) are offered once, without waiting.
    if sent < pending.len() {
        let _ = stream.write(&pending[sent..]);
    }
}

/// Registers `ControlSocket`, binding into `sockets`.
pub fn register(reg: &mut Registry, sockets: &Arc<Sockets>) {
    reg.add(Arc::new(ControlSocketClass {
        sockets: sockets.clone(),
    }));
}

struct ControlSocketClass {
    sockets: Arc<Sockets>,
}

/// How many ports past PORT a `PORT+` address tries.
const PORT_TRIES: u16 = 64;

impl ElementClass for ControlSocketClass {
    fn name(&self) -> &'static str {
        "ControlSocket"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("0/0")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let kind: String = arg(args.required("TYPE"), cx)?;
        let address: String = arg(
            args.required(if kind.eq_ignore_ascii_case("unix") {
                "FILENAME"
            } else {
                "PORTNUMBER"
            }),
            cx,
        )?;
        let read_only = arg(args.keyword::<bool>("READONLY"), cx)?.unwrap_or(false);
        let verbose = arg(args.keyword::<bool>("VERBOSE"), cx)?.unwrap_or(false);
        let localhost = arg(args.keyword::<bool>("LOCALHOST"), cx)?;
        arg(args.finish(), cx)?;
        if !kind.eq_ignore_ascii_case("tcp") && !kind.eq_ignore_ascii_case("unix") {
            return Err(cx.error(format!("unknown socket type '{}' (expected TCP or UNIX)", kind)));
        }
        if kind.eq_ignore_ascii_case("unix") && localhost.is_some() {
            return Err(cx.error("LOCALHOST is for TCP sockets"));
        }
        let key = socket_key(&kind, &address, localhost, cx.base_dir);
        if let Some(address) = self.sockets.take_over(&key, read_only, verbose) {
            return Ok(Arc::new(ControlSocketSpec { address }));
        }
        let (listener, address) = if kind.eq_ignore_ascii_case("tcp") {
            let (port, tries) = match address.strip_suffix('+') {
                Some(p) => (p, PORT_TRIES),
                None => (address.as_str(), 1),
            };
            let port: u16 = port.parse().map_err(|_| {
                cx.error(format!(
                    "PORTNUMBER expects a port number (0 to 65535), not '{}'",
                    address
                ))
            })?;
            // Unlike Click, which listens on every address unless LOCALHOST is true,
            // the socket listens on 127.0.0.1 unless LOCALHOST is false: it can
            // change routes, so reaching it from the network is asked for explicitly.
            let ip = if localhost.unwrap_or(true) {
                Ipv4Addr::LOCALHOST
            } else {
                Ipv4Addr::UNSPECIFIED
            };
            let l = bind_tcp(ip, port, tries).map_err(|e| cx.error(e))?;
            let bound = l.local_addr().map_err(|e| cx.error(strerror(&e)))?;
            (Listener::Tcp(l), Address::Tcp(bound))
        } else {
            let path = cx.base_dir.join(&address);
            let l = bind_unix(&path).map_err(|e| cx.error(e))?;
            (
                Listener::Unix {
                    listener: l,
                    _file: SocketFile(path),
                },
                Address::Unix(address),
            )
        };
        lock(&self.sockets.bound).push(Bound {
            declaration: format!("{} :: ControlSocket", cx.name),
            key,
            address: address.clone(),
            listener,
            read_only,
            verbose,
        });
        Ok(Arc::new(ControlSocketSpec { address }))
    }
}

/// An argument's value, or its error naming the element.
pub(crate) fn arg<T>(r: Result<T, String>, cx: &BuildContext) -> Result<T, ConfigError> {
    r.map_err(|e| cx.error(e))
}

fn bind_tcp(ip: Ipv4Addr, port: u16, tries: u16) -> Result<TcpListener, String> {
    let mut last = None;
    for p in (0..tries).map_while(|i| port.checked_add(i)) {
        match TcpListener::bind(SocketAddr::from((ip, p))) {
            Ok(l) => {
                l.set_nonblocking(true).map_err(|e| strerror(&e))?;
                return Ok(l);
            }
            Err(e) => last = Some(e),
        }
    }
    let e = last.map_or_else(|| "no port to try".to_string(), |e| strerror(&e));
    Err(if tries > 1 {
        format!("{}:{} and the {} ports after it: {}", ip, port, tries - 1, e)
    } else {
        format!("{}:{}: {}", ip, port, e)
    })
}

/// Binds a UNIX socket at `path`. A socket file no process listens on any more (left
/// by a router that was killed) is replaced; a live one, or a file of another kind,
/// is an error.
fn bind_unix(path: &Path) -> Result<UnixListener, String> {
    let shown = path.display();
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            return Err(format!("{}: file exists and is not a socket", shown));
        }
        match UnixStream::connect(path) {
            Ok(_) => return Err(format!("{}: another process is listening on it", shown)),
            Err(_) => std::fs::remove_file(path).map_err(|e| format!("{}: {}", shown, strerror(&e)))?,
        }
    }
    let l = UnixListener::bind(path).map_err(|e| format!("{}: {}", shown, strerror(&e)))?;
    l.set_nonblocking(true).map_err(|e| strerror(&e))?;
    Ok(l)
}

#[derive(Clone)]
enum Address {
    Tcp(SocketAddr),
    Unix(String),
}

struct ControlSocketSpec {
    address: Address,
}

impl ElementSpec for ControlSocketSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(NoPorts)
    }
    fn handlers(&self) -> Vec<HandlerInfo> {
        match self.address {
            Address::Tcp(_) => vec![HandlerInfo::read("port")],
            Address::Unix(_) => vec![HandlerInfo::read("filename")],
        }
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        match (&self.address, name) {
            (Address::Tcp(a), "port") => Some(a.port().to_string()),
            (Address::Unix(f), "filename") => Some(f.clone()),
            _ => None,
        }
    }
}

/// The workers' side of an element that has no ports (ControlSocket, KernelRoutes):
/// never called.
pub(crate) struct NoPorts;

impl Element for NoPorts {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, _out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        batch.clear();
    }
}
