//! A generator of random, well-formed `.adasm` programs.
//!
//! Each program has an entry function `@main(%x0: f64, %x1: f64, %v: f64[],
//! %n: i64) -> f64` and a few helpers (one of them recursive, one taking an
//! array). Bodies mix straight-line arithmetic, two- and three-way joins with
//! phis, counted loops with loop-carried phis (trip counts constant or from
//! `%n`), early `ret` from inside loops, calls, and array reads and in-place
//! writes. Values stay bounded (most unary operations are bounded, divisions
//! are by `1 + b*b`) so that finite differences stay meaningful. A few
//! operations have kinks (`abs`, `min`, `max`, `select` on an f64
//! comparison); callers of the finite-difference check skip points where the
//! difference quotients disagree with each other.
//!
//! The generator is a plain function of a seed, so property tests, fuzz
//! targets and reproductions share it: `program(seed)` always gives the same
//! text.

use std::fmt::Write;
use vm::Value;

/// A small, fast, deterministic RNG (xorshift64*).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// Uniform in `[lo, hi)`.
    pub fn float(&mut self, lo: f64, hi: f64) -> f64 {
        let u = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        lo + u * (hi - lo)
    }

    pub fn chance(&mut self, p: f64) -> bool {
        self.float(0.0, 1.0) < p
    }
}

/// A generated program and a point to evaluate it at.
#[derive(Clone, Debug)]
pub struct Generated {
    pub source: String,
    /// The entry function's name (without `@`).
    pub entry: String,
    pub args: Vec<Value>,
}

/// Knobs of the generator.
#[derive(Clone, Debug)]
pub struct Config {
    /// Statements per function body (upper bound).
    pub statements: usize,
    /// Nesting depth of branches and loops.
    pub depth: usize,
    /// Allow operations with kinks (abs, min, max, select on f64).
    pub kinks: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            statements: 8,
            depth: 2,
            kinks: true,
        }
    }
}

/// The program for `seed`.
pub fn program(seed: u64, cfg: &Config) -> Generated {
    let mut rng = Rng::new(seed);
    let mut out = String::new();
    let helpers = Helpers {
        binary: "h0",
        rec: "rec",
        sum: "asum",
    };

    // @h0(a, b): straight-line code and a branch.
    let mut h = Body::new(&["%a", "%b"], &[], &[], &mut rng, cfg.clone(), None);
    h.cfg.depth = 1;
    h.statements(4);
    h.finish(&mut out, "fn @h0(%a: f64, %b: f64) -> f64");

    // @rec(x, d): recursion with an f64 payload.
    let step = rng.below(3);
    let body = match step {
        0 => "%s = sin %x\n    %m = mul %s, 0.9",
        1 => "%s = tanh %x\n    %m = add %s, 0.25",
        _ => "%s = cos %x\n    %m = mul %s, %x",
    };
    let combine = ["%o = mul %r, %x", "%o = add %r, %x", "%o = sin %r"][rng.below(3)];
    let _ = write!(
        out,
        "fn @rec(%x: f64, %d: i64) -> f64 {{\nentry:\n    %z = le %d, 0\n    br %z, base, step\nbase:\n    ret %x\nstep:\n    %d2 = sub %d, 1\n    {body}\n    %r = call @rec(%m, %d2)\n    {combine}\n    ret %o\n}}\n\n"
    );

    // @asum(v, s): a loop over an array parameter, scaled.
    out.push_str(
        "fn @asum(%v: f64[], %s: f64) -> f64 {\nentry:\n    %len = alen %v\n    jmp head\nhead:\n    %i = phi [entry: 0], [body: %i2]\n    %acc = phi [entry: 0.0], [body: %acc2]\n    %c = lt %i, %len\n    br %c, body, done\nbody:\n    %e = aget %v, %i\n    %t = mul %e, %s\n    %acc2 = add %acc, %t\n    %i2 = add %i, 1\n    jmp head\ndone:\n    ret %acc\n}\n\n",
    );

    let mut m = Body::new(
        &["%x0", "%x1"],
        &["%n"],
        &[("%v", 3)],
        &mut rng,
        cfg.clone(),
        Some(helpers),
    );
    m.statements(cfg.statements);
    m.finish(
        &mut out,
        "fn @main(%x0: f64, %x1: f64, %v: f64[], %n: i64) -> f64",
    );

    let args = vec![
        Value::F64(rng.float(-1.5, 1.5)),
        Value::F64(rng.float(-1.5, 1.5)),
        Value::Arr((0..3).map(|_| rng.float(-1.5, 1.5)).collect()),
        Value::I64(rng.below(4) as i64),
    ];
    Generated {
        source: out,
        entry: "main".into(),
        args,
    }
}

