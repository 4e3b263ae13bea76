//! `brickroute bench scaling`: RouteBricks' cores-and-queues experiment. The same
//! application runs with each number of workers asked for, each worker owning one
//! queue of every port (the in-memory ports spread the frames over the queues by RSS),
//! in turns over several rounds so that every count sees the same minutes of a shared
//! host. Each count's packets a second are compared with one worker's in the same
//! rounds: the speedup, and the efficiency (speedup over workers).

use crate::bench::{check_shape, finish, in_turns, Shape, Turns};
use runtime::bench::{median, PipelineOptions};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct ScalingArgs {
    #[command(flatten)]
    shape: Shape,
    /// Worker counts to run, comma-separated (1 to 1024 each); one worker always runs,
    /// as the baseline.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    workers: Vec<usize>,
    /// Packets each run processes, over all workers.
    #[arg(long, default_value_t = 2_000_000)]
    packets: u64,
    /// Rounds: each round runs every worker count once; a count's figures are its
    /// rounds' medians.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=100))]
    rounds: u64,
}

/// One worker count's figures: medians over the rounds.
struct Cell {
    workers: usize,
    mpps: f64,
    cycles: f64,
    /// Its packets a second over one worker's, the median of the rounds' ratios.
    speedup: f64,
}

pub fn main(a: ScalingArgs, app_config: fn(&str) -> Result<&'static str, String>) -> ExitCode {
    let report = run(&a, app_config).map(|(cells, size)| {
        if a.shape.json {
            format!("{}\n", json(&a, size, &cells))
        } else {
            table(&a, size, &cells)
        }
    });
    finish("scaling", report)
}

fn check(a: &ScalingArgs) -> Result<(), String> {
    check_shape(&a.shape)?;
    if a.shape.threads != 1 {
        return Err("bench scaling takes its worker counts from --workers, not --threads".into());
    }
    if let Some(w) = a
        .workers
        .iter()
        .find(|&&w| !(1..=runtime::MAX_WORKERS).contains(&w))
    {
        return Err(format!(
            "--workers {}: each count must be from 1 to {}",
            w,
            runtime::MAX_WORKERS
        ));
    }
    if a.packets == 0 {
        return Err("--packets must be at least 1".into());
    }
    Ok(())
}

/// The counts to run: one worker first (every count is compared with it), then the
/// asked ones in order, each once.
fn counts(a: &ScalingArgs) -> Vec<usize> {
    let mut v = vec![1];
    for &w in &a.workers {
        if !v.contains(&w) {
            v.push(w);
        }
    }
    v
}

fn run(
    a: &ScalingArgs,
    app_config: fn(&str) -> Result<&'static str, String>,
) -> Result<(Vec<Cell>, usize), (String, u8)> {
    let conf = app_config(&a.shape.app).map_err(|e| (e, 2))?;
    check(a).map_err(|e| (e, 2))?;
    let counts = counts(a);
    let runs: Vec<PipelineOptions> = counts
        .iter()
        .map(|&workers| PipelineOptions {
            app: conf.to_string(),
            conf_dir: a.shape.conf_dir.clone(),
            size: a.shape.size,
            packets: Some(a.packets),
            threads: workers,
            flows: a.shape.flows,
            pin: !a.shape.no_pin,
            extra_classes: Some(cluster::register),
            ..PipelineOptions::default()
        })
        .collect();
    let Turns { mpps, cycles, size } = in_turns(&runs, a.rounds, |i| format!("{} workers", counts[i]))?;
    let cells = counts
        .iter()
        .enumerate()
        .map(|(i, &workers)| {
            let ratios: Vec<f64> = mpps[0].iter().zip(&mpps[i]).map(|(one, m)| m / one).collect();
            Cell {
                workers,
                mpps: median(&mpps[i]),
                cycles: median(&cycles[i]),
                speedup: median(&ratios),
            }
        })
        .collect();
    Ok((cells, size))
}

fn table(a: &ScalingArgs, size: usize, cells: &[Cell]) -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mut s = format!(
        "app {}  size {} B  flows {}  {} packets a run, {} round{} (medians); this machine has {} cores\n",
        a.shape.app,
        size,
        a.shape.flows,
        a.packets,
        a.rounds,
        if a.rounds == 1 { "" } else { "s" },
        cores
    );
    s.push_str("workers  queues/port       Mpps  cycles/packet   against 1 worker  efficiency\n");
    let widest = cells.iter().map(|c| c.speedup).fold(1.0, f64::max);
    for c in cells {
        s.push_str(&format!(
            "{:7} {:12} {:10.3} {:14.1} {:17.2}x {:10.0}%  {}\n",
            c.workers,
            c.workers,
            c.mpps,
            c.cycles,
            c.speedup,
            100.0 * c.speedup / c.workers as f64,
            crate::bench::bar(c.speedup / widest * 40.0)
        ));
    }
    if cells.iter().any(|c| c.workers > cores) {
        s.push_str("(counts above the cores share them: their figures measure the sharing)\n");
    }
    s
}

fn json(a: &ScalingArgs, size: usize, cells: &[Cell]) -> String {
    let cells: Vec<serde_json::Value> = cells
        .iter()
        .map(|c| {
            serde_json::json!({
                "workers": c.workers,
                "queues_per_port": c.workers,
                "mpps": c.mpps,
                "cycles_per_packet": c.cycles,
                "speedup": c.speedup,
                "efficiency": c.speedup / c.workers as f64,
            })
        })
        .collect();
    serde_json::json!({
        "app": a.shape.app,
        "size": size,
        "flows": a.shape.flows,
        "packets": a.packets,
        "rounds": a.rounds,
        "cells": cells,
    })
    .to_string()
}
