//! `brickroute`: the command line.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod addresses;
mod batching;
mod bench;
mod cluster;
mod control;
mod cpu;
mod ctl;
mod demo;
mod fib;
mod gen;
mod handlers;
mod hotconfig;
mod kernelroutes;
mod kerneltun;
mod metrics;
mod neighbors;
mod report;
mod rss_bench;
mod run;
mod scaling;
mod services;
mod sink;
mod testbed;

#[derive(Parser)]
#[command(
    name = "brickroute",
    version,
    about = "A parallel, programmable software IP router"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs a router configuration written in the Click language.
    Run(run::RunArgs),
    /// Measurements: packets/s and cycles/packet of the shipped applications.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// The namespace testbed: gen -- dut -- sink joined by veth pairs.
    #[command(subcommand)]
    Testbed(testbed::TestbedCommand),
    /// Traffic generator: stamped UDP/IPv4 frames out of an interface.
    Gen(gen::GenArgs),
    /// Traffic sink: delivered rate, loss, reordering and latency of stamped frames.
    Sink(sink::SinkArgs),
    /// Builds a testbed, routes traffic through it for a few seconds, shows what happens.
    Demo(demo::DemoArgs),
    /// Longest-prefix-match tables: lookups from a table file, benchmarks, synthetic tables.
    #[command(subcommand)]
    Fib(fib::FibCommand),
    /// Reads and writes a running router's handlers through its ControlSocket.
    Ctl(ctl::CtlArgs),
    /// A mesh of servers acting as one router (Valiant load balancing): plans and simulations.
    #[command(subcommand)]
    Cluster(cluster::ClusterCommand),
}

fn main() -> ExitCode {
    let missing = cpu::missing();
    if !missing.is_empty() {
        eprintln!(
            "brickroute: this CPU lacks {}, which this build assumes (the workspace builds for \
             x86-64-v3, see .cargo/config.toml); build for any x86-64 with \
             RUSTFLAGS=\"-C target-cpu=x86-64\" cargo build --release",
            missing.join(", ")
        );
        return ExitCode::FAILURE;
    }
    let cli = Cli::parse();
    if matches!(
        cli.command,
        Command::Bench(_)
            | Command::Fib(_)
            | Command::Gen(_)
            | Command::Sink(_)
            | Command::Ctl(_)
            | Command::Cluster(_)
    ) {
        end_quietly_when_the_reader_goes();
    }
    match cli.command {
        Command::Run(args) => run::main(args),
        Command::Bench(cmd) => bench::main(cmd),
        Command::Testbed(cmd) => testbed::main(cmd),
        Command::Gen(args) => gen::main(args),
        Command::Sink(args) => sink::main(args),
        Command::Demo(args) => demo::main(args),
        Command::Fib(cmd) => fib::main(cmd),
        Command::Ctl(args) => ctl::main(args),
        Command::Cluster(cmd) => cluster::main(cmd),
    }
}

/// Commands that only compute, send or receive and report end as other Unix tools do
/// when their reader goes away (`brickroute fib gen | head`, `brickroute sink | true`):
/// by SIGPIPE, where Rust's default (the signal ignored) turned the failed write into a
/// panic in `println!` or an error message. `gen` and `sink` change nothing outside the
/// process (their sockets close with it), and `ctl` prints only once the router has
/// answered. Commands that undo what they set up on the
/// way out (`run`: kernel flags, output files; `demo` and `testbed`: namespaces) keep
/// the signal ignored, so a failed write cannot skip that.
fn end_quietly_when_the_reader_goes() {
    // SAFETY: restoring SIGPIPE's default disposition, before any thread exists,
    // changes nothing but what a write to a closed pipe does to this process.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