#[derive(Clone, Copy)]
struct Helpers {
    binary: &'static str,
    rec: &'static str,
    sum: &'static str,
}

/// A loop header being generated (see [`Body::open_loop`]).
struct LoopHead {
    /// The block that jumps to the header.
    pre: String,
    /// The line of the header's first phi.
    phi_line: usize,
    /// Carried f64 values: phis, their first values, their next values.
    phis: Vec<String>,
    inits: Vec<String>,
    nexts: Vec<String>,
}

/// The body of one function under construction.
struct Body<'r> {
    lines: Vec<String>,
    fresh: usize,
    /// f64 registers available (dominating) at the current point.
    fpool: Vec<String>,
    ipool: Vec<String>,
    arrays: Vec<(String, usize)>,
    /// The block currently being filled.
    block: String,
    rng: &'r mut Rng,
    cfg: Config,
    helpers: Option<Helpers>,
    depth: usize,
}

impl<'r> Body<'r> {
    fn new(
        fparams: &[&str],
        iparams: &[&str],
        arrays: &[(&str, usize)],
        rng: &'r mut Rng,
        cfg: Config,
        helpers: Option<Helpers>,
    ) -> Body<'r> {
        Body {
            lines: vec!["entry:".into()],
            fresh: 0,
            fpool: fparams.iter().map(|s| s.to_string()).collect(),
            ipool: iparams.iter().map(|s| s.to_string()).collect(),
            arrays: arrays.iter().map(|(s, n)| (s.to_string(), *n)).collect(),
            block: "entry".into(),
            rng,
            cfg,
            helpers,
            depth: 0,
        }
    }

    fn reg(&mut self, prefix: &str) -> String {
        self.fresh += 1;
        format!("%{prefix}{}", self.fresh)
    }

    fn label(&mut self, prefix: &str) -> String {
        self.fresh += 1;
        format!("{prefix}{}", self.fresh)
    }

    fn emit(&mut self, line: String) {
        self.lines.push(format!("    {line}"));
    }

    fn start_block(&mut self, name: &str) {
        self.lines.push(format!("{name}:"));
        self.block = name.to_string();
    }

    fn pick_f(&mut self) -> String {
        // Prefer recent values so that chains form.
        let n = self.fpool.len();
        let window = n.min(6);
        let i = n - 1 - self.rng.below(window);
        self.fpool[i].clone()
    }

    fn def_f(&mut self, text: &str) -> String {
        let r = self.reg("t");
        self.emit(format!("{r} = {text}"));
        self.fpool.push(r.clone());
        r
    }

    fn def_tmp(&mut self, text: &str) -> String {
        let r = self.reg("u");
        self.emit(format!("{r} = {text}"));
        r
    }

    fn statements(&mut self, n: usize) {
        let count = 1 + self.rng.below(n.max(1));
        for _ in 0..count {
            self.statement();
        }
    }

    fn statement(&mut self) {
        let nested = self.depth < self.cfg.depth;
        match self.rng.below(20) {
            0..=1 if nested => self.diamond(),
            2 if nested => self.three_way(),
            3 if nested => self.counted_loop(),
            4 if nested => self.shaped_loop(),
            5 if self.helpers.is_some() => self.call(),
            6 if !self.arrays.is_empty() => self.array_write(),
            7 if !self.arrays.is_empty() => self.array_read(),
            8 => self.local_array(),
            _ => self.arith(),
        }
    }

    /// One f64 operation on pool values.
    fn arith(&mut self) {
        let a = self.pick_f();
        let b = self.pick_f();
        let kinks = self.cfg.kinks;
        match self.rng.below(32) {
            0 => self.def_f(&format!("add {a}, {b}")),
            1 => self.def_f(&format!("sub {a}, {b}")),
            2 | 3 => self.def_f(&format!("mul {a}, {b}")),
            4 => {
                let t = self.def_tmp(&format!("mul {b}, {b}"));
                let u = self.def_tmp(&format!("add {t}, 1.0"));
                self.def_f(&format!("div {a}, {u}"))
            }
            5 => self.def_f(&format!("sin {a}")),
            6 => self.def_f(&format!("cos {a}")),
            7 => self.def_f(&format!("tanh {a}")),
            8 => {
                let t = self.def_tmp(&format!("tanh {a}"));
                self.def_f(&format!("exp {t}"))
            }
            9 => {
                let t = self.def_tmp(&format!("mul {a}, {a}"));
                let u = self.def_tmp(&format!("add {t}, 1.0"));
                self.def_f(&format!("log {u}"))
            }
            10 => {
                let t = self.def_tmp(&format!("mul {a}, {a}"));
                let u = self.def_tmp(&format!("add {t}, 0.5"));
                self.def_f(&format!("sqrt {u}"))
            }
            11 => {
                let t = self.def_tmp(&format!("mul {a}, {a}"));
                let u = self.def_tmp(&format!("add {t}, 1.0"));
                let e = self.def_tmp(&format!("tanh {b}"));
                self.def_f(&format!("pow {u}, {e}"))
            }
            12 => {
                let t = self.def_tmp(&format!("tanh {a}"));
                self.def_f(&format!("tan {t}"))
            }
            13 => self.def_f(&format!("neg {a}")),
            14 => self.def_f(&format!("copy {a}")),
            // `nograd` changes the derivative, not the value, so finite
            // differences only agree with it where its input is constant
            // in the arguments: here a value derived from an integer.
            15 if !self.ipool.is_empty() => {
                let i = self.ipool[self.rng.below(self.ipool.len())].clone();
                let t = self.def_tmp(&format!("itof {i}"));
                let u = self.def_tmp(&format!("nograd {t}"));
                self.def_f(&format!("mul {u}, {b}"))
            }
            16 if !self.ipool.is_empty() => {
                let i = self.ipool[self.rng.below(self.ipool.len())].clone();
                let t = self.def_tmp(&format!("itof {i}"));
                self.def_f(&format!("mul {t}, {a}"))
            }
            17 if kinks => self.def_f(&format!("abs {a}")),
            18 if kinks => self.def_f(&format!("min {a}, {b}")),
            19 if kinks => self.def_f(&format!("max {a}, {b}")),
            20 if kinks => {
                let c = self.def_tmp(&format!("lt {a}, {b}"));
                let x = self.pick_f();
                self.def_f(&format!("select {c}, {x}, {a}"))
            }
            // The math of adasm.md §7, each on arguments in its domain.
            21 => {
                let t = self.def_tmp(&format!("tanh {a}"));
                let op = ["asin", "acos", "atan", "erf", "erfc"][self.rng.below(5)];
                self.def_f(&format!("{op} {t}"))
            }
            22 => {
                let op = ["atan2", "hypot"][self.rng.below(2)];
                let t = self.def_tmp(&format!("add {b}, 1.5"));
                self.def_f(&format!("{op} {a}, {t}"))
            }
            23 => {
                let t = self.def_tmp(&format!("tanh {a}"));
                let op = ["sinh", "cosh", "expm1"][self.rng.below(3)];
                self.def_f(&format!("{op} {t}"))
            }
            24 => {
                let t = self.def_tmp(&format!("mul {a}, {a}"));
                let u = self.def_tmp(&format!("add {t}, 0.5"));
                let op = ["log1p", "log2", "log10", "cbrt"][self.rng.below(4)];
                self.def_f(&format!("{op} {u}"))
            }
            // Rounding has derivative 0: added to a smooth value, the
            // gradient is that value's (finite differences agree away
            // from the steps, which the kink guard keeps them off).
            25 if kinks => {
                let op = ["floor", "ceil", "round", "trunc"][self.rng.below(4)];
                let r = self.def_tmp(&format!("{op} {a}"));
                self.def_f(&format!("add {r}, {b}"))
            }
            // JAX's "where" trap: the side a select does not choose has an
            // infinite or nan derivative (sqrt or log below 0, a division
            // by zero); its zero cotangent must contribute exactly zero.
            26 if kinks => {
                let op = ["sqrt", "log", "asin"][self.rng.below(3)];
                let s = self.def_tmp(&format!("{op} {a}"));
                let c = self.def_tmp(&format!("gt {a}, 0.25"));
                let lim = self.def_tmp(&format!("lt {a}, 0.75"));
                let c = if op == "asin" {
                    self.def_tmp(&format!("and {c}, {lim}"))
                } else {
                    c
                };
                self.def_f(&format!("select {c}, {s}, {b}"))
            }
            27 if kinks => {
                let q = self.def_tmp(&format!("div {b}, {a}"));
                let t = self.def_tmp(&format!("mul {q}, {b}"));
                let c = self.def_tmp(&format!("gt {a}, 0.5"));
                self.def_f(&format!("select {c}, {t}, {b}"))
            }
            28 if kinks => {
                let s = self.def_tmp(&format!("sqrt {a}"));
                self.def_f(&format!("min {b}, {s}"))
            }
            _ => {
                let k = self.rng.float(-2.0, 2.0);
                self.def_f(&format!("mul {a}, {k:?}"))
            }
        };
    }

    /// A condition: on an i64 (no kink) or on two f64 values.
    fn condition(&mut self) -> String {
        if !self.ipool.is_empty() && self.rng.chance(0.5) {
            let i = self.ipool[self.rng.below(self.ipool.len())].clone();
            let k = self.rng.below(3);
            self.def_tmp(&format!("gt {i}, {k}"))
        } else {
            let a = self.pick_f();
            let b = self.pick_f();
            let cmp = ["lt", "le", "gt", "ge"][self.rng.below(4)];
            self.def_tmp(&format!("{cmp} {a}, {b}"))
        }
    }

    /// Run `arm` in a nested scope; returns the value it leaves and the block
    /// it ends in.
    fn arm(&mut self, label: &str) -> (String, String) {
        let saved = (self.fpool.clone(), self.ipool.clone());
        self.start_block(label);
        self.depth += 1;
        let stmts = 1 + self.rng.below(3);
        for _ in 0..stmts {
            self.statement();
        }
        self.depth -= 1;
        let v = self.pick_f();
        let end = self.block.clone();
        (self.fpool, self.ipool) = saved;
        (v, end)
    }

    fn diamond(&mut self) {
        let c = self.condition();
        let (t, e, j) = (self.label("then"), self.label("else"), self.label("join"));
        self.emit(format!("br {c}, {t}, {e}"));
        let (vt, et) = self.arm(&t);
        self.emit(format!("jmp {j}"));
        let (ve, ee) = self.arm(&e);
        self.emit(format!("jmp {j}"));
        self.start_block(&j);
        let p = self.reg("p");
        self.emit(format!("{p} = phi [{et}: {vt}], [{ee}: {ve}]"));
        self.fpool.push(p);
    }

    /// A join with three predecessors.
    fn three_way(&mut self) {
        let c1 = self.condition();
        let c2 = self.condition();
        let (a, x, b, d, j) = (
            self.label("a"),
            self.label("x"),
            self.label("b"),
            self.label("d"),
            self.label("join"),
        );
        self.emit(format!("br {c1}, {a}, {x}"));
        let (va, ea) = self.arm(&a);
        self.emit(format!("jmp {j}"));
        self.start_block(&x);
        self.emit(format!("br {c2}, {b}, {d}"));
        let (vb, eb) = self.arm(&b);
        self.emit(format!("jmp {j}"));
        let (vd, ed) = self.arm(&d);
        self.emit(format!("jmp {j}"));
        self.start_block(&j);
        let p = self.reg("p");
        self.emit(format!(
            "{p} = phi [{ea}: {va}], [{eb}: {vb}], [{ed}: {vd}]"
        ));
        self.fpool.push(p);
    }

    /// `for k in 0..trip` with one or two loop-carried f64 values, sometimes
    /// with an early `ret` from inside the body.
    fn counted_loop(&mut self) {
        let (h, body, exit) = (self.label("head"), self.label("body"), self.label("exit"));
        let trip = if !self.ipool.is_empty() && self.rng.chance(0.4) {
            self.ipool[self.rng.below(self.ipool.len())].clone()
        } else {
            (1 + self.rng.below(4)).to_string()
        };
        let carried = 1 + self.rng.below(2);
        let inits: Vec<String> = (0..carried).map(|_| self.pick_f()).collect();
        let pre = self.block.clone();
        self.emit(format!("jmp {h}"));
        self.start_block(&h);
        let k = self.reg("k");
        let k2 = self.reg("k");
        let phis: Vec<String> = (0..carried).map(|_| self.reg("c")).collect();
        let nexts: Vec<String> = (0..carried).map(|_| self.reg("c")).collect();
        // The back edge comes from the body's last block, known only after
        // the body is generated: patch the phi lines then.
        let phi_line = self.lines.len();
        self.emit(String::new());
        for _ in 0..carried {
            self.emit(String::new());
        }
        let c = self.reg("lc");
        self.emit(format!("{c} = lt {k}, {trip}"));
        self.emit(format!("br {c}, {body}, {exit}"));

        let saved = (self.fpool.clone(), self.ipool.clone());
        self.fpool.extend(phis.iter().cloned());
        self.ipool.push(k.clone());
        self.start_block(&body);
        self.depth += 1;
        if self.rng.chance(0.25) {
            // Early return from inside the loop.
            let e = self.reg("early");
            let (r, cont) = (self.label("ret"), self.label("cont"));
            let limit = self.rng.below(3);
            self.emit(format!("{e} = gt {k}, {limit}"));
            self.emit(format!("br {e}, {r}, {cont}"));
            self.start_block(&r);
            let v = self.pick_f();
            self.emit(format!("ret {v}"));
            self.start_block(&cont);
        }
        let stmts = 1 + self.rng.below(3);
        for _ in 0..stmts {
            self.statement();
        }
        self.depth -= 1;
        for (i, next) in nexts.iter().enumerate() {
            let v = self.pick_f();
            let op = if self.rng.chance(0.5) { "sin" } else { "tanh" };
            self.emit(format!("{next} = {op} {v}"));
            let _ = i;
        }
        self.emit(format!("{k2} = add {k}, 1"));
        let latch = self.block.clone();
        self.emit(format!("jmp {h}"));
        self.lines[phi_line] = format!("    {k} = phi [{pre}: 0], [{latch}: {k2}]");
        for i in 0..carried {
            self.lines[phi_line + 1 + i] = format!(
                "    {} = phi [{pre}: {}], [{latch}: {}]",
                phis[i], inits[i], nexts[i]
            );
        }
        (self.fpool, self.ipool) = saved;
        self.start_block(&exit);
        // The header's phis dominate the exit.
        self.fpool.extend(phis);
    }

    /// A loop of one of the shapes the AD stage treats specially (see
    /// `ad::analysis::Counted`): an induction variable stepped by a constant
    /// other than 1, added or subtracted, from a constant or an integer
    /// register; a `while` on an f64 counter (no integer induction variable,
    /// so the forward code counts); an exit from the middle of the body into
    /// a join with phis; a loop of one block; a triangular nest whose inner
    /// loop starts at the outer counter. Trip counts stay small (at most 4
    /// per loop) and never depend on f64 data, so finite differences do not
    /// cross a change of path.
    fn shaped_loop(&mut self) {
        match self.rng.below(5) {
            0 => self.stepped_loop(),
            1 => self.while_loop(),
            2 => self.mid_exit_loop(),
            3 => self.one_block_loop(),
            _ => self.triangular_loop(),
        }
    }

    /// Jump to a new loop header `header` and start it, with lines kept
    /// for its phis (a counter and one or two carried f64 values), which
    /// [`Body::close_loop`] writes once the latch is known.
    fn open_loop(&mut self, header: &str) -> LoopHead {
        let n = 1 + self.rng.below(2);
        let inits = (0..n).map(|_| self.pick_f()).collect();
        let phis = (0..n).map(|_| self.reg("c")).collect();
        let nexts = (0..n).map(|_| self.reg("c")).collect();
        let pre = self.block.clone();
        self.emit(format!("jmp {header}"));
        self.start_block(header);
        let phi_line = self.lines.len();
        for _ in 0..=n {
            self.emit(String::new());
        }
        LoopHead {
            pre,
            phi_line,
            phis,
            inits,
            nexts,
        }
    }

    /// Define each carried value's next value from the pool (at the end of
    /// the loop body).
    fn step_carried(&mut self, head: &LoopHead) {
        for next in &head.nexts {
            let v = self.pick_f();
            let op = if self.rng.chance(0.5) { "sin" } else { "tanh" };
            self.emit(format!("{next} = {op} {v}"));
        }
    }

    /// Write the header's phis: `counter_phi` (a whole phi) and the carried
    /// values', entered from `head.pre` and from `latch`.
    fn close_loop(&mut self, head: &LoopHead, counter_phi: String, latch: &str) {
        self.lines[head.phi_line] = format!("    {counter_phi}");
        for (i, phi) in head.phis.iter().enumerate() {
            self.lines[head.phi_line + 1 + i] = format!(
                "    {phi} = phi [{}: {}], [{latch}: {}]",
                head.pre, head.inits[i], head.nexts[i]
            );
        }
    }

    /// One to `max` statements one nesting level deeper.
    fn nested_statements(&mut self, max: usize) {
        self.depth += 1;
        for _ in 0..1 + self.rng.below(max) {
            self.statement();
        }
        self.depth -= 1;
    }

    /// `for (k = init; k <> bound; k += step)` with `step` in +-{1,2,3,5}.
    fn stepped_loop(&mut self) {
        let (h, body, exit) = (self.label("sh"), self.label("sb"), self.label("sx"));
        let step: i64 = [1, 2, 3, 5, -1, -2, -3, -5][self.rng.below(8)];
        let trip = self.rng.below(5) as i64;
        let (init, bound) = if !self.ipool.is_empty() && self.rng.chance(0.5) {
            let lo = self.ipool[self.rng.below(self.ipool.len())].clone();
            let b = self.reg("bd");
            self.emit(format!("{b} = add {lo}, {}", trip * step));
            (lo, b)
        } else {
            let lo = [-3i64, 0, 4][self.rng.below(3)];
            (lo.to_string(), (lo + trip * step).to_string())
        };
        let head = self.open_loop(&h);
        let (k, k2) = (self.reg("k"), self.reg("k"));
        let c = self.reg("lc");
        let cmp = if step > 0 { "lt" } else { "gt" };
        self.emit(format!("{c} = {cmp} {k}, {bound}"));
        self.emit(format!("br {c}, {body}, {exit}"));
        let saved = (self.fpool.clone(), self.ipool.clone());
        self.fpool.extend(head.phis.iter().cloned());
        self.ipool.push(k.clone());
        self.start_block(&body);
        self.nested_statements(3);
        self.step_carried(&head);
        match (step > 0, self.rng.below(2)) {
            (true, 0) => self.emit(format!("{k2} = add {k}, {step}")),
            (true, _) => self.emit(format!("{k2} = add {step}, {k}")),
            (false, _) => self.emit(format!("{k2} = sub {k}, {}", -step)),
        }
        let latch = self.block.clone();
        self.emit(format!("jmp {h}"));
        let counter = format!("{k} = phi [{}: {init}], [{latch}: {k2}]", head.pre);
        self.close_loop(&head, counter, &latch);
        (self.fpool, self.ipool) = saved;
        self.start_block(&exit);
        self.fpool.extend(head.phis);
    }

    /// `while t < trip` on an f64 counter `t`: no integer phi at all.
    fn while_loop(&mut self) {
        let (h, body, exit) = (self.label("wh"), self.label("wb"), self.label("wx"));
        let trip = self.rng.below(4);
        let head = self.open_loop(&h);
        let (t, t2) = (self.reg("w"), self.reg("w"));
        let c = self.reg("lc");
        self.emit(format!("{c} = lt {t}, {trip}.5"));
        self.emit(format!("br {c}, {body}, {exit}"));
        let saved = (self.fpool.clone(), self.ipool.clone());
        self.fpool.extend(head.phis.iter().cloned());
        self.start_block(&body);
        self.nested_statements(3);
        self.step_carried(&head);
        self.emit(format!("{t2} = add {t}, 1.0"));
        let latch = self.block.clone();
        self.emit(format!("jmp {h}"));
        let counter = format!("{t} = phi [{}: 0.0], [{latch}: {t2}]", head.pre);
        self.close_loop(&head, counter, &latch);
        (self.fpool, self.ipool) = saved;
        self.start_block(&exit);
        self.fpool.extend(head.phis);
    }

    /// A counted loop that may also leave from the middle of its body; the
    /// exit block joins both ways out with a phi.
    fn mid_exit_loop(&mut self) {
        let (h, body, cont, exit) = (
            self.label("mh"),
            self.label("mb"),
            self.label("mc"),
            self.label("mx"),
        );
        let trip = 1 + self.rng.below(4);
        let limit = self.rng.below(4);
        let head = self.open_loop(&h);
        let (k, k2) = (self.reg("k"), self.reg("k"));
        let c = self.reg("lc");
        self.emit(format!("{c} = lt {k}, {trip}"));
        self.emit(format!("br {c}, {body}, {exit}"));
        let saved = (self.fpool.clone(), self.ipool.clone());
        self.fpool.extend(head.phis.iter().cloned());
        self.ipool.push(k.clone());
        self.start_block(&body);
        // Straight-line work before the middle exit, so that the value
        // leaving there is defined in this block.
        self.arith();
        let out_mid = self.pick_f();
        let mid_block = self.block.clone();
        let e = self.reg("brk");
        self.emit(format!("{e} = ge {k}, {limit}"));
        self.emit(format!("br {e}, {exit}, {cont}"));
        self.start_block(&cont);
        self.nested_statements(2);
        self.step_carried(&head);
        self.emit(format!("{k2} = add {k}, 1"));
        let latch = self.block.clone();
        self.emit(format!("jmp {h}"));
        let counter = format!("{k} = phi [{}: 0], [{latch}: {k2}]", head.pre);
        self.close_loop(&head, counter, &latch);
        (self.fpool, self.ipool) = saved;
        // The exit's phi is its first line.
        self.start_block(&exit);
        let z = self.reg("z");
        self.emit(format!(
            "{z} = phi [{h}: {}], [{mid_block}: {out_mid}]",
            head.phis[0]
        ));
        self.fpool.push(z);
    }

    /// A loop that is a single block (its own latch), straight-line inside.
    fn one_block_loop(&mut self) {
        let (h, exit) = (self.label("oh"), self.label("ox"));
        let trip = 1 + self.rng.below(4);
        let head = self.open_loop(&h);
        let (k, k2) = (self.reg("k"), self.reg("k"));
        let saved = (self.fpool.clone(), self.ipool.clone());
        self.fpool.extend(head.phis.iter().cloned());
        for _ in 0..1 + self.rng.below(3) {
            self.arith();
        }
        self.step_carried(&head);
        self.emit(format!("{k2} = add {k}, 1"));
        let c = self.reg("lc");
        self.emit(format!("{c} = lt {k2}, {trip}"));
        self.emit(format!("br {c}, {h}, {exit}"));
        let counter = format!("{k} = phi [{}: 0], [{h}: {k2}]", head.pre);
        self.close_loop(&head, counter, &h);
        (self.fpool, self.ipool) = saved;
        self.start_block(&exit);
        self.fpool.extend(head.phis);
        self.fpool.extend(head.nexts);
    }

    /// `for i in 0..t { for j in i..t { .. } }` with a value carried
    /// through both loops.
    fn triangular_loop(&mut self) {
        let (ho, hi, li, lo, exit) = (
            self.label("to"),
            self.label("ti"),
            self.label("tb"),
            self.label("te"),
            self.label("tx"),
        );
        let t = 1 + self.rng.below(3);
        let init = self.pick_f();
        let pre = self.block.clone();
        let (i, i2, j, j2) = (self.reg("i"), self.reg("i"), self.reg("j"), self.reg("j"));
        let (c, c2, d, d2) = (self.reg("c"), self.reg("c"), self.reg("c"), self.reg("c"));
        self.emit(format!("jmp {ho}"));
        self.start_block(&ho);
        self.emit(format!("{i} = phi [{pre}: 0], [{lo}: {i2}]"));
        self.emit(format!("{c} = phi [{pre}: {init}], [{lo}: {c2}]"));
        let co = self.reg("lc");
        self.emit(format!("{co} = lt {i}, {t}"));
        self.emit(format!("br {co}, {hi}, {exit}"));
        let saved = (self.fpool.clone(), self.ipool.clone());
        self.fpool.push(c.clone());
        self.start_block(&hi);
        self.emit(format!("{j} = phi [{ho}: {i}], [{li}: {j2}]"));
        self.emit(format!("{d} = phi [{ho}: {c}], [{li}: {d2}]"));
        let ci = self.reg("lc");
        self.emit(format!("{ci} = lt {j}, {t}"));
        self.emit(format!("br {ci}, {li}, {lo}"));
        self.start_block(&li);
        self.fpool.push(d.clone());
        self.arith();
        let v = self.pick_f();
        self.emit(format!("{d2} = sin {v}"));
        self.emit(format!("{j2} = add {j}, 1"));
        self.emit(format!("jmp {hi}"));
        self.start_block(&lo);
        self.fpool.retain(|x| *x == c || saved.0.contains(x));
        self.fpool.push(d.clone());
        let w = self.pick_f();
        self.emit(format!("{c2} = tanh {w}"));
        self.emit(format!("{i2} = add {i}, 1"));
        self.emit(format!("jmp {ho}"));
        (self.fpool, self.ipool) = saved;
        self.start_block(&exit);
        self.fpool.push(c);
    }

    fn call(&mut self) {
        let Some(h) = self.helpers else { return };
        let a = self.pick_f();
        let b = self.pick_f();
        match self.rng.below(3) {
            0 => {
                self.def_f(&format!("call @{}({a}, {b})", h.binary));
            }
            1 => {
                let d = 1 + self.rng.below(4);
                self.def_f(&format!("call @{}({a}, {d})", h.rec));
            }
            _ => {
                if let Some((arr, _)) = self.arrays.first().cloned() {
                    self.def_f(&format!("call @{}({arr}, {a})", h.sum));
                }
            }
        }
    }

    fn array_write(&mut self) {
        let (arr, len) = self.arrays[self.rng.below(self.arrays.len())].clone();
        let i = self.rng.below(len);
        let v = self.pick_f();
        self.emit(format!("aset {arr}, {i}, {v}"));
    }

    fn array_read(&mut self) {
        let (arr, len) = self.arrays[self.rng.below(self.arrays.len())].clone();
        let i = self.rng.below(len);
        self.def_f(&format!("aget {arr}, {i}"));
    }

    /// A local array: filled from pool values, one element overwritten, read.
    fn local_array(&mut self) {
        let arr = self.reg("arr");
        self.emit(format!("{arr} = anew 2"));
        let a = self.pick_f();
        let b = self.pick_f();
        self.emit(format!("aset {arr}, 0, {a}"));
        self.emit(format!("aset {arr}, 1, {b}"));
        let t = self.def_tmp(&format!("aget {arr}, 0"));
        let u = self.def_tmp(&format!("mul {t}, {b}"));
        self.emit(format!("aset {arr}, 0, {u}"));
        self.def_f(&format!("aget {arr}, 0"));
        self.def_f(&format!("aget {arr}, 1"));
    }

    fn finish(mut self, out: &mut String, header: &str) {
        // Sum the values defined at this point (the most recent ones) so
        // that most of the computation reaches the result.
        let n = self.fpool.len();
        let take: Vec<String> = self.fpool[n.saturating_sub(8)..].to_vec();
        let mut acc = take[0].clone();
        for v in take.into_iter().skip(1) {
            let r = self.reg("s");
            self.emit(format!("{r} = add {acc}, {v}"));
            acc = r;
        }
        self.emit(format!("ret {acc}"));
        let _ = writeln!(out, "{header} {{");
        for l in &self.lines {
            let _ = writeln!(out, "{l}");
        }
        out.push_str("}\n\n");
    }
}

/// `fn @f0` calls `@f1` ... calls `@f{n-1}`, each squaring its argument
/// first (`@f{n-1}` returns its argument): a long call chain, for the
/// tests of large inputs (deriving, loading, listing).
pub fn call_chain(n: usize) -> String {
    let mut src = String::new();
    for i in 0..n {
        let body = if i + 1 < n {
            format!(
                "    %y = mul %x, %x\n    %r = call @f{}(%y)\n    ret %r",
                i + 1
            )
        } else {
            "    ret %x".to_string()
        };
        src.push_str(&format!(
            "fn @f{i}(%x: f64) -> f64 {{\nentry:\n{body}\n}}\n"
        ));
    }
    src
}
