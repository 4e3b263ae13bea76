//! Compound expansion and tunnel resolution (after Click's `Lexer::create_router`):
//! every compound element becomes its components named `compound/component`, with
//! `$variables` substituted, and connections through compound and group ports are
//! joined into connections between primitive elements.

use super::parser::{deanonymize, redeclaration, Body, ClassRef, CompoundDef, Kind, NamedMut, Tunnel};
use super::vars::{assign_arguments, expand, Env};
use super::{Connection, ElementDecl, FlatConfig};
use crate::args::split_args;
use crate::error::{ConfigError, Landmark};
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

/// Most elements (including compound and tunnel placeholders) an expansion may make.
const MAX_ELEMENTS: usize = 200_000;
/// Most connections between primitive elements a configuration may make.
const MAX_CONNECTIONS: usize = 1_000_000;

#[derive(Clone)]
enum NodeKind {
    Real(String),
    Compound(Rc<CompoundDef>),
    Outer { input: usize, output: usize },
    In { outer: usize },
    Out { outer: usize },
}

struct Node {
    name: String,
    kind: NodeKind,
    config: String,
    landmark: Landmark,
    class_landmark: Landmark,
    nports: [usize; 2],
    group: bool,
}

impl NamedMut for Node {
    fn name_mut(&mut self) -> &mut String {
        &mut self.name
    }
}

struct Conn {
    from: usize,
    from_port: usize,
    to: usize,
    to_port: usize,
    landmark: Landmark,
}

struct Flattener {
    nodes: Vec<Node>,
    map: HashMap<String, usize>,
    conns: Vec<Conn>,
}

enum Resolved {
    Primitive(String),
    Compound(Rc<CompoundDef>, Vec<String>),
}

/// Chooses the overload of `first` that fits the ports used and the arguments.
fn resolve(
    first: &Rc<CompoundDef>,
    nports: [usize; 2],
    args: &[String],
    landmark: &Landmark,
) -> Result<Resolved, ConfigError> {
    let mut ct = first.clone();
    let mut closest = None;
    let mut count = 0;
    loop {
        count += 1;
        let fits = assign_arguments(args, &ct.formal_types());
        if let Some(values) = fits {
            if ct.ninputs == nports[0] && ct.noutputs == nports[1] {
                return Ok(Resolved::Compound(ct, values));
            }
            closest = Some((ct.clone(), values));
        }
        match ct.overload.clone() {
            Some(ClassRef::Compound(next)) => ct = next,
            Some(ClassRef::Primitive(name)) => return Ok(Resolved::Primitive(name)),
            None => break,
        }
    }
    match closest {
        Some((c, values)) if count == 1 => Ok(Resolved::Compound(c, values)),
        _ => {
            let mut candidates = Vec::new();
            let mut c = Some(first.clone());
            while let Some(def) = c {
                candidates.push(format!("{} (at {})", def.signature(), def.landmark));
                c = match &def.overload {
                    Some(ClassRef::Compound(next)) => Some(next.clone()),
                    _ => None,
                };
            }
            let sig = CompoundDef::use_signature(&first.name, args.len(), nports[0], nports[1]);
            Err(ConfigError::at(landmark, format!("no match for '{}'", sig))
                .with_hint(format!("candidates are: {}", candidates.join(", "))))
        }
    }
}

impl Flattener {
    fn add_node(&mut self, node: Node, at: &Landmark) -> Result<usize, ConfigError> {
        if let Some(&old) = self.map.get(&node.name) {
            return Err(redeclaration(at, &node.name, &self.nodes[old].landmark));
        }
        if self.nodes.len() >= MAX_ELEMENTS {
            return Err(ConfigError::at(
                at,
                format!(
                    "too many elements after compound expansion (more than {})",
                    MAX_ELEMENTS
                ),
            ));
        }
        let i = self.nodes.len();
        self.map.insert(node.name.clone(), i);
        self.nodes.push(node);
        Ok(i)
    }

