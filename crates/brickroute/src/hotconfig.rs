//! Click's `hotconfig` (`brickroute run -R`): a configuration written to the global
//! `hotconfig` handler replaces the running one without restarting the router.
//!
//! The new configuration is built while the old one runs, over the same interfaces
//! (an interface both name keeps its open port: its queues, UMEMs and XDP program),
//! the same workers and the same control sockets. If it fails, the write is refused
//! with the error (`file:line:column` in `<hotconfig>`), what its build opened or
//! bound is closed, RSS settings it changed are put back, and the old configuration
//! runs on untouched. If it builds, the write succeeds, the control sockets call the
//! new configuration's handlers from their next command, and `run` stops the old
//! configuration's workers after their current pass and starts the new one's
//! ([`Hotconfig::take`]). As in Click, an element of the new configuration takes the
//! state of the old one's element of the same name and class where it has any to take
//! (`RouterSpec::take_state`, once the old workers have stopped): an ARPQuerier or
//! IP6NDSolicitor for the same addresses its resolved entries and counts, an ESPEncap
//! or ESPDecap of the same association its sequence numbers or anti-replay window, a
//! FromDump or ToDump of the same file its open file.
//! Everything else starts afresh: counters at zero, route tables with what the new
//! configuration gives (KernelRoutes installs the kernel's table again before the
//! write succeeds); packets waiting for an address go with the old configuration.

use crate::control::Sockets;
use crate::kernelroutes::{Follower, Syncs};
use crate::neighbors::Resolvers;
use crate::run::{self, Services};
use crate::services::CurrentRouter;
use graph::router::{Reconfigure, RouterSpec};
use runtime::DeviceTable;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

/// How long a `hotconfig` write waits for the configuration an earlier one built to
/// take over (the old workers finish their pass within milliseconds, unless one is
/// blocked reading a FIFO).
const TAKEOVER_WAIT: Duration = Duration::from_secs(10);

/// The landmark of a configuration written to `hotconfig` in its errors.
pub const LANDMARK: &str = "<hotconfig>";

/// What replaces a configuration for `run -R`.
pub struct Hotconfig {
    defines: HashMap<String, String>,
    threads: usize,
    devices: Arc<DeviceTable>,
    sockets: Arc<Sockets>,
    current: OnceLock<Arc<CurrentRouter>>,
    /// The configuration built and waiting for the workers, and the flag `run`'s
    /// stop test reads without a lock.
    next: Mutex<Option<Next>>,
    requested: AtomicBool,
    /// One build, or one takeover, at a time.
    building: Mutex<()>,
    /// `run` has stopped running configurations: writes are refused.
    closed: AtomicBool,
    /// The devices the running configuration names.
    in_use: Mutex<BTreeSet<String>>,
    me: Weak<Hotconfig>,
}

/// A configuration that has been built and takes over at the workers' next stop.
pub struct Next {
    pub router: Arc<RouterSpec>,
    /// Its KernelRoutes elements, installed, to follow the kernel with.
    pub followers: Vec<Follower>,
    /// Its NeighborEncap elements.
    pub resolvers: Arc<Resolvers>,
    devices: BTreeSet<String>,
}

impl Hotconfig {
    /// For a router whose configuration was built with `defines` for `threads` workers
    /// over `devices` (it names those [`DeviceTable::named`] lists) and `sockets`.
    pub fn new(
        defines: HashMap<String, String>,
        threads: usize,
        devices: Arc<DeviceTable>,
        sockets: Arc<Sockets>,
    ) -> Arc<Hotconfig> {
        let in_use = Mutex::new(devices.named());
        Arc::new_cyclic(|me| Hotconfig {
            defines,
            threads,
            devices,
            sockets,
            current: OnceLock::new(),
            next: Mutex::new(None),
            requested: AtomicBool::new(false),
            building: Mutex::new(()),
            closed: AtomicBool::new(false),
            in_use,
            me: me.clone(),
        })
    }

