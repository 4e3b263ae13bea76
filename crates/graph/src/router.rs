//! Compiling a flat configuration into a router, and running one worker's graph.
//!
//! [`RouterSpec::build`] checks the configuration as Click's `Router::initialize` does
//! (classes, port ranges, reused and unused ports, then each element's configuration)
//! and configures every element once. [`RouterSpec::instantiate`] gives each worker its
//! own [`GraphInstance`]: private element instances and output batches, so the data path
//! takes no locks. Batches run to completion: an element's outputs are pushed
//! downstream, depth first, as soon as the element returns.

use crate::args::Args;
use crate::element::*;
use crate::error::ConfigError;
use crate::lang::{ElementDecl, FlatConfig};
use crate::registry::Registry;
use cycles::FatalCycle;
use packet::PacketBatch;
use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, Mutex};

mod cycles;

struct ElementEntry {
    name: String,
    class: &'static str,
    /// The configuration string, as the `config` handler shows it: the declared one
    /// until a handler that reconfigures an argument is written (see
    /// [`HandlerInfo::reconfigures`]).
    config: Mutex<String>,
    spec: Arc<dyn ElementSpec>,
    ninputs: usize,
    noutputs: usize,
    /// Destination (element, input port) of each output port.
    dest: Vec<(usize, usize)>,
}

/// A configured router, shared by all workers.
pub struct RouterSpec {
    elements: Vec<ElementEntry>,
    /// Each element's index by name: handler calls find their element in constant
    /// time (a scrape of every handler of 20,000 elements scanned the list 7.5 s).
    by_name: std::collections::HashMap<String, usize>,
    stop: Arc<StopFlag>,
    requirements: Vec<String>,
    /// The configuration's text, for the global `config` handler (set by the driver
    /// that read it).
    text: Option<String>,
    /// What a write to the global `hotconfig` handler calls (set by a driver that
    /// allows reconfiguration).
    hotconfig: Option<Arc<Reconfigure>>,
    /// The names the configuration's AddressInfo elements give, for handler values
    /// as for configuration arguments.
    addresses: Option<Arc<crate::addressinfo::AddressTable>>,
}

/// A driver's replacement of the running configuration by the text written to the
/// global `hotconfig` handler: `Ok` once the new configuration is built and will take
/// over, or why it was refused (the running one then goes on).
pub type Reconfigure = dyn Fn(&str) -> Result<(), String> + Send + Sync;

/// What one pass over a worker's sources did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunResult {
    /// Packets the sources that keep the router running emitted in this pass (not those
    /// an ARPQuerier or NeighborEncap sent from the ones it held).
    pub packets: usize,
    /// True once every source of this worker has finished.
    pub all_done: bool,
}

