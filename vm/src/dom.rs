//! Dominators of a control-flow graph given as successor lists.

/// The dominator tree of the blocks reachable from block 0, computed with
/// the Cooper-Harvey-Kennedy algorithm and numbered so that a dominance
/// query is two comparisons. Everything is iterative: no recursion depth
/// depends on the input.
pub struct DomTree {
    /// Preorder and postorder numbers in the dominator tree (`u32::MAX`
    /// for unreachable blocks).
    pre: Vec<u32>,
    post: Vec<u32>,
}

impl DomTree {
    /// The dominator tree of the graph with successor lists `succs` (block 0 the entry).
    pub fn new(succs: &[Vec<u32>]) -> DomTree {
        let n = succs.len();
        let rpo = reverse_postorder(succs);
        let mut rpo_num = vec![u32::MAX; n];
        for (i, &b) in rpo.iter().enumerate() {
            rpo_num[b as usize] = i as u32;
        }
        let mut preds = vec![Vec::new(); n];
        for &b in &rpo {
            for &s in &succs[b as usize] {
                preds[s as usize].push(b);
            }
        }
        let idom = immediate_dominators(&rpo, &rpo_num, &preds);
        let (pre, post) = tree_numbers(&idom, n);
        DomTree { pre, post }
    }

    /// Whether block `b` is reachable from the entry.
    pub fn reachable(&self, b: u32) -> bool {
        self.pre.get(b as usize).is_some_and(|&p| p != u32::MAX)
    }

    /// Block `b`'s number in a preorder walk of the dominator tree
    /// (`u32::MAX` if unreachable): a block's dominators have smaller
    /// numbers.
    pub fn preorder(&self, b: u32) -> u32 {
        self.pre.get(b as usize).copied().unwrap_or(u32::MAX)
    }

    /// Whether `a` dominates `b` (both reachable; every block dominates
    /// itself).
    pub fn dominates(&self, a: u32, b: u32) -> bool {
        if !self.reachable(a) || !self.reachable(b) {
            return false;
        }
        let (a, b) = (a as usize, b as usize);
        self.pre[a] <= self.pre[b] && self.post[b] <= self.post[a]
    }
}

/// The natural loops of a control-flow graph: for each block that is the
/// target of a back edge (an edge from a block it dominates), the blocks
/// that reach one of those edges' sources without passing through it.
pub struct Loops {
    /// The dominator tree.
    pub dom: DomTree,
    /// Each block's predecessors among the reachable blocks (in the order
    /// of the successor lists).
    pub preds: Vec<Vec<usize>>,
    /// The loops, innermost first (a loop inside another has fewer
    /// blocks).
    pub loops: Vec<Loop>,
}

/// One natural loop ([`Loops`]).
pub struct Loop {
    /// Its header.
    pub header: usize,
    /// Its blocks, in increasing order.
    pub blocks: Vec<usize>,
}

impl Loop {
    /// Whether block `b` is in the loop.
    pub fn contains(&self, b: usize) -> bool {
        self.blocks.binary_search(&b).is_ok()
    }
}

impl Loops {
    /// The natural loops of the graph with successor lists `succs` (block
    /// 0 the entry), as long as their blocks come to at most `most` in
    /// all (the loops of a huge nest would take time and memory quadratic
    /// in its size): the loops found before that are kept, the rest left
    /// out.
    pub fn new(succs: &[Vec<u32>], most: usize) -> Loops {
        let n = succs.len();
        let dom = DomTree::new(succs);
        let mut preds = vec![Vec::new(); n];
        for (b, ss) in succs.iter().enumerate() {
            if dom.reachable(b as u32) {
                for s in ss {
                    preds[*s as usize].push(b);
                }
            }
        }
        let mut loops: Vec<Loop> = Vec::new();
        // The loop (its index + 1) that last marked each block.
        let mut mark = vec![0usize; n];
        let mut total = 0usize;
        for h in 0..n {
            let latches: Vec<usize> = preds[h]
                .iter()
                .copied()
                .filter(|p| dom.dominates(h as u32, *p as u32))
                .collect();
            if latches.is_empty() {
                continue;
            }
            let stamp = loops.len() + 1;
            let mut blocks = vec![h];
            mark[h] = stamp;
            let mut work = latches;
            while let Some(b) = work.pop() {
                if mark[b] != stamp {
                    mark[b] = stamp;
                    blocks.push(b);
                    work.extend(preds[b].iter().copied());
                }
            }
            total = total.saturating_add(blocks.len());
            if total > most {
                break;
            }
            blocks.sort_unstable();
            loops.push(Loop { header: h, blocks });
        }
        loops.sort_by_key(|l| l.blocks.len());
        Loops { dom, preds, loops }
    }
}

