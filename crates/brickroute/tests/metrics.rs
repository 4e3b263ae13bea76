//! `brickroute run --metrics`: a Prometheus scrape of a running router's numbers, the
//! answers to other requests, and addresses refused before the router starts.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_brickroute");

/// The router process, stopped on drop.
struct Router(Child);

impl Drop for Router {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Sends `request` to `addr` and returns the whole answer.
fn http(addr: &str, request: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    answer
}

/// The value of `sample` (its name and labels) in an exposition.
fn sample(body: &str, sample: &str) -> Option<f64> {
    body.lines()
        .find_map(|l| l.strip_prefix(sample)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn a_scrape_reports_every_numeric_handler() {
    let mut child = Command::new(BIN)
        .args(["run", "--metrics", "127.0.0.1:0", "-e"])
        .arg(
            "RatedSource(RATE 2000) -> c :: Counter -> chk :: CheckIPHeader -> Discard;
             Idle -> [0]v :: VLBSwitch(0, SCHEME vlb, DOWN 1); Idle -> [1]v; v[0] -> Discard; v[1] -> Discard;",
        )
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let router = Router(child);
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let addr = line
        .trim()
        .strip_prefix("brickroute: metrics at http://")
        .and_then(|r| r.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("{line}"))
        .to_string();

    let deadline = Instant::now() + Duration::from_secs(20);
    let answer = loop {
        let answer = http(&addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        if sample(
            &answer,
            r#"brickroute_handler{element="c",class="Counter",handler="count"}"#,
        )
        .unwrap_or(0.0)
            > 0.0
        {
            break answer;
        }
        assert!(Instant::now() < deadline, "no packets counted: {answer}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    assert!(
        answer.contains("Content-Type: text/plain; version=0.0.4"),
        "{answer}"
    );
    assert!(answer.contains("# TYPE brickroute_handler untyped\n"), "{answer}");
    // RatedSource's frames are not IP: every one the counter saw, the check dropped
    // (or is about to).
    let count = sample(
        &answer,
        r#"brickroute_handler{element="c",class="Counter",handler="count"}"#,
    )
    .unwrap();
    let drops = sample(
        &answer,
        r#"brickroute_handler{element="chk",class="CheckIPHeader",handler="drops"}"#,
    )
    .unwrap();
    assert!(drops > 0.0 && drops <= count, "{answer}");
    // (Click's token rate reads back within one of what was asked.)
    let rate = sample(
        &answer,
        r#"brickroute_handler{element="RatedSource@1",class="RatedSource",handler="rate"}"#,
    );
    assert!(rate.is_some_and(|r| (r - 2000.0).abs() <= 1.0), "{answer}");
    // Standard handlers and text values are not metrics.
    assert!(
        !answer.contains("handler=\"config\"") && !answer.contains("handler=\"class\""),
        "{answer}"
    );

    assert!(http(&addr, "GET / HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404 Not Found\r\n"));
    assert!(http(&addr, "POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405 Method Not Allowed\r\n"));
    assert!(http(&addr, "junk\r\n\r\n").starts_with("HTTP/1.1 400 Bad Request\r\n"));
    let post = http(&addr, "POST /metrics HTTP/1.1\r\n\r\n");
    assert!(post.contains("\r\nAllow: GET, HEAD\r\n"), "{post}");
    // HEAD: the headers alone.
    let head = http(&addr, "HEAD /metrics HTTP/1.1\r\n\r\n");
    assert!(
        head.starts_with("HTTP/1.1 200 OK\r\n") && head.ends_with("\r\n\r\n"),
        "{head}"
    );
    // A list of servers that happens to read as a number is no metric.
    assert!(answer.contains("handler=\"flowlet_hits\""), "{answer}");
    assert!(!answer.contains("handler=\"down\""), "{answer}");

    // A client that trickles its request holds up neither other scrapes nor the
    // router's stop for longer than a scrape's 2 s.
    let mut slow = TcpStream::connect(&addr).unwrap();
    slow.write_all(b"GET /met").unwrap();
    let started = Instant::now();
    assert!(http(&addr, "GET /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 200 OK"));
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    let mut router = router;
    // SAFETY: kill(2) on our own child's process id, which we have not reaped yet.
    unsafe { libc::kill(router.0.id() as i32, libc::SIGINT) };
    let stopping = Instant::now();
    while router.0.try_wait().unwrap().is_none() {
        assert!(
            stopping.elapsed() < Duration::from_secs(5),
            "the router did not stop"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(slow);
}

#[test]
fn addresses_that_cannot_serve_are_refused_before_the_router_starts() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port();
    for (addr, message) in [
        ("127.0.0.1".to_string(), "--metrics 127.0.0.1: not [HOST:]PORT"),
        (format!("127.0.0.1:{port}"), "cannot listen"),
    ] {
        let o = Command::new(BIN)
            .args(["run", "--metrics", &addr, "-e", "Idle -> Discard;"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{addr}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(message), "{addr}: {err}");
    }
}