/// `Err` with every error of `errors` (each with those it carries, in order), if any.
fn stop_on(errors: Vec<ConfigError>) -> Result<(), ConfigError> {
    let flat = errors.into_iter().flat_map(|mut e| {
        let also = std::mem::take(&mut e.also);
        std::iter::once(e).chain(also)
    });
    match ConfigError::all(flat.collect()) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn decl(name: &str, class: &str) -> String {
    format!("{} :: {}", name, class)
}

impl RouterSpec {
    /// Checks and configures `flat` with the classes of `reg`, and commits it
    /// ([`RouterSpec::commit`]). File names in element configurations are relative to
    /// `base_dir`.
    pub fn build(
        flat: &FlatConfig,
        reg: &Registry,
        base_dir: &Path,
        workers: usize,
    ) -> Result<RouterSpec, ConfigError> {
        let r = Self::build_staged(flat, reg, base_dir, workers)?;
        for e in r.commit() {
            crate::warn!("{}", e);
        }
        Ok(r)
    }

    /// [`RouterSpec::build`] without the commit: the output files its elements
    /// created keep temporary names (and go if the spec is dropped uncommitted), for a
    /// configuration that may not run (one written to `hotconfig`).
    pub fn build_staged(
        flat: &FlatConfig,
        reg: &Registry,
        base_dir: &Path,
        workers: usize,
    ) -> Result<RouterSpec, ConfigError> {
        let n = flat.elements.len();
        // Each step reports every error it finds, as Click does, before the build stops.
        // 1. Classes.
        let mut classes = Vec::with_capacity(n);
        let mut errors = Vec::new();
        for e in &flat.elements {
            match reg.get(&e.class) {
                Some(c) => classes.push(c.clone()),
                None => {
                    let mut err =
                        ConfigError::at(&e.class_landmark, format!("unknown element class '{}'", e.class));
                    if let Some(question) = reg.did_you_mean(&e.class) {
                        err = err.with_hint(question);
                    }
                    errors.push(err);
                }
            }
        }
        stop_on(errors)?;

        // 2. Port counts: used ports, clamped to what the class accepts (Click's
        //    notify_nports), then every connection checked against them.
        //    A FlatConfig built by hand may repeat a connection; it counts once, as in
        //    Click, and the first occurrence is kept so that errors keep their order.
        let mut seen = HashSet::with_capacity(flat.connections.len());
        let mut conns: Vec<(usize, usize, usize, usize, usize)> = Vec::new(); // from, fp, to, tp, idx
        for (i, c) in flat.connections.iter().enumerate() {
            if seen.insert((c.from, c.from_port, c.to, c.to_port)) {
                conns.push((c.from, c.from_port, c.to, c.to_port, i));
            }
        }
        let mut nin = vec![0usize; n];
        let mut nout = vec![0usize; n];
        for &(f, fp, t, tp, _) in &conns {
            nout[f] = nout[f].max(fp + 1);
            nin[t] = nin[t].max(tp + 1);
        }
        for i in 0..n {
            let pc = classes[i].port_count();
            nin[i] = nin[i].clamp(pc.min_in, pc.max_in);
            nout[i] = if pc.outputs_equal_inputs {
                nin[i]
            } else {
                nout[i].clamp(pc.min_out, pc.max_out)
            };
        }
        let el = |i: usize| &flat.elements[i];
        let mut errors = Vec::new();
        for &(f, fp, t, tp, _) in &conns {
            if fp >= nout[f] {
                errors.push(ConfigError::at(
                    &el(f).landmark,
                    format!("'{}' has no output {}", decl(&el(f).name, &el(f).class), fp),
                ));
            }
            if tp >= nin[t] {
                errors.push(ConfigError::at(
                    &el(t).landmark,
                    format!("'{}' has no input {}", decl(&el(t).name, &el(t).class), tp),
                ));
            }
        }
        stop_on(errors)?;

        // 3. Completeness: every push output goes to exactly one input; every port is used.
        let mut dest: Vec<Vec<Option<(usize, usize)>>> = nout.iter().map(|&k| vec![None; k]).collect();
        let mut input_used: Vec<Vec<bool>> = nin.iter().map(|&k| vec![false; k]).collect();
        let mut errors = Vec::new();
        for &(f, fp, t, tp, _) in &conns {
            if dest[f][fp].is_some() {
                errors.push(ConfigError::at(
                    &el(f).landmark,
                    format!(
                        "illegal reuse of '{}' push output {}",
                        decl(&el(f).name, &el(f).class),
                        fp
                    ),
                ));
                continue;
            }
            dest[f][fp] = Some((t, tp));
            input_used[t][tp] = true;
        }
        // Every unused port is reported (inputs, then outputs), as Click does.
        let unused_inputs = input_used.iter().enumerate().flat_map(|(i, used)| {
            used.iter()
                .enumerate()
                .filter(|(_, u)| !**u)
                .map(move |(p, _)| (i, "input", p))
        });
        let unused_outputs = dest.iter().enumerate().flat_map(|(i, d)| {
            d.iter()
                .enumerate()
                .filter(|(_, d)| d.is_none())
                .map(move |(p, _)| (i, "output", p))
        });
        let unused = unused_inputs.chain(unused_outputs).map(|(i, kind, p)| {
            ConfigError::at(
                &el(i).landmark,
                format!("'{}' {} {} unused", decl(&el(i).name, &el(i).class), kind, p),
            )
        });
        errors.extend(unused);
        stop_on(errors)?;

        // 4. Configure every element, with the names every AddressInfo gives.
        let addresses = crate::addressinfo::collect(
            flat.elements
                .iter()
                .map(|e| (e.class.as_str(), e.config.as_str())),
        )
        .map_err(|(i, e)| {
            ConfigError::at(
                &el(i).landmark,
                format!("{}: {}", decl(&el(i).name, &el(i).class), e),
            )
        })?;
        // Elements are configured phase by phase (Click's `configure_phase`), in
        // declaration order within a phase, each seeing those configured before it;
        // the router keeps them in declaration order. An element that fails does not
        // stop the others: every element's errors are reported, as Click does.
        let configure = || -> Result<Vec<ElementEntry>, ConfigError> {
            let mut errors = Vec::new();
            let mut order: Vec<usize> = (0..n).collect();
            order.sort_by_key(|&i| classes[i].configure_phase());
            let mut built: Vec<Option<ElementEntry>> = (0..n).map(|_| None).collect();
            let mut peers: Vec<Peer> = Vec::with_capacity(n);
            for i in order {
                let e = el(i);
                let cx = BuildContext {
                    name: &e.name,
                    class: classes[i].name(),
                    landmark: &e.landmark,
                    ninputs: nin[i],
                    noutputs: nout[i],
                    base_dir,
                    workers,
                    peers: Peers::new(&peers),
                };
                let mut args = Args::new(&e.config);
                let spec = match classes[i].build(&mut args, &cx) {
                    Ok(spec) => spec,
                    Err(err) => {
                        errors.push(err.or_at(&e.landmark));
                        continue;
                    }
                };
                peers.push(Peer {
                    name: e.name.clone(),
                    class: classes[i].name(),
                    spec: spec.clone(),
                });
                built[i] = Some(ElementEntry {
                    name: e.name.clone(),
                    class: classes[i].name(),
                    config: Mutex::new(e.config.clone()),
                    spec,
                    ninputs: nin[i],
                    noutputs: nout[i],
                    dest: dest[i].iter().map(|d| d.expect("checked above")).collect(),
                });
            }
            stop_on(errors)?;
            Ok(built
                .into_iter()
                .map(|e| e.expect("every element configured"))
                .collect())
        };
        let elements = crate::addressinfo::with_table(addresses.clone(), configure)?;
        // 5. No cycle that packets could never leave: through a queue's output (Click
        //    refuses those), or made only of pass-through elements, which the graph
        //    connects around so that no element call would ever take packets out.
        let dests: Vec<&[(usize, usize)]> = elements.iter().map(|e| &e.dest[..]).collect();
        let is_queue = |i: usize| matches!(el(i).class.as_str(), "Queue" | "SimpleQueue" | "ThreadSafeQueue");
        if let Some(cycle) = cycles::fatal_cycle(&dests, &is_queue, &|i| elements[i].spec.is_pass_through()) {
            return Err(fatal_cycle_error(cycle, &|i| el(i)));
        }

        Ok(RouterSpec {
            by_name: elements
                .iter()
                .enumerate()
                .map(|(i, e)| (e.name.clone(), i))
                .collect(),
            elements,
            stop: Arc::new(StopFlag::new()),
            requirements: flat.requirements.clone(),
            text: None,
            hotconfig: None,
            addresses,
        })
    }

    /// One worker's graph.
    pub fn instantiate(&self, worker: WorkerInfo) -> GraphInstance {
        let nodes: Vec<Node> = self
            .elements
            .iter()
            .map(|e| Node {
                elem: e.spec.instantiate(worker),
                outs: (0..e.noutputs).map(|_| PacketBatch::new()).collect(),
                busy: false,
                spare: Vec::new(),
                dest: e.dest.clone(),
                next0: NO_DEST,
                profile: ElementProfile::default(),
            })
            .collect();
        let mut nodes = nodes;
        skip_pass_through(&mut nodes);
        for n in &mut nodes {
            n.next0 = n.dest.first().copied().unwrap_or(NO_DEST);
        }
        let sources: Vec<usize> = (0..nodes.len()).filter(|&i| nodes[i].elem.is_source()).collect();
        let counted: Vec<bool> = sources
            .iter()
            .map(|&i| nodes[i].elem.keeps_router_running())
            .collect();
        GraphInstance {
            done: vec![false; sources.len()],
            wake_at: vec![0; sources.len()],
            live: counted.iter().filter(|&&c| c).count(),
            counted,
            sources,
            nodes,
            stop: self.stop.clone(),
            worker,
            scratch: PacketBatch::new(),
            profiling: false,
        }
    }

    pub fn stop_flag(&self) -> &Arc<StopFlag> {
        &self.stop
    }

    /// Makes the configuration the router's: each element puts in place the files it
    /// created under temporary names ([`ElementSpec::commit`]). Returns what could not
    /// be done, each with its element.
    pub fn commit(&self) -> Vec<String> {
        let errors = self
            .elements
            .iter()
            .filter_map(|e| {
                e.spec
                    .commit()
                    .err()
                    .map(|m| format!("{} :: {}: {}", e.name, e.class, m))
            })
            .collect();
        crate::addressinfo::with_table(self.addresses.clone(), || {
            for e in &self.elements {
                e.spec.initialize(self);
            }
        });
        errors
    }

    /// Takes over the state of the configuration this one replaces (Click's hotswap):
    /// each element with the name and class of one of `old`'s takes what it carries
    /// ([`ElementSpec::take_state`]). Call once `old`'s workers have stopped, before
    /// this configuration's start. Returns the elements that took state, as
    /// `name :: Class`.
    pub fn take_state(&self, old: &RouterSpec) -> Vec<String> {
        let mut took = Vec::new();
        for e in &self.elements {
            let Some(o) = old.by_name.get(&e.name).map(|&i| &old.elements[i]) else {
                continue;
            };
            if o.class == e.class && o.spec.state().is_some() && e.spec.take_state(&*o.spec) {
                took.push(decl(&e.name, e.class));
            }
        }
        took
    }

    /// Keeps the configuration's text for the global `config` handler.
    pub fn set_text(&mut self, text: String) {
        self.text = Some(text);
    }

    /// Gives the router a global `hotconfig` write handler calling `reconfigure`.
    pub fn set_hotconfig(&mut self, reconfigure: Arc<Reconfigure>) {
        self.hotconfig = Some(reconfigure);
    }

    /// Names of all elements, in configuration order.
    pub fn element_names(&self) -> impl Iterator<Item = &str> {
        self.elements.iter().map(|e| e.name.as_str())
    }

    /// Class names of all elements, in configuration order.
    pub fn element_classes(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.elements.iter().map(|e| e.class)
    }

    pub fn requirements(&self) -> &[String] {
        &self.requirements
    }

    /// Whether packets leaving an element for which `start(class, config)` holds can
    /// reach, through the connections, an input for which `target(class, input)` holds
    /// (an `ARPResponder`'s, say, from a `FromDevice` of one interface).
    pub fn reaches(&self, start: impl Fn(&str, &str) -> bool, target: impl Fn(&str, usize) -> bool) -> bool {
        let mut seen = vec![false; self.elements.len()];
        let mut todo: Vec<usize> = (0..self.elements.len())
            .filter(|&i| start(self.elements[i].class, &lock(&self.elements[i].config)))
            .collect();
        while let Some(i) = todo.pop() {
            if std::mem::replace(&mut seen[i], true) {
                continue;
            }
            for &(to, port) in &self.elements[i].dest {
                if target(self.elements[to].class, port) {
                    return true;
                }
                todo.push(to);
            }
        }
        false
    }

    fn find(&self, name: &str) -> Option<&ElementEntry> {
        self.find_index(name).map(|i| &self.elements[i])
    }

    fn find_index(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    /// Names of elements whose class is `class`.
    pub fn elements_of_class(&self, class: &str) -> Vec<&str> {
        self.elements
            .iter()
            .filter(|e| e.class == class)
            .map(|e| e.name.as_str())
            .collect()
    }

    pub fn has_element(&self, name: &str) -> bool {
        self.find(name).is_some()
    }

    /// Whether `element.handler` exists and is readable.
    pub fn has_read_handler(&self, element: &str, handler: &str) -> bool {
        self.find(element).is_some_and(|e| access(e, handler).0)
    }

    /// Whether `element.handler` can be read and written: `None` when there is no
    /// element `element`, `(false, false)` when it has no such handler.
    pub fn handler_access(&self, element: &str, handler: &str) -> Option<(bool, bool)> {
        self.find(element).map(|e| access(e, handler))
    }

    /// How many outputs element `element` has in the configuration.
    pub fn outputs(&self, element: &str) -> Option<usize> {
        self.find(element).map(|e| e.noutputs)
    }

    /// The name of the element numbered `number` in configuration order, counting from
    /// 1 (Click's handler names `NUMBER.HANDLER`).
    pub fn element_name(&self, number: usize) -> Option<&str> {
        let i = number.checked_sub(1)?;
        self.elements.get(i).map(|e| e.name.as_str())
    }

    /// Reads a global handler (Click's `version`, `driver`, `list`, `requirements`,
    /// `flatconfig`, and `config` when the driver gave the text), or `None` when there
    /// is no such one.
    pub fn read_global_handler(&self, name: &str) -> Option<String> {
        let lines = |v: Vec<&str>| v.iter().map(|s| format!("{}\n", s)).collect::<String>();
        match name {
            "version" => Some(format!("{}\n", env!("CARGO_PKG_VERSION"))),
            // Click's user-level driver: brickroute runs as a process.
            "driver" => Some("userlevel".to_string()),
            "config" => self.text.clone(),
            "flatconfig" => Some(self.flat_text()),
            "list" => {
                let names: Vec<&str> = self.element_names().collect();
                Some(format!("{}\n{}", names.len(), lines(names)))
            }
            "requirements" => Some(lines(self.requirements().iter().map(String::as_str).collect())),
            _ => None,
        }
    }

    /// The flattened configuration, as Click's `Router::unparse` writes it: the
    /// requirements, each element with its current configuration, then each
    /// connection; compound elements are expanded, and anonymous elements keep the
    /// names they were given (`Class@N`). It reads back as the same router.
    fn flat_text(&self) -> String {
        let mut s = String::new();
        for r in &self.requirements {
            s.push_str(&format!("require({});\n", r));
        }
        if !self.requirements.is_empty() {
            s.push('\n');
        }
        for e in &self.elements {
            let config = lock(&e.config).clone();
            if config.is_empty() {
                s.push_str(&format!("{} :: {};\n", e.name, e.class));
            } else {
                s.push_str(&format!("{} :: {}({});\n", e.name, e.class, config));
            }
        }
        let mut first = true;
        for e in &self.elements {
            for (out, &(to, input)) in e.dest.iter().enumerate() {
                if std::mem::take(&mut first) {
                    s.push('\n');
                }
                s.push_str(&format!(
                    "{} [{}] -> [{}] {};\n",
                    e.name, out, input, self.elements[to].name
                ));
            }
        }
        s
    }

    /// Whether `name` is a global write handler: Click's `stop`, which asks the
    /// workers to stop as a source's `STOP true` does, and `hotconfig` when the
    /// driver allows reconfiguration ([`RouterSpec::set_hotconfig`]).
    pub fn has_global_write_handler(&self, name: &str) -> bool {
        name == "stop" || name == "hotconfig" && self.hotconfig.is_some()
    }

    /// Writes a global handler (see [`RouterSpec::has_global_write_handler`]); `None`
    /// when there is no such one. `stop` ignores its value, as Click's does.
    pub fn write_global_handler(&self, name: &str, value: &str) -> Option<Result<(), String>> {
        match (name, &self.hotconfig) {
            ("stop", _) => {
                self.stop.request();
                Some(Ok(()))
            }
            ("hotconfig", Some(reconfigure)) => Some(reconfigure(value)),
            _ => None,
        }
    }

    /// Reads handler `element.handler`, or `element.handler PARAM` for a read handler
    /// with a parameter (`rt.lookup 10.0.0.1`). Errors use Click's wording.
    pub fn read_handler(&self, path: &str) -> Result<String, String> {
        crate::addressinfo::with_table(self.addresses.clone(), || self.read_handler_here(path))
    }

    fn read_handler_here(&self, path: &str) -> Result<String, String> {
        // An empty parameter is none, as in Click.
        let (path, param) = match path.split_once(char::is_whitespace) {
            Some((p, rest)) => (p, Some(rest.trim()).filter(|r| !r.is_empty())),
            None => (path, None),
        };
        let (ename, hname) = split_handler(path)?;
        let index = self
            .find_index(ename)
            .ok_or_else(|| format!("no element '{}'", ename))?;
        let e = &self.elements[index];
        if let Some(r) = e.spec.read_handler_in(hname, param, self) {
            return r;
        }
        if let Some(param) = param {
            if let Some(r) = e.spec.read_handler_with(hname, param) {
                return r;
            }
            // Click's Handler::call_read.
            return Err(if self.has_read_handler(ename, hname) {
                format!("read handler '{}' does not take parameters", path)
            } else {
                not_readable(e, hname, path)
            });
        }
        let std = match hname {
            "name" => Some(e.name.clone()),
            "class" => Some(e.class.to_string()),
            // An element may answer `config` itself, as Click's rate elements do with
            // their current rate.
            "config" => Some(
                e.spec
                    .read_handler("config")
                    .unwrap_or_else(|| lock(&e.config).clone()),
            ),
            "ports" => Some(self.ports_string(index)),
            "handlers" => {
                let mut names: Vec<String> = STANDARD_HANDLERS.iter().map(|h| h.to_string()).collect();
                names.extend(e.spec.handlers().into_iter().map(|h| h.name.to_string()));
                names.sort();
                // (An element's own write handler of a standard one, `config` written to
                // reconfigure it live, is one handler, readable and writable.)
                names.dedup();
                let mut s = String::new();
                for n in names {
                    let (r, w) = access(e, &n);
                    s.push_str(&format!(
                        "{}\t{}{}\n",
                        n,
                        if r { "r" } else { "" },
                        if w { "w" } else { "" }
                    ));
                }
                Some(s)
            }
            _ => None,
        };
        if let Some(v) = std {
            return Ok(v);
        }
        if let Some(v) = e.spec.read_handler(hname) {
            return Ok(v);
        }
        // A handler that takes a parameter, read without one.
        if let Some(r) = e.spec.read_handler_with(hname, "") {
            return r;
        }
        Err(not_readable(e, hname, path))
    }

    /// The `ports` handler's text, as Click's `Router::element_ports_string`: the
    /// number of inputs, a line per input, the number of outputs, a line per output.
    /// A port's line is its processing, its packet count (`-`: Click counts none unless
    /// built with statistics) and the ports connected to it: `element [output]` for an
    /// input, in configuration order, and `[input] element` for an output. Every port
    /// runs push (see the crate's full-push model), and an agnostic port, which Click
    /// marks with a `~`, cannot be told apart here, so the processing is `push` for all.
    fn ports_string(&self, index: usize) -> String {
        let e = &self.elements[index];
        let mut s = format!("{} input{}\n", e.ninputs, plural(e.ninputs));
        for port in 0..e.ninputs {
            let from: Vec<String> = self
                .elements
                .iter()
                .flat_map(|x| {
                    x.dest
                        .iter()
                        .enumerate()
                        .filter(|&(_, &d)| d == (index, port))
                        .map(move |(out, _)| format!("{} [{}]", x.name, out))
                })
                .collect();
            s.push_str(&format!("push\t-\t{}\n", from.join(", ")));
        }
        s.push_str(&format!("{} output{}\n", e.noutputs, plural(e.noutputs)));
        for &(to, port) in &e.dest {
            s.push_str(&format!("push\t-\t[{}] {}\n", port, self.elements[to].name));
        }
        s
    }

    /// Writes handler `element.handler`. A handler that reconfigures an argument (see
    /// [`HandlerInfo::reconfigures`]) puts the value it accepted into the element's
    /// `config`.
    pub fn write_handler(&self, path: &str, value: &str) -> Result<(), String> {
        crate::addressinfo::with_table(self.addresses.clone(), || self.write_handler_here(path, value))
    }

    fn write_handler_here(&self, path: &str, value: &str) -> Result<(), String> {
        let (ename, hname) = split_handler(path)?;
        let e = self
            .find(ename)
            .ok_or_else(|| format!("no element '{}'", ename))?;
        // Held across the write, so that concurrent writes leave `config` showing the
        // value the element took last.
        if let Some(r) = e.spec.write_handler_in(hname, value, self) {
            // (Not under the `config` lock: the handler calls other handlers, which
            // may be this element's own.)
            return r;
        }
        let mut config = lock(&e.config);
        match e.spec.write_handler(hname, value) {
            Some(Ok(())) if hname == "config" => {
                // The element took a whole new configuration.
                *config = value.to_string();
                Ok(())
            }
            Some(Ok(())) => {
                let reconfigures = e
                    .spec
                    .handlers()
                    .into_iter()
                    .find(|h| h.name == hname && h.write)
                    .and_then(|h| h.reconfigures);
                if let Some(arg) = reconfigures {
                    *config = arg.replace_in(&config, value);
                }
                Ok(())
            }
            Some(Err(err)) => Err(err),
            None if STANDARD_HANDLERS.contains(&hname)
                || e.spec.handlers().iter().any(|h| h.name == hname && h.read) =>
            {
                Err(format!("'{}' is a read handler", path))
            }
            None => Err(format!("no '{}' handler", path)),
        }
    }

    /// Lets elements flush files once every worker has stopped.
    pub fn cleanup(&self) {
        for e in &self.elements {
            e.spec.cleanup();
        }
    }
}

const STANDARD_HANDLERS: [&str; 5] = ["class", "config", "handlers", "name", "ports"];

/// Whether `e`'s handler `handler` can be read and written: a standard handler is
/// readable, and an element may make one writable too (`config`, for a live
/// reconfiguration).
fn access(e: &ElementEntry, handler: &str) -> (bool, bool) {
    let standard = STANDARD_HANDLERS.contains(&handler);
    if !standard && e.spec.answers_any_handler() {
        return (true, true);
    }
    e.spec
        .handlers()
        .iter()
        .filter(|h| h.name == handler)
        .fold((standard, false), |(r, w), h| (r || h.read, w || h.write))
}

/// The error for reading `path` (handler `hname` of `e`), which is not a read handler.
fn not_readable(e: &ElementEntry, hname: &str, path: &str) -> String {
    if e.spec.handlers().iter().any(|h| h.name == hname && h.write) {
        format!("'{}' is a write handler", path)
    } else {
        format!("no '{}' handler", path)
    }
}

use crate::elements::shared::lock;

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

fn split_handler(path: &str) -> Result<(&str, &str), String> {
    path.split_once('.')
        .ok_or_else(|| format!("bad handler name '{}'", path))
}

struct Node {
    elem: Box<dyn Element>,
    /// One batch per output; all empty unless the element is `busy`.
    outs: Vec<PacketBatch>,
    /// True while the element's outputs are being dispatched. A push that re-enters it
    /// then (a cycle through it) gets batches from `spare`, so packets still waiting
    /// in `outs` keep their order.
    busy: bool,
    /// Output batches for re-entrant pushes.
    spare: Vec<Vec<PacketBatch>>,
    dest: Vec<(usize, usize)>,
    /// `dest[0]`, or `NO_DEST` for an element without outputs: kept beside the flags
    /// the dispatch loop reads anyway, so following output 0 (nearly every call) reads
    /// no `dest` vector.
    next0: (usize, usize),
    /// Time in this element's own `push` / `run` calls, when the worker profiles.
    profile: ElementProfile,
}

/// [`Node::next0`] of an element without outputs: never followed, since its calls pass
/// nothing on.
const NO_DEST: (usize, usize) = (usize::MAX, usize::MAX);

/// What one element's calls cost on one worker, measured when profiling is on (see
/// [`GraphInstance::set_profiling`]): TSC cycles inside its own `push` and `run`
/// calls, not counting the elements downstream, which run after the call returns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ElementProfile {
    /// Calls of `push` (and of `run`, for a source).
    pub calls: u64,
    /// Packets handed to its `push` calls.
    pub packets: u64,
    /// TSC cycles of those calls, each timed with two counter reads (their own cost,
    /// some 20-40 cycles a call here, is included).
    pub cycles: u64,
}

impl std::ops::AddAssign for ElementProfile {
    fn add_assign(&mut self, o: ElementProfile) {
        self.calls += o.calls;
        self.packets += o.packets;
        self.cycles += o.cycles;
    }
}

/// Runs `call` (one element call on `packets` packets), timed into `profile` when
/// `PROF`; without it, just the call.
#[inline(always)]
fn timed<const PROF: bool, R>(profile: &mut ElementProfile, packets: usize, call: impl FnOnce() -> R) -> R {
    if !PROF {
        return call();
    }
    let t0 = crate::tsc::rdtsc();
    let r = call();
    *profile += ElementProfile {
        calls: 1,
        packets: packets as u64,
        cycles: crate::tsc::rdtsc().wrapping_sub(t0),
    };
    r
}

/// One worker's instance of the router graph.
pub struct GraphInstance {
    nodes: Vec<Node>,
    sources: Vec<usize>,
    done: Vec<bool>,
    /// Per source, whether the worker runs until it is done
    /// ([`Element::keeps_router_running`]).
    counted: Vec<bool>,
    /// Per source, the TSC reading before which a busy pass may skip it (see
    /// [`TaskStatus::IdleUntil`]); 0 for a source to run in every pass.
    wake_at: Vec<u64>,
    live: usize,
    stop: Arc<StopFlag>,
    worker: WorkerInfo,
    /// An empty batch that carries a source's outputs on (see [`forward`]).
    scratch: PacketBatch,
    /// Time every element call (see [`GraphInstance::set_profiling`]).
    profiling: bool,
}

impl GraphInstance {
    pub fn has_sources(&self) -> bool {
        !self.sources.is_empty()
    }

    pub fn worker(&self) -> WorkerInfo {
        self.worker
    }

    /// Times every element call from now on (or stops): each element's
    /// [`ElementProfile`] then adds up its calls, packets and cycles. Off by default;
    /// when off, the passes run code without any timing in it.
    pub fn set_profiling(&mut self, on: bool) {
        self.profiling = on;
    }

    /// Each element's profile, by element index (the order of
    /// [`RouterSpec::element_names`]); all zero unless profiling was on.
    pub fn profile(&self) -> Vec<ElementProfile> {
        self.nodes.iter().map(|n| n.profile).collect()
    }

    /// Runs every live source once, pushing what it emits through the graph.
    pub fn run_sources(&mut self) -> RunResult {
        self.run_sources_with(None, None)
    }

    /// [`Self::run_sources`] for a pass that began at TSC reading `now`, which the
    /// elements' timers then use instead of reading the counter again.
    pub fn run_sources_at(&mut self, now: u64) -> RunResult {
        self.run_sources_with(Some(now), None)
    }

    /// [`Self::run_sources_at`] for the graph of `router`, whose handlers the elements
    /// may then call (a Script's instructions).
    pub fn run_sources_in(&mut self, router: &RouterSpec, now: u64) -> RunResult {
        self.run_sources_with(Some(now), Some(router))
    }

    fn run_sources_with(&mut self, now: Option<u64>, router: Option<&RouterSpec>) -> RunResult {
        if self.profiling {
            self.run_sources_timed::<true>(now, router)
        } else {
            self.run_sources_timed::<false>(now, router)
        }
    }

    /// A pass; `PROF`: time each element call (two copies of the graph's dispatch, so
    /// the usual one carries no test for it).
    fn run_sources_timed<const PROF: bool>(
        &mut self,
        now: Option<u64>,
        router: Option<&RouterSpec>,
    ) -> RunResult {
        // Borrow the fields apart instead of cloning the Arc: a clone per pass is an
        // atomic write to a cache line every worker shares.
        let GraphInstance {
            nodes,
            sources,
            done,
            counted,
            wake_at,
            live,
            stop,
            worker,
            scratch,
            profiling: _,
        } = self;
        let mut cx = match now {
            Some(t) => Context::at(*worker, stop, t),
            None => Context::new(*worker, stop),
        }
        .in_router(router);
        // Sources that said they have nothing to do yet are skipped only in a timed pass
        // that is not the one seeing a stop request, once another source moved packets.
        // (`u64::MAX`: none is skipped.)
        let skip_before = match now {
            Some(t) if !stop.is_requested() => t,
            _ => u64::MAX,
        };
        // Packets the pass moved, and of those the ones from sources that keep the router
        // running (an ARPQuerier or NeighborEncap sending packets it held brings none of
        // its own: they were counted when their source emitted them).
        let (mut moved, mut packets) = (0, 0);
        for (si, &idx) in sources.iter().enumerate() {
            if done[si] || (moved > 0 && skip_before < wake_at[si]) {
                continue;
            }
            let node = &mut nodes[idx];
            node.busy = true;
            let status = timed::<PROF, _>(&mut node.profile, 0, || {
                node.elem.run(&mut Outputs::new(&mut node.outs), &mut cx)
            });
            for q in 0..node.dest.len() {
                let n = nodes[idx].outs[q].len();
                if n > 0 {
                    moved += n;
                    if counted[si] {
                        packets += n;
                    }
                    forward::<PROF>(nodes, idx, q, scratch, &mut cx);
                }
            }
            nodes[idx].busy = false;
            wake_at[si] = match status {
                TaskStatus::IdleUntil(t) => t,
                _ => 0,
            };
            if matches!(status, TaskStatus::Done | TaskStatus::Released) {
                done[si] = status == TaskStatus::Done;
                if std::mem::take(&mut counted[si]) {
                    *live -= 1;
                }
            }
        }
        RunResult {
            packets,
            all_done: self.live == 0 && !self.any_pending(),
        }
    }

    /// Whether a live source that does not keep the router running has work coming
    /// all the same ([`Element::is_pending`]).
    fn any_pending(&self) -> bool {
        self.sources
            .iter()
            .enumerate()
            .any(|(si, &idx)| !self.done[si] && !self.counted[si] && self.nodes[idx].elem.is_pending())
    }

    /// The descriptors this worker may sleep on when idle: `None` if a live source
    /// must keep being polled, else every descriptor a live source waits on (empty when
    /// none does: only a stop request or a timeout then ends the wait).
    pub fn idle_fds(&mut self, fds: &mut Vec<std::os::fd::RawFd>) -> Option<()> {
        fds.clear();
        for (si, &idx) in self.sources.iter().enumerate() {
            if self.done[si] {
                continue;
            }
            match self.nodes[idx].elem.idle_wait() {
                IdleWait::Poll => return None,
                IdleWait::Readable(fd) => fds.push(fd),
                IdleWait::Nothing => {}
            }
        }
        Some(())
    }

    /// Pushes `batch` into input `port` of element `element` (by index).
    pub fn push(&mut self, element: usize, port: usize, batch: &mut PacketBatch) {
        let mut cx = Context::new(self.worker, &self.stop);
        push_into::<false>(&mut self.nodes, element, port, batch, &mut cx);
    }
}

/// The error for a cycle [`cycles::fatal_cycle`] found. Where a queue is in it,
/// Click's own (`Router::check_push_and_pull`, after the agnostic elements behind the
/// queue's pull output turned pull).
fn fatal_cycle_error<'a>(cycle: FatalCycle, el: &dyn Fn(usize) -> &'a ElementDecl) -> ConfigError {
    let name = |i: usize| decl(&el(i).name, &el(i).class);
    match cycle {
        FatalCycle::IntoQueue {
            from,
            port,
            queue,
            input,
        } => ConfigError::at(
            &el(from).landmark,
            format!(
                "'{}' pull output {} connected to '{}' push input {}",
                name(from),
                port,
                name(queue),
                input
            ),
        ),
        FatalCycle::PassThrough { first } => ConfigError::at(
            &el(first).landmark,
            format!(
                "'{}' output 0 leads back to its input through pass-through elements only, where packets would circle for ever",
                name(first)
            ),
        ),
    }
}

