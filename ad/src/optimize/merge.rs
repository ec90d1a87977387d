//! Pass 1, block merging: a block that jumps to a block with no other
//! predecessor absorbs it; jumps to empty blocks go where those go; a jump to a
//! block that only returns becomes that return.

use super::*;

/// Merge each block ending in `jmp B` with `B` when `B` has no other
/// predecessor, then drop unreachable blocks. A merged phi-edge block takes
/// the name of the block it led to.
pub fn merge_blocks(f: &mut Function) {
    thread_empty_blocks(f);
    copy_returns(f);
    // Blocks jumped over above are unreachable now: they must not count as
    // predecessors.
    let n = f.blocks.len();
    let reach = reachable(f);
    let mut npreds = vec![0usize; n];
    for b in f
        .blocks
        .iter()
        .zip(&reach)
        .filter(|(_, r)| **r)
        .map(|(b, _)| b)
    {
        let mut ss = b.term.successors();
        ss.dedup();
        for s in ss {
            npreds[s.index()] += 1;
        }
    }
    let mut gone = vec![false; n];
    for a in 0..n {
        if gone[a] || !reach[a] {
            continue;
        }
        while let Term::Jmp(b) = f.blocks[a].term {
            let b = b.index();
            if b == a || b == 0 || npreds[b] != 1 || gone[b] {
                break;
            }
            let taken = std::mem::replace(
                &mut f.blocks[b],
                vm::ir::Block {
                    name: String::new(),
                    phis: Vec::new(),
                    insts: Vec::new(),
                    term: Term::RetN(Vec::new()),
                    term_loc: Default::default(),
                },
            );
            gone[b] = true;
            let into = &mut f.blocks[a];
            if into.name.starts_with("edge.") {
                into.name = taken.name;
            }
            into.insts.extend(taken.insts);
            into.term = taken.term;
            into.term_loc = taken.term_loc;
        }
    }
    // Keep the blocks reachable from the entry, in their order.
    let reach = reachable(f);
    let mut new_index = vec![0u32; n];
    let mut next = 0u32;
    for b in 0..n {
        if reach[b] {
            new_index[b] = next;
            next += 1;
        }
    }
    let old = std::mem::take(&mut f.blocks);
    for (b, mut block) in old.into_iter().enumerate() {
        if !reach[b] {
            continue;
        }
        let remap = |t: &mut BlockId| *t = BlockId(new_index[t.index()]);
        block.term.map_targets(remap);
        f.blocks.push(block);
    }
}

/// Which blocks the entry block reaches.
pub(super) fn reachable(f: &Function) -> Vec<bool> {
    let n = f.blocks.len();
    let succs = successors(f);
    let mut reach = vec![false; n];
    let mut stack = vec![0usize];
    while let Some(b) = stack.pop() {
        if b < n && !std::mem::replace(&mut reach[b], true) {
            stack.extend(&succs[b]);
        }
    }
    reach
}

/// Send every edge into an empty block that only jumps on to where it
/// jumps (the entry block stays).
///
/// Each block is sent where following the chain of empty blocks from it
/// ends, or, on a cycle of empty blocks, where `n` steps along it end (`n`
/// the number of blocks; cycles are left alone in effect, since a block on
/// one only moves to another block of it). Empty blocks with their jumps
/// form a graph in which each block has at most one successor, so one walk
/// per unvisited block and one pass back along it find every block's
/// target: linear in the number of blocks.
pub(super) fn thread_empty_blocks(f: &mut Function) {
    let n = f.blocks.len();
    // The block an empty block jumps to (a self-loop ends the chain).
    let next = |b: usize| {
        let block = &f.blocks[b];
        match block.term {
            Term::Jmp(t) if b != 0 && block.insts.is_empty() && t.index() != b => Some(t.index()),
            _ => None,
        }
    };
    /// Where the chain from a block ends: at a block, or on a cycle of
    /// empty blocks (`cycles[cycle][pos]`) after `dist` more steps.
    #[derive(Clone, Copy)]
    enum End {
        Unknown,
        OnPath(usize),
        At(usize),
        Cycle {
            cycle: usize,
            pos: usize,
            dist: usize,
        },
    }
    let mut end = vec![End::Unknown; n];
    let mut cycles: Vec<Vec<usize>> = Vec::new();
    let mut path: Vec<usize> = Vec::new();
    for start in 0..n {
        if !matches!(end[start], End::Unknown) {
            continue;
        }
        let mut b = start;
        loop {
            match end[b] {
                End::Unknown => {}
                End::OnPath(k) => {
                    // The walk came back to its own block `b`: the path
                    // from `b` on is a cycle.
                    let cycle = cycles.len();
                    for (pos, &c) in path[k..].iter().enumerate() {
                        end[c] = End::Cycle {
                            cycle,
                            pos,
                            dist: 0,
                        };
                    }
                    cycles.push(path.split_off(k));
                    break;
                }
                _ => break,
            }
            match next(b) {
                Some(t) => {
                    end[b] = End::OnPath(path.len());
                    path.push(b);
                    b = t;
                }
                None => {
                    end[b] = End::At(b);
                    break;
                }
            }
        }
        // Each block left on the path ends where its successor does, one
        // step further from a cycle.
        while let Some(p) = path.pop() {
            let t = next(p).expect("a block on the path has a successor");
            end[p] = match end[t] {
                End::Cycle { cycle, pos, dist } => End::Cycle {
                    cycle,
                    pos,
                    dist: dist + 1,
                },
                e => e,
            };
        }
    }
    let targets: Vec<usize> = end
        .iter()
        .map(|e| match *e {
            End::At(t) => t,
            End::Cycle { cycle, pos, dist } => {
                // `dist` steps to the cycle, the other `n - dist` around it
                // (`dist < n`: the blocks on the way are distinct).
                let c = &cycles[cycle];
                c[(pos + (n - dist) % c.len()) % c.len()]
            }
            End::Unknown | End::OnPath(_) => unreachable!("every block's end is found"),
        })
        .collect();
    let remap = |t: &mut BlockId| *t = BlockId(targets[t.index()] as u32);
    for block in &mut f.blocks {
        block.term.map_targets(remap);
    }
}

/// Replace a jump to a block that only returns by that return: one
/// dispatch fewer on the way out (the reverse of a function with several
/// `ret`s ends each path with a jump to the one `exit` block).
pub(super) fn copy_returns(f: &mut Function) {
    for b in 0..f.blocks.len() {
        let Term::Jmp(t) = f.blocks[b].term else {
            continue;
        };
        let target = &f.blocks[t.index()];
        if t.index() == 0 || !target.phis.is_empty() || !target.insts.is_empty() {
            continue;
        }
        if let Term::Ret(_) | Term::RetN(_) = target.term {
            let (term, loc) = (target.term.clone(), target.term_loc);
            f.blocks[b].term = term;
            f.blocks[b].term_loc = loc;
        }
    }
}
