//! The array heap.
//!
//! Arrays live for one top-level call (a run, or a gradient's forward and
//! reverse calls together) and are addressed by handles `1..` (0 is the null
//! handle, the value of an array register never written). [`Heap::begin`]
//! forgets the arrays but keeps their buffers, so a warm call that creates
//! arrays of the same sizes allocates nothing. In AD mode every array has a
//! shadow of the same length holding its cotangents.
//!
//! ## The byte limit
//! [`Heap::alloc`] takes the limit (`Limits::max_heap_bytes`) and keeps two
//! sums within it:
//! * the bytes of the *live* arrays: 8 per element, 16 in AD mode (data
//!   and shadow), plus [`SLOT_BYTES`] per array. Exceeding it is the trap
//!   [`TrapKind::HeapLimit`].
//! * the bytes the heap *holds* ([`Heap::held_bytes`]): the capacity of
//!   every data and shadow buffer, of live arrays and of those kept for
//!   reuse, plus the slot tables. When an allocation would take it past the
//!   limit, the buffers kept for reuse are given back first
//!   ([`Heap::release_spare`]), after which what is held is exactly what is
//!   live. So no sequence of calls, and no limit lowered between calls,
//!   makes the heap hold more than the limit.

use crate::interp::TrapKind;

/// Bytes one array costs beyond its elements: its slot in the data and in
/// the shadow table.
pub const SLOT_BYTES: usize = 2 * std::mem::size_of::<Vec<f64>>();

pub(crate) struct Heap {
    data: Vec<Vec<f64>>,
    shadow: Vec<Vec<f64>>,
    live: usize,
    ad: bool,
    /// Bytes of the live arrays (elements and slots), what the limit bounds.
    live_bytes: usize,
    /// Capacity in bytes of every data and shadow buffer, live or spare.
    buf_bytes: usize,
    /// The VM's memory budget (`Limits::max_memory_bytes`) and what the
    /// VM's other stores (registers, frames, AD stacks) hold of it, as the
    /// VM last said ([`Heap::set_memory`]); `usize::MAX` and 0 until then.
    max_memory: usize,
    other_bytes: usize,
    /// How many times [`Heap::release_spare`] ran: the only thing that
    /// moves a live array's buffers (a native tier's raw views of the live
    /// arrays are stale once it changes; [`Heap::raw`]).
    moves: u64,
}

impl Default for Heap {
    fn default() -> Heap {
        Heap {
            data: Vec::new(),
            shadow: Vec::new(),
            live: 0,
            ad: false,
            live_bytes: 0,
            buf_bytes: 0,
            max_memory: usize::MAX,
            other_bytes: 0,
            moves: 0,
        }
    }
}

impl Heap {
    /// The memory budget, and the bytes the VM's other stores hold of it:
    /// allocations keep what the heap holds within `max_memory -
    /// other_bytes` as well as within their own limit.
    #[inline]
    pub(crate) fn set_memory(&mut self, max_memory: usize, other_bytes: usize) {
        self.max_memory = max_memory;
        self.other_bytes = other_bytes;
    }

    #[inline]
    pub(crate) fn begin(&mut self, ad: bool) {
        self.live = 0;
        self.live_bytes = 0;
        self.ad = ad;
    }

    /// A new array of `n` zeros (and a zero shadow in AD mode), if the live
    /// arrays stay within `limit` bytes. Never aborts: a failed allocation
    /// is [`TrapKind::OutOfMemory`].
    ///
    /// The memory budget ([`Heap::set_memory`]) bounds it too: where it is
    /// the smaller bound, exceeding it is [`TrapKind::MemoryLimit`].
    pub(crate) fn alloc(&mut self, n: usize, limit: usize) -> Result<u64, TrapKind> {
        self.alloc_bounded(n, limit, None)
    }

    /// [`Heap::alloc`]'s two bounds for an array of `n` zeros, or of
    /// `init`'s elements (`n` of them).
    fn alloc_bounded(
        &mut self,
        n: usize,
        limit: usize,
        init: Option<&[f64]>,
    ) -> Result<u64, TrapKind> {
        let budget = self.max_memory.saturating_sub(self.other_bytes);
        if budget < limit {
            return self.alloc_init(n, budget, init).map_err(|k| match k {
                TrapKind::HeapLimit { .. } => TrapKind::MemoryLimit {
                    limit: self.max_memory,
                },
                k => k,
            });
        }
        self.alloc_init(n, limit, init)
    }

    /// Bytes a live array of `n` elements counts for: its elements, its
    /// shadow's in AD mode, and its slot.
    fn array_bytes(&self, n: usize) -> usize {
        let per = if self.ad { 16 } else { 8 };
        n.saturating_mul(per).saturating_add(SLOT_BYTES)
    }