/// Points every connection that leads into a pass-through element (see
/// [`Element::is_pass_through`]) at that element's own destination, following chains of
/// them: a full-push `Queue` costs no call per batch. (A cycle made only of pass-through
/// elements, which [`RouterSpec::build`] refuses, would be left as it is.)
fn skip_pass_through(nodes: &mut [Node]) {
    let through: Vec<Option<(usize, usize)>> = nodes
        .iter()
        .map(|n| match n.dest[..] {
            [d] if n.elem.is_pass_through() => Some(d),
            _ => None,
        })
        .collect();
    for node in nodes.iter_mut() {
        for dest in node.dest.iter_mut() {
            let mut d = *dest;
            let mut hops = 0;
            while let (0, Some(next)) = (d.1, through[d.0]) {
                if hops == through.len() {
                    break;
                }
                d = next;
                hops += 1;
            }
            if hops < through.len() {
                *dest = d;
            }
        }
    }
}

/// Sends the packets waiting on output `q` of node `idx` on through the graph, carried
/// by `empty` (an empty batch, empty again on return): swapping batches moves their
/// storage, never their packets.
#[inline]
fn forward<const PROF: bool>(
    nodes: &mut [Node],
    idx: usize,
    q: usize,
    empty: &mut PacketBatch,
    cx: &mut Context<'_>,
) {
    std::mem::swap(empty, &mut nodes[idx].outs[q]);
    let (d, dp) = nodes[idx].dest[q];
    push_into::<PROF>(nodes, d, dp, empty, cx);
    std::mem::swap(empty, &mut nodes[idx].outs[q]);
}

