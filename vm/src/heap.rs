//! The array heap.
//!
//! Arrays live for one top-level call (a run, or a gradient's forward and
//! reverse calls together) and are addressed by handles `1..` (0 is the null
//! handle, the value of an array register never written). [`Heap::begin`]
//! forgets the arrays but keeps their buffers, so a warm call that creates
//! arrays of the same sizes allocates nothing. In AD mode every array has a
//! shadow of the same length holding its cotangents.

use std::collections::TryReserveError;

#[derive(Default)]
pub(crate) struct Heap {
    data: Vec<Vec<f64>>,
    shadow: Vec<Vec<f64>>,
    live: usize,
    ad: bool,
}

impl Heap {
    pub(crate) fn begin(&mut self, ad: bool) {
        self.live = 0;
        self.ad = ad;
    }

    /// A new array of `n` zeros (and a zero shadow in AD mode).
    pub(crate) fn alloc(&mut self, n: usize) -> Result<u64, TryReserveError> {
        if self.live == self.data.len() {
            self.data.try_reserve(1)?;
            self.shadow.try_reserve(1)?;
            self.data.push(Vec::new());
            self.shadow.push(Vec::new());
        }
        let i = self.live;
        fill_zero(&mut self.data[i], n)?;
        if self.ad {
            fill_zero(&mut self.shadow[i], n)?;
        } else {
            self.shadow[i].clear();
        }
        self.live += 1;
        Ok(i as u64 + 1)
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
    pub(crate) fn get_mut(&mut self, h: u64) -> Option<&mut Vec<f64>> {
        self.index(h).map(|i| &mut self.data[i])
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
    pub(crate) fn shadow_mut(&mut self, h: u64) -> Option<&mut Vec<f64>> {
        if !self.ad {
            return None;
        }
        self.index(h).map(|i| &mut self.shadow[i])
    }

    pub(crate) fn is_ad(&self) -> bool {
        self.ad
    }
}

fn fill_zero(v: &mut Vec<f64>, n: usize) -> Result<(), TryReserveError> {
    v.clear();
    v.try_reserve_exact(n)?;
    v.resize(n, 0.0);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn begin_keeps_buffers_and_forgets_handles() {
        let mut h = Heap::default();
        h.begin(true);
        let a = h.alloc(100).expect("alloc");
        assert_eq!(a, 1, "handles start at 1; 0 is null");
        h.get_mut(a).expect("live")[3] = 7.0;
        let ptr = h.get(a).expect("live").as_ptr();
        assert_eq!(h.shadow(a).map(<[f64]>::len), Some(100));
        h.begin(false);
        assert!(h.get(a).is_none());
        let b = h.alloc(50).expect("alloc");
        assert_eq!(b, a);
        let arr = h.get(b).expect("live");
        assert_eq!(arr.as_ptr(), ptr, "the buffer is reused");
        assert!(arr.iter().all(|x| *x == 0.0), "and zeroed");
        assert!(h.shadow(b).is_none(), "no shadows outside AD mode");
        assert!(h.get(0).is_none() && h.get(u64::MAX).is_none());
    }
}
