//! `Script(INSTRUCTIONS..., TYPE ACTIVE|PASSIVE|PACKET|PROXY)`: Click's scripting
//! element. A script sets variables, calls the router's handlers, prints, waits for
//! time or for its `step` handler, stops the router, and (TYPE PACKET) decides where
//! each packet goes (see docs/ELEMENTS.md).
//!
//! The script runs on worker 0, as a source: it takes its timer there (its `run`
//! answers `IdleUntil` the next wait's end), and it calls handlers there as Click
//! calls them from its one driver thread. Writes to its `run`, `step` and `goto`
//! handlers run it at once in the writer's thread; a packet script runs in the thread
//! of the worker the packet is on. Its state is under one lock, which worker 0 takes
//! only when the script's time has come.

mod expand;
mod functions;
mod machine;
mod program;

use crate::args::Args;
use crate::element::*;
use crate::elements::shared::lock;
use crate::error::ConfigError;
use crate::router::RouterSpec;
use crate::tsc;
use machine::{Caller, Ending, Machine, World};
use packet::PacketBatch;
use program::{first_word, Program};
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

pub struct ScriptClass;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Runs as soon as the router starts.
    Active,
    /// Runs when its `run` handler is called.
    Passive,
    /// Runs for each packet pushed into it; its ending chooses the packet's output.
    Packet,
    /// Runs when any handler other than its own is called on it.
    Proxy,
}

impl ElementClass for ScriptClass {
    fn name(&self) -> &'static str {
        "Script"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("-/-")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let e = |m: String| cx.error(m);
        let has_ports = cx.ninputs > 0 || cx.noutputs > 0;
        let kind = match args
            .keyword::<String>("TYPE")
            .map_err(e)?
            .as_deref()
            .map(str::trim)
        {
            None if has_ports => Kind::Packet,
            None | Some("ACTIVE") => Kind::Active,
            Some("PASSIVE") => Kind::Passive,
            Some("PACKET" | "PUSH") => Kind::Packet,
            Some("PROXY") => Kind::Proxy,
            Some(t) if t == "DRIVER" || t.starts_with("SIGNAL") => {
                return Err(e(format!(
                    "TYPE {} is not supported (brickroute runs ACTIVE, PASSIVE, PACKET and PROXY scripts)",
                    t.split_whitespace().next().unwrap_or(t)
                )))
            }
            Some(_) => return Err(e("bad TYPE".to_string())),
        };
        if kind == Kind::Packet && cx.ninputs == 0 {
            return Err(e("PACKET script must have inputs".to_string()));
        }
        if kind != Kind::Packet && has_ports {
            return Err(e("ports allowed only on PACKET scripts".to_string()));
        }
        let program = Program::parse(&args.rest())
            .map_err(|errors| ConfigError::all(errors.into_iter().map(e).collect()).expect("an error"))?;
        let machine = Mutex::new(Machine::new(&program));
        Ok(Arc::new(ScriptSpec(Arc::new(Script {
            name: cx.name.to_string(),
            kind,
            program,
            machine,
            wake: AtomicU64::new(u64::MAX),
            ended: AtomicBool::new(false),
            base_dir: cx.base_dir.to_path_buf(),
        }))))
    }
}

struct Script {
    name: String,
    kind: Kind,
    program: Program,
    machine: Mutex<Machine>,
    /// When the wait the script is blocked at ends (TSC), `u64::MAX` if it waits for
    /// no time: what worker 0 checks without taking the lock.
    wake: AtomicU64,
    /// The script's last run ended (it is not blocked at a wait).
    ended: AtomicBool,
    /// Where `print >FILE` names are relative to.
    base_dir: PathBuf,
}

