//! Threads `run` keeps beside the workers (control sockets, kernel route followers):
//! each gets the router (or the cell holding the current one) and a shared stop flag;
//! dropping the set stops and joins them.

use graph::router::RouterSpec;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// The router `run` is running, for the threads that outlive a configuration replaced
/// through `hotconfig` (control sockets, metrics): each call they make takes the
/// current one.
pub struct CurrentRouter(Mutex<Arc<RouterSpec>>);

impl CurrentRouter {
    pub fn new(router: Arc<RouterSpec>) -> Arc<CurrentRouter> {
        Arc::new(CurrentRouter(Mutex::new(router)))
    }

    pub fn get(&self) -> Arc<RouterSpec> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn set(&self, router: Arc<RouterSpec>) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = router;
    }
}

pub struct ServiceThreads {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl ServiceThreads {
    /// A thread named `name` for each of `items`, running `work(item, router, stop)`
    /// (`router`: the router, or the [`CurrentRouter`]); `work` returns soon after
    /// `stop` is set.
    pub fn spawn<T, R, F>(name: &str, items: Vec<T>, router: &Arc<R>, work: F) -> ServiceThreads
    where
        T: Send + 'static,
        R: Send + Sync + 'static,
        F: Fn(T, Arc<R>, Arc<AtomicBool>) + Copy + Send + 'static,
    {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = items
            .into_iter()
            .map(|item| {
                let (router, stop) = (router.clone(), stop.clone());
                std::thread::Builder::new()
                    .name(name.into())
                    .spawn(move || work(item, router, stop))
                    .unwrap_or_else(|e| panic!("spawn {} thread: {}", name, e))
            })
            .collect();
        ServiceThreads { stop, threads }
    }

    /// Whether any thread runs: the router then keeps running after its sources are
    /// done, as Click's driver does while it has sockets to watch, until stopped.
    pub fn is_running(&self) -> bool {
        !self.threads.is_empty()
    }
}

/// Also when a worker's panic unwinds through `run`: sockets close and their files go.
impl Drop for ServiceThreads {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
