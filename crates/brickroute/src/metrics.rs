//! `brickroute run --metrics [HOST:]PORT`: the router's numbers for Prometheus. Every
//! element's own read handler whose value is a number (a Counter's `count`, a
//! CheckIPHeader's `drops`, a VLBSwitch's `balanced`...) is one sample of the family
//! `brickroute_handler`, labelled with the element's name and class and the handler's
//! name, read as the ControlSocket reads it, at each scrape (but for the handlers that
//! print whole tables, which are never numbers). `GET /metrics` answers in
//! Prometheus' text format (0.0.4); other paths are 404, other methods 405.

use crate::services::ServiceThreads;
use graph::router::RouterSpec;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How long a scrape may take to send its request, and how often the listener looks
/// for the router's stop.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
const POLL: Duration = Duration::from_millis(50);
/// The longest request head read.
const MAX_REQUEST: usize = 8192;

/// Click's handlers every element has: not metrics.
const STANDARD: [&str; 5] = ["name", "class", "config", "ports", "handlers"];

/// Handlers that print a whole table or program, never a number: not read at a scrape
/// (a route table's `table` is a million lines on a full table).
const DUMPS: [&str; 4] = ["table", "program", "data", "drop_details"];

/// Listens on `spec` (`PORT`, `:PORT` or `HOST:PORT`; `HOST` alone is refused), so a bad
/// address fails before the router starts.
pub fn bind(spec: &str) -> Result<TcpListener, String> {
    let with_host = match spec.strip_prefix(':') {
        Some(port) => format!("0.0.0.0:{}", port),
        None if spec.parse::<u16>().is_ok() => format!("0.0.0.0:{}", spec),
        None => spec.to_string(),
    };
    let addrs: Vec<SocketAddr> = with_host
        .to_socket_addrs()
        .map_err(|e| format!("--metrics {}: not [HOST:]PORT ({})", spec, e))?
        .collect();
    let listener =
        TcpListener::bind(&addrs[..]).map_err(|e| format!("--metrics {}: cannot listen: {}", spec, e))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("--metrics {}: {}", spec, e))?;
    Ok(listener)
}

/// Serves scrapes with `router`'s handlers until the returned threads drop.
pub fn serve(listener: TcpListener, router: &Arc<RouterSpec>) -> ServiceThreads {
    ServiceThreads::spawn("metrics", vec![listener], router, accept_loop)
}

fn accept_loop(listener: TcpListener, router: Arc<RouterSpec>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::SeqCst) {
        match listener.accept() {
            // One scrape at a time: each is short, and a slow client waits its turn.
            Ok((stream, _)) => answer(stream, &router),
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {
                std::thread::sleep(POLL)
            }
            Err(_) => std::thread::sleep(POLL),
        }
    }
}

fn answer(mut stream: TcpStream, router: &RouterSpec) {
    if stream.set_nonblocking(false).is_err() || stream.set_read_timeout(Some(REQUEST_TIMEOUT)).is_err() {
        return;
    }
    let _ = stream.set_write_timeout(Some(REQUEST_TIMEOUT));
    let Some(head) = request_head(&mut stream) else {
        let _ = respond(
            &mut stream,
            "400 Bad Request",
            "a request head of at most 8 KiB\n",
        );
        return;
    };
    let mut words = head.lines().next().unwrap_or("").split_whitespace();
    let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let _ = match (method, path.split('?').next().unwrap_or("")) {
        ("GET", "/metrics") => respond(&mut stream, "200 OK", &exposition(router)),
        ("GET", _) => respond(&mut stream, "404 Not Found", "the metrics are at /metrics\n"),
        _ => respond(&mut stream, "405 Method Not Allowed", "only GET\n"),
    };
}

/// The request's head (up to the blank line), or None if it is too long, not text, or
/// does not come within the timeout.
fn request_head(stream: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && !head.windows(2).any(|w| w == b"\n\n") {
        let n = stream.read(&mut buf).ok().filter(|&n| n > 0)?;
        head.extend_from_slice(&buf[..n]);
        if head.len() > MAX_REQUEST {
            return None;
        }
    }
    String::from_utf8(head).ok()
}

fn respond(stream: &mut TcpStream, status: &str, body: &str) -> std::io::Result<()> {
    let content_type = if status.starts_with("200") {
        "text/plain; version=0.0.4; charset=utf-8"
    } else {
        "text/plain; charset=utf-8"
    };
    write!(
        stream,
        "HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
        status,
        content_type,
        body.len(),
        body
    )
}

/// Every numeric own read handler of every element, in configuration order.
pub fn exposition(router: &RouterSpec) -> String {
    let mut out = String::from(
        "# HELP brickroute_handler An element's read handler whose value is a number, as the ControlSocket reads it.\n\
         # TYPE brickroute_handler untyped\n",
    );
    let names: Vec<String> = router.element_names().map(String::from).collect();
    for element in &names {
        let read = |h: &str| router.read_handler(&format!("{}.{}", element, h));
        let (Ok(class), Ok(handlers)) = (read("class"), read("handlers")) else {
            continue;
        };
        for line in handlers.lines() {
            let mut fields = line.split('\t');
            let (Some(handler), Some(access)) = (fields.next(), fields.next()) else {
                continue;
            };
            if STANDARD.contains(&handler) || DUMPS.contains(&handler) || !access.contains('r') {
                continue;
            }
            // Handlers that need a parameter refuse a read without one: skipped.
            let Ok(value) = read(handler) else {
                continue;
            };
            let Some(value) = number(&value) else {
                continue;
            };
            out.push_str(&format!(
                "brickroute_handler{{element=\"{}\",class=\"{}\",handler=\"{}\"}} {}\n",
                label(element),
                label(class.trim()),
                label(handler),
                value
            ));
        }
    }
    out
}

/// A handler's value as a Prometheus number, if it is one number.
fn number(value: &str) -> Option<String> {
    let v = value.trim();
    let x: f64 = v.parse().ok()?;
    x.is_finite().then(|| v.to_string())
}

/// A label value with Prometheus' escapes.
fn label(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_labels() {
        assert_eq!(number(" 42\n"), Some("42".into()));
        assert_eq!(number("1.5"), Some("1.5".into()));
        assert_eq!(number("10.0.0.1"), None);
        assert_eq!(number("inf"), None);
        assert_eq!(number("1 2"), None);
        assert_eq!(label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }

    #[test]
    fn addresses() {
        assert!(bind("127.0.0.1:0").is_ok());
        assert!(bind("0").is_ok());
        let e = bind("127.0.0.1").unwrap_err();
        assert!(e.starts_with("--metrics 127.0.0.1: not [HOST:]PORT"), "{}", e);
        let e = bind("127.0.0.1:99999").unwrap_err();
        assert!(
            e.starts_with("--metrics 127.0.0.1:99999: not [HOST:]PORT"),
            "{}",
            e
        );
    }
}
