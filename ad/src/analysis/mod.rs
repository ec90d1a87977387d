//! What the AD stage computes of a primal function before it builds any
//! forward or reverse code, so that each transform is a single pass: its
//! control flow and loops (`loops.rs`: [`Cfg`]) and which values carry a
//! derivative (`active.rs`: [`activity()`]).

mod active;
mod loops;

pub use active::{
    activity, activity_in, all_params, call_is_active, call_wrt, may_write_arrays, Aliases,
    ArraySet, CallWrites,
};
pub use loops::{Cfg, Counted, Iv, Loop, MAX_IV_STEP};
