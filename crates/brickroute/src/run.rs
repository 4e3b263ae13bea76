//! `brickroute run`: Click's userlevel driver options on brickroute's workers.

use crate::addresses;
use crate::control;
use crate::handlers;
use crate::hotconfig::{self, Hotconfig};
use crate::kernelroutes;
use crate::neighbors;
use crate::services::CurrentRouter;
use graph::lang;
use graph::registry::Registry;
use graph::router::RouterSpec;
use runtime::kernel_forwarding::KernelForwarding;
use runtime::DeviceTable;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(clap::Args)]
#[command(disable_help_flag = true)]
pub struct RunArgs {
    /// Read the configuration from FILE (`-` for standard input).
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    file: Option<String>,
    /// Use EXPR as the configuration.
    #[arg(short = 'e', long = "expression", value_name = "EXPR")]
    expr: Option<String>,
    /// After the run, read handler ELEMENT.HANDLER and print it as Click does.
    #[arg(short = 'h', long = "handler", value_name = "ELEMENT.HANDLER")]
    handlers: Vec<String>,
    /// Do not run the router: configure it, read handlers, exit.
    #[arg(short = 'q', long = "quit")]
    quit: bool,
    /// Number of worker threads (one per core), 1 to 1024.
    #[arg(short = 'j', long = "threads", value_name = "N", default_value_t = 1)]
    threads: usize,
    /// Print no summary after the run.
    #[arg(long = "no-summary")]
    no_summary: bool,
    /// Microseconds a worker keeps polling without receiving anything before it sleeps
    /// until one of its interfaces has traffic (0: sleep as soon as a poll finds none).
    #[arg(long = "idle-spin-us", value_name = "US", default_value_t = runtime::IDLE_SPIN.as_micros() as u64)]
    idle_spin_us: u64,
    /// Leave the kernel's IPv4 forwarding on the interfaces opened with METHOD PACKET as
    /// it is. By default brickroute turns it off on each while it runs (AF_PACKET leaves
    /// every frame to the kernel, which would forward it too) and restores it on exit.
    #[arg(long = "keep-kernel-forwarding")]
    keep_kernel_forwarding: bool,
    /// Serve the elements' numeric handlers to Prometheus at http://[HOST:]PORT/metrics
    /// while the router runs (`9100`, `:9100` and `0.0.0.0:9100` listen on every IPv4
    /// address; `127.0.0.1:9100` on loopback only; port 0 takes a free one). The router
    /// then runs until it is stopped, as with a ControlSocket.
    #[arg(long = "metrics", value_name = "[HOST:]PORT")]
    metrics: Option<String>,
    /// Allow the configuration to be replaced while the router runs, through the
    /// global write handler `hotconfig` (Click's option of that name): the new
    /// configuration is built beside the running one, and takes over only if it builds.
    #[arg(short = 'R', long = "allow-reconfigure")]
    allow_reconfigure: bool,
    /// The configuration file, and NAME=value definitions for $NAME.
    #[arg(value_name = "FILE | NAME=value")]
    rest: Vec<String>,
    #[arg(long = "help", action = clap::ArgAction::Help, help = "Print help")]
    help: Option<bool>,
}

/// Set by the first stop signal.
static SIGNALLED: AtomicBool = AtomicBool::new(false);

/// Whether a stop signal has come.
pub(crate) fn signalled() -> bool {
    SIGNALLED.load(Ordering::SeqCst)
}

/// True until the router is configured (Click's `!started`).
static CONFIGURING: AtomicBool = AtomicBool::new(true);

/// The first stop signal asks for an orderly stop: the workers end after one more pass,
/// files are flushed, interfaces closed, kernel flags restored, handlers printed. That
/// waits for whatever a worker or the configuration is blocked in (a read of a FIFO or
/// of standard input), so a second signal ends the process at once, as in Click. So
/// does the first one while the router is being configured, as in Click, unless a
/// kernel flag is already held off: then it stops before its first pass, to restore it.
extern "C" fn on_signal(sig: libc::c_int) {
    let again = SIGNALLED.swap(true, Ordering::SeqCst);
    if again || (CONFIGURING.load(Ordering::SeqCst) && runtime::kernel_forwarding::held_off() == 0) {
        end_by_signal(sig);
    }
}

