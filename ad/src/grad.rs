//! Reverse mode's entry points: the gradient of a call (all parameters or a
//! selection), prepared gradients of scalar functions that allocate nothing per
//! call, and gradients at many points on all cores.

use crate::*;

impl Engine {
    /// Value and gradient of `f` at `args`, with respect to every `f64` and
    /// `f64[]` parameter.
    pub fn grad(&mut self, f: FuncId, args: &[Value]) -> Result<Gradient, AdError> {
        let mut out = Gradient::default();
        self.grad_into(f, args, &mut out)?;
        Ok(out)
    }

    /// Like [`Engine::grad`], reusing `out`'s buffers: after a warm-up call
    /// with the same shapes this performs no heap allocation.
    pub fn grad_into(
        &mut self,
        f: FuncId,
        args: &[Value],
        out: &mut Gradient,
    ) -> Result<(), AdError> {
        let wrt = self.take_full_mask(f)?;
        let result = self.grad_wrt_into(f, args, &wrt, out);
        self.full_masks[f.index()] = wrt;
        result
    }

    /// Value and gradient of `f` at `args` with respect to the parameters
    /// selected by `wrt` (one flag per parameter; only `f64` and `f64[]`
    /// parameters may be selected). Unselected parameters get `None`, and
    /// the derived code does none of their work: values that depend only on
    /// unselected parameters are inactive (see [`analysis::activity`]).
    pub fn grad_wrt(
        &mut self,
        f: FuncId,
        args: &[Value],
        wrt: &[bool],
    ) -> Result<Gradient, AdError> {
        let mut out = Gradient::default();
        self.grad_wrt_into(f, args, wrt, &mut out)?;
        Ok(out)
    }

    /// Like [`Engine::grad_wrt`], reusing `out`'s buffers: after a warm-up
    /// call with the same shapes and mask this performs no heap allocation.
    ///
    /// The call runs in a compile section ([`vm::oom`]): with
    /// [`vm::alloc_count::Reserve`] as the global allocator, an allocation
    /// that fails in it (deriving, or the call's own bookkeeping) is
    /// [`AdError::out_of_memory`], not an abort; the run's arrays and
    /// stacks report theirs as the trap `out of memory` themselves.
    pub fn grad_wrt_into(
        &mut self,
        f: FuncId,
        args: &[Value],
        wrt: &[bool],
        out: &mut Gradient,
    ) -> Result<(), AdError> {
        crate::error::section(|| self.grad_call(f, args, wrt, out))
    }

    #[inline(always)]
    fn grad_call(
        &mut self,
        f: FuncId,
        args: &[Value],
        wrt: &[bool],
        out: &mut Gradient,
    ) -> Result<(), AdError> {
        let arrays = self.raw_args(f, args)?;
        // Built already (the common case), without a call: `derive_wrt`
        // checks and builds the rest.
        let d = match self.built(f, wrt) {
            Some(d) => d,
            None => self.derive_wrt(f, wrt)?,
        };
        self.vm.begin(true);
        self.place_arrays(args, arrays)?;
        out.value = self.forward_reverse(f, d)?;
        self.read_gradient(args, wrt, &mut out.grad)
    }

    /// After `vm.begin`: the array arguments (if `arrays`) into the heap,
    /// their handles in `self.handles` and in their places in `self.raw`.
    #[inline]
    pub(crate) fn place_arrays(&mut self, args: &[Value], arrays: bool) -> Result<(), AdError> {
        self.handles.clear();
        if arrays {
            for (bits, a) in self.raw.iter_mut().zip(args) {
                if let Value::Arr(xs) = a {
                    let h = self.vm.alloc_array(xs)?;
                    self.handles.push(h);
                    *bits = h;
                }
            }
        }
        Ok(())
    }

