//! Bit sets over value indices, for the dataflow analyses of the lowering
//! (phi coalescing by liveness, `lower/coalesce.rs`) and of the AD stage's clean-up
//! of reverse code (`ad/src/optimize/`).
//!
//! [`Bits`] is one set; [`has`] and [`insert`] work on any word slice, so
//! an analysis can keep one flat vector of `blocks * words` (one row per
//! block) instead of a vector per block.

use crate::ir::ValueId;

/// Words of a set of `n` bits.
pub fn words(n: usize) -> usize {
    n.div_ceil(64)
}

/// Whether bit `i` of `set` is on (`false` past its end).
#[inline]
pub fn has(set: &[u64], i: usize) -> bool {
    set.get(i / 64).is_some_and(|w| w >> (i % 64) & 1 == 1)
}

/// Turn bit `i` of `set` on (nothing past its end).
#[inline]
pub fn insert(set: &mut [u64], i: usize) {
    if let Some(w) = set.get_mut(i / 64) {
        *w |= 1 << (i % 64);
    }
}

/// Turn bit `i` of `set` off (nothing past its end).
#[inline]
pub fn remove(set: &mut [u64], i: usize) {
    if let Some(w) = set.get_mut(i / 64) {
        *w &= !(1 << (i % 64));
    }
}

/// A set of values of one function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bits(Vec<u64>);

impl Bits {
    /// Room for values `0..n`: none of them, or all of them (`full`).
    pub fn new(n: usize, full: bool) -> Bits {
        Bits(vec![if full { u64::MAX } else { 0 }; words(n)])
    }

    /// Whether `v` is in the set.
    pub fn has(&self, v: ValueId) -> bool {
        has(&self.0, v.index())
    }

    /// Put `v` in the set (`on`) or take it out.
    pub fn set(&mut self, v: ValueId, on: bool) {
        if on {
            insert(&mut self.0, v.index());
        } else {
            remove(&mut self.0, v.index());
        }
    }

    /// Remove every value.
    pub fn clear(&mut self) {
        self.0.fill(0);
    }

    /// Intersect with `o` (a set of the same function).
    pub fn and_with(&mut self, o: &Bits) {
        for (a, b) in self.0.iter_mut().zip(&o.0) {
            *a &= b;
        }
    }

    /// Unite with `o` (a set of the same function).
    pub fn or_with(&mut self, o: &Bits) {
        for (a, b) in self.0.iter_mut().zip(&o.0) {
            *a |= b;
        }
    }
}
