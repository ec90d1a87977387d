//! Batched reservation: the `comms.push`es of a stretch between calls and
//! block-id pushes become one `comms.reserve` and unchecked `comms.push.r`s.

use super::*;

/// How an instruction of a block is lowered with respect to batched
/// reservation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Push {
    /// As it is (every instruction but the `comms.push`es of a batch).
    Plain,
    /// The first `comms.push` of a batch of `n`: `comms.reserve n`, which
    /// makes room for the batch and does this push.
    Reserve(u32),
    /// A later `comms.push` of a batch: `comms.push.r`.
    Reserved,
}

/// The fewest `comms.push`es of a stretch that get one `comms.reserve`
/// instead of a capacity check each (one alone keeps its check: a
/// reservation would only add an instruction).
pub(super) const MIN_BATCH: usize = 2;

/// Batched reservation for one block's instructions: cut them at every
/// `call`, `call.acc` and `blk.push` (where the verifier's budget of
/// reserved pushes drops to 0: a callee pushes too, and growing the block
/// stack may shrink the comms stack's capacity), and make each stretch's
/// `comms.push`es one batch if there are at least [`MIN_BATCH`] of them.
/// One entry per instruction.
pub(super) fn reservations(insts: &[ir::Inst]) -> Vec<Push> {
    let mut plan = vec![Push::Plain; insts.len()];
    let cuts = |i: &ir::Inst| matches!(i.op, Op::Call | Op::CallAcc | Op::CallN | Op::BlkPush);
    let mut start = 0;
    while start < insts.len() {
        let end = insts[start..]
            .iter()
            .position(cuts)
            .map_or(insts.len(), |k| start + k);
        let pushes: Vec<usize> = (start..end)
            .filter(|&k| insts[k].op == Op::CommsPush)
            .collect();
        if let [first, rest @ ..] = pushes.as_slice() {
            if pushes.len() >= MIN_BATCH {
                // A block has far fewer than 2^32 instructions (the
                // lowering rejects more code than a `u32` can address).
                let n = u32::try_from(pushes.len()).unwrap_or(u32::MAX);
                plan[*first] = Push::Reserve(n);
                for &k in rest {
                    plan[k] = Push::Reserved;
                }
            }
        }
        start = end + 1;
    }
    plan
}
