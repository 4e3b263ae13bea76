//! What a pipeline run measured ([`PipelineReport`]), and its JSON and text forms.

use std::fmt;

/// One worker's share of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkerReport {
    pub index: usize,
    pub core: Option<usize>,
    pub packets: u64,
    pub mpps: f64,
    pub cycles_per_packet: f64,
    pub empty_poll_share: f64,
}

/// What [`pipeline`](super::pipeline) measured.
#[derive(Clone, Debug, PartialEq)]
pub struct PipelineReport {
    pub app: String,
    pub size: usize,
    pub threads: usize,
    pub routes: usize,
    pub flows: usize,
    /// Packets received from the ports (and emitted by the `FromDevice`s).
    pub packets: u64,
    /// Packets the ports transmitted.
    pub tx_packets: u64,
    /// Longest worker run time, seconds (with rounds, summed over the runs).
    pub seconds: f64,
    pub mpps: f64,
    /// Received bits per second of `size`-byte frames, in Gbit/s (RouteBricks'
    /// convention: no preamble or inter-frame gap).
    pub gbps: f64,
    /// Busy TSC cycles per packet over all workers (with rounds, the median round's).
    pub cycles_per_packet: f64,
    /// With rounds: each round's cycles a packet, in order; empty for a single run.
    pub rounds: Vec<f64>,
    /// Share of loop cycles spent in empty polls.
    pub empty_poll_share: f64,
    pub tsc_ghz: f64,
    /// Time to install the `routes` random routes, seconds.
    pub route_install_seconds: f64,
    /// Deny rules added in front of the IPFilter's own.
    pub rules: usize,
    /// Writes of the IPFilter's rules during the runs, and their median time in
    /// microseconds (compiling and publishing the rules).
    pub rule_writes: u64,
    pub rule_write_median_us: f64,
    pub workers: Vec<WorkerReport>,
    /// With `profile`: every element that was called, summed over the workers, the
    /// dearest first; empty otherwise.
    pub elements: Vec<ElementReport>,
    /// With `profile`: TSC cycles of one call's timing (two counter reads back to
    /// back, the least of many), included in each call's cycles.
    pub timer_cycles: f64,
    /// Another application run with the same frame size, flows, workers and batches
    /// (right after this one, or in turns with it), whose figures this run's are
    /// compared with (none unless asked for).
    pub baseline: Option<BaselineReport>,
}

/// A baseline run's figures (see [`PipelineReport::baseline`]).
#[derive(Clone, Debug, PartialEq)]
pub struct BaselineReport {
    pub app: String,
    pub mpps: f64,
    pub cycles_per_packet: f64,
    /// With rounds: each round's cycles a packet (see [`PipelineReport::rounds`]).
    pub rounds: Vec<f64>,
}

impl PipelineReport {
    /// This run's cycles a packet over the baseline's: with rounds, the median of each
    /// round's ratio, so that both sides of a ratio come from the same minutes of a
    /// shared host (0 without a baseline or when the baseline measured none).
    pub fn ratio_to_baseline(&self) -> f64 {
        match &self.baseline {
            Some(b) if !self.rounds.is_empty() && b.rounds.len() == self.rounds.len() => {
                let ratios: Vec<f64> = self
                    .rounds
                    .iter()
                    .zip(&b.rounds)
                    .filter(|(_, &base)| base > 0.0)
                    .map(|(&x, &base)| x / base)
                    .collect();
                if ratios.is_empty() {
                    0.0
                } else {
                    median(&ratios)
                }
            }
            Some(b) if b.cycles_per_packet > 0.0 => self.cycles_per_packet / b.cycles_per_packet,
            _ => 0.0,
        }
    }

    /// This report as the baseline of another, under the name `app`.
    pub fn as_baseline(&self, app: &str) -> BaselineReport {
        BaselineReport {
            app: app.to_string(),
            mpps: self.mpps,
            cycles_per_packet: self.cycles_per_packet,
            rounds: self.rounds.clone(),
        }
    }
}