    /// Replaces compound element `which` by the components of `def`; returns the new
    /// elements that may need expansion themselves.
    fn expand_into(&mut self, which: usize, def: &CompoundDef) -> Result<Vec<usize>, ConfigError> {
        let ename = self.nodes[which].name.clone();
        let lm = self.nodes[which].landmark.clone();
        let body: &Body = &def.body;
        let mut idx = Vec::with_capacity(body.elements.len());
        let mut fresh = Vec::new();
        for (i, e) in body.elements.iter().enumerate() {
            let (name, kind, group) = match i {
                0 => (format!("{}/input", ename), NodeKind::In { outer: which }, false),
                1 => (format!("{}/output", ename), NodeKind::Out { outer: which }, false),
                _ => {
                    let kind = match &e.kind {
                        Kind::Class(ClassRef::Primitive(p)) => NodeKind::Real(p.clone()),
                        Kind::Class(ClassRef::Compound(c)) => NodeKind::Compound(c.clone()),
                        // patched below, once every index is known
                        Kind::Tunnel(Tunnel::Outer { .. }) => NodeKind::Outer { input: 0, output: 0 },
                        Kind::Tunnel(Tunnel::Input { outer }) => NodeKind::In {
                            outer: outer.map_or(which, |o| idx[o]),
                        },
                        Kind::Tunnel(Tunnel::Output { outer }) => NodeKind::Out {
                            outer: outer.map_or(which, |o| idx[o]),
                        },
                    };
                    let group = matches!(e.kind, Kind::Tunnel(_));
                    (format!("{}/{}", ename, e.name), kind, group)
                }
            };
            let (landmark, class_landmark) = if i < 2 {
                (lm.clone(), lm.clone())
            } else {
                (e.landmark.clone(), e.class_landmark.clone())
            };
            let real = matches!(kind, NodeKind::Real(_) | NodeKind::Compound(_));
            let n = self.add_node(
                Node {
                    name,
                    kind,
                    config: e.config.clone(),
                    landmark,
                    class_landmark,
                    nports: e.nports,
                    group,
                },
                &lm,
            )?;
            idx.push(n);
            if real {
                fresh.push(n);
            }
        }
        for (i, e) in body.elements.iter().enumerate() {
            if let Kind::Tunnel(Tunnel::Outer { input, output }) = e.kind {
                self.nodes[idx[i]].kind = NodeKind::Outer {
                    input: idx[input],
                    output: idx[output],
                };
            }
        }
        self.nodes[which].kind = NodeKind::Outer {
            input: idx[0],
            output: idx[1],
        };
        for c in &body.conns {
            self.conns.push(Conn {
                from: idx[c.from],
                from_port: c.from_port,
                to: idx[c.to],
                to_port: c.to_port,
                landmark: c.landmark.clone(),
            });
        }
        Ok(fresh)
    }

    fn display_name(&self, i: usize) -> &str {
        if self.nodes[i].group {
            "<anonymous group>"
        } else {
            &self.nodes[i].name
        }
    }