fn reverse_postorder(succs: &[Vec<u32>]) -> Vec<u32> {
    let n = succs.len();
    let mut order = Vec::with_capacity(n);
    if n == 0 {
        return order;
    }
    let mut visited = vec![false; n];
    visited[0] = true;
    let mut stack: Vec<(u32, usize)> = vec![(0, 0)];
    while let Some(top) = stack.last_mut() {
        let (b, i) = *top;
        match succs[b as usize].get(i) {
            Some(&s) => {
                top.1 += 1;
                if !visited[s as usize] {
                    visited[s as usize] = true;
                    stack.push((s, 0));
                }
            }
            None => {
                order.push(b);
                stack.pop();
            }
        }
    }
    order.reverse();
    order
}

fn immediate_dominators(rpo: &[u32], rpo_num: &[u32], preds: &[Vec<u32>]) -> Vec<Option<u32>> {
    let mut idom: Vec<Option<u32>> = vec![None; rpo_num.len()];
    let Some(&entry) = rpo.first() else {
        return idom;
    };
    idom[entry as usize] = Some(entry);
    // The nodes the first finger of `intersect` stepped on while computing
    // the current block's dominator (`seen[x] == tick`): each of them lies
    // below the dominator found so far, so a later predecessor whose walk
    // reaches one of them changes nothing. Without this, a block with N
    // predecessors along one chain (a `br` to a common exit in each of N
    // blocks) takes N²/2 steps.
    let mut seen = vec![usize::MAX; rpo_num.len()];
    let mut tick = 0usize;
    let mut changed = true;
    while changed {
        changed = false;
        for &b in rpo.iter().skip(1) {
            tick += 1;
            let mut new: Option<u32> = None;
            for &p in &preds[b as usize] {
                if idom[p as usize].is_none() {
                    continue;
                }
                let Some(q) = new else {
                    new = Some(p);
                    seen[p as usize] = tick;
                    continue;
                };
                // Walk two fingers up the current tree until they meet; the
                // finger with the larger reverse-postorder number is the
                // deeper one.
                let (mut a, mut c) = (p, q);
                let mut below_q = false;
                'meet: while a != c {
                    while rpo_num[a as usize] > rpo_num[c as usize] {
                        if seen[a as usize] == tick {
                            // Only while `c` is still `q` (a node seen lies
                            // below `q`, so `q` is then above `p`).
                            below_q = true;
                            break 'meet;
                        }
                        seen[a as usize] = tick;
                        a = idom[a as usize].unwrap_or(entry);
                    }
                    while rpo_num[c as usize] > rpo_num[a as usize] {
                        c = idom[c as usize].unwrap_or(entry);
                    }
                }
                if below_q {
                    continue;
                }
                seen[a as usize] = tick;
                new = Some(a);
            }
            if new != idom[b as usize] {
                idom[b as usize] = new;
                changed = true;
            }
        }
    }
    idom
}

