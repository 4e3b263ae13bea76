//! A `brickroute run` child process for the namespace tests: killed and reaped when the
//! test drops it (also when the test fails), with bounded waits and its captured output.

#![allow(dead_code)]

use std::io::Read;
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

/// The router process; killed and reaped on drop if the test did not end it.
pub struct RouterProcess(pub Child);

impl Drop for RouterProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl RouterProcess {
    /// Waits up to `limit` for the process to exit.
    pub fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(s) = self.0.try_wait().unwrap() {
                return s;
            }
            assert!(Instant::now() < deadline, "router did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The process id (`ip netns exec` execs its program, so this is brickroute's).
    pub fn pid(&self) -> i32 {
        self.0.id() as i32
    }

    /// Whether the process has exited (without waiting).
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.0.try_wait().unwrap()
    }

    /// Everything the process wrote to its (piped) standard output and error.
    pub fn output(&mut self) -> (String, String) {
        let mut out = String::new();
        let mut err = String::new();
        self.0.stdout.take().unwrap().read_to_string(&mut out).unwrap();
        self.0.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        (out, err)
    }
}
