//! Cycles a configuration must not have: ones that packets, once in, could never
//! leave, because the graph connects around the elements in them or because Click
//! refuses them.

/// A cycle [`fatal_cycle`] found.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum FatalCycle {
    /// A queue's output 0 leads back to the queue, and this connection closes the
    /// cycle: output `port` of `from` into input `input` of `queue`. In Click a queue's
    /// output is pull and its input push, and the elements after it turn pull, so the
    /// connection joins a pull output to a push input.
    IntoQueue {
        from: usize,
        port: usize,
        queue: usize,
        input: usize,
    },
    /// A cycle of pass-through elements only (no queue); `first` is its element that
    /// comes first in the configuration.
    PassThrough { first: usize },
}

/// The first fatal cycle of the graph whose element `i` sends its outputs to `dest[i]`
/// ((element, input) per output): the queues are tried in configuration order, then
/// the cycles of pass-through elements. Linear in the connections.
pub(super) fn fatal_cycle(
    dest: &[&[(usize, usize)]],
    is_queue: &dyn Fn(usize) -> bool,
    is_pass_through: &dyn Fn(usize) -> bool,
) -> Option<FatalCycle> {
    let n = dest.len();
    let comp = strong_components(dest);
    for q in (0..n).filter(|&q| is_queue(q)) {
        let Some(&(start, input)) = dest[q].first() else {
            continue;
        };
        if start == q {
            return Some(FatalCycle::IntoQueue {
                from: q,
                port: 0,
                queue: q,
                input,
            });
        }
        if comp[start] == comp[q] {
            return Some(closing_connection(dest, &comp, start, q));
        }
    }
    pass_through_ring(dest, is_pass_through).map(|first| FatalCycle::PassThrough { first })
}

/// The element that comes first in the configuration among those of the rings of
/// pass-through elements, if there are any. Such an element sends every packet out of
/// output 0, so only those links are followed; each element is walked once.
fn pass_through_ring(dest: &[&[(usize, usize)]], is_pass_through: &dyn Fn(usize) -> bool) -> Option<usize> {
    const NEW: u8 = 0;
    const ON_WALK: u8 = 1;
    const DONE: u8 = 2;
    let next = |i: usize| dest[i].first().map(|d| d.0).filter(|&d| is_pass_through(d));
    let mut state = vec![NEW; dest.len()];
    let mut found: Option<usize> = None;
    for start in (0..dest.len()).filter(|&i| is_pass_through(i)) {
        let mut walk = Vec::new();
        let mut at = Some(start);
        while let Some(v) = at.filter(|&v| state[v] == NEW) {
            state[v] = ON_WALK;
            walk.push(v);
            at = next(v);
        }
        if let Some(v) = at.filter(|&v| state[v] == ON_WALK) {
            let ring = &walk[walk.iter().position(|&w| w == v).expect("on this walk")..];
            let first = *ring.iter().min().expect("a ring has an element");
            found = Some(found.map_or(first, |f| f.min(first)));
        }
        for v in walk {
            state[v] = DONE;
        }
    }
    found
}

/// The connection into `queue` that a walk from `start` (in the queue's component)
/// reaches first, searching breadth first without going through the queue.
fn closing_connection(dest: &[&[(usize, usize)]], comp: &[usize], start: usize, queue: usize) -> FatalCycle {
    let mut seen = vec![false; dest.len()];
    let mut todo = std::collections::VecDeque::from([start]);
    seen[start] = true;
    while let Some(u) = todo.pop_front() {
        for (port, &(v, input)) in dest[u].iter().enumerate() {
            if v == queue {
                return FatalCycle::IntoQueue {
                    from: u,
                    port,
                    queue,
                    input,
                };
            }
            if comp[v] == comp[queue] && !seen[v] {
                seen[v] = true;
                todo.push_back(v);
            }
        }
    }
    unreachable!("the queue is in its own strongly connected component");
}