/// Preorder and postorder numbers of the dominator tree given by `idom`.
fn tree_numbers(idom: &[Option<u32>], n: usize) -> (Vec<u32>, Vec<u32>) {
    let mut children = vec![Vec::new(); n];
    for (b, d) in idom.iter().enumerate() {
        if let Some(d) = *d {
            if d as usize != b {
                children[d as usize].push(b as u32);
            }
        }
    }
    let mut pre = vec![u32::MAX; n];
    let mut post = vec![u32::MAX; n];
    if n == 0 || idom[0].is_none() {
        return (pre, post);
    }
    let (mut next_pre, mut next_post) = (0u32, 0u32);
    let mut stack: Vec<(u32, usize)> = vec![(0, 0)];
    pre[0] = 0;
    next_pre += 1;
    while let Some(top) = stack.last_mut() {
        let (b, i) = *top;
        match children[b as usize].get(i) {
            Some(&c) => {
                top.1 += 1;
                pre[c as usize] = next_pre;
                next_pre += 1;
                stack.push((c, 0));
            }
            None => {
                post[b as usize] = next_post;
                next_post += 1;
                stack.pop();
            }
        }
    }
    (pre, post)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dominators_of_a_diamond_with_a_loop() {
        // 0 -> 1 -> {2, 3} -> 4 -> 1 ; 4 -> 5 ; 6 unreachable
        let succs = vec![
            vec![1],
            vec![2, 3],
            vec![4],
            vec![4],
            vec![1, 5],
            vec![],
            vec![5],
        ];
        let d = DomTree::new(&succs);
        assert!(d.dominates(0, 5));
        assert!(d.dominates(1, 4));
        assert!(!d.dominates(2, 4));
        assert!(!d.dominates(3, 4));
        assert!(d.dominates(4, 5));
        assert!(d.dominates(4, 4));
        assert!(!d.reachable(6));
        assert!(!d.dominates(6, 5));
    }

    /// Three nested loops and one beside them: innermost first, each with
    /// its blocks in order, and a budget that keeps only the loops found
    /// before it runs out (headers in block order: the outer ones first).
    #[test]
    fn natural_loops_innermost_first_within_a_budget() {
        // 0 -> 1 (outer) -> 2 (middle) -> 3 (inner, self-loop) -> 4 -> 2 ;
        // 4 -> 5 -> 1 ; 5 -> 6 (a loop of its own: 6 -> 6) -> 7.
        let succs = vec![
            vec![1],
            vec![2],
            vec![3],
            vec![3, 4],
            vec![2, 5],
            vec![1, 6],
            vec![6, 7],
            vec![],
        ];
        let all = Loops::new(&succs, usize::MAX);
        let found: Vec<(usize, Vec<usize>)> = all
            .loops
            .iter()
            .map(|l| (l.header, l.blocks.clone()))
            .collect();
        assert_eq!(
            found,
            [
                (3, vec![3]),
                (6, vec![6]),
                (2, vec![2, 3, 4]),
                (1, vec![1, 2, 3, 4, 5]),
            ]
        );
        assert!(all.loops[2].contains(4) && !all.loops[2].contains(5));
        assert_eq!(all.preds[3], [2, 3]);
        // The outer loop's 5 blocks and the middle one's 3 fit in 8.
        let some = Loops::new(&succs, 8);
        let headers: Vec<usize> = some.loops.iter().map(|l| l.header).collect();
        assert_eq!(headers, [2, 1]);
        assert!(Loops::new(&succs, 4).loops.is_empty());
    }

    /// Dominators by the definition (a block's dominators are itself and
    /// the dominators common to all its reachable predecessors, iterated
    /// to a fixed point from "everything"): the same answers as the tree,
    /// on random graphs with chains, joins of many predecessors and loops.
    #[test]
    fn the_tree_agrees_with_the_definition_on_random_graphs() {
        let mut seed = 0x853c_49e6_748f_ea9bu64;
        let mut next = |m: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % m as u64) as usize
        };
        for _ in 0..500 {
            let n = 1 + next(40);
            let succs: Vec<Vec<u32>> = (0..n)
                .map(|b| {
                    let k = next(3);
                    (0..k)
                        .map(|e| {
                            if e == 0 && b + 1 < n && next(4) != 0 {
                                b as u32 + 1
                            } else if next(3) == 0 {
                                (n - 1) as u32
                            } else {
                                next(n) as u32
                            }
                        })
                        .collect()
                })
                .collect();
            let d = DomTree::new(&succs);
            // Reachability, then dominator sets.
            let mut reach = vec![false; n];
            reach[0] = true;
            let mut stack = vec![0usize];
            while let Some(b) = stack.pop() {
                for &s in &succs[b] {
                    if !std::mem::replace(&mut reach[s as usize], true) {
                        stack.push(s as usize);
                    }
                }
            }
            let mut preds = vec![Vec::new(); n];
            for (b, ss) in succs.iter().enumerate() {
                for &s in ss {
                    if reach[b] {
                        preds[s as usize].push(b);
                    }
                }
            }
            let mut dom: Vec<Vec<bool>> = vec![vec![true; n]; n];
            dom[0] = (0..n).map(|x| x == 0).collect();
            let mut changed = true;
            while changed {
                changed = false;
                for b in 1..n {
                    if !reach[b] {
                        continue;
                    }
                    let mut set = vec![true; n];
                    for &p in &preds[b] {
                        for x in 0..n {
                            set[x] &= dom[p][x];
                        }
                    }
                    set[b] = true;
                    if set != dom[b] {
                        dom[b] = set;
                        changed = true;
                    }
                }
            }
            for b in 0..n {
                assert_eq!(d.reachable(b as u32), reach[b], "{succs:?}");
                for a in 0..n {
                    let want = reach[a] && reach[b] && dom[b][a];
                    assert_eq!(
                        d.dominates(a as u32, b as u32),
                        want,
                        "{a} dom {b}: {succs:?}"
                    );
                }
            }
        }
    }
}