/// Pushes `batch` into input `port` of node `idx` and on through the graph, depth
/// first, output by output; `batch` is empty on return. The element writes into its
/// own output batches in place; the last non-empty output continues in this loop
/// instead of a nested call (its packets are swapped into `batch`), so a chain of
/// elements costs one virtual call each and no call frames.
fn push_into<const PROF: bool>(
    nodes: &mut [Node],
    mut idx: usize,
    mut port: usize,
    batch: &mut PacketBatch,
    cx: &mut Context<'_>,
) {
    loop {
        let node = &mut nodes[idx];
        if node.busy {
            push_reentrant::<PROF>(nodes, idx, port, batch, cx);
            return;
        }
        // (Not `busy` during the element's own push: an element reaches no other
        // element, so nothing can push into this one before it returns.)
        // Read before the call: when the element passes its input on to output 0, as
        // nearly every one does, finding the next element does not wait for this one's
        // result (the branch below is predicted), so the two calls overlap.
        let next0 = node.next0;
        let mut outs = Outputs::for_input(&mut node.outs, batch);
        timed::<PROF, _>(&mut node.profile, batch.len(), || {
            node.elem.push(port, batch, &mut outs, cx)
        });
        // The usual case: the whole input passed to one port, or nothing came out.
        if let Some(q) = outs.only_pass() {
            (idx, port) = if q == 0 { next0 } else { node.dest[q] };
            continue;
        }
        if outs.nothing_out() {
            // An element must consume its input; whatever it left is dropped.
            batch.clear();
            return;
        }
        outs.settle(batch);
        // Its output batches hold packets until they are dispatched below.
        node.busy = true;
        // `batch` is empty now: it carries every non-empty output but the last on.
        let mut last = None;
        for q in 0..nodes[idx].outs.len() {
            if !nodes[idx].outs[q].is_empty() {
                if let Some(prev) = last.replace(q) {
                    forward::<PROF>(nodes, idx, prev, batch, cx);
                }
            }
        }
        let node = &mut nodes[idx];
        let Some(q) = last else {
            node.busy = false;
            return;
        };
        std::mem::swap(batch, &mut node.outs[q]);
        node.busy = false;
        (idx, port) = node.dest[q];
    }
}

