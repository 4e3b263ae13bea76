//! `brickroute testbed up|down`: the gen — dut — sink namespaces.

use ::bench::testbed::{self, DEFAULT_PREFIX};
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum TestbedCommand {
    /// Creates namespaces {P}gen, {P}dut, {P}sink joined by veth pairs g0-d0 and d1-s0.
    Up {
        /// RX/TX queues of every veth.
        #[arg(long, default_value_t = 1)]
        queues: usize,
        /// Prefix of the namespace names.
        #[arg(long, default_value = DEFAULT_PREFIX)]
        prefix: String,
    },
    /// Removes exactly what `up` made with this prefix (and processes left inside).
    Down {
        #[arg(long, default_value = DEFAULT_PREFIX)]
        prefix: String,
    },
}

pub fn main(cmd: TestbedCommand) -> ExitCode {
    // (graph::warn!, not eprintln!: a closed standard error must not turn into a panic
    // after the testbed is already up or down.)
    if let Err(e) = testbed::require_root() {
        graph::warn!("brickroute testbed: {}", e);
        return ExitCode::from(1);
    }
    let r = match cmd {
        TestbedCommand::Up { queues, prefix } => testbed::up(&prefix, queues).map(|tb| {
            format!(
                "testbed '{}' up: {}(g0 {}) -- {}(d0 {} | d1 {}) -- {}(s0 {}), {} queue{} per veth",
                tb.prefix,
                tb.gen_ns(),
                testbed::G0_IP,
                tb.dut_ns(),
                testbed::D0_IP,
                testbed::D1_IP,
                tb.sink_ns(),
                testbed::S0_IP,
                tb.queues,
                if tb.queues == 1 { "" } else { "s" }
            )
        }),
        TestbedCommand::Down { prefix } => testbed::down(&prefix).map(|tb| {
            format!(
                "testbed '{}' down: removed {}",
                tb.prefix,
                tb.namespaces.join(", ")
            )
        }),
    };
    match r {
        Ok(msg) => {
            graph::warn!("{}", msg);
            ExitCode::SUCCESS
        }
        Err(e) => {
            graph::warn!("brickroute testbed: {}", e);
            ExitCode::from(1)
        }
    }
}
