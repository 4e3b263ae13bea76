//! `Switch([OUTPUT])` and `StaticSwitch(OUTPUT)`: every packet goes to one output,
//! chosen by the configuration (and, for Switch, by its `switch` handler), as Click's
//! elements of the same names. A negative output drops every packet.

use crate::args::{uncomment, Args, FromArg};
use crate::element::*;
use crate::error::ConfigError;
use packet::PacketBatch;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

/// Sends `batch` whole to `output`, or drops it for a negative output (or one past
/// the element's outputs, which Click's `checked_output_push` ignores too).
fn send(output: i32, batch: &mut PacketBatch, out: &mut Outputs<'_>) {
    match usize::try_from(output) {
        Ok(o) if o < out.len() => out.push_batch(o, batch),
        _ => batch.clear(),
    }
}

pub struct SwitchClass;

impl ElementClass for SwitchClass {
    fn name(&self) -> &'static str {
        "Switch"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/-")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let output = args
            .positional::<i32>("OUTPUT")
            .map_err(|e| cx.error(e))?
            .unwrap_or(0);
        args.finish().map_err(|e| cx.error(e))?;
        if output >= 0 && output as usize >= cx.noutputs {
            return Err(cx.error(format!("output must be < {}", cx.noutputs)));
        }
        Ok(Arc::new(SwitchSpec {
            output: Arc::new(AtomicI32::new(output)),
            noutputs: cx.noutputs,
        }))
    }
}

struct SwitchSpec {
    output: Arc<AtomicI32>,
    noutputs: usize,
}

impl ElementSpec for SwitchSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(Switch {
            output: self.output.clone(),
        })
    }
    fn handlers(&self) -> Vec<HandlerInfo> {
        vec![HandlerInfo::read_write("switch").reconfiguring(0, "OUTPUT")]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        // Click's Switch answers `config` with the current output, as `switch`.
        matches!(name, "switch" | "config").then(|| self.output.load(Ordering::Relaxed).to_string())
    }
    fn write_handler(&self, name: &str, value: &str) -> Option<Result<(), String>> {
        (name == "switch").then(|| match i32::from_arg(uncomment(value).trim()) {
            Some(o) => {
                // An output the element does not have drops, as -1 does.
                let o = if o >= 0 && o as usize >= self.noutputs {
                    -1
                } else {
                    o
                };
                self.output.store(o, Ordering::Relaxed);
                Ok(())
            }
            None => Err("Switch output must be integer".to_string()),
        })
    }
}

struct Switch {
    output: Arc<AtomicI32>,
}

impl Element for Switch {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        send(self.output.load(Ordering::Relaxed), batch, out);
    }
}

pub struct StaticSwitchClass;

impl ElementClass for StaticSwitchClass {
    fn name(&self) -> &'static str {
        "StaticSwitch"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/-")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let output = args.required::<i32>("OUTPUT").map_err(|e| cx.error(e))?;
        args.finish().map_err(|e| cx.error(e))?;
        // Click's StaticSwitch takes an output it does not have as -1.
        let output = if output >= 0 && output as usize >= cx.noutputs {
            -1
        } else {
            output
        };
        Ok(Arc::new(StaticSwitchSpec(output)))
    }
}

struct StaticSwitchSpec(i32);

impl ElementSpec for StaticSwitchSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(StaticSwitch(self.0))
    }
}

struct StaticSwitch(i32);

impl Element for StaticSwitch {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        send(self.0, batch, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{build_error, Harness};
    use packet::Packet;

    fn three() -> Vec<Packet> {
        vec![
            Packet::from_slice(&[1, 0xaa]),
            Packet::from_slice(&[2, 0xbb]),
            Packet::from_slice(&[3, 0xcc]),
        ]
    }

    fn datas(v: &[Packet]) -> Vec<Vec<u8>> {
        v.iter().map(|p| p.data().to_vec()).collect()
    }

    fn want() -> Vec<Vec<u8>> {
        vec![vec![1, 0xaa], vec![2, 0xbb], vec![3, 0xcc]]
    }

    #[test]
    fn switch_sends_everything_to_its_output() {
        let mut h = Harness::new(&SwitchClass, "", 1, 3);
        assert_eq!(h.read("switch"), "0");
        assert_eq!(h.read("config"), "0");
        let out = h.push(0, three());
        assert_eq!(datas(&out[0]), want());
        assert!(out[1].is_empty() && out[2].is_empty());

        let mut h = Harness::new(&SwitchClass, "2", 1, 3);
        let out = h.push(0, three());
        assert_eq!(datas(&out[2]), want());
        assert!(out[0].is_empty() && out[1].is_empty());

        let mut h = Harness::new(&SwitchClass, "OUTPUT -1", 1, 2);
        let out = h.push(0, three());
        assert!(out.iter().all(|o| o.is_empty()));
        assert_eq!(h.read("switch"), "-1");
    }

    #[test]
    fn switch_handler_moves_every_worker() {
        let mut h = Harness::new(&SwitchClass, "0", 1, 2);
        let mut other = h.another_worker();
        h.write("switch", "1").unwrap();
        assert_eq!(h.read("switch"), "1");
        assert_eq!(h.read("config"), "1");
        assert_eq!(datas(&h.push(0, three())[1]), want());
        assert_eq!(datas(&other.push(0, three())[1]), want());
        // An output past the last one drops, as -1.
        h.write("switch", "7").unwrap();
        assert_eq!(h.read("switch"), "-1");
        assert!(h.push(0, three()).iter().all(|o| o.is_empty()));
        h.write("switch", "0 // back\n").unwrap();
        assert_eq!(h.read("switch"), "0");
        assert_eq!(
            h.write("switch", "one"),
            Err("Switch output must be integer".to_string())
        );
        assert_eq!(h.read("switch"), "0");
        assert_eq!(
            h.spec.handlers(),
            vec![HandlerInfo::read_write("switch").reconfiguring(0, "OUTPUT")]
        );
    }

    #[test]
    fn switch_configuration_errors() {
        assert_eq!(
            build_error(&SwitchClass, "2", 1, 2),
            "e :: Switch: output must be < 2"
        );
        assert_eq!(
            build_error(&SwitchClass, "x", 1, 2),
            "e :: Switch: OUTPUT expects integer"
        );
        assert_eq!(
            build_error(&SwitchClass, "0, 1", 1, 2),
            "e :: Switch: too many arguments"
        );
    }

    #[test]
    fn static_switch_is_fixed() {
        let mut h = Harness::new(&StaticSwitchClass, "1", 1, 2);
        let out = h.push(0, three());
        assert_eq!(datas(&out[1]), want());
        assert!(out[0].is_empty());
        assert!(h.spec.handlers().is_empty());
        assert!(h.spec.write_handler("switch", "0").is_none());
        // Click's StaticSwitch drops for a negative output or one it does not have.
        for config in ["-1", "5"] {
            let mut h = Harness::new(&StaticSwitchClass, config, 1, 2);
            assert!(h.push(0, three()).iter().all(|o| o.is_empty()));
        }
        assert_eq!(
            build_error(&StaticSwitchClass, "", 1, 2),
            "e :: StaticSwitch: missing mandatory OUTPUT argument"
        );
        assert_eq!(
            build_error(&StaticSwitchClass, "0.5", 1, 2),
            "e :: StaticSwitch: OUTPUT expects integer"
        );
    }
}
