//! `Script(INSTRUCTIONS..., TYPE ACTIVE|PASSIVE)`: Click's scripting element. A script
//! sets variables, calls the router's handlers, prints, waits for time or for its
//! `step` handler, and stops the router (see docs/ELEMENTS.md).
//!
//! The script runs on worker 0, as a source: it takes its timer there (its `run`
//! answers `IdleUntil` the next wait's end), and it calls handlers there as Click
//! calls them from its one driver thread. Writes to its `run`, `step` and `goto`
//! handlers run it at once in the writer's thread. Its state is under one lock, which
//! the worker takes only when the script's time has come.

mod arith;
mod expand;
mod machine;
mod program;

use crate::args::Args;
use crate::element::*;
use crate::elements::shared::lock;
use crate::error::ConfigError;
use crate::router::RouterSpec;
use crate::tsc;
use machine::{Ending, Machine, World};
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
}

impl ElementClass for ScriptClass {
    fn name(&self) -> &'static str {
        "Script"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("0/0")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let e = |m: String| cx.error(m);
        let kind = match args
            .keyword::<String>("TYPE")
            .map_err(e)?
            .as_deref()
            .map(str::trim)
        {
            None | Some("ACTIVE") => Kind::Active,
            Some("PASSIVE") => Kind::Passive,
            Some(t) if t == "DRIVER" || t.starts_with("SIGNAL") => {
                return Err(e(format!(
                    "TYPE {} is not supported (brickroute runs ACTIVE and PASSIVE scripts)",
                    t.split_whitespace().next().unwrap_or(t)
                )))
            }
            Some(_) => return Err(e("bad TYPE; expected 'ACTIVE' or 'PASSIVE'".to_string())),
        };
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
    /// `run`: from the beginning, with these arguments.
    Run(&'a str),
}

thread_local! {
    /// The scripts this thread is running, innermost last: a script whose
    /// instructions call its own `run`, `step` or `goto`, directly or through another
    /// script, is refused instead of waiting for itself.
    static RUNNING: std::cell::RefCell<Vec<usize>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Script {
    /// Runs the script as `how` asks. `Ok` with what `return` gave (empty if it did not
    /// end with one), `Err` if it ended with `error` or could not be moved. `stopped`
    /// says whether it asked the router to stop.
    fn advance(&self, router: Option<&RouterSpec>, how: Advance) -> (Result<String, String>, bool) {
        let me = self as *const Script as usize;
        if RUNNING.with(|r| r.borrow().contains(&me)) {
            return (
                Err(format!("{}: the script is already running", self.name)),
                false,
            );
        }
        RUNNING.with(|r| r.borrow_mut().push(me));
        struct Leave;
        impl Drop for Leave {
            fn drop(&mut self) {
                RUNNING.with(|r| r.borrow_mut().pop());
            }
        }
        let _leave = Leave;

        let mut m = lock(&self.machine);
        let mut world = RouterWorld {
            script: self,
            router,
            stopped: false,
        };
        let p = &self.program;
        m.initialize(p, &mut world);
        let result = match how {
            Advance::Start => {
                m.step(p, &mut world, 0);
                Ok(())
            }
            Advance::Timer => {
                if m.deadline.is_some_and(|t| tsc::rdtsc() >= t) {
                    m.step(p, &mut world, 1);
                }
                Ok(())
            }
            Advance::Steps(n) => {
                m.step(p, &mut world, n);
                Ok(())
            }
            Advance::Goto(label) => match p.label(label).ok_or("jump to nonexistent label".to_string()) {
                Ok(target) => m.jump(target).map(|()| m.step(p, &mut world, 0)),
                Err(err) => Err(err),
            },
            Advance::Run(args) => {
                m.restart(args);
                m.step(p, &mut world, 0);
                Ok(())
            }
        };
        self.wake.store(m.deadline.unwrap_or(u64::MAX), Ordering::Release);
        self.ended.store(m.ending.is_some(), Ordering::Release);
        let result = result.and_then(|()| match &m.ending {
            Some(Ending::Error(msg)) if msg.is_empty() => Err(format!("{}: script error", self.name)),
            Some(Ending::Error(msg)) => Err(msg.clone()),
            _ => Ok(m.returned()),
        });
        (result, world.stopped)
    }
}

/// The router as a script sees it: its handlers, standard output, its stop flag.
struct RouterWorld<'a> {
    script: &'a Script,
    router: Option<&'a RouterSpec>,
    stopped: bool,
}

/// The handlers a script answers itself.
const OWN_HANDLERS: [&str; 3] = ["run", "step", "goto"];

impl RouterWorld<'_> {
    /// `path` with the script's own handlers named in full: `add` and `run` without an
    /// element are the script's, as in Click; other names without one are global.
    fn resolve<'p>(&self, path: &'p str) -> (Option<&'p str>, String) {
        match path.split_once('.') {
            Some((e, h)) if e == self.script.name => (Some(h), path.to_string()),
            Some(_) => (None, path.to_string()),
            None if arith::HANDLERS.contains(&path) || OWN_HANDLERS.contains(&path) => {
                (Some(path), format!("{}.{}", self.script.name, path))
            }
            None => (None, path.to_string()),
        }
    }

    fn router(&self) -> Result<&RouterSpec, String> {
        self.router
            .ok_or_else(|| "no router to call handlers of".to_string())
    }
}