    /// Click's errors for connections that end in a tunnel leading nowhere.
    fn check_tunnels(
        &self,
        from_index: &HashMap<(usize, usize), Vec<usize>>,
        to_index: &HashMap<(usize, usize), Vec<usize>>,
    ) -> Result<(), ConfigError> {
        let has =
            |index: &HashMap<(usize, usize), Vec<usize>>, n: usize, p: usize| index.contains_key(&(n, p));
        for c in &self.conns {
            let (f, fp) = (c.from, c.from_port);
            match self.nodes[f].kind {
                NodeKind::Out { .. } => {
                    return Err(ConfigError::at(
                        &self.nodes[f].landmark,
                        format!("'{}' used as output", self.nodes[f].name),
                    ));
                }
                NodeKind::In { outer } if !has(to_index, outer, fp) => {
                    return Err(ConfigError::at(
                        &self.nodes[outer].landmark,
                        format!("'{}' input {} unused", self.display_name(outer), fp),
                    ));
                }
                NodeKind::Outer { output, .. } if !has(to_index, output, fp) => {
                    return Err(ConfigError::at(
                        &self.nodes[f].landmark,
                        format!("'{}' has no output {}", self.display_name(f), fp),
                    ));
                }
                _ => {}
            }
            let (t, tp) = (c.to, c.to_port);
            match self.nodes[t].kind {
                NodeKind::In { .. } => {
                    return Err(ConfigError::at(
                        &self.nodes[t].landmark,
                        format!("'{}' used as input", self.nodes[t].name),
                    ));
                }
                NodeKind::Out { outer } if !has(from_index, outer, tp) => {
                    return Err(ConfigError::at(
                        &self.nodes[outer].landmark,
                        format!("'{}' output {} unused", self.display_name(outer), tp),
                    ));
                }
                NodeKind::Outer { input, .. } if !has(from_index, input, tp) => {
                    return Err(ConfigError::at(
                        &self.nodes[t].landmark,
                        format!("'{}' has no input {}", self.display_name(t), tp),
                    ));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Primitive input ports reached from input port `port` of `node` through tunnels.
    fn reach(
        &self,
        node: usize,
        port: usize,
        from_index: &HashMap<(usize, usize), Vec<usize>>,
        out: &mut Vec<(usize, usize)>,
    ) {
        let mut stack = vec![(node, port)];
        let mut seen = HashSet::new();
        while let Some((n, p)) = stack.pop() {
            if !seen.insert((n, p)) {
                continue;
            }
            let next = match self.nodes[n].kind {
                NodeKind::Real(_) => {
                    out.push((n, p));
                    continue;
                }
                NodeKind::Outer { input, .. } => input,
                NodeKind::Out { outer } => outer,
                NodeKind::In { .. } | NodeKind::Compound(_) => continue,
            };
            if let Some(cs) = from_index.get(&(next, p)) {
                for &c in cs.iter().rev() {
                    stack.push((self.conns[c].to, self.conns[c].to_port));
                }
            }
        }
    }
}

pub(crate) fn flatten(
    top: Body,
    defines: &HashMap<String, String>,
    requirements: Vec<String>,
) -> Result<FlatConfig, ConfigError> {
    let mut env = Env {
        vars: top.vars.clone(),
        depth: 0,
        parent: None,
    };
    let mut names: Vec<&String> = defines.keys().collect();
    names.sort();
    for name in names {
        env.set(name, defines[name].clone());
    }
    let top_env = Rc::new(env);

    let mut f = Flattener {
        nodes: Vec::with_capacity(top.elements.len()),
        map: top.map,
        conns: top
            .conns
            .into_iter()
            .map(|c| Conn {
                from: c.from,
                from_port: c.from_port,
                to: c.to,
                to_port: c.to_port,
                landmark: c.landmark,
            })
            .collect(),
    };
    for e in top.elements {
        let (kind, group) = match e.kind {
            Kind::Class(ClassRef::Primitive(p)) => (NodeKind::Real(p), false),
            Kind::Class(ClassRef::Compound(c)) => (NodeKind::Compound(c), false),
            Kind::Tunnel(Tunnel::Outer { input, output }) => (NodeKind::Outer { input, output }, true),
            Kind::Tunnel(Tunnel::Input { outer }) => (
                NodeKind::In {
                    outer: outer.unwrap_or(0),
                },
                true,
            ),
            Kind::Tunnel(Tunnel::Output { outer }) => (
                NodeKind::Out {
                    outer: outer.unwrap_or(0),
                },
                true,
            ),
        };
        f.nodes.push(Node {
            name: e.name,
            kind,
            config: e.config,
            landmark: e.landmark,
            class_landmark: e.class_landmark,
            nports: e.nports,
            group,
        });
    }
    for i in 0..f.nodes.len() {
        deanonymize(&mut f.nodes, &mut f.map, i);
    }

    // Expand compounds depth-first, in Click's element order.
    let mut stack: Vec<(usize, Rc<Env>)> = (0..f.nodes.len()).rev().map(|i| (i, top_env.clone())).collect();
    while let Some((i, env)) = stack.pop() {
        let kind = f.nodes[i].kind.clone();
        match kind {
            NodeKind::Real(_) => f.nodes[i].config = expand(&f.nodes[i].config, &env),
            NodeKind::Compound(def) => {
                let config = expand(&f.nodes[i].config, &env);
                f.nodes[i].config = config.clone();
                let args = split_args(&config);
                match resolve(&def, f.nodes[i].nports, &args, &f.nodes[i].landmark)? {
                    Resolved::Primitive(name) => f.nodes[i].kind = NodeKind::Real(name),
                    Resolved::Compound(found, values) => {
                        let depth = found.body.depth;
                        let mut scope = Env {
                            vars: Vec::new(),
                            depth,
                            parent: Env::parent_of(&env, depth),
                        };
                        let nformals = found.body.nformals;
                        for ((name, _), value) in found.body.vars[..nformals].iter().zip(values) {
                            scope.set(name, value);
                        }
                        for (name, value) in &found.body.vars[nformals..] {
                            let v = expand(value, &scope);
                            scope.set(name, v);
                        }
                        let scope = Rc::new(scope);
                        let fresh = f.expand_into(i, &found)?;
                        stack.extend(fresh.into_iter().rev().map(|n| (n, scope.clone())));
                    }
                }
            }
            _ => {}
        }
    }

    let mut from_index: HashMap<(usize, usize), Vec<usize>> = HashMap::new();
    let mut to_index: HashMap<(usize, usize), Vec<usize>> = HashMap::new();
    for (k, c) in f.conns.iter().enumerate() {
        from_index.entry((c.from, c.from_port)).or_default().push(k);
        to_index.entry((c.to, c.to_port)).or_default().push(k);
    }
    f.check_tunnels(&from_index, &to_index)?;

    let mut out_index = vec![usize::MAX; f.nodes.len()];
    let mut elements = Vec::new();
    for (i, n) in f.nodes.iter().enumerate() {
        if let NodeKind::Real(class) = &n.kind {
            out_index[i] = elements.len();
            elements.push(ElementDecl {
                name: n.name.clone(),
                class: class.clone(),
                config: n.config.clone(),
                landmark: n.landmark.clone(),
                class_landmark: n.class_landmark.clone(),
            });
        }
    }
    let mut connections: Vec<Connection> = Vec::new();
    let mut reached = Vec::new();
    for c in &f.conns {
        if !matches!(f.nodes[c.from].kind, NodeKind::Real(_)) {
            continue;
        }
        reached.clear();
        f.reach(c.to, c.to_port, &from_index, &mut reached);
        for &(t, tp) in &reached {
            connections.push(Connection {
                from: out_index[c.from],
                from_port: c.from_port,
                to: out_index[t],
                to_port: tp,
                landmark: c.landmark.clone(),
            });
        }
        if connections.len() > MAX_CONNECTIONS {
            return Err(ConfigError::at(
                &c.landmark,
                format!(
                    "too many connections after compound expansion (more than {})",
                    MAX_CONNECTIONS
                ),
            ));
        }
    }
    connections.sort_by_key(|c| (c.from, c.from_port, c.to, c.to_port));
    connections.dedup_by_key(|c| (c.from, c.from_port, c.to, c.to_port));
    Ok(FlatConfig {
        elements,
        connections,
        requirements,
    })
}