    /// A new array holding a copy of `data` (an argument array), bounded
    /// like [`Heap::alloc`]: the elements are written once, not zeroed
    /// first.
    pub(crate) fn alloc_copy(&mut self, data: &[f64], limit: usize) -> Result<u64, TrapKind> {
        self.alloc_bounded(data.len(), limit, Some(data))
    }

    /// An array of `n` zeros, or of `init`'s elements (`n` of them).
    fn alloc_init(
        &mut self,
        n: usize,
        limit: usize,
        init: Option<&[f64]>,
    ) -> Result<u64, TrapKind> {
        let per = if self.ad { 16 } else { 8 };
        let need = self.array_bytes(n);
        if self.live_bytes.saturating_add(need) > limit {
            return Err(TrapKind::HeapLimit {
                needed: self.live_bytes.saturating_add(need),
                limit,
            });
        }
        let i = self.live;
        if self.held_bytes().saturating_add(self.growth(i, n)) > limit {
            self.release_spare();
        }
        if i == self.data.len() {
            self.new_slot(limit, n.saturating_mul(per))?;
        }
        self.fill(i, n, false, init)?;
        if self.ad {
            self.fill(i, n, true, None)?;
        } else {
            self.shadow[i].clear();
        }
        self.live += 1;
        self.live_bytes += need;
        Ok(i as u64 + 1)
    }

    /// Bytes the heap holds: every buffer's capacity and the slot tables.
    #[inline]
    pub(crate) fn held_bytes(&self) -> usize {
        let slots = (self.data.capacity() + self.shadow.capacity())
            .saturating_mul(std::mem::size_of::<Vec<f64>>());
        self.buf_bytes.saturating_add(slots)
    }

    /// The least that allocating `n` elements in slot `i` adds to
    /// [`Heap::held_bytes`].
    fn growth(&self, i: usize, n: usize) -> usize {
        let per = if self.ad { 2 } else { 1 };
        match (self.data.get(i), self.shadow.get(i)) {
            (Some(d), Some(s)) => {
                let mut more = n.saturating_sub(d.capacity());
                if self.ad {
                    more = more.saturating_add(n.saturating_sub(s.capacity()));
                }
                more.saturating_mul(8)
            }
            _ => {
                let slot = if self.data.len() == self.data.capacity() {
                    SLOT_BYTES
                } else {
                    0
                };
                n.saturating_mul(8 * per).saturating_add(slot)
            }
        }
    }

    /// Give back every buffer not in use: those of dead arrays (all of them
    /// after [`Heap::begin`]), the spare capacity of live ones and of the
    /// slot tables. Afterwards [`Heap::held_bytes`] is the live bytes.
    pub(crate) fn release_spare(&mut self) {
        self.moves = self.moves.wrapping_add(1);
        self.data.truncate(self.live);
        self.shadow.truncate(self.live);
        self.data.shrink_to_fit();
        self.shadow.shrink_to_fit();
        let ad = self.ad;
        for d in &mut self.data {
            d.shrink_to_fit();
        }
        for s in &mut self.shadow {
            if ad {
                s.shrink_to_fit();
            } else {
                *s = Vec::new();
            }
        }
        self.buf_bytes = self
            .data
            .iter()
            .chain(&self.shadow)
            .map(|v| v.capacity() * 8)
            .sum();
    }

    /// Append an empty slot, growing the slot tables by doubling while
    /// that stays within `limit` (with `elems` more bytes to come), else by
    /// one.
    fn new_slot(&mut self, limit: usize, elems: usize) -> Result<(), TrapKind> {
        if self.data.len() == self.data.capacity() || self.shadow.len() == self.shadow.capacity() {
            let mut add = self.data.len().max(8);
            let grown = add.saturating_mul(SLOT_BYTES);
            if self
                .held_bytes()
                .saturating_add(grown)
                .saturating_add(elems)
                > limit
            {
                add = 1;
            }
            crate::oom::bypass(|| self.data.try_reserve_exact(add))
                .map_err(|_| TrapKind::OutOfMemory)?;
            crate::oom::bypass(|| self.shadow.try_reserve_exact(add))
                .map_err(|_| TrapKind::OutOfMemory)?;
        }
        self.data.push(Vec::new());
        self.shadow.push(Vec::new());
        Ok(())
    }

