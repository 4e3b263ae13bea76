//! `brickroute run --metrics [HOST:]PORT`: the router's numbers for Prometheus. Every
//! element's own read handler whose value is a number (a Counter's `count`, a
//! CheckIPHeader's `drops`, a VLBSwitch's `balanced`...) is one sample of the family
//! `brickroute_handler`, labelled with the element's name and class and the handler's
//! name, read as the ControlSocket reads it, at each scrape (but for the handlers that
//! print whole tables, lists or addresses). `GET /metrics` (or `HEAD`) answers in
//! Prometheus' text format (0.0.4); other paths are 404, other methods 405. Each scrape
//! runs on a thread of its own, at most 8 at once, and has 2 s for its request and
//! answer.

use crate::services::{CurrentRouter, ServiceThreads};
use graph::router::RouterSpec;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a scrape may take, request and answer, and how often the listener looks
/// for the router's stop.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(2);
const POLL: Duration = Duration::from_millis(50);
/// The longest request head read.
const MAX_REQUEST: usize = 8192;
/// Scrapes served at once; more are answered 503 at once.
const MAX_SCRAPES: usize = 8;

/// Click's handlers every element has: not metrics.
const STANDARD: [&str; 5] = ["name", "class", "config", "ports", "handlers"];

/// Handlers that are not measurements, though their text may look like a number: whole
/// tables and programs (a route table's `table` is a million lines on a full table,
/// never read at a scrape), lists of servers, addresses, file names, triggers.
const NOT_METRICS: [&str; 14] = [
    "table",
    "program",
    "data",
    "drop_details",
    "down",
    "silent",
    "heard_ms",
    "count_call",
    "byte_count_call",
    "filename",
    "ipaddr",
    "addr",
    "src",
    "dst",
];

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

/// Serves scrapes with the handlers of the router `current` holds at each scrape,
/// until the returned threads drop.
pub fn serve(listener: TcpListener, current: &Arc<CurrentRouter>) -> ServiceThreads {
    ServiceThreads::spawn("metrics", vec![listener], current, accept_loop)
}

fn accept_loop(listener: TcpListener, current: Arc<CurrentRouter>, stop: Arc<AtomicBool>) {
    let mut scrapes: Vec<JoinHandle<()>> = Vec::new();
    while !stop.load(Ordering::SeqCst) {
        scrapes.retain(|s| !s.is_finished());
        let mut stream = match listener.accept() {
            Ok((stream, _)) => stream,
            Err(_) => {
                std::thread::sleep(POLL);
                continue;
            }
        };
        let deadline = Instant::now() + SCRAPE_TIMEOUT;
        if scrapes.len() >= MAX_SCRAPES {
            let _ = stream.set_nonblocking(false);
            let _ = respond(
                &mut stream,
                deadline,
                "503 Service Unavailable",
                "",
                "too many scrapes at once\n",
                true,
            );
            continue;
        }
        // Each scrape on a thread of its own, bounded by its deadline: a slow client
        // holds up neither the others nor the router's stop for longer than that.
        let router = current.get();
        let spawned = std::thread::Builder::new()
            .name("metrics-scrape".into())
            .spawn(move || answer(stream, deadline, &router));
        if let Ok(t) = spawned {
            scrapes.push(t);
        }
    }
    for s in scrapes {
        let _ = s.join();
    }
}

fn answer(mut stream: TcpStream, deadline: Instant, router: &RouterSpec) {
    if stream.set_nonblocking(false).is_err() {
        return;
    }
    let _ = stream.set_nodelay(true);
    let Some(head) = request_head(&mut stream, deadline) else {
        // Too long, not text, or too slow: closed without an answer.
        return;
    };
    let mut words = head.lines().next().unwrap_or("").split_whitespace();
    let (method, path, version) = (words.next(), words.next(), words.next());
    let (Some(method), Some(path), Some(true)) = (method, path, version.map(|v| v.starts_with("HTTP/")))
    else {
        let _ = respond(
            &mut stream,
            deadline,
            "400 Bad Request",
            "",
            "not an HTTP request\n",
            true,
        );
        return;
    };
    let with_body = method != "HEAD";
    let _ = match (method, path.split('?').next().unwrap_or("")) {
        ("GET" | "HEAD", "/metrics") => respond(
            &mut stream,
            deadline,
            "200 OK",
            "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n",
            &exposition(router),
            with_body,
        ),
        ("GET" | "HEAD", _) => respond(
            &mut stream,
            deadline,
            "404 Not Found",
            "",
            "the metrics are at /metrics\n",
            with_body,
        ),
        _ => respond(
            &mut stream,
            deadline,
            "405 Method Not Allowed",
            "Allow: GET, HEAD\r\n",
            "only GET and HEAD\n",
            true,
        ),
    };
}

/// The time left before `deadline`, or a timed-out error.
fn left(deadline: Instant) -> std::io::Result<Duration> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(std::io::Error::new(
            ErrorKind::TimedOut,
            "the scrape's time is up",
        ));
    }
    Ok(left)
}

/// The request's head (up to the blank line), or None if it is too long, not text, or
/// not all there by the deadline.
fn request_head(stream: &mut TcpStream, deadline: Instant) -> Option<String> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && !head.windows(2).any(|w| w == b"\n\n") {
        stream.set_read_timeout(Some(left(deadline).ok()?)).ok()?;
        let n = stream.read(&mut buf).ok().filter(|&n| n > 0)?;
        head.extend_from_slice(&buf[..n]);
        if head.len() > MAX_REQUEST {
            return None;
        }
    }
    String::from_utf8(head).ok()
}

/// One answer, written at once (a response in pieces waits on TCP's small-packet delay).
fn respond(
    stream: &mut TcpStream,
    deadline: Instant,
    status: &str,
    headers: &str,
    body: &str,
    with_body: bool,
) -> std::io::Result<()> {
    let content_type = if headers.contains("Content-Type") {
        ""
    } else {
        "Content-Type: text/plain; charset=utf-8\r\n"
    };
    let mut answer = format!(
        "HTTP/1.1 {}\r\n{}{}Content-Length: {}\r\nConnection: close\r\n\r\n",
        status,
        headers,
        content_type,
        body.len()
    );
    if with_body {
        answer.push_str(body);
    }
    stream.set_write_timeout(Some(left(deadline)?))?;
    stream.write_all(answer.as_bytes())
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
        // A Script's read handlers are calls (`run` runs it; `add` computes from its
        // parameters), not values to sample.
        if class.trim() == "Script" {
            continue;
        }
        for line in handlers.lines() {
            let mut fields = line.split('\t');
            let (Some(handler), Some(access)) = (fields.next(), fields.next()) else {
                continue;
            };
            if STANDARD.contains(&handler) || NOT_METRICS.contains(&handler) || !access.contains('r') {
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
    fn a_scrape_runs_no_script() {
        let r = graph::testing::router(
            "c :: Counter; Idle -> c -> Discard;
             s :: Script(TYPE PASSIVE, write c.reset, return 5)",
        )
        .unwrap();
        let text = exposition(&r);
        assert!(
            text.contains("element=\"c\",class=\"Counter\",handler=\"count\"} 0\n"),
            "{}",
            text
        );
        assert!(!text.contains("element=\"s\""), "{}", text);
        assert_eq!(r.read_handler("s.run").unwrap(), "5");
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
