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
    // Walk two fingers up the current tree until they meet; the finger with
    // the larger reverse-postorder number is the deeper one.
    let intersect = |idom: &[Option<u32>], mut a: u32, mut b: u32| {
        while a != b {
            while rpo_num[a as usize] > rpo_num[b as usize] {
                a = idom[a as usize].unwrap_or(entry);
            }
            while rpo_num[b as usize] > rpo_num[a as usize] {
                b = idom[b as usize].unwrap_or(entry);
            }
        }
        a
    };
    let mut changed = true;
    while changed {
        changed = false;
        for &b in rpo.iter().skip(1) {
            let mut new: Option<u32> = None;
            for &p in &preds[b as usize] {
                if idom[p as usize].is_some() {
                    new = Some(match new {
                        None => p,
                        Some(q) => intersect(&idom, p, q),
                    });
                }
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
}