    /// Slot `i`'s data (or shadow) buffer: `n` zeros, keeping
    /// [`Heap::buf_bytes`] up to date.
    fn fill(
        &mut self,
        i: usize,
        n: usize,
        shadow: bool,
        init: Option<&[f64]>,
    ) -> Result<(), TrapKind> {
        let v = if shadow {
            &mut self.shadow[i]
        } else {
            &mut self.data[i]
        };
        let before = v.capacity();
        v.clear();
        // Not from the reserve inside a compile section: a run's failure
        // is its trap (`crate::oom::bypass`).
        let r = crate::oom::bypass(|| v.try_reserve_exact(n));
        let after = v.capacity();
        self.buf_bytes = self
            .buf_bytes
            .saturating_sub(before * 8)
            .saturating_add(after * 8);
        r.map_err(|_| TrapKind::OutOfMemory)?;
        match init {
            Some(data) => v.extend_from_slice(data),
            None => v.resize(n, 0.0),
        }
        Ok(())
    }

    #[inline]
    fn index(&self, h: u64) -> Option<usize> {
        let i = h.wrapping_sub(1) as usize;
        (h != 0 && i < self.live).then_some(i)
    }

    #[inline]
    pub(crate) fn get(&self, h: u64) -> Option<&[f64]> {
        self.index(h).map(|i| self.data[i].as_slice())
    }

    #[inline]
    pub(crate) fn get_mut(&mut self, h: u64) -> Option<&mut [f64]> {
        self.index(h).map(|i| self.data[i].as_mut_slice())
    }

    /// The shadow of `h`; `None` outside AD mode or for a bad handle.
    #[inline]
    pub(crate) fn shadow(&self, h: u64) -> Option<&[f64]> {
        if !self.ad {
            return None;
        }
        self.index(h).map(|i| self.shadow[i].as_slice())
    }

    #[inline]
    pub(crate) fn shadow_mut(&mut self, h: u64) -> Option<&mut [f64]> {
        if !self.ad {
            return None;
        }
        self.index(h).map(|i| self.shadow[i].as_mut_slice())
    }

    pub(crate) fn is_ad(&self) -> bool {
        self.ad
    }

    /// The number of live arrays (handles `1..=live`).
    #[inline]
    pub(crate) fn live(&self) -> usize {
        self.live
    }

    /// See the field `moves`.
    #[inline]
    pub(crate) fn moves(&self) -> u64 {
        self.moves
    }

    /// Where live array `h`'s elements are and how many, then its shadow's
    /// (length 0 outside AD mode), for a native tier that reads and writes
    /// them in place. The buffers of a live array stay where they are
    /// until [`Heap::begin`] or [`Heap::release_spare`] (counted by
    /// [`Heap::moves`]): [`Heap::alloc`] fills only the slot past the live
    /// ones and grows the slot tables, which moves the `Vec` headers, not
    /// the buffers they point to.
    pub(crate) fn raw(&mut self, h: u64) -> Option<(*mut f64, usize, *mut f64, usize)> {
        let i = self.index(h)?;
        let d = &mut self.data[i];
        let (dp, dl) = (d.as_mut_ptr(), d.len());
        let s = &mut self.shadow[i];
        let (sp, sl) = if self.ad {
            (s.as_mut_ptr(), s.len())
        } else {
            (std::ptr::null_mut(), 0)
        };
        Some((dp, dl, sp, sl))
    }

    /// A copy of the live arrays' elements (not their shadows), for a
    /// checkpoint (`interp/ckpt.rs`).
    pub(crate) fn snapshot(&self) -> Vec<Vec<f64>> {
        self.snapshot_of(self.live)
    }

    /// A copy of the elements of the first `n` live arrays (all of them
    /// if fewer are live).
    pub(crate) fn snapshot_of(&self, n: usize) -> Vec<Vec<f64>> {
        self.data[..n.min(self.live)].to_vec()
    }

    /// [`Heap::snapshot`] into `out`, reusing its buffers: no allocation
    /// where they are as long as before.
    pub(crate) fn snapshot_into(&self, out: &mut Vec<Vec<f64>>) {
        let live = &self.data[..self.live];
        out.truncate(live.len());
        let kept = out.len();
        for (o, d) in out.iter_mut().zip(live) {
            o.clear();
            o.extend_from_slice(d);
        }
        out.extend(live[kept..].iter().cloned());
    }

    /// Bytes [`Heap::snapshot`] holds.
    pub(crate) fn snapshot_bytes(&self) -> usize {
        self.data[..self.live]
            .iter()
            .map(|d| d.len().saturating_mul(8).saturating_add(SLOT_BYTES / 2))
            .fold(0, usize::saturating_add)
    }