/// What moves a script on.
enum Advance<'a> {
    /// The router started (an active script's first run).
    Start,
    /// A wait's time may have come.
    Timer,
    /// `step`: past this many waits.
    Steps(u32),
    /// `goto`: from this label.
    Goto(&'a str),
    /// `run` (or a PROXY script's handler): from the beginning, with these arguments.
    Run(&'a str, Caller),
}

thread_local! {
    /// The scripts this thread is running, innermost last: a script whose
    /// instructions call its own `run`, `step` or `goto`, directly or through another
    /// script, is refused instead of waiting for itself.
    static RUNNING: std::cell::RefCell<Vec<usize>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// How long a script called from another script waits for it to be free.
const NESTED_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// The handlers every element has (the router answers them).
const STANDARD_HANDLERS: [&str; 5] = ["class", "config", "handlers", "name", "ports"];
/// The handlers that run or move a script.
const STEP_HANDLERS: [&str; 3] = ["run", "step", "goto"];
/// The handlers over the script's variables.
const VARIABLE_HANDLERS: [&str; 3] = ["get", "set", "shift"];
/// The handlers that look at the router's handlers.
const LOOKUP_HANDLERS: [&str; 2] = ["readable", "writable"];

impl Script {
    /// Runs `f` on the script's state, which it holds alone meanwhile; `Err` if this
    /// thread is already running the script. Also says whether the script asked the
    /// router to stop.
    fn with_machine<R>(
        &self,
        router: Option<&RouterSpec>,
        f: impl FnOnce(&mut Machine, &mut RouterWorld) -> R,
    ) -> Result<(R, bool), String> {
        let me = self as *const Script as usize;
        if RUNNING.with(|r| r.borrow().contains(&me)) {
            return Err(format!("{}: the script is already running", self.name));
        }
        RUNNING.with(|r| r.borrow_mut().push(me));
        struct Leave;
        impl Drop for Leave {
            fn drop(&mut self) {
                RUNNING.with(|r| r.borrow_mut().pop());
            }
        }
        let _leave = Leave;
        // A script called from another script's instructions does not wait for ever:
        // two scripts on two threads calling each other would otherwise deadlock.
        let nested = RUNNING.with(|r| r.borrow().len() > 1);
        let mut m = if nested {
            self.lock_within(NESTED_WAIT)?
        } else {
            lock(&self.machine)
        };
        let mut world = RouterWorld {
            script: self,
            router,
            stopped: false,
        };
        m.initialize(&self.program, &mut world);
        let r = f(&mut m, &mut world);
        self.wake.store(m.deadline.unwrap_or(u64::MAX), Ordering::Release);
        self.ended.store(m.ending.is_some(), Ordering::Release);
        Ok((r, world.stopped))
    }

    /// The script's state, if its lock comes free within `limit`.
    fn lock_within(&self, limit: std::time::Duration) -> Result<std::sync::MutexGuard<'_, Machine>, String> {
        let start = std::time::Instant::now();
        loop {
            match self.machine.try_lock() {
                Ok(m) => return Ok(m),
                Err(std::sync::TryLockError::Poisoned(p)) => return Ok(p.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) if start.elapsed() < limit => {
                    std::thread::sleep(std::time::Duration::from_micros(50))
                }
                Err(std::sync::TryLockError::WouldBlock) => {
                    return Err(format!(
                        "{}: the script is busy (is it calling a script that calls it back?)",
                        self.name
                    ))
                }
            }
        }
    }

    /// Runs the script as `how` asks. `Ok` with what `return` gave (empty if it did not
    /// end with one), `Err` if it ended with `error` or could not be moved. The flag
    /// says whether it asked the router to stop.
    fn advance(&self, router: Option<&RouterSpec>, how: Advance) -> (Result<String, String>, bool) {
        let p = &self.program;
        let r = self.with_machine(router, |m, world| {
            let moved = match how {
                Advance::Start => {
                    m.step(p, world, 0);
                    Ok(())
                }
                Advance::Timer => {
                    if m.deadline.is_some_and(|t| tsc::rdtsc() >= t) {
                        m.step(p, world, 1);
                    }
                    Ok(())
                }
                Advance::Steps(n) => {
                    m.caller = Caller {
                        handler: "step".to_string(),
                        write: true,
                    };
                    m.step(p, world, n);
                    m.caller = Caller::default();
                    Ok(())
                }
                Advance::Goto(label) => {
                    m.caller = Caller {
                        handler: "goto".to_string(),
                        write: true,
                    };
                    let r = p
                        .label(label)
                        .ok_or("jump to nonexistent label".to_string())
                        .and_then(|target| m.jump(target))
                        .map(|()| m.step(p, world, 0));
                    m.caller = Caller::default();
                    r
                }
                Advance::Run(args, caller) => {
                    m.restart(args);
                    m.caller = caller;
                    m.step(p, world, 0);
                    m.caller = Caller::default();
                    Ok(())
                }
            };
            moved.and_then(|()| match &m.ending {
                Some(Ending::Error(msg)) if msg.is_empty() => Err(format!("{}: script error", self.name)),
                Some(Ending::Error(msg)) => Err(msg.clone()),
                _ => Ok(m.returned()),
            })
        });
        match r {
            Ok((result, stopped)) => (result, stopped),
            Err(e) => (Err(e), false),
        }
    }

    /// Whether `handler` is one the script answers itself (not its PROXY handlers).
    fn is_own(&self, handler: &str) -> bool {
        STANDARD_HANDLERS.contains(&handler)
            || STEP_HANDLERS.contains(&handler)
            || VARIABLE_HANDLERS.contains(&handler)
            || LOOKUP_HANDLERS.contains(&handler)
            || functions::HANDLERS.contains(&handler)
            || functions::FILE_HANDLERS.contains(&handler)
            || self.exported(handler).is_some()
    }

    /// The variable `export` made readable as handler `name`.
    fn exported(&self, name: &str) -> Option<usize> {
        self.program
            .exported
            .iter()
            .copied()
            .find(|&v| self.program.vars[v] == name)
    }

    /// Reads one of the script's own handlers from outside it (a handler call, not
    /// its own instructions), or runs a PROXY script; `None` if there is no such
    /// handler.
    fn read(
        &self,
        name: &str,
        param: &str,
        router: Option<&RouterSpec>,
        private: bool,
    ) -> Option<Result<String, String>> {
        if name == "run" {
            let caller = Caller {
                handler: "run".to_string(),
                write: false,
            };
            return Some(self.advance(router, Advance::Run(param, caller)).0);
        }
        if name == "get" || name == "shift" || self.exported(name).is_some() {
            return Some(
                self.with_machine(router, |m, _| m.read_variable(name, param))
                    .and_then(|(r, _)| r),
            );
        }
        if LOOKUP_HANDLERS.contains(&name) {
            let world = RouterWorld {
                script: self,
                router,
                stopped: false,
            };
            return Some(world.all_exist(param, name == "writable").map(|b| b.to_string()));
        }
        if functions::FILE_HANDLERS.contains(&name) && !private {
            return Some(Err(format!("'{}.{}' is private", self.name, name)));
        }
        if let Some(r) = functions::call(name, param) {
            return Some(r);
        }
        if self.kind == Kind::Proxy && !self.is_own(name) {
            let caller = Caller {
                handler: name.to_string(),
                write: false,
            };
            return Some(self.advance(router, Advance::Run(param, caller)).0);
        }
        None
    }

    /// Writes one of the script's own handlers, or runs a PROXY script; `None` if
    /// there is no such handler.
    fn write(&self, name: &str, value: &str, router: Option<&RouterSpec>) -> Option<Result<(), String>> {
        let how = match name {
            "run" => Advance::Run(
                value,
                Caller {
                    handler: "run".to_string(),
                    write: true,
                },
            ),
            "goto" => Advance::Goto(value.trim()),
            "step" => match value.trim() {
                "" => Advance::Steps(1),
                n => match n.parse::<u32>() {
                    Ok(n) => Advance::Steps(n),
                    Err(_) => return Some(Err("syntax error".to_string())),
                },
            },
            "set" => {
                let (var, v) = first_word(value);
                if var.is_empty() {
                    return Some(Err("no variable".to_string()));
                }
                let v = v.to_string();
                return Some(self.with_machine(router, |m, _| m.set(var, v)).map(|_| ()));
            }
            _ if self.kind == Kind::Proxy && !self.is_own(name) => Advance::Run(
                value,
                Caller {
                    handler: name.to_string(),
                    write: true,
                },
            ),
            _ if self.is_own(name) => {
                return Some(Err(format!("'{}.{}' is a read handler", self.name, name)))
            }
            _ => return None,
        };
        let (r, stopped) = self.advance(router, how);
        if stopped {
            if let Some(r) = router {
                r.stop_flag().request();
            }
        }
        Some(r.map(|_| ()))
    }
}

/// The router as a script sees it: its handlers, standard output, its stop flag.
struct RouterWorld<'a> {
    script: &'a Script,
    router: Option<&'a RouterSpec>,
    stopped: bool,
}

