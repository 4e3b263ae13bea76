//! The Click language and the element graph of brickroute.

pub mod addressinfo;
pub mod args;
pub mod control;
pub mod element;
pub mod elements;
pub mod error;
pub mod lang;
pub mod outfile;
pub mod registry;
pub mod router;
pub mod stats;
pub mod testing;
pub mod tsc;

pub use element::{
    BuildContext, Context, Element, ElementClass, ElementSpec, HandlerInfo, Outputs, PortCount, StopFlag,
    TaskStatus, WorkerInfo,
};
pub use error::{ConfigError, Landmark};

/// Writes a line to standard error, as `eprintln!` does, but ignores a failed write:
/// where standard error is a pipe whose reader has gone, `eprintln!` panics, and a
/// router's warning (or Click's error handler) must never stop it.
#[macro_export]
macro_rules! warn {
    ($($arg:tt)*) => {{
        use ::std::io::Write as _;
        let _ = ::std::writeln!(::std::io::stderr().lock(), $($arg)*);
    }};
}