/// Ends the process by `sig`'s default action (the exit status a shell shows as
/// 128 + `sig`). Only async-signal-safe calls: it runs in the handler.
fn end_by_signal(sig: libc::c_int) {
    // SAFETY: sigaction and raise are async-signal-safe; the sigaction struct is
    // zeroed (no flags, empty mask) and asks for the default disposition. The signal
    // is blocked while its handler runs, so it is delivered, with the default action,
    // as the handler returns.
    unsafe {
        let mut default: libc::sigaction = std::mem::zeroed();
        default.sa_sigaction = libc::SIG_DFL;
        libc::sigaction(sig, &default, std::ptr::null_mut());
        libc::raise(sig);
    }
}

fn install_signal_handlers() {
    // The signals the traffic tools stop on too: SIGINT, SIGTERM, SIGHUP, SIGQUIT.
    for sig in ::bench::net::STOP_SIGNALS {
        // SAFETY: a zeroed sigaction with the handler, whose calls are async-signal-safe
        // (atomics, sigaction, raise) and which lives as long as the process. SA_RESTART:
        // system calls in progress on the thread that takes the signal go on, so that no
        // read or send elsewhere in the router fails with EINTR; the stop is seen
        // through the flag.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
}

fn is_definition(s: &str) -> Option<(&str, &str)> {
    let (k, v) = s.split_once('=')?;
    (!k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')).then_some((k, v))
}

/// An I/O error as C's strerror words it ("No such file or directory"), without
/// Rust's "(os error N)" suffix.
pub(crate) fn strerror(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.rfind(" (os error ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// The inputs that take ARP frames from an interface (ARPResponder's requests,
/// ARPQuerier's replies on input 1), and Neighbour Discovery frames (IP6NDAdvertiser's
/// solicitations, IP6NDSolicitor's advertisements on input 1). An AF_XDP interface
/// whose received frames can reach one of them hands the router the ARP (or neighbour
/// discovery) for addresses other than its own, which its XDP program otherwise leaves
/// to the kernel with the rest; the other interfaces leave it to the kernel.
fn takes_arp(class: &str, input: usize) -> bool {
    class == "ARPResponder" || class == "ARPQuerier" && input == 1
}

fn takes_nd(class: &str, input: usize) -> bool {
    class == "IP6NDAdvertiser" || class == "IP6NDSolicitor" && input == 1
}

/// Sets each interface's XDP program to hand the router the ARP and neighbour discovery
/// frames `router` takes, and to leave the rest to the kernel.
fn deliver_neighbor_frames(router: &RouterSpec, devices: &DeviceTable) -> Result<(), String> {
    for d in devices.devices() {
        // A FromDevice of this interface.
        let from_here = |class: &str, config: &str| {
            class == "FromDevice"
                && graph::args::Args::new(config)
                    .required::<String>("DEVNAME")
                    .is_ok_and(|dev| dev == d.name)
        };
        d.port
            .deliver_router_arp(router.reaches(from_here, takes_arp))
            .map_err(|e| e.to_string())?;
        d.port
            .deliver_router_nd(router.reaches(from_here, takes_nd))
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The configuration's text as read, with the name its errors give it, and the
/// `NAME=value` definitions.
struct Source {
    text: String,
    name: String,
    defines: HashMap<String, String>,
}

/// Reads the configuration the command line names, or says why not.
fn read_configuration(args: &RunArgs) -> Result<Source, String> {
    let mut defines = HashMap::new();
    // Click's driver takes one configuration: a file (-f or an argument) or an
    // expression (-e), and refuses a second one whatever its kind.
    if args.file.is_some() && args.expr.is_some() {
        return Err("router configuration specified twice".into());
    }
    let mut file = args.file.clone();
    for r in &args.rest {
        if let Some((k, v)) = is_definition(r) {
            if defines.insert(k.to_string(), v.to_string()).is_some() {
                return Err(format!("parameter '{}' multiply defined", k));
            }
        } else if file.is_some() || args.expr.is_some() {
            return Err("router configuration specified twice".into());
        } else {
            file = Some(r.clone());
        }
    }
    let (text, name) = match (&args.expr, &file) {
        (Some(e), _) => (e.clone(), "<expr>".to_string()),
        (None, Some(f)) if f != "-" => {
            let bytes = std::fs::read(f).map_err(|e| format!("{}: {}", f, strerror(&e)))?;
            let text = lang::source_text(&bytes, f).map_err(|e| e.to_string())?;
            (text, f.clone())
        }
        _ => {
            let mut bytes = Vec::new();
            std::io::stdin()
                .read_to_end(&mut bytes)
                .map_err(|e| format!("<stdin>: {}", strerror(&e)))?;
            let text = lang::source_text(&bytes, "<stdin>").map_err(|e| e.to_string())?;
            (text, "<stdin>".to_string())
        }
    };
    Ok(Source { text, name, defines })
}

/// Checks and builds configuration `text` (`name` in its errors). `devices` opens the
/// network interfaces `FromDevice` and `ToDevice` name. `services` takes the
/// configuration's control sockets (bound) and kernel route syncs. With `staged`, the
/// output files its elements create keep temporary names until
/// [`RouterSpec::commit`].
pub(crate) fn build(
    text: &str,
    name: &str,
    defines: &HashMap<String, String>,
    threads: usize,
    devices: &Arc<DeviceTable>,
    services: &Services,
    staged: bool,
) -> Result<RouterSpec, String> {
    let mut reg = Registry::with_library();
    runtime::register(&mut reg, devices);
    control::register(&mut reg, &services.sockets);
    kernelroutes::register(&mut reg, &services.syncs);
    neighbors::register(&mut reg, &services.resolvers);
    cluster::register(&mut reg);
    crate::kerneltun::register(&mut reg);
    let flat = lang::parse_with_classes(text, name, defines, &|c| reg.get(c).is_some())
        .map_err(|e| reg.hint_unknown_name(e).to_string())?;
    if staged {
        RouterSpec::build_staged(&flat, &reg, Path::new("."), threads)
    } else {
        RouterSpec::build(&flat, &reg, Path::new("."), threads)
    }
    .map_err(|e| e.to_string())
}

/// What `run` serves beside the workers, collected while the configuration is built.
pub(crate) struct Services {
    pub sockets: Arc<control::Sockets>,
    pub syncs: Arc<kernelroutes::Syncs>,
    pub resolvers: Arc<neighbors::Resolvers>,
}

/// "; devices d0 (PACKET, 2 queues: 10 in, 0 out), ..." for the summary line, or "".
/// Frames a port lost (receive ring full, refused on transmit) are added when there
/// are any: "d0 (PACKET, 1 queue: 10 in, 0 out, 3 lost on receive)".
fn device_summary(devices: &DeviceTable) -> String {
    let list: Vec<String> = devices
        .devices()
        .iter()
        .map(|d| {
            let t = d.port.totals();
            let nq = d.port.queues();
            let rx_lost: u64 = (0..nq).map(|q| d.port.rx_dropped(q)).sum();
            let tx_lost: u64 = (0..nq).map(|q| d.port.tx_dropped(q)).sum();
            let mut s = format!(
                "{} ({}{} queue{}: {} in, {} out",
                d.name,
                d.method.map_or(String::new(), |m| match d.port.mode() {
                    Some(mode) => format!("{}: {}, ", m, mode),
                    None => format!("{}, ", m),
                }),
                nq,
                if nq == 1 { "" } else { "s" },
                t.rx_packets,
                t.tx_packets
            );
            if rx_lost > 0 {
                s += &format!(", {} lost on receive", rx_lost);
            }
            if tx_lost > 0 {
                s += &format!(", {} refused on transmit", tx_lost);
            }
            s + ")"
        })
        .collect();
    if list.is_empty() {
        String::new()
    } else {
        format!(
            "; device{} {}",
            if list.len() == 1 { "" } else { "s" },
            list.join(", ")
        )
    }
}

/// Where one worker's cycles went: "worker 0 on core 1: 12 packets, 150 cycles a packet
/// when busy, 97.0 % of its polling cycles in empty polls, 3 sleeps when idle".
fn worker_summary(w: &runtime::WorkerStats) -> String {
    format!(
        "worker {}{}: {} packets, {:.0} cycles a packet when busy, {:.1} % of its polling cycles in empty polls, {} sleep{} when idle",
        w.index,
        w.core.map_or(String::new(), |c| format!(" on core {}", c)),
        w.packets,
        w.cycles_per_packet(),
        100.0 * w.empty_poll_share(),
        w.idle_sleeps,
        if w.idle_sleeps == 1 { "" } else { "s" }
    )
}

pub fn main(args: RunArgs) -> ExitCode {
    // Checked before anything is built: the per-worker tables are allocated for this
    // many workers.
    if !(1..=runtime::MAX_WORKERS).contains(&args.threads) {
        graph::warn!("brickroute run: --threads must be 1..{}", runtime::MAX_WORKERS);
        return ExitCode::from(2);
    }
    let threads = args.threads;
    // Bound first: a busy or bad address fails before anything is opened.
    let metrics = match args.metrics.as_deref().map(crate::metrics::bind).transpose() {
        Ok(m) => m,
        Err(e) => {
            graph::warn!("brickroute run: {}", e);
            return ExitCode::from(2);
        }
    };
    let kernel = if args.keep_kernel_forwarding {
        KernelForwarding::Keep
    } else {
        KernelForwarding::TurnOff
    };
    let devices = Arc::new(DeviceTable::interfaces(kernel));
    let services = Services {
        sockets: control::Sockets::new(),
        syncs: kernelroutes::Syncs::new(),
        resolvers: neighbors::Resolvers::new(),
    };
    // The kernel's routes go in before the workers start (also with -q, as Click
    // initializes every element before it decides not to run).
    let loaded = read_configuration(&args).and_then(|source| {
        // Opening an AF_PACKET interface changes a kernel flag that only an orderly
        // exit restores: from here on a stop signal ends the process at once only
        // while no flag is held off (see `on_signal`). Until the text is read the
        // default dispositions stand, so Ctrl-C ends a read of standard input.
        install_signal_handlers();
        build(
            &source.text,
            &source.name,
            &source.defines,
            threads,
            &devices,
            &services,
            true,
        )
        .and_then(|r| deliver_neighbor_frames(&r, &devices).map(|()| r))
        .and_then(|r| services.syncs.install(&r).map(|followers| (r, followers, source)))
    });
    CONFIGURING.store(false, Ordering::SeqCst);
    let (mut router, followers, source) = match loaded {
        Ok(l) => l,
        Err(e) => {
            // Interfaces opened before the error close, and their flags are restored,
            // before the message.
            devices.clear();
            graph::warn!("{}", e);
            graph::warn!("Router could not be initialized!");
            return ExitCode::from(1);
        }
    };
    // Its output files take their names now that it is the router's.
    for e in router.commit() {
        graph::warn!("{}", e);
    }
    router.set_text(source.text);
    let hot = args
        .allow_reconfigure
        .then(|| Hotconfig::new(source.defines, threads, devices.clone(), services.sockets.clone()));
    if let Some(h) = &hot {
        router.set_hotconfig(h.handler());
    }
    let mut router = Arc::new(router);
    if !args.quit {
        let current = CurrentRouter::new(router.clone());
        if let Some(h) = &hot {
            h.serve_through(&current);
        }
        services.sockets.serve(&current);
        let scraped = metrics.map(|listener| {
            if let Ok(addr) = listener.local_addr() {
                graph::warn!("brickroute: metrics at http://{}/metrics", addr);
            }
            crate::metrics::serve(listener, &current)
        });
        let replacing = || hot.as_ref().is_some_and(|h| h.requested());
        let (mut followers, mut resolvers) = (followers, services.resolvers.clone());
        let mut s = runtime::RunStats::default();
        let mut configurations = 0;
        loop {
            configurations += 1;
            let following = kernelroutes::follow(followers, &router);
            // (Following the neighbour tables does not keep the router running: it
            // serves the workers' packets only.)
            let resolving = neighbors::follow(&resolvers, &router);
            // (Nor does following the interfaces' addresses for their XDP programs.)
            let addressing = addresses::follow(&devices, &router);
            // One worker per thread (pinned to cores) until a source asks to stop,
            // every source is done, a stop signal arrives, or another configuration
            // takes over.
            // With a control socket or kernel routes to follow, the router runs until
            // it is stopped (a signal, a source's STOP, or a write to the `stop`
            // handler), as Click's driver does while it has sockets to watch, also
            // once its sources are done: the workers go on (asleep when idle), so what
            // a handler starts (a Script's wait) still runs.
            let serving = services.sockets.is_serving() || following.is_running() || scraped.is_some();
            s.add(
                &runtime::Runtime::new(threads)
                    .idle_spin(Duration::from_micros(args.idle_spin_us))
                    .until_stopped(serving)
                    .run_until(&router, None, || signalled() || replacing()),
            );
            drop(addressing);
            drop(resolving);
            drop(following);
            // A stop asked for (a signal, `stop`, a source's STOP) wins over a
            // configuration written meanwhile (`stop` may have gone to the one waiting
            // to take over).
            let stopping =
                signalled() || router.stop_flag().was_asked() || current.get().stop_flag().was_asked();
            let next = match &hot {
                Some(h) if !stopping && h.requested() => h.take(|next| {
                    // Its elements take what the old one's of the same name learned
                    // (ARP tables, IPsec sequence numbers) once those have stopped.
                    next.router.take_state(&router);
                    for e in next.router.commit() {
                        graph::warn!("{}: {}", hotconfig::LANDMARK, e);
                    }
                    if let Err(e) = deliver_neighbor_frames(&next.router, &devices) {
                        graph::warn!("{}: {}", hotconfig::LANDMARK, e);
                    }
                    services.sockets.serve(&current);
                }),
                _ => None,
            };
            let Some(next) = next else { break };
            router = next.router;
            followers = next.followers;
            resolvers = next.resolvers;
        }
        if let Some(h) = &hot {
            h.close();
        }
        drop(scraped);
        services.sockets.close();
        if !args.no_summary {
            graph::warn!(
                "brickroute: {} worker{}, {} packets from sources in {:.3} s{}{}{}",
                threads,
                if threads == 1 { "" } else { "s" },
                s.packets(),
                s.elapsed.as_secs_f64(),
                if configurations > 1 {
                    format!(" over {} configurations", configurations)
                } else {
                    String::new()
                },
                device_summary(&devices),
                if SIGNALLED.load(Ordering::Relaxed) {
                    " (interrupted)"
                } else {
                    ""
                }
            );
            for w in &s.workers {
                graph::warn!("brickroute: {}", worker_summary(w));
            }
        }
    }
    let (out, errors) = handlers::read_all(&router, &args.handlers);
    // Close the interfaces (their sockets, and the promiscuous mode they asked for) and
    // give the kernel back its forwarding on them before printing: the router's
    // elements and the table hold the only references (with `-R`, also the current
    // router's cell, and a configuration written too late to run).
    drop(hot);
    drop(router);
    devices.clear();
    // SIGPIPE stays ignored in `run` (everything above must happen whatever the
    // reader does), so a reader that went away is an EPIPE here, reported as coreutils
    // report it when SIGPIPE is ignored: a message and exit status 1.
    let written = {
        let mut stdout = std::io::stdout().lock();
        stdout.write_all(out.as_bytes()).and_then(|()| stdout.flush())
    };
    for e in &errors {
        graph::warn!("{}", e);
    }
    if let Err(e) = &written {
        graph::warn!("brickroute: standard output: {}", strerror(e));
    }
    if errors.is_empty() && written.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