impl RouterWorld<'_> {
    /// The script's own handler `path` names (`add`, or `s.add` for script `s`), if
    /// it names one; handler names without an element that are not the script's are
    /// global, as in Click.
    fn own<'p>(&self, path: &'p str) -> Option<&'p str> {
        match path.split_once('.') {
            Some((e, h)) if e == self.script.name => self.script.is_own(h).then_some(h),
            Some(_) => None,
            None => self.script.is_own(path).then_some(path),
        }
    }

    fn router(&self) -> Result<&RouterSpec, String> {
        self.router
            .ok_or_else(|| "no router to call handlers of".to_string())
    }

    /// Whether every handler named in `names` exists with `write` (or read) access.
    fn all_exist(&self, names: &str, write: bool) -> Result<bool, String> {
        let router = self.router()?;
        Ok(crate::args::split_words(names).iter().all(|path| {
            if let Some(h) = self.own(path) {
                return if write {
                    STEP_HANDLERS.contains(&h) || h == "set"
                } else {
                    h != "step" && h != "goto" && h != "set"
                };
            }
            match path.split_once('.') {
                None if write => router.has_global_write_handler(path),
                None => router.read_global_handler(path).is_some(),
                Some((e, h)) => router
                    .handler_access(e, h)
                    .is_some_and(|(r, w)| if write { w } else { r }),
            }
        }))
    }
}