impl World for RouterWorld<'_> {
    fn read(&mut self, call: &str) -> Result<String, String> {
        let (path, args) = first_word(call);
        let (own, full) = self.resolve(path);
        if let Some(r) = own.and_then(|h| arith::call(h, args)) {
            return r;
        }
        let router = self.router()?;
        if !full.contains('.') {
            if !args.is_empty() {
                return Err(format!("read handler '{}' does not take parameters", full));
            }
            return router
                .read_global_handler(&full)
                .ok_or_else(|| format!("no read handler '{}'", full));
        }
        if args.is_empty() {
            router.read_handler(&full)
        } else {
            router.read_handler(&format!("{} {}", full, args))
        }
    }

    fn write(&mut self, call: &str) -> Result<(), String> {
        let (path, value) = first_word(call);
        let (own, full) = self.resolve(path);
        if own.is_some_and(|h| arith::HANDLERS.contains(&h)) {
            return Err(format!("'{}' is a read handler", full));
        }
        let router = self.router()?;
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
        ];
        h.extend(arith::HANDLERS.iter().map(|&name| HandlerInfo::read(name)));
        h
    }

    fn read_handler_in(
        &self,
        name: &str,
        param: Option<&str>,
        router: &RouterSpec,
    ) -> Option<Result<String, String>> {
        let param = param.unwrap_or("");
        if name == "run" {
            return Some(self.0.advance(Some(router), Advance::Run(param)).0);
        }
        arith::call(name, param)
    }

    fn write_handler_in(&self, name: &str, value: &str, router: &RouterSpec) -> Option<Result<(), String>> {
        let how = match name {
            "run" => Advance::Run(value),
            "goto" => Advance::Goto(value.trim()),
            "step" => match value.trim() {
                "" => Advance::Steps(1),
                n => match n.parse::<u32>() {
                    Ok(n) => Advance::Steps(n),
                    Err(_) => return Some(Err("syntax error".to_string())),
                },
            },
            _ => return None,
        };
        Some(self.0.advance(Some(router), how).0.map(|_| ()))
    }
}

/// The script on a worker: on worker 0 a source that runs it when the router starts
/// (active scripts) and whenever a wait's time comes; elsewhere nothing.
struct ScriptTask {
    script: Arc<Script>,
    on_worker_0: bool,
    started: bool,
    /// Said [`TaskStatus::Released`] once the active script ended.
    released: bool,
}

impl Element for ScriptTask {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, _out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        // No inputs.
        batch.clear();
    }

    fn is_source(&self) -> bool {
        self.on_worker_0
    }

    /// An active script keeps the router running until it ends; a passive one only
    /// serves its waits.
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
            let (result, stopped) = s.advance(cx.router(), how);
            if let Err(e) = result {
                crate::warn!("{} :: Script: {}", s.name, e);
            }
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
