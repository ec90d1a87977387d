//! Pass 9, layout: blocks in chains along preferred fall-through edges, each
//! loop's test after its body.

use super::*;

/// Order the blocks (the entry block first) so that control falls through
/// instead of jumping where it runs most often. Blocks are laid out in
/// chains along each block's preferred successor: the target of a `jmp`,
/// or the `then` target of a `br` (the lowering then branches to the
/// `else` target, which in reverse code is the way back into a loop). A
/// block with several predecessors belongs to the chain of the one that
/// reaches it by a back edge (the block dominates it), so a loop's test
/// follows the loop's body rather than the code that enters the loop.
pub fn layout(f: &mut Function) {
    let n = f.blocks.len();
    if n <= 2 {
        return;
    }
    let succs = successors(f);
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (b, ss) in succs.iter().enumerate() {
        for &s in ss {
            if !preds[s].contains(&b) {
                preds[s].push(b);
            }
        }
    }
    let succ_u32: Vec<Vec<u32>> = succs
        .iter()
        .map(|ss| ss.iter().map(|&s| s as u32).collect())
        .collect();
    let dom = vm::dom::DomTree::new(&succ_u32);
    let pref: Vec<Option<usize>> = f
        .blocks
        .iter()
        .map(|b| match &b.term {
            Term::Jmp(t) => Some(t.index()),
            Term::Br { then_, .. } => Some(then_.index()),
            _ => None,
        })
        .collect();
    let claim: Vec<Option<usize>> = (0..n)
        .map(|s| {
            let wanting: Vec<usize> = preds[s]
                .iter()
                .copied()
                .filter(|&p| p != s && pref[p] == Some(s))
                .collect();
            // A back edge: `s` dominates its source.
            let inside = wanting
                .iter()
                .copied()
                .find(|&p| dom.dominates(s as u32, p as u32));
            inside.or(wanting.first().copied())
        })
        .collect();
    let mut order = Vec::with_capacity(n);
    let mut placed = vec![false; n];
    let chain = |b: usize, order: &mut Vec<usize>, placed: &mut Vec<bool>| {
        let mut cur = b;
        loop {
            placed[cur] = true;
            order.push(cur);
            match pref[cur] {
                Some(s) if s != 0 && !placed[s] && claim[s] == Some(cur) => cur = s,
                _ => break,
            }
        }
    };
    chain(0, &mut order, &mut placed);
    for b in 0..n {
        if !placed[b] && claim[b].is_none() {
            chain(b, &mut order, &mut placed);
        }
    }
    for b in 0..n {
        if !placed[b] {
            chain(b, &mut order, &mut placed);
        }
    }
    let mut new_index = vec![0u32; n];
    for (pos, old) in order.iter().enumerate() {
        new_index[*old] = pos as u32;
    }
    let mut old_blocks: Vec<Option<vm::ir::Block>> = std::mem::take(&mut f.blocks)
        .into_iter()
        .map(Some)
        .collect();
    for old in order {
        let Some(mut b) = old_blocks[old].take() else {
            continue;
        };
        let remap = |t: &mut BlockId| *t = BlockId(new_index[t.index()]);
        b.term.map_targets(remap);
        f.blocks.push(b);
    }
}