impl World for RouterWorld<'_> {
    fn read(&mut self, handler: &str, param: &str) -> Result<String, String> {
        let mut handler = handler.to_string();
        if let Some(h) = self.own(&handler) {
            // The script's own functions; its variables are the machine's (which
            // answers them before asking here), and `run` refuses to re-enter.
            if let Some(r) = self.script.read(h, param, self.router, true) {
                return r;
            }
            // The standard handlers, which the router answers.
            handler = format!("{}.{}", self.script.name, h);
        }
        let router = self.router()?;
        if !handler.contains('.') {
            if !param.is_empty() {
                return Err(format!("read handler '{}' does not take parameters", handler));
            }
            return router
                .read_global_handler(&handler)
                .ok_or_else(|| format!("no read handler '{}'", handler));
        }
        if param.is_empty() {
            router.read_handler(&handler)
        } else {
            router.read_handler(&format!("{} {}", handler, param))
        }
    }

    fn write(&mut self, handler: &str, value: &str) -> Result<(), String> {
        let router = self.router()?;
        let full = self.full_name(handler);
        if !full.contains('.') {
            let r = router
                .write_global_handler(&full, value)
                .ok_or_else(|| format!("no write handler '{}'", full))?;
            if r.is_ok() && full == "stop" {
                self.stopped = true;
            }
            return r;
        }
        router.write_handler(&full, value)
    }

    fn full_name(&self, handler: &str) -> String {
        match self.own(handler) {
            Some(h) if !handler.contains('.') => format!("{}.{}", self.script.name, h),
            _ => handler.to_string(),
        }
    }

    fn is_own(&self, handler: &str) -> Option<String> {
        self.own(handler).map(str::to_string)
    }

    fn readable(&self, handler: &str) -> bool {
        self.all_exist(handler, false).unwrap_or(false)
    }

    fn print(&mut self, file: Option<(&str, bool)>, text: &str) -> Result<(), String> {
        match file {
            None => {
                let mut out = std::io::stdout().lock();
                out.write_all(text.as_bytes())
                    .and_then(|()| out.flush())
                    .map_err(|e| format!("standard output: {}", e))
            }
            Some((name, append)) => {
                let path = self.script.base_dir.join(name);
                std::fs::OpenOptions::new()
                    .create(true)
                    .write(true)
                    .append(append)
                    .truncate(!append)
                    .open(&path)
                    .and_then(|mut f| f.write_all(text.as_bytes()))
                    .map_err(|e| format!("{}: {}", name, e))
            }
        }
    }

    fn message(&mut self, text: &str) {
        crate::warn!("{}", text);
    }

    fn error(&mut self, text: &str) {
        crate::warn!("{} :: Script: {}", self.script.name, text);
    }

    fn stop(&mut self) {
        self.stopped = true;
        if let Some(r) = self.router {
            r.stop_flag().request();
        }
    }

    fn now(&self) -> u64 {
        tsc::rdtsc()
    }

    fn ticks(&self, d: std::time::Duration) -> u64 {
        (d.as_secs_f64() * tsc::tsc_hz()) as u64
    }
}

struct ScriptSpec(Arc<Script>);

impl ElementSpec for ScriptSpec {
    fn instantiate(&self, w: WorkerInfo) -> Box<dyn Element> {
        Box::new(ScriptTask {
            script: self.0.clone(),
            on_worker_0: w.index == 0,
            started: false,
            released: false,
        })
    }