    /// The `hotconfig` handler to give each configuration. It holds no reference to
    /// this (whose current router holds it): a write after `run` let go of it fails.
    pub fn handler(&self) -> Arc<Reconfigure> {
        let me = self.me.clone();
        Arc::new(move |text: &str| match me.upgrade() {
            Some(h) => h.replace(text),
            None => Err("the router is stopping".into()),
        })
    }

    /// The cell the control sockets and metrics read the router from: a built
    /// configuration goes there as its write succeeds.
    pub fn serve_through(&self, current: &Arc<CurrentRouter>) {
        let _ = self.current.set(current.clone());
    }

    /// Whether a configuration waits to take over: `run` then stops the workers.
    pub fn requested(&self) -> bool {
        self.requested.load(Ordering::Relaxed)
    }

    /// The configuration waiting to take over, once the old one's workers have
    /// stopped: the interfaces only the old one named are closed, then `install`
    /// puts the rest of it in place (its sockets served), before another write may
    /// build.
    pub fn take(&self, install: impl FnOnce(&Next)) -> Option<Next> {
        let _one = lock(&self.building);
        let next = lock(&self.next).take()?;
        self.requested.store(false, Ordering::SeqCst);
        self.devices.close_except(&next.devices);
        *lock(&self.in_use) = next.devices.clone();
        install(&next);
        Some(next)
    }

    /// Refuses every write from now on, once a build under way has ended: `run` runs
    /// no more configurations.
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        drop(lock(&self.building));
    }

    /// Why a write is refused now, if it is: the router is stopping.
    fn stopping(&self, current: &CurrentRouter) -> Result<(), String> {
        if self.closed.load(Ordering::SeqCst) || run::signalled() || current.get().stop_flag().was_asked() {
            Err("the router is stopping".into())
        } else {
            Ok(())
        }
    }

    /// Takes the build lock once the configuration written before has taken over.
    fn turn(&self, current: &CurrentRouter) -> Result<std::sync::MutexGuard<'_, ()>, String> {
        let deadline = Instant::now() + TAKEOVER_WAIT;
        loop {
            self.stopping(current)?;
            let one = lock(&self.building);
            if lock(&self.next).is_none() {
                return Ok(one);
            }
            drop(one);
            if Instant::now() >= deadline {
                return Err(format!(
                    "the configuration written before has not taken over after {} s (a worker is still in its pass); try again",
                    TAKEOVER_WAIT.as_secs()
                ));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn replace(&self, text: &str) -> Result<(), String> {
        let Some(current) = self.current.get() else {
            return Err("the router is not running".into());
        };
        let _one = self.turn(current)?;
        let services = Services {
            sockets: self.sockets.clone(),
            syncs: Syncs::new(),
            resolvers: Resolvers::new(),
        };
        // The build may change a running port's RSS (FromDevice's RSS keywords): put
        // back if it fails.
        let rss: Vec<_> = self
            .devices
            .devices()
            .into_iter()
            .filter_map(|d| d.port.rss().ok().map(|r| (d.port, r)))
            .collect();
        self.devices.begin_build();
        let built = run::build(
            text,
            LANDMARK,
            &self.defines,
            self.threads,
            &self.devices,
            &services,
            true,
        )
        .and_then(|r| services.syncs.install(&r).map(|followers| (r, followers)))
        .and_then(|b| self.stopping(current).map(|()| b));
        let (mut router, followers) = match built {
            Ok(b) => b,
            Err(e) => {
                self.sockets.abort();
                self.devices.close_except(&lock(&self.in_use));
                for (port, settings) in rss {
                    if let Err(why) = port.set_rss(&settings) {
                        graph::warn!("{}: RSS settings not restored: {}", LANDMARK, why);
                    }
                }
                return Err(e);
            }
        };
        router.set_text(text.to_string());
        router.set_hotconfig(self.handler());
        let router = Arc::new(router);
        *lock(&self.next) = Some(Next {
            router: router.clone(),
            followers,
            resolvers: services.resolvers,
            devices: self.devices.named(),
        });
        current.set(router);
        self.requested.store(true, Ordering::SeqCst);
        Ok(())
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