/// The median of `xs` (the mean of the middle two for an even count; 0 for none).
pub fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// One element's calls in a profiled run (see [`PipelineOptions::profile`](super::PipelineOptions::profile)).
#[derive(Clone, Debug, PartialEq)]
pub struct ElementReport {
    pub name: String,
    pub class: String,
    pub calls: u64,
    /// Packets handed to its `push` calls.
    pub packets: u64,
    /// TSC cycles inside its own calls (not the elements downstream), per call.
    pub cycles_per_call: f64,
    /// The same cycles over all packets the run received: the element's share of the
    /// run's cycles a packet (with the timing's own cost in it).
    pub cycles_per_packet: f64,
}

fn num(x: f64, decimals: usize) -> String {
    if x.is_finite() {
        format!("{:.*}", decimals, x)
    } else {
        "0".into()
    }
}

fn json_string(s: &str) -> String {
    let mut o = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

impl PipelineReport {
    /// The report as one line of JSON.
    pub fn to_json_line(&self) -> String {
        let workers: Vec<String> = self
            .workers
            .iter()
            .map(|w| {
                format!(
                    "{{\"index\":{},\"core\":{},\"packets\":{},\"mpps\":{},\"cycles_per_packet\":{},\"empty_poll_share\":{}}}",
                    w.index,
                    w.core.map_or("null".to_string(), |c| c.to_string()),
                    w.packets,
                    num(w.mpps, 4),
                    num(w.cycles_per_packet, 1),
                    num(w.empty_poll_share, 4)
                )
            })
            .collect();
        let elements: Vec<String> = self
            .elements
            .iter()
            .map(|e| {
                format!(
                    "{{\"name\":{},\"class\":{},\"calls\":{},\"packets\":{},\"cycles_per_call\":{},\"cycles_per_packet\":{}}}",
                    json_string(&e.name),
                    json_string(&e.class),
                    e.calls,
                    e.packets,
                    num(e.cycles_per_call, 1),
                    num(e.cycles_per_packet, 2)
                )
            })
            .collect();
        let list = |xs: &[f64]| xs.iter().map(|&x| num(x, 1)).collect::<Vec<_>>().join(",");
        let baseline = match &self.baseline {
            None => String::new(),
            Some(b) => format!(
                ",\"baseline\":{},\"baseline_mpps\":{},\"baseline_cycles_per_packet\":{},\"ratio_to_baseline\":{}{}",
                json_string(&b.app),
                num(b.mpps, 4),
                num(b.cycles_per_packet, 1),
                num(self.ratio_to_baseline(), 3),
                if b.rounds.is_empty() {
                    String::new()
                } else {
                    format!(",\"baseline_round_cycles_per_packet\":[{}]", list(&b.rounds))
                }
            ),
        };
        let rounds = if self.rounds.is_empty() {
            String::new()
        } else {
            format!(
                ",\"rounds\":{},\"round_cycles_per_packet\":[{}]",
                self.rounds.len(),
                list(&self.rounds)
            )
        };
        let profile = if self.elements.is_empty() {
            String::new()
        } else {
            format!(
                ",\"timer_cycles\":{},\"elements\":[{}]",
                num(self.timer_cycles, 1),
                elements.join(",")
            )
        };
        format!(
            "{{\"app\":{},\"size\":{},\"threads\":{},\"routes\":{},\"flows\":{},\"packets\":{},\"tx_packets\":{},\"seconds\":{},\"mpps\":{},\"gbps\":{},\"cycles_per_packet\":{},\"empty_poll_share\":{},\"tsc_ghz\":{},\"route_install_seconds\":{},\"rules\":{},\"rule_writes\":{},\"rule_write_median_us\":{}{}{},\"workers\":[{}]{}}}",
            json_string(&self.app),
            self.size,
            self.threads,
            self.routes,
            self.flows,
            self.packets,
            self.tx_packets,
            num(self.seconds, 6),
            num(self.mpps, 4),
            num(self.gbps, 4),
            num(self.cycles_per_packet, 1),
            num(self.empty_poll_share, 4),
            num(self.tsc_ghz, 3),
            num(self.route_install_seconds, 6),
            self.rules,
            self.rule_writes,
            num(self.rule_write_median_us, 1),
            rounds,
            baseline,
            workers.join(","),
            profile
        )
    }
}

/// The report as `brickroute bench pipeline` prints it: a header, a row per worker and
/// their total, the baseline's figures, and with `profile` the elements' table.
impl fmt::Display for PipelineReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "app {}  size {} B  threads {}  routes {}  flows {}  TSC {:.2} GHz",
            self.app, self.size, self.threads, self.routes, self.flows, self.tsc_ghz
        )?;
        if self.routes > 0 {
            writeln!(f, "route install: {:.3} s", self.route_install_seconds)?;
        }
        if self.rules > 0 || self.rule_writes > 0 {
            writeln!(
                f,
                "filter: {} rules added; {} rule writes while it ran, median {:.1} us a write (compile and publish)",
                self.rules, self.rule_writes, self.rule_write_median_us
            )?;
        }
        writeln!(
            f,
            "{:>6} {:>6} {:>12} {:>10} {:>14} {:>12}",
            "worker", "core", "packets", "Mpps", "cycles/packet", "empty polls"
        )?;
        let row = |f: &mut fmt::Formatter<'_>, index: &str, core: &str, w: (u64, f64, f64, f64)| {
            writeln!(
                f,
                "{:>6} {:>6} {:>12} {:>10.3} {:>14.1} {:>11.1}%",
                index,
                core,
                w.0,
                w.1,
                w.2,
                100.0 * w.3
            )
        };
        for w in &self.workers {
            let core = w.core.map_or("-".to_string(), |c| c.to_string());
            let figures = (w.packets, w.mpps, w.cycles_per_packet, w.empty_poll_share);
            row(f, &w.index.to_string(), &core, figures)?;
        }
        // (With rounds, the workers' figures and this row's are over all rounds; the
        // median round's cycles a packet follows below.)
        let busy: f64 = self
            .workers
            .iter()
            .map(|w| w.cycles_per_packet * w.packets as f64)
            .sum();
        let all_cycles = if self.rounds.is_empty() || self.packets == 0 {
            self.cycles_per_packet
        } else {
            busy / self.workers.iter().map(|w| w.packets).sum::<u64>().max(1) as f64
        };
        let figures = (self.packets, self.mpps, all_cycles, self.empty_poll_share);
        row(f, "all", "", figures)?;
        writeln!(
            f,
            "transmitted {} packets, {:.3} Gbit/s of {}-byte frames",
            self.tx_packets, self.gbps, self.size
        )?;
        let list = |xs: &[f64]| {
            xs.iter()
                .map(|x| format!("{:.1}", x))
                .collect::<Vec<_>>()
                .join(" ")
        };
        if !self.rounds.is_empty() {
            writeln!(
                f,
                "{} rounds, cycles/packet: {}; median {:.1}",
                self.rounds.len(),
                list(&self.rounds),
                self.cycles_per_packet
            )?;
        }
        if let Some(b) = &self.baseline {
            let when = if b.rounds.is_empty() {
                "right after"
            } else {
                "in turns"
            };
            writeln!(
                f,
                "baseline {} ({}, same frame size, flows and workers): {:.3} Mpps, {:.1} cycles/packet; \
                 {} takes {:.2}x its cycles a packet",
                b.app,
                when,
                b.mpps,
                b.cycles_per_packet,
                self.app,
                self.ratio_to_baseline()
            )?;
            if !b.rounds.is_empty() {
                writeln!(
                    f,
                    "baseline rounds, cycles/packet: {}; median {:.1} (the ratio is the median of the rounds')",
                    list(&b.rounds),
                    b.cycles_per_packet
                )?;
            }
        }
        if self.elements.is_empty() {
            return Ok(());
        }
        writeln!(f)?;
        writeln!(
            f,
            "{:<24} {:<16} {:>10} {:>12} {:>12} {:>14}",
            "element", "class", "calls", "packets", "cycles/call", "cycles/packet"
        )?;
        for e in &self.elements {
            writeln!(
                f,
                "{:<24} {:<16} {:>10} {:>12} {:>12.1} {:>14.2}",
                e.name, e.class, e.calls, e.packets, e.cycles_per_call, e.cycles_per_packet
            )?;
        }
        writeln!(
            f,
            "elements' own calls: {:.1} cycles a packet of the {:.1} measured; each call's \
             figure includes about {:.0} cycles of timing",
            self.elements.iter().map(|e| e.cycles_per_packet).sum::<f64>(),
            self.cycles_per_packet,
            self.timer_cycles
        )
    }
}