    /// The tangent arguments, in parameter order, after the primal ones in
    /// `self.raw`: the direction of each `f64` and `f64[]` parameter
    /// selected by `wrt` (zero where `dir` has none), its arrays' handles
    /// in `self.tangent_handles`. With `every`, the parameters outside
    /// `wrt` too, with a zero direction (the tangent of a pullback takes
    /// one per `f64` and `f64[]` parameter).
    pub(crate) fn push_tangent_args(
        &mut self,
        args: &[Value],
        dir: &[Option<Value>],
        wrt: &[bool],
        every: bool,
    ) -> Result<(), AdError> {
        self.tangent_handles.clear();
        for ((a, d), w) in args.iter().zip(dir).zip(wrt) {
            if !*w && !every {
                continue;
            }
            match (a, d.as_ref().filter(|_| *w)) {
                (Value::F64(_), Some(Value::F64(x))) => self.raw.push(x.to_bits()),
                (Value::F64(_), _) => self.raw.push(0),
                (Value::Arr(_), Some(Value::Arr(xs))) => {
                    let h = self.vm.alloc_array(xs)?;
                    self.tangent_handles.push(h);
                    self.raw.push(h);
                }
                (Value::Arr(xs), _) => {
                    if self.zeros.len() < xs.len() {
                        self.zeros.resize(xs.len(), 0.0);
                    }
                    let h = self.vm.alloc_array(&self.zeros[..xs.len()])?;
                    self.tangent_handles.push(h);
                    self.raw.push(h);
                }
                (Value::I64(_) | Value::Bool(_), _) => {}
            }
        }
        Ok(())
    }

    /// After a pullback: one gradient entry per argument into `grad` (its
    /// buffers reused), from the pullback's results (f64 parameters) and
    /// the shadows of the argument arrays (`self.handles`).
    #[inline]
    pub(crate) fn read_gradient(
        &self,
        args: &[Value],
        wrt: &[bool],
        grad: &mut Vec<Option<Value>>,
    ) -> Result<(), AdError> {
        self.read_entries(0, &self.handles, args, wrt, grad)
    }

    /// One entry per argument into `out` (its buffers reused): an `f64`
    /// parameter's from the results at `first` on, in order; an array
    /// parameter's from the shadow of its array in `handles`, in order;
    /// `None` for the parameters not selected by `wrt` and the integers.
    /// The arrays are allocated fallibly (their length is the user's): a
    /// failure is an `out of memory` trap, not an abort.
    #[inline]
    pub(crate) fn read_entries(
        &self,
        first: usize,
        handles: &[u64],
        args: &[Value],
        wrt: &[bool],
        out: &mut Vec<Option<Value>>,
    ) -> Result<(), AdError> {
        if out.len() != args.len() {
            out.resize(args.len(), None);
        }
        let results = self.vm.results();
        let (mut fi, mut ai) = (0, 0);
        for ((slot, a), selected) in out.iter_mut().zip(args).zip(wrt) {
            match a {
                Value::F64(_) => {
                    let g = f64::from_bits(results.get(first + fi).copied().unwrap_or(0));
                    fi += 1;
                    *slot = selected.then_some(Value::F64(g));
                }
                Value::Arr(_) => {
                    let h = handles.get(ai).copied().unwrap_or(0);
                    ai += 1;
                    if !selected {
                        *slot = None;
                        continue;
                    }
                    let shadow = self.vm.shadow(h).unwrap_or(&[]);
                    let oom = |_| AdError::Trap(vm::Trap::host(vm::TrapKind::OutOfMemory));
                    match slot {
                        Some(Value::Arr(v)) => {
                            v.clear();
                            vm::oom::bypass(|| v.try_reserve_exact(shadow.len())).map_err(oom)?;
                            v.extend_from_slice(shadow);
                        }
                        _ => {
                            let mut v = Vec::new();
                            vm::oom::bypass(|| v.try_reserve_exact(shadow.len())).map_err(oom)?;
                            v.extend_from_slice(shadow);
                            *slot = Some(Value::Arr(v));
                        }
                    }
                }
                Value::I64(_) | Value::Bool(_) => *slot = None,
            }
        }
        Ok(())
    }

    /// Prepare the gradient of `f`, whose parameters must be scalars
    /// (`f64`, `i64`, `bool`; no arrays), with respect to those selected by
    /// `wrt` (one flag per parameter, `f64` ones only): builds the derived
    /// pair as [`Engine::derive_wrt`] does. [`Engine::grad_prepared`] then
    /// computes value and gradient with none of [`Engine::grad_wrt_into`]'s
    /// per-call lookups and conversions.
    pub fn prepare(&mut self, f: FuncId, wrt: &[bool]) -> Result<Prepared, AdError> {
        let func = self.scalar_params_only(f, "gradient", "grad_wrt")?;
        let types = func.params.iter().map(|p| func.ty(*p)).collect();
        let d = self.derive_wrt(f, wrt)?;
        Ok(Prepared {
            engine: self.id,
            f,
            d,
            types,
            wrt: wrt.into(),
        })
    }