/// The strongly connected component of each element (Tarjan's algorithm, with an
/// explicit stack so that a configuration of any length cannot overflow the thread's).
fn strong_components(dest: &[&[(usize, usize)]]) -> Vec<usize> {
    let n = dest.len();
    let mut t = Tarjan {
        index: vec![UNSEEN; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        calls: Vec::new(),
        next_index: 0,
    };
    let mut comp = vec![UNSEEN; n];
    let mut next_comp = 0;
    for root in 0..n {
        if t.index[root] != UNSEEN {
            continue;
        }
        t.enter(root);
        while let Some(&(v, pos)) = t.calls.last() {
            if let Some(&(w, _)) = dest[v].get(pos) {
                t.calls.last_mut().expect("not empty").1 += 1;
                if t.index[w] == UNSEEN {
                    t.enter(w);
                } else if t.on_stack[w] {
                    t.low[v] = t.low[v].min(t.index[w]);
                }
                continue;
            }
            t.calls.pop();
            if let Some(&(u, _)) = t.calls.last() {
                t.low[u] = t.low[u].min(t.low[v]);
            }
            if t.low[v] == t.index[v] {
                loop {
                    let w = t.stack.pop().expect("v is on the stack");
                    t.on_stack[w] = false;
                    comp[w] = next_comp;
                    if w == v {
                        break;
                    }
                }
                next_comp += 1;
            }
        }
    }
    comp
}

const UNSEEN: usize = usize::MAX;

/// Tarjan's per-element state: visit order, lowest order reachable, and the stacks.
struct Tarjan {
    index: Vec<usize>,
    low: Vec<usize>,
    on_stack: Vec<bool>,
    stack: Vec<usize>,
    /// The depth-first walk: (element, next output to follow).
    calls: Vec<(usize, usize)>,
    next_index: usize,
}

impl Tarjan {
    fn enter(&mut self, v: usize) {
        self.index[v] = self.next_index;
        self.low[v] = self.next_index;
        self.next_index += 1;
        self.stack.push(v);
        self.on_stack[v] = true;
        self.calls.push((v, 0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find(edges: &[Vec<(usize, usize)>], queues: &[usize], through: &[usize]) -> Option<FatalCycle> {
        let dest: Vec<&[(usize, usize)]> = edges.iter().map(|e| &e[..]).collect();
        // (Queues are pass-through elements too.)
        let mut kind = vec![(false, false); edges.len()];
        for &q in queues {
            kind[q] = (true, true);
        }
        for &t in through {
            kind[t].1 = true;
        }
        fatal_cycle(&dest, &|i| kind[i].0, &|i| kind[i].1)
    }

    #[test]
    fn components_follow_every_output() {
        // 0 -> 1 -> 2 -> 1 (output 1 of 2: 2 -> 3), 3 -> 0: one component of all four.
        let edges: Vec<Vec<(usize, usize)>> =
            vec![vec![(1, 0)], vec![(2, 0)], vec![(1, 1), (3, 0)], vec![(0, 0)]];
        let dest: Vec<&[(usize, usize)]> = edges.iter().map(|e| &e[..]).collect();
        let c = strong_components(&dest);
        assert!(c.iter().all(|&x| x == c[0]), "{:?}", c);
        // Without 3 -> 0: {0}, {1, 2}, {3}.
        let edges: Vec<Vec<(usize, usize)>> = vec![vec![(1, 0)], vec![(2, 0)], vec![(1, 1), (3, 0)], vec![]];
        let dest: Vec<&[(usize, usize)]> = edges.iter().map(|e| &e[..]).collect();
        let c = strong_components(&dest);
        assert_eq!(c[1], c[2]);
        assert!(c[0] != c[1] && c[3] != c[1] && c[0] != c[3], "{:?}", c);
    }

    #[test]
    fn a_queue_whose_output_leads_back_is_fatal_whatever_is_between() {
        // 0 source -> 1 queue -> 2 counter -> 1.
        let edges = vec![vec![(1, 0)], vec![(2, 0)], vec![(1, 0)]];
        assert_eq!(
            find(&edges, &[1], &[]),
            Some(FatalCycle::IntoQueue {
                from: 2,
                port: 0,
                queue: 1,
                input: 0
            })
        );
        // The same cycle left by another output of 2 (2[1] -> 3 sink): still fatal.
        let edges = vec![vec![(1, 0)], vec![(2, 0)], vec![(3, 0), (1, 0)], vec![]];
        assert_eq!(
            find(&edges, &[1], &[]),
            Some(FatalCycle::IntoQueue {
                from: 2,
                port: 1,
                queue: 1,
                input: 0
            })
        );
        // A queue's output 1 (which never carries packets) back into it is not.
        let edges = vec![vec![(1, 0)], vec![(2, 0), (1, 0)], vec![]];
        assert_eq!(find(&edges, &[1], &[]), None);
        // A cycle of ordinary elements is the configuration's business, as in Click.
        let edges = vec![vec![(1, 0)], vec![(2, 0)], vec![(1, 0), (3, 0)], vec![]];
        assert_eq!(find(&edges, &[], &[]), None);
    }

    #[test]
    fn a_cycle_of_pass_through_elements_only_is_fatal() {
        // 0 source -> 1 null -> 2 null -> 1; and 3 null -> 3 alone.
        let edges = vec![vec![(1, 0)], vec![(2, 0)], vec![(1, 0)]];
        assert_eq!(
            find(&edges, &[], &[1, 2]),
            Some(FatalCycle::PassThrough { first: 1 })
        );
        let edges = vec![vec![(1, 0)], vec![(2, 0)], vec![], vec![(3, 0)]];
        assert_eq!(
            find(&edges, &[], &[1, 2, 3]),
            Some(FatalCycle::PassThrough { first: 3 })
        );
        // One ordinary element in the cycle: not this kind.
        let edges = vec![vec![(1, 0)], vec![(2, 0)], vec![(1, 0)]];
        assert_eq!(find(&edges, &[], &[1]), None);
    }

    #[test]
    fn long_chains_are_checked_in_linear_time_and_stack() {
        // 200,000 pass-through elements in a line, then closed into a ring.
        let n = 200_000;
        let mut edges: Vec<Vec<(usize, usize)>> = (0..n).map(|i| vec![(i + 1, 0)]).collect();
        edges.push(vec![]);
        let all: Vec<usize> = (0..=n).collect();
        assert_eq!(find(&edges, &[], &all), None);
        edges[n] = vec![(1, 0)];
        assert_eq!(
            find(&edges, &[], &all),
            Some(FatalCycle::PassThrough { first: 1 })
        );
    }
}