/// A push into an element that is dispatching its outputs (a cycle leads back to it):
/// the element writes into spare batches, which are dispatched before returning.
#[cold]
fn push_reentrant<const PROF: bool>(
    nodes: &mut [Node],
    idx: usize,
    port: usize,
    batch: &mut PacketBatch,
    cx: &mut Context<'_>,
) {
    let nout = nodes[idx].outs.len();
    let mut outs = nodes[idx]
        .spare
        .pop()
        .unwrap_or_else(|| (0..nout).map(|_| PacketBatch::new()).collect());
    let node = &mut nodes[idx];
    timed::<PROF, _>(&mut node.profile, batch.len(), || {
        node.elem.push(port, batch, &mut Outputs::new(&mut outs), cx)
    });
    batch.clear();
    for (q, b) in outs.iter_mut().enumerate() {
        if !b.is_empty() {
            let (d, dp) = nodes[idx].dest[q];
            push_into::<PROF>(nodes, d, dp, b, cx);
        }
    }
    nodes[idx].spare.push(outs);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Landmark;
    use crate::lang::{Connection, ElementDecl};
    use packet::Packet;

    /// Emits `N` one-byte packets numbered 0.., one batch of up to 4 per run.
    struct TestSourceClass;
    struct TestSource {
        left: usize,
        next: u8,
    }
    struct TestSourceSpec(usize);
    impl ElementClass for TestSourceClass {
        fn name(&self) -> &'static str {
            "TestSource"
        }
        fn port_count(&self) -> PortCount {
            PortCount::parse("0/1")
        }
        fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
            let n = args.required::<usize>("N").map_err(|e| cx.error(e))?;
            Ok(Arc::new(TestSourceSpec(n)))
        }
    }
    impl ElementSpec for TestSourceSpec {
        fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
            Box::new(TestSource {
                left: self.0,
                next: 0,
            })
        }
    }
    impl Element for TestSource {
        fn push(&mut self, _: usize, b: &mut PacketBatch, _: &mut Outputs<'_>, _: &mut Context<'_>) {
            b.clear();
        }
        fn is_source(&self) -> bool {
            true
        }
        fn run(&mut self, out: &mut Outputs<'_>, _: &mut Context<'_>) -> TaskStatus {
            for _ in 0..self.left.min(4) {
                out.push(0, Packet::from_slice(&[self.next]));
                self.next += 1;
                self.left -= 1;
            }
            if self.left == 0 {
                TaskStatus::Done
            } else {
                TaskStatus::Busy
            }
        }
    }

    /// Sends even first bytes to output 0 and odd ones to output 1; records what it
    /// sees in a shared log. With `INC true` it first adds one to odd bytes.
    struct SplitClass(Arc<std::sync::Mutex<Vec<u8>>>, bool);
    struct Split(Arc<std::sync::Mutex<Vec<u8>>>, bool);
    impl ElementClass for SplitClass {
        fn name(&self) -> &'static str {
            "Split"
        }
        fn port_count(&self) -> PortCount {
            PortCount::parse("1-/1-2")
        }
        fn build(&self, args: &mut Args, _: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
            let inc = args.keyword::<bool>("INC").unwrap().unwrap_or(false);
            Ok(Arc::new(SplitClass(self.0.clone(), inc)))
        }
    }
    impl ElementSpec for SplitClass {
        fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
            Box::new(Split(self.0.clone(), self.1))
        }
    }
    impl Element for Split {
        fn push(&mut self, _: usize, b: &mut PacketBatch, out: &mut Outputs<'_>, _: &mut Context<'_>) {
            for mut p in b.drain() {
                self.0.lock().unwrap().push(p.data()[0]);
                if self.1 && p.data()[0] % 2 == 1 {
                    p.data_mut()[0] += 1;
                }
                let port = (p.data()[0] % 2) as usize;
                out.push(port, p);
            }
        }
    }

    /// Passes each batch whole to the output its configuration names.
    struct PassToClass;
    struct PassTo(usize);
    impl ElementClass for PassToClass {
        fn name(&self) -> &'static str {
            "PassTo"
        }
        fn port_count(&self) -> PortCount {
            PortCount::parse("1/1-")
        }
        fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
            let k = args.required::<usize>("OUTPUT").map_err(|e| cx.error(e))?;
            Ok(Arc::new(PassToSpec(k)))
        }
    }
    struct PassToSpec(usize);
    impl ElementSpec for PassToSpec {
        fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
            Box::new(PassTo(self.0))
        }
    }
    impl Element for PassTo {
        fn push(&mut self, _: usize, b: &mut PacketBatch, out: &mut Outputs<'_>, _: &mut Context<'_>) {
            out.push_batch(self.0, b);
        }
    }

    /// Adds one to each packet's first byte and passes the batch on to output 0.
    struct AddOneClass;
    struct AddOne;
    impl ElementClass for AddOneClass {
        fn name(&self) -> &'static str {
            "AddOne"
        }
        fn port_count(&self) -> PortCount {
            PortCount::parse("1/1")
        }
        fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
            args.finish().map_err(|e| cx.error(e))?;
            Ok(Arc::new(AddOneClass))
        }
    }
    impl ElementSpec for AddOneClass {
        fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
            Box::new(AddOne)
        }
    }
    impl Element for AddOne {
        fn push(&mut self, _: usize, b: &mut PacketBatch, out: &mut Outputs<'_>, _: &mut Context<'_>) {
            for p in b.iter_mut() {
                p.data_mut()[0] += 1;
            }
            out.push_batch(0, b);
        }
    }

    /// A source with nothing to emit that counts its runs and asks not to be run again
    /// for 500 TSC ticks.
    struct WaiterClass(Arc<std::sync::atomic::AtomicUsize>);
    struct Waiter(Arc<std::sync::atomic::AtomicUsize>);
    impl ElementClass for WaiterClass {
        fn name(&self) -> &'static str {
            "Waiter"
        }
        fn port_count(&self) -> PortCount {
            PortCount::parse("0/1")
        }
        fn build(&self, _: &mut Args, _: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
            Ok(Arc::new(WaiterClass(self.0.clone())))
        }
    }
    impl ElementSpec for WaiterClass {
        fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
            Box::new(Waiter(self.0.clone()))
        }
    }
    impl Element for Waiter {
        fn push(&mut self, _: usize, b: &mut PacketBatch, _: &mut Outputs<'_>, _: &mut Context<'_>) {
            b.clear();
        }
        fn is_source(&self) -> bool {
            true
        }
        fn run(&mut self, _: &mut Outputs<'_>, cx: &mut Context<'_>) -> TaskStatus {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            TaskStatus::IdleUntil(cx.now_tsc() + 500)
        }
    }

    fn lm(line: u32) -> Landmark {
        Landmark {
            file: Arc::from("t.click"),
            line,
            column: 1,
            source_line: Arc::from("x"),
        }
    }

    fn el(name: &str, class: &str, config: &str, line: u32) -> ElementDecl {
        ElementDecl {
            name: name.into(),
            class: class.into(),
            config: config.into(),
            landmark: lm(line),
            class_landmark: lm(line),
        }
    }

    fn conn(from: usize, fp: usize, to: usize, tp: usize) -> Connection {
        Connection {
            from,
            from_port: fp,
            to,
            to_port: tp,
            landmark: lm(9),
        }
    }

    fn registry(log: Arc<std::sync::Mutex<Vec<u8>>>) -> Registry {
        let mut r = Registry::with_library();
        r.add(Arc::new(TestSourceClass));
        r.add(Arc::new(SplitClass(log, false)));
        r.add(Arc::new(PassToClass));
        r.add(Arc::new(AddOneClass));
        r
    }

    fn build(flat: &FlatConfig) -> Result<RouterSpec, ConfigError> {
        RouterSpec::build(flat, &registry(Default::default()), Path::new("."), 1)
    }

    /// Builds `flat` for one worker, runs its sources until they are done, and returns
    /// the router and the first bytes every `Split` saw, in order.
    fn run_logged(flat: &FlatConfig) -> (RouterSpec, Vec<u8>) {
        let log: Arc<std::sync::Mutex<Vec<u8>>> = Default::default();
        let r = RouterSpec::build(flat, &registry(log.clone()), Path::new("."), 1).unwrap();
        let mut g = r.instantiate(WorkerInfo { index: 0, count: 1 });
        while !g.run_sources().all_done {}
        let seen = log.lock().unwrap().clone();
        (r, seen)
    }

    #[test]
    fn a_hundred_thousand_connections_build_and_repeats_count_once() {
        // Large enough that comparing each connection with all those before it would
        // take minutes; listed twice, the second time in reverse order, so that a
        // repeat is never next to its first occurrence.
        let n = 100_000;
        let mut elements = Vec::with_capacity(2 * n);
        for i in 0..n {
            elements.push(el(&format!("s{}", i), "TestSource", "1", 1));
            elements.push(el(&format!("d{}", i), "Discard", "", 2));
        }
        let once = (0..n).map(|i| conn(2 * i, 0, 2 * i + 1, 0));
        let connections = once.clone().chain(once.rev()).collect();
        let flat = FlatConfig {
            elements,
            connections,
            ..Default::default()
        };
        let r = build(&flat).unwrap();
        assert_eq!(r.element_names().count(), 2 * n);
        let mut g = r.instantiate(WorkerInfo { index: 0, count: 1 });
        while !g.run_sources().all_done {}
        for i in [0, 1, n / 2, n - 1] {
            assert_eq!(r.read_handler(&format!("d{}.count", i)).unwrap(), "1");
        }
    }

    #[test]
    fn unknown_class_suggests_near_names() {
        let flat = FlatConfig {
            elements: vec![el("d", "Discrad", "", 2)],
            ..Default::default()
        };
        let e = build(&flat).err().unwrap();
        assert_eq!(e.message, "unknown element class 'Discrad'");
        assert_eq!(e.hint.as_deref(), Some("did you mean 'Discard'?"));
        assert_eq!(e.landmark.unwrap().line, 2);
    }

    #[test]
    fn port_errors_use_click_wording() {
        // s -> [1] d : Discard has one input.
        let flat = FlatConfig {
            elements: vec![el("s", "TestSource", "1", 1), el("d", "Discard", "", 2)],
            connections: vec![conn(0, 0, 1, 1)],
            ..Default::default()
        };
        assert_eq!(
            build(&flat).err().unwrap().message,
            "'d :: Discard' has no input 1"
        );

        // An unconnected input.
        let flat = FlatConfig {
            elements: vec![el("s", "TestSource", "1", 1), el("d", "Discard", "", 2)],
            ..Default::default()
        };
        let e = build(&flat).err().unwrap();
        assert_eq!(e.message, "'d :: Discard' input 0 unused");
        // And every other unused port after it.
        let also: Vec<&str> = e.also.iter().map(|e| e.message.as_str()).collect();
        assert_eq!(also, ["'s :: TestSource' output 0 unused"]);

        // Split with output 1 connected but not output 0.
        let flat = FlatConfig {
            elements: vec![
                el("s", "TestSource", "1", 1),
                el("x", "Split", "", 2),
                el("d", "Discard", "", 3),
            ],
            connections: vec![conn(0, 0, 1, 0), conn(1, 1, 2, 0)],
            ..Default::default()
        };
        let e = build(&flat).err().unwrap();
        assert_eq!(e.message, "'x :: Split' output 0 unused");
        assert_eq!(e.landmark.unwrap().line, 2);

        // One push output to two inputs.
        let flat = FlatConfig {
            elements: vec![
                el("s", "TestSource", "1", 1),
                el("d", "Discard", "", 2),
                el("e", "Discard", "", 3),
            ],
            connections: vec![conn(0, 0, 1, 0), conn(0, 0, 2, 0)],
            ..Default::default()
        };
        assert_eq!(
            build(&flat).err().unwrap().message,
            "illegal reuse of 's :: TestSource' push output 0"
        );
    }

    #[test]
    fn cycles_packets_could_never_leave_are_refused() {
        // Through a queue's output, as Click refuses them; or of Nulls only, which the
        // graph connects around, so that no element call would take packets out.
        let cycle = |classes: &[&str]| {
            let mut elements = vec![el("s", "TestSource", "1", 1)];
            elements.extend(
                classes
                    .iter()
                    .zip(2..)
                    .map(|(c, i)| el(&format!("p{}", i), c, "", i)),
            );
            let n = classes.len();
            let mut connections = vec![conn(0, 0, 1, 0)];
            connections.extend((1..=n).map(|i| conn(i, 0, i % n + 1, 0)));
            build(&FlatConfig {
                elements,
                connections,
                ..Default::default()
            })
        };
        let e = cycle(&["Queue"]).err().unwrap();
        assert_eq!(
            e.message,
            "'p2 :: Queue' pull output 0 connected to 'p2 :: Queue' push input 0"
        );
        assert_eq!(e.landmark.unwrap().line, 2);
        // As Click: the Null before the Queue turns pull.
        let e = cycle(&["Null", "SimpleQueue", "PushNull"]).err().unwrap();
        assert_eq!(
            e.message,
            "'p2 :: Null' pull output 0 connected to 'p3 :: SimpleQueue' push input 0"
        );
        let e = cycle(&["Null", "PullNull"]).err().unwrap();
        assert_eq!(
            e.message,
            "'p2 :: Null' output 0 leads back to its input through pass-through elements only, where packets would circle for ever"
        );
        // Any element after the queue: Click turns the agnostic Counter pull.
        let e = cycle(&["Queue", "Counter"]).err().unwrap();
        assert_eq!(
            e.message,
            "'p3 :: Counter' pull output 0 connected to 'p2 :: Queue' push input 0"
        );
        assert_eq!(e.landmark.unwrap().line, 3);
        // A cycle of ordinary elements is the configuration's business, as in Click.
        assert!(cycle(&["Counter", "Null"]).is_ok());
        let flat = FlatConfig {
            elements: vec![
                el("s", "TestSource", "1", 1),
                el("q", "Queue", "", 2),
                el("d", "Discard", "", 3),
            ],
            connections: vec![conn(0, 0, 1, 0), conn(1, 0, 2, 0)],
            ..Default::default()
        };
        assert!(build(&flat).is_ok());
    }

    #[test]
    fn configuration_errors_name_the_element() {
        let flat = FlatConfig {
            elements: vec![el("s", "TestSource", "x", 4), el("d", "Discard", "", 5)],
            connections: vec![conn(0, 0, 1, 0)],
            ..Default::default()
        };
        let e = build(&flat).err().unwrap();
        assert_eq!(e.message, "s :: TestSource: N expects unsigned integer");
        assert_eq!(e.landmark.unwrap().line, 4);
    }

    #[test]
    fn batches_run_to_completion_through_a_split() {
        // s -> x; x[0] -> even; x[1] -> odd: counts, order and handlers.
        let log: Arc<std::sync::Mutex<Vec<u8>>> = Default::default();
        let flat = FlatConfig {
            elements: vec![
                el("s", "TestSource", "10", 1),
                el("x", "Split", "", 2),
                el("even", "Discard", "", 3),
                el("odd", "Discard", "", 4),
            ],
            connections: vec![conn(0, 0, 1, 0), conn(1, 0, 2, 0), conn(1, 1, 3, 0)],
            ..Default::default()
        };
        let r = RouterSpec::build(&flat, &registry(log.clone()), Path::new("."), 1).unwrap();
        let mut g = r.instantiate(WorkerInfo { index: 0, count: 1 });
        let mut total = 0;
        let mut passes = 0;
        loop {
            let rr = g.run_sources();
            total += rr.packets;
            passes += 1;
            if rr.all_done {
                break;
            }
        }
        assert_eq!(total, 10);
        assert_eq!(passes, 3);
        assert_eq!(*log.lock().unwrap(), (0..10).collect::<Vec<u8>>());
        assert_eq!(r.read_handler("even.count").unwrap(), "5");
        assert_eq!(r.read_handler("odd.count").unwrap(), "5");
        assert_eq!(r.read_handler("odd.class").unwrap(), "Discard");
        assert_eq!(r.read_handler("odd.nope").unwrap_err(), "no 'odd.nope' handler");
        assert_eq!(
            r.read_handler("odd.reset_counts").unwrap_err(),
            "'odd.reset_counts' is a write handler"
        );
        assert_eq!(r.read_handler("zz.count").unwrap_err(), "no element 'zz'");
        r.write_handler("odd.reset_counts", "").unwrap();
        assert_eq!(r.read_handler("odd.count").unwrap(), "0");
    }

    #[test]
    fn a_batch_passed_whole_to_a_later_output_reaches_that_outputs_element() {
        // s -> p; p[0] -> zero; p[1] -> one; p[2] -> two, with p passing to output 1.
        let flat = FlatConfig {
            elements: vec![
                el("s", "TestSource", "10", 1),
                el("p", "PassTo", "1", 2),
                el("zero", "Discard", "", 3),
                el("one", "Discard", "", 4),
                el("two", "Discard", "", 5),
            ],
            connections: vec![
                conn(0, 0, 1, 0),
                conn(1, 0, 2, 0),
                conn(1, 1, 3, 0),
                conn(1, 2, 4, 0),
            ],
            ..Default::default()
        };
        let r = build(&flat).unwrap();
        let mut g = r.instantiate(WorkerInfo { index: 0, count: 1 });
        while !g.run_sources().all_done {}
        assert_eq!(r.read_handler("zero.count").unwrap(), "0");
        assert_eq!(r.read_handler("one.count").unwrap(), "10");
        assert_eq!(r.read_handler("two.count").unwrap(), "0");
    }

    #[test]
    fn profiling_counts_each_elements_calls_and_packets_and_is_off_by_default() {
        // TestSource emits its 12 packets four at a run, then finishes.
        let flat = FlatConfig {
            elements: vec![
                el("s", "TestSource", "12", 1),
                el("c", "Counter", "", 2),
                el("d", "Discard", "", 3),
            ],
            connections: vec![conn(0, 0, 1, 0), conn(1, 0, 2, 0)],
            ..Default::default()
        };
        let r = RouterSpec::build(&flat, &registry(Default::default()), Path::new("."), 1).unwrap();
        let run_all = |g: &mut GraphInstance| {
            let mut passes = 0;
            while !g.run_sources().all_done {
                passes += 1;
                assert!(passes < 100, "the source never finished");
            }
            passes + 1
        };
        let mut g = r.instantiate(WorkerInfo { index: 0, count: 1 });
        run_all(&mut g);
        assert!(g.profile().iter().all(|p| *p == ElementProfile::default()));

        let mut g = r.instantiate(WorkerInfo { index: 0, count: 1 });
        g.set_profiling(true);
        let passes = run_all(&mut g);
        let p = g.profile();
        assert_eq!((p[0].calls, p[0].packets), (passes as u64, 0));
        assert_eq!((p[1].calls, p[1].packets), (3, 12));
        assert_eq!((p[2].calls, p[2].packets), (3, 12));
        assert!(p.iter().all(|e| e.cycles > 0));
        assert_eq!(r.read_handler("c.count").unwrap(), "24");
    }

    #[test]
    fn a_source_idle_until_a_time_is_skipped_only_in_busy_passes_before_it() {
        let runs: Arc<std::sync::atomic::AtomicUsize> = Default::default();
        let graph = |n: usize| {
            let flat = FlatConfig {
                elements: vec![
                    el("s", "TestSource", &n.to_string(), 1),
                    el("w", "Waiter", "", 2),
                    el("d", "Discard", "", 3),
                    el("d2", "Discard", "", 4),
                ],
                connections: vec![conn(0, 0, 2, 0), conn(1, 0, 3, 0)],
                ..Default::default()
            };
            let mut reg = registry(Default::default());
            reg.add(Arc::new(WaiterClass(runs.clone())));
            RouterSpec::build(&flat, &reg, Path::new("."), 1).unwrap()
        };
        let runs_now = || runs.load(std::sync::atomic::Ordering::Relaxed);
        let r = graph(12);
        let mut g = r.instantiate(WorkerInfo { index: 0, count: 1 });
        // TSC 100: both run; the waiter has nothing to do before 600.
        assert_eq!(g.run_sources_at(100).packets, 4);
        assert_eq!(runs_now(), 1);
        // 200: the source is busy, the waiter's time has not come: skipped.
        assert_eq!(g.run_sources_at(200).packets, 4);
        assert_eq!(runs_now(), 1);
        // 600: its time: run (next: 1100). The source emits its last packets.
        assert_eq!(g.run_sources_at(600).packets, 4);
        assert_eq!(runs_now(), 2);
        // 700: nothing moved, so the waiter runs although its time has not come.
        assert_eq!(g.run_sources_at(700).packets, 0);
        assert_eq!(runs_now(), 3);

        // A pass that sees a stop request runs every source; so does an untimed pass.
        runs.store(0, std::sync::atomic::Ordering::Relaxed);
        let r = graph(100);
        let mut g = r.instantiate(WorkerInfo { index: 0, count: 1 });
        g.run_sources_at(100);
        g.run_sources_at(200);
        assert_eq!(runs_now(), 1);
        g.run_sources();
        assert_eq!(runs_now(), 2);
        r.stop_flag().request();
        assert_eq!(g.run_sources_at(300).packets, 4);
        assert_eq!(runs_now(), 3);
    }

    #[test]
    fn reentrant_push_through_a_cycle_delivers_every_packet() {
        // s -> x; x[0] -> d; x[1] -> y :: Split(INC true); y[0] -> [1]x; y[1] -> never.
        // Odd bytes leave x, become even in y and enter x again. (x[1] is x's last
        // output, followed after x's dispatch has ended: x is no longer `busy`, so this
        // path does not reach `push_reentrant`.)
        let flat = FlatConfig {
            elements: vec![
                el("s", "TestSource", "6", 1),
                el("x", "Split", "", 2),
                el("y", "Split", "INC true", 3),
                el("d", "Discard", "", 4),
                el("never", "Discard", "", 5),
            ],
            connections: vec![
                conn(0, 0, 1, 0),
                conn(1, 0, 3, 0),
                conn(1, 1, 2, 0),
                conn(2, 0, 1, 1),
                conn(2, 1, 4, 0),
            ],
            ..Default::default()
        };
        let (r, log) = run_logged(&flat);
        assert_eq!(r.read_handler("d.count").unwrap(), "6");
        assert_eq!(r.read_handler("never.count").unwrap(), "0");
        // x saw 0..6 (first batch 0..4, then 4,5), y saw the odd ones, x saw them again +1.
        assert_eq!(log, vec![0, 1, 2, 3, 1, 3, 2, 4, 4, 5, 5, 6]);
    }

    #[test]
    fn push_into_an_element_still_dispatching_its_outputs_loses_nothing() {
        // s -> x; x[0] -> a :: AddOne -> [1]x; x[1] -> d. Even bytes leave x on output 0,
        // which is dispatched while x still holds its odd bytes on output 1; they come
        // back odd into x, which is then `busy`: the path through `push_reentrant`.
        let flat = FlatConfig {
            elements: vec![
                el("s", "TestSource", "6", 1),
                el("x", "Split", "", 2),
                el("a", "AddOne", "", 3),
                el("d", "Discard", "", 4),
            ],
            connections: vec![
                conn(0, 0, 1, 0),
                conn(1, 0, 2, 0),
                conn(2, 0, 1, 1),
                conn(1, 1, 3, 0),
            ],
            ..Default::default()
        };
        let (r, log) = run_logged(&flat);
        // All six reach d: the odd ones, and the even ones made odd by a.
        assert_eq!(r.read_handler("d.count").unwrap(), "6");
        // Batch 0..4: x sees 0-3, then 0 and 2 come back as 1 and 3 before x's own odd
        // ones (1, 3) leave; batch 4, 5: 4 comes back as 5.
        assert_eq!(log, vec![0, 1, 2, 3, 1, 3, 4, 5, 5]);
    }

    #[test]
    fn null_elements_are_skipped_and_lose_nothing() {
        // s -> n1 :: Null -> q :: Queue -> n2 :: PushNull -> d
        let flat = FlatConfig {
            elements: vec![
                el("s", "TestSource", "9", 1),
                el("n1", "Null", "", 2),
                el("q", "Queue", "", 3),
                el("n2", "PushNull", "", 4),
                el("d", "Discard", "", 5),
            ],
            connections: vec![
                conn(0, 0, 1, 0),
                conn(1, 0, 2, 0),
                conn(2, 0, 3, 0),
                conn(3, 0, 4, 0),
            ],
            ..Default::default()
        };
        let r = build(&flat).unwrap();
        let mut g = r.instantiate(WorkerInfo { index: 0, count: 1 });
        assert_eq!(g.nodes[0].dest, vec![(4, 0)]);
        // The dispatch loop follows output 0 through `next0`.
        assert_eq!(g.nodes[0].next0, (4, 0));
        while !g.run_sources().all_done {}
        assert_eq!(r.read_handler("d.count").unwrap(), "9");
    }

    #[test]
    fn pass_through_queues_are_skipped_not_lost() {
        // s -> q1 :: Queue -> q2 :: Queue -> d.
        let flat = FlatConfig {
            elements: vec![
                el("s", "TestSource", "10", 1),
                el("q1", "Queue", "", 2),
                el("q2", "Queue", "5", 3),
                el("d", "Discard", "", 4),
            ],
            connections: vec![conn(0, 0, 1, 0), conn(1, 0, 2, 0), conn(2, 0, 3, 0)],
            ..Default::default()
        };
        let r = build(&flat).unwrap();
        let mut g = r.instantiate(WorkerInfo { index: 0, count: 1 });
        // The source feeds the Discard directly.
        assert_eq!(g.nodes[0].dest, vec![(3, 0)]);
        assert_eq!(g.nodes[0].next0, (3, 0));
        while !g.run_sources().all_done {}
        assert_eq!(r.read_handler("d.count").unwrap(), "10");
        assert_eq!(r.read_handler("q2.capacity").unwrap(), "5");
        assert_eq!(r.read_handler("q1.length").unwrap(), "0");
        // Pushing into a skipped queue directly still works.
        let mut b: PacketBatch = vec![Packet::from_slice(&[1])].into_iter().collect();
        g.push(1, 0, &mut b);
        assert_eq!(r.read_handler("d.count").unwrap(), "11");
    }

    #[test]
    fn ports_lists_every_port_with_its_connections_as_click_does() {
        // a -> [0]x; b -> [0]x; c -> [1]x; x[0] -> d0; x[1] -> d1, with b's connection
        // given before a's: an input lists its sources in configuration order.
        let flat = FlatConfig {
            elements: vec![
                el("a", "TestSource", "1", 1),
                el("b", "TestSource", "1", 2),
                el("c", "TestSource", "1", 3),
                el("x", "Split", "", 4),
                el("d0", "Discard", "", 5),
                el("d1", "Discard", "", 6),
            ],
            connections: vec![
                conn(1, 0, 3, 0),
                conn(0, 0, 3, 0),
                conn(2, 0, 3, 1),
                conn(3, 0, 4, 0),
                conn(3, 1, 5, 0),
            ],
            ..Default::default()
        };
        let r = build(&flat).unwrap();
        assert_eq!(
            r.read_handler("x.ports").unwrap(),
            "2 inputs\npush\t-\ta [0], b [0]\npush\t-\tc [0]\n2 outputs\npush\t-\t[0] d0\npush\t-\t[0] d1\n"
        );
        assert_eq!(
            r.read_handler("a.ports").unwrap(),
            "0 inputs\n1 output\npush\t-\t[0] x\n"
        );
        assert_eq!(
            r.read_handler("d1.ports").unwrap(),
            "1 input\npush\t-\tx [1]\n0 outputs\n"
        );
        // A queue the workers skip still reports the connections of the configuration.
        let flat = FlatConfig {
            elements: vec![
                el("s", "TestSource", "1", 1),
                el("q", "Queue", "", 2),
                el("d", "Discard", "", 3),
            ],
            connections: vec![conn(0, 0, 1, 0), conn(1, 0, 2, 0)],
            ..Default::default()
        };
        let r = build(&flat).unwrap();
        assert_eq!(
            r.read_handler("q.ports").unwrap(),
            "1 input\npush\t-\ts [0]\n1 output\npush\t-\t[0] d\n"
        );
        assert_eq!(
            r.read_handler("d.ports").unwrap(),
            "1 input\npush\t-\tq [0]\n0 outputs\n"
        );
    }

    #[test]
    fn a_parameter_given_to_a_read_handler_without_one_is_refused_in_clicks_words() {
        let flat = FlatConfig {
            elements: vec![
                el("s", "TestSource", "1", 1),
                el("p", "Paint", "3", 2),
                el("d", "Discard", "", 3),
            ],
            connections: vec![conn(0, 0, 1, 0), conn(1, 0, 2, 0)],
            ..Default::default()
        };
        let r = build(&flat).unwrap();
        assert_eq!(
            r.read_handler("p.color 5").unwrap_err(),
            "read handler 'p.color' does not take parameters"
        );
        assert_eq!(
            r.read_handler("p.class x").unwrap_err(),
            "read handler 'p.class' does not take parameters"
        );
        // Handlers that cannot be read at all say so first.
        assert_eq!(r.read_handler("p.nope 5").unwrap_err(), "no 'p.nope' handler");
        assert_eq!(
            r.read_handler("d.reset_counts 1").unwrap_err(),
            "'d.reset_counts' is a write handler"
        );
        // White space alone is no parameter.
        assert_eq!(r.read_handler("p.color  ").unwrap(), "3");
    }

    #[test]
    fn writing_a_reconfiguring_handler_rewrites_config_as_click_does() {
        let router = |class: &str, config: &str| {
            let flat = FlatConfig {
                elements: vec![
                    el("s", "TestSource", "1", 1),
                    el("e", class, config, 2),
                    el("d", "Discard", "", 3),
                ],
                connections: vec![conn(0, 0, 1, 0), conn(1, 0, 2, 0)],
                ..Default::default()
            };
            build(&flat).unwrap()
        };
        let config_after = |class: &str, config: &str, handler: &str, value: &str| {
            let r = router(class, config);
            r.write_handler(&format!("e.{}", handler), value).unwrap();
            r.read_handler("e.config").unwrap()
        };
        // A positional argument is replaced where it stands.
        let r = router("Queue", "5");
        r.write_handler("e.capacity", "50").unwrap();
        assert_eq!(r.read_handler("e.capacity").unwrap(), "50");
        assert_eq!(r.read_handler("e.config").unwrap(), "50");
        // A refused value changes neither.
        assert_eq!(
            r.write_handler("e.capacity", "lots").unwrap_err(),
            "CAPACITY expects unsigned integer"
        );
        assert_eq!(r.read_handler("e.config").unwrap(), "50");
        // Not given: appended by keyword. Given by keyword: every occurrence removed,
        // the new one appended.
        assert_eq!(config_after("Queue", "", "capacity", "7"), "CAPACITY 7");
        assert_eq!(
            config_after("SimpleQueue", "CAPACITY 5, CAPACITY 6", "capacity", " 7\n"),
            "CAPACITY 7"
        );
        assert_eq!(
            config_after(
                "EtherRewrite",
                "SRC 00:00:00:00:00:01, DST 00:00:00:00:00:02",
                "src",
                "0:0:0:0:0:3"
            ),
            "DST 00:00:00:00:00:02, SRC 0:0:0:0:0:3"
        );
        // EtherRewrite's arguments by position, each handler its own.
        assert_eq!(
            config_after(
                "EtherRewrite",
                "00:00:00:00:00:01, /* to */ 00:00:00:00:00:02",
                "src",
                "0:0:0:0:0:3"
            ),
            "0:0:0:0:0:3, 00:00:00:00:00:02"
        );
        assert_eq!(
            config_after(
                "EtherRewrite",
                "00:00:00:00:00:01, 00:00:00:00:00:02",
                "dst",
                "0:0:0:0:0:3"
            ),
            "00:00:00:00:00:01, 0:0:0:0:0:3"
        );
        // EtherEncap: both type handlers reconfigure ETHERTYPE; a keyword argument
        // stands in for the positional one.
        let encap = "0x0800, 00:00:00:00:00:01, DST 00:00:00:00:00:02";
        assert_eq!(
            config_after("EtherEncap", encap, "etht", "0x86DD"),
            "0x86DD, 00:00:00:00:00:01, DST 00:00:00:00:00:02"
        );
        assert_eq!(
            config_after("EtherEncap", encap, "ethertype", "0x0806"),
            "0x0806, 00:00:00:00:00:01, DST 00:00:00:00:00:02"
        );
        assert_eq!(
            config_after("EtherEncap", encap, "src", "0:0:0:0:0:3"),
            "0x0800, 0:0:0:0:0:3, DST 00:00:00:00:00:02"
        );
        assert_eq!(
            config_after("EtherEncap", encap, "dst", "0:0:0:0:0:3"),
            "0x0800, 00:00:00:00:00:01, DST 0:0:0:0:0:3"
        );
        // A handler that is no reconfiguring one leaves config alone (Click's Paint
        // writes its color as data).
        assert_eq!(config_after("Paint", "3", "color", "5"), "3");
    }

    #[test]
    fn a_replacing_configuration_takes_state_by_name_and_class() {
        let build = |text: &str| crate::testing::router(text).unwrap();
        let old = build(
            "Idle -> q :: ARPQuerier(10.0.0.1/24, 02:00:00:00:00:01) -> Discard; Idle -> [1]q;
             Idle -> p :: ARPQuerier(10.0.0.1/24, 02:00:00:00:00:01) -> Discard; Idle -> [1]p;
             Idle -> c :: Counter -> Discard;",
        );
        old.write_handler("q.insert", "10.0.0.2 02:00:00:00:00:02")
            .unwrap();
        old.write_handler("p.insert", "10.0.0.2 02:00:00:00:00:02")
            .unwrap();
        // q as it was; p now another class; s a new name; c a Counter (no state).
        let new = build(
            "Idle -> q :: ARPQuerier(10.0.0.1/24, 02:00:00:00:00:01) -> Discard; Idle -> [1]q;
             Idle -> p :: IP6NDSolicitor(2001:db8::1, 02:00:00:00:00:01) -> Discard; Idle -> [1]p;
             Idle -> s :: ARPQuerier(10.0.0.1/24, 02:00:00:00:00:01) -> Discard; Idle -> [1]s;
             Idle -> c :: Counter -> Discard;",
        );
        assert_eq!(new.take_state(&old), vec!["q :: ARPQuerier".to_string()]);
        assert_eq!(new.read_handler("q.count").unwrap(), "1");
        assert_eq!(new.read_handler("p.count").unwrap(), "0");
        assert_eq!(new.read_handler("s.count").unwrap(), "0");
    }

    #[test]
    fn flatconfig_writes_the_expanded_router_which_reads_back_the_same() {
        let build = |text: &str| crate::testing::router(text).unwrap();
        let r = build(
            "elementclass Foo { input -> Counter -> output }
             InfiniteSource(LIMIT 1) -> f :: Foo -> c :: Classifier(12/0800, -);
             c[0] -> Discard; c[1] -> Discard;",
        );
        let flat = r.read_global_handler("flatconfig").unwrap();
        assert_eq!(
            flat,
            "InfiniteSource@1 :: InfiniteSource(LIMIT 1);\n\
             c :: Classifier(12/0800, -);\n\
             Discard@4 :: Discard;\n\
             Discard@5 :: Discard;\n\
             f/Counter@1 :: Counter;\n\
             \n\
             InfiniteSource@1 [0] -> [0] f/Counter@1;\n\
             c [0] -> [0] Discard@4;\n\
             c [1] -> [0] Discard@5;\n\
             f/Counter@1 [0] -> [0] c;\n"
        );
        let again = build(&flat);
        assert_eq!(again.read_global_handler("list"), r.read_global_handler("list"));
        for name in r.element_names() {
            let ports = format!("{name}.ports");
            assert_eq!(again.read_handler(&ports), r.read_handler(&ports), "{name}");
        }
        assert_eq!(again.read_global_handler("flatconfig").unwrap(), flat);
        assert_eq!(r.read_global_handler("driver").unwrap(), "userlevel");
    }
}