    /// Make the live arrays those of `arrays` (a [`Heap::snapshot`]), with
    /// the same handles. Where the heap already has those arrays (the same
    /// lengths: a snapshot of this heap, or a restore before), only their
    /// elements are copied back, the arrays made after them are dropped
    /// and the shadows are left as they are;
    /// otherwise the heap starts anew (zero shadows in AD mode).
    pub(crate) fn restore(&mut self, arrays: &[Vec<f64>], limit: usize) -> Result<(), TrapKind> {
        let same = self.live >= arrays.len()
            && arrays
                .iter()
                .zip(&self.data)
                .zip(&self.shadow)
                .all(|((a, d), s)| a.len() == d.len() && (!self.ad || s.len() == a.len()));
        if same {
            for (d, a) in self.data.iter_mut().zip(arrays) {
                d.copy_from_slice(a);
            }
            self.live = arrays.len();
            self.live_bytes = arrays
                .iter()
                .map(|a| self.array_bytes(a.len()))
                .fold(0, usize::saturating_add);
            return Ok(());
        }
        let ad = self.ad;
        self.begin(ad);
        for a in arrays {
            let h = self.alloc(a.len(), limit)?;
            if let Some(d) = self.get_mut(h) {
                d.copy_from_slice(a);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BIG: usize = usize::MAX;

    #[test]
    fn begin_keeps_buffers_and_forgets_handles() {
        let mut h = Heap::default();
        h.begin(true);
        let a = h.alloc(100, BIG).expect("alloc");
        assert_eq!(a, 1, "handles start at 1; 0 is null");
        h.get_mut(a).expect("live")[3] = 7.0;
        let ptr = h.get(a).expect("live").as_ptr();
        assert_eq!(h.shadow(a).map(<[f64]>::len), Some(100));
        h.begin(false);
        assert!(h.get(a).is_none());
        let b = h.alloc(50, BIG).expect("alloc");
        assert_eq!(b, a);
        let arr = h.get(b).expect("live");
        assert_eq!(arr.as_ptr(), ptr, "the buffer is reused");
        assert!(arr.iter().all(|x| *x == 0.0), "and zeroed");
        assert!(h.shadow(b).is_none(), "no shadows outside AD mode");
        assert!(h.get(0).is_none() && h.get(u64::MAX).is_none());
    }

    #[test]
    fn live_bytes_are_bounded() {
        let limit = 10 * (800 + SLOT_BYTES);
        let mut h = Heap::default();
        h.begin(false);
        for _ in 0..10 {
            h.alloc(100, limit).expect("fits");
        }
        let e = h.alloc(0, limit).expect_err("the eleventh array");
        assert_eq!(
            e,
            TrapKind::HeapLimit {
                needed: limit + SLOT_BYTES,
                limit
            }
        );
        // In AD mode an array costs twice its elements (the shadow).
        h.begin(true);
        for _ in 0..5 {
            h.alloc(100, limit).expect("fits");
        }
        assert!(matches!(
            h.alloc(100, limit),
            Err(TrapKind::HeapLimit { .. })
        ));
        // A huge request is a trap, not an overflow or an abort.
        h.begin(true);
        assert!(matches!(
            h.alloc(usize::MAX, limit),
            Err(TrapKind::HeapLimit {
                needed: usize::MAX,
                ..
            })
        ));
    }

    /// Buffers kept for reuse count too: calls that each fit the limit, in
    /// any order, never make the heap hold more than it.
    #[test]
    fn held_bytes_never_exceed_the_limit() {
        let limit = 64 * 1024;
        let mut h = Heap::default();
        // Each round has a different shape, so reused buffers fit badly.
        let rounds: [&[usize]; 5] = [
            &[4000, 10, 10],
            &[10, 4000, 10, 2000],
            &[1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 4000],
            &[7000],
            &[3000, 3000],
        ];
        for ad in [false, true, false] {
            for sizes in rounds {
                h.begin(ad);
                for &n in sizes {
                    match h.alloc(n, limit) {
                        Ok(_) | Err(TrapKind::HeapLimit { .. }) => {}
                        Err(e) => panic!("{e}"),
                    }
                    assert!(h.held_bytes() <= limit, "holds {}", h.held_bytes());
                }
            }
        }
        // A lowered limit: what is kept is given back.
        h.begin(false);
        h.alloc(10, 1024).expect("fits");
        assert!(h.held_bytes() <= 1024, "holds {}", h.held_bytes());
    }

    #[test]
    fn release_spare_keeps_live_arrays() {
        let mut h = Heap::default();
        h.begin(true);
        let a = h.alloc(1000, BIG).expect("alloc");
        h.begin(true);
        let b = h.alloc(3, BIG).expect("alloc");
        h.get_mut(b).expect("live")[2] = 5.0;
        h.release_spare();
        assert_eq!(h.held_bytes(), 3 * 16 + SLOT_BYTES);
        assert_eq!(h.get(a), Some(&[0.0, 0.0, 5.0][..]));
    }
}
