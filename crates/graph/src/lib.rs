//! The Click language and the element graph of brickroute.

pub mod args;
pub mod element;
pub mod elements;
pub mod error;
pub mod lang;
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