    fn handlers(&self) -> Vec<HandlerInfo> {
        let mut h = vec![
            HandlerInfo::read_write("run"),
            HandlerInfo::write("step"),
            HandlerInfo::write("goto"),
            HandlerInfo::read("get"),
            HandlerInfo::write("set"),
            HandlerInfo::read("shift"),
            HandlerInfo::read("readable"),
            HandlerInfo::read("writable"),
        ];
        h.extend(functions::HANDLERS.iter().map(|&name| HandlerInfo::read(name)));
        h
    }

    /// Its `init` and `export` values, read as the router starts (as Click's
    /// `initialize`).
    fn initialize(&self, router: &RouterSpec) {
        if let Err(e) = self.0.with_machine(Some(router), |_, _| ()) {
            crate::warn!("{} :: Script: {}", self.0.name, e);
        }
    }

    fn answers_any_handler(&self) -> bool {
        self.0.kind == Kind::Proxy
    }

    fn read_handler_in(
        &self,
        name: &str,
        param: Option<&str>,
        router: &RouterSpec,
    ) -> Option<Result<String, String>> {
        self.0.read(name, param.unwrap_or(""), Some(router), false)
    }

    fn write_handler_in(&self, name: &str, value: &str, router: &RouterSpec) -> Option<Result<(), String>> {
        self.0.write(name, value, Some(router))
    }
}

/// The script on a worker: on worker 0 a source that runs it when the router starts
/// (active scripts) and whenever a wait's time comes; on every worker, a packet
/// script's element.
struct ScriptTask {
    script: Arc<Script>,
    on_worker_0: bool,
    started: bool,
    /// Said [`TaskStatus::Released`] once the active script ended.
    released: bool,
}

impl Element for ScriptTask {
    /// A packet script runs from its first instruction for each packet, with `$input`
    /// the input port: `end` sends the packet to output 0, `return N` to output N, and
    /// `exit`, `stop`, `error`, a wait or an output the element does not have drop it.
    fn push(&mut self, port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, cx: &mut Context<'_>) {
        let s = &*self.script;
        let outputs = out.len().min(usize::from(DROP));
        let input = port.to_string();
        let r = s.with_machine(cx.router(), |m, world| {
            let mut verdicts = Vec::with_capacity(batch.len());
            for _ in 0..batch.len() {
                m.set("input", input.clone());
                m.pos = 0;
                m.step(&s.program, world, 0);
                verdicts.push(m.output().filter(|&o| o < outputs).map_or(DROP, |o| o as u8));
            }
            verdicts
        });
        let (verdicts, stopped) = match r {
            Ok(v) => v,
            Err(e) => {
                crate::warn!("{} :: Script: {}", s.name, e);
                (Vec::new(), false)
            }
        };
        let mut next = verdicts.into_iter();
        out.route_each(batch, |_| next.next().unwrap_or(DROP));
        if stopped {
            cx.request_stop();
        }
    }

    fn is_source(&self) -> bool {
        self.on_worker_0
    }

    /// An active script keeps the router running until it ends; the others only
    /// serve their waits.
    fn keeps_router_running(&self) -> bool {
        self.script.kind == Kind::Active
    }

    fn run(&mut self, _out: &mut Outputs<'_>, cx: &mut Context<'_>) -> TaskStatus {
        let s = &*self.script;
        let how = if !self.started {
            self.started = true;
            (s.kind == Kind::Active).then_some(Advance::Start)
        } else {
            (cx.now_tsc() >= s.wake.load(Ordering::Acquire)).then_some(Advance::Timer)
        };
        if let Some(how) = how {
            // An `error` was reported as the script ran.
            let (_, stopped) = s.advance(cx.router(), how);
            if stopped {
                cx.request_stop();
            }
        }
        if s.kind == Kind::Active && !self.released && s.ended.load(Ordering::Acquire) {
            self.released = true;
            return TaskStatus::Released;
        }
        TaskStatus::IdleUntil(s.wake.load(Ordering::Acquire))
    }

    /// A wait a handler started keeps the worker running.
    fn is_pending(&self) -> bool {
        self.script.wake.load(Ordering::Acquire) != u64::MAX
    }

    fn idle_wait(&mut self) -> IdleWait {
        // A wait ending within 10 ms keeps the worker polling; otherwise it may sleep
        // (it looks again within 10 ms).
        let wake = self.script.wake.load(Ordering::Acquire);
        if wake.saturating_sub(tsc::rdtsc()) < (0.01 * tsc::tsc_hz()) as u64 {
            IdleWait::Poll
        } else {
            IdleWait::Nothing
        }
    }
}

#[cfg(test)]
mod tests;