    /// Value and gradient of a [`Prepared`] function at `args` (one per
    /// parameter, of its type); `grad` receives one entry per parameter,
    /// 0 for those not selected (and for `i64` and `bool` ones). No
    /// allocation after the first call.
    pub fn grad_prepared(
        &mut self,
        p: &Prepared,
        args: &[Value],
        grad: &mut [f64],
    ) -> Result<f64, AdError> {
        let n = p.types.len();
        if !self.owns(p) || args.len() != n || grad.len() != n {
            return Err(self.prepared_refused(p, args, grad.len()));
        }
        self.raw.clear();
        for (a, t) in args.iter().zip(&p.types) {
            match scalar_bits(a, *t) {
                Some(bits) => self.raw.push(bits),
                None => return Err(self.prepared_refused(p, args, grad.len())),
            }
        }
        self.vm.begin(true);
        let value = self.forward_reverse(p.f, p.d)?;
        // One result per f64 parameter, in order.
        let mut results = self.vm.results().iter();
        for ((g, t), selected) in grad.iter_mut().zip(&p.types).zip(&p.wrt) {
            *g = 0.0;
            if *t == Type::F64 {
                let Some(r) = results.next() else {
                    return Err(AdError::Internal(
                        "a prepared pullback returned too few values".to_string(),
                    ));
                };
                if *selected {
                    *g = f64::from_bits(*r);
                }
            }
        }
        Ok(value)
    }

    /// Value and gradient of a [`Prepared`] function at many points, in
    /// parallel on the current rayon thread pool (the global one, or the
    /// one whose [`rayon::ThreadPool::install`] this runs in).
    ///
    /// `points` holds the arguments of each point (each as
    /// [`Engine::grad_prepared`] takes them); `values` receives one value
    /// per point and `grads` [`Prepared::arity`] entries per point, point
    /// after point (row-major). Each worker thread runs its own clone of
    /// this engine, made once per call: the derived code is built already
    /// (by [`Engine::prepare`]) and shared, and after each worker's first
    /// point no point allocates (allocations are per call and per thread,
    /// not per point). A point that fails (a trap, an argument of the wrong
    /// kind) gets NaN as value and gradient; the failures are returned with
    /// their point's index, in index order (an empty vector, which does not
    /// allocate, when none fails). Buffers of the wrong size, or a
    /// gradient prepared by an unrelated engine, are an [`AdError::Args`]
    /// before anything runs.
    ///
    /// ```
    /// let src = "fn @sq(%x: f64) -> f64 {\nentry:\n    %y = mul %x, %x\n    ret %y\n}";
    /// let module = assembler::assemble(src, "sq.adasm").expect("assembles");
    /// let mut engine = ad::Engine::new(module).expect("verifies");
    /// let f = engine.find("sq").expect("defined");
    /// let p = engine.prepare(f, &[true]).expect("derives");
    /// let points: Vec<[vm::Value; 1]> = (0..100).map(|i| [vm::Value::F64(i as f64)]).collect();
    /// let (mut values, mut grads) = (vec![0.0; 100], vec![0.0; 100]);
    /// let failed = engine.grad_many(&p, &points, &mut values, &mut grads).expect("shapes fit");
    /// assert!(failed.is_empty());
    /// assert_eq!((values[7], grads[7]), (49.0, 14.0));
    /// ```
    pub fn grad_many<P: AsRef<[Value]> + Sync>(
        &self,
        p: &Prepared,
        points: &[P],
        values: &mut [f64],
        grads: &mut [f64],
    ) -> Result<Vec<(usize, AdError)>, AdError> {
        use rayon::prelude::*;
        let arity = p.arity();
        if !self.owns(p) {
            return Err(AdError::Args(
                "the gradient was prepared by another engine".to_string(),
            ));
        }
        if values.len() != points.len() || Some(grads.len()) != points.len().checked_mul(arity) {
            return Err(AdError::Args(format!(
                "{} point(s) of {arity} argument(s) need {} value(s) and {} gradient entries; \
                 the buffers hold {} and {}",
                points.len(),
                points.len(),
                points.len().saturating_mul(arity),
                values.len(),
                grads.len()
            )));
        }
        if points.is_empty() {
            return Ok(Vec::new());
        }
        let threads = rayon::current_num_threads().max(1);
        let workers: Vec<Mutex<Engine>> = (0..threads).map(|_| Mutex::new(self.clone())).collect();
        // A few chunks per thread, so that threads that finish early take
        // over work; each chunk locks its thread's engine once.
        let size = points.len().div_ceil(threads * 4).max(1);
        let mut chunks = Vec::with_capacity(points.len().div_ceil(size));
        let mut grad_rows = grads;
        for (k, (pts, vals)) in points.chunks(size).zip(values.chunks_mut(size)).enumerate() {
            let (g, rest) = std::mem::take(&mut grad_rows).split_at_mut(pts.len() * arity);
            grad_rows = rest;
            chunks.push((k * size, pts, vals, g));
        }
        let mut failed: Vec<(usize, AdError)> = chunks
            .into_par_iter()
            .map(|(first, pts, vals, g)| {
                let mut failed = Vec::new();
                let me = rayon::current_thread_index().unwrap_or(0) % workers.len();
                // A worker that panicked cannot have left the engine
                // half-changed in a way that matters here (no derivation
                // runs): use it all the same.
                let mut engine = workers[me].lock().unwrap_or_else(|e| e.into_inner());
                for (j, (pt, v)) in pts.iter().zip(vals.iter_mut()).enumerate() {
                    let row = &mut g[j * arity..(j + 1) * arity];
                    match engine.grad_prepared(p, pt.as_ref(), row) {
                        Ok(value) => *v = value,
                        Err(e) => {
                            *v = f64::NAN;
                            row.fill(f64::NAN);
                            failed.push((first + j, e));
                        }
                    }
                }
                failed
            })
            .reduce(Vec::new, |mut a, mut b| {
                a.append(&mut b);
                a
            });
        failed.sort_by_key(|(i, _)| *i);
        Ok(failed)
    }

    /// Whether `p` was prepared by this engine, or by one it was cloned
    /// from before the clone (so that its derived functions are the same
    /// here).
    #[inline]
    pub(crate) fn owns(&self, p: &Prepared) -> bool {
        p.engine == self.id
            || self.lineage.iter().any(|&(id, shared)| {
                id == p.engine && p.d.fwd.index() < shared && p.d.rev.index() < shared
            })
    }

    /// Why [`Engine::grad_prepared`] refused a call.
    #[cold]
    pub(crate) fn prepared_refused(&self, p: &Prepared, args: &[Value], grad: usize) -> AdError {
        let n = p.types.len();
        if !self.owns(p) {
            return AdError::Args("the gradient was prepared by another engine".to_string());
        }
        if args.len() != n {
            return AdError::Args(format!(
                "{} argument(s) for a function of {n} parameter(s)",
                args.len()
            ));
        }
        if grad != n {
            return AdError::Args(format!("a gradient buffer of {grad} for {n} parameter(s)"));
        }
        match self.arg_error(p.f, args) {
            Err(e) => e,
            Ok(()) => AdError::Internal("a prepared call refused for no reason".to_string()),
        }
    }

    /// Run the derived pair `d` of `f` on the raw arguments in `self.raw`
    /// (after `Vm::begin`, array arguments in the heap): the forward
    /// function, whose value this returns, then the pullback with seed 1,
    /// which must leave both stacks empty; its results stay in the VM.
    // Always inlined: called once per gradient, it is the hot path of a
    // small function's gradient (a call here costs about 30 instructions).
    #[inline(always)]
    pub(crate) fn forward_reverse(&mut self, f: FuncId, d: Derived) -> Result<f64, AdError> {
        self.vm.call_raw(&self.program, d.fwd, &self.raw)?;
        let value = f64::from_bits(self.vm.results()[0]);
        self.vm
            .call_raw(&self.program, d.rev, &[1.0f64.to_bits()])?;
        if self.vm.comms_len() != 0 || self.vm.blk_len() != 0 {
            return Err(AdError::Internal(format!(
                "stacks not empty after the pullback of @{} ({} comms, {} block ids)",
                self.module.func(f).name,
                self.vm.comms_len(),
                self.vm.blk_len()
            )));
        }
        Ok(value)
    }

    /// The mask selecting every `f64` and `f64[]` parameter of `f`, taken
    /// out of the engine (without allocating) for the length of a call;
    /// the caller puts it back.
    pub(crate) fn take_full_mask(&mut self, f: FuncId) -> Result<Box<[bool]>, AdError> {
        match self.full_masks.get_mut(f.index()) {
            Some(m) => Ok(std::mem::take(m)),
            None => Err(AdError::Args(format!("no function {f}"))),
        }
    }
}
