//! A second family of random `.adasm` programs, integer-heavy, to reach what
//! `crate::gen` (smooth f64 programs for gradient checks) does not:
//! wrapping `mul`, `div` and `rem` (by zero, and `i64::MIN / -1`), i64
//! `min`/`max` ties, `select` on i64, `ftoi` of nan/inf/huge values, `itof`,
//! f64 division by zero (inf, nan), arrays of data-dependent length (negative
//! ones trap) indexed out of bounds, recursion of data-dependent depth (past
//! the depth limit), and data-dependent loops (Collatz-like, possibly
//! endless: run them under fuel). Many programs trap; a differential test
//! compares the trap class as well as values.
//!
//! `program(seed)` is a pure function of the seed. This file is shared by
//! the fuzz crate (`fuzz/src/lib.rs`) and the tests that include it with
//! the fuzz crate and the workspace tests (`ad/tests/it/differential.rs`, `ad/tests/it/fuzz_smoke.rs`).

use crate::gen::Rng;
use std::fmt::Write;
use vm::Value;

/// A generated program and the arguments to run its entry with.
#[derive(Clone, Debug)]
pub struct IntProgram {
    pub source: String,
    pub entry: String,
    pub args: Vec<Value>,
}

/// Integers that make arithmetic interesting.
const INTS: &[i64] = &[
    0,
    1,
    -1,
    2,
    3,
    -7,
    10,
    255,
    1 << 31,
    i64::MAX,
    i64::MIN,
    i64::MIN + 1,
    -4_611_686_018_427_387_904,
];

/// f64 values that make conversions and comparisons interesting.
const FLOATS: &[f64] = &[
    0.0,
    -0.0,
    1.5,
    -2.5,
    0.5,
    1e300,
    -1e300,
    9.3e18,
    -9_223_372_036_854_775_808.0,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NAN,
];

/// An f64 literal in `.adasm` syntax.
pub fn float_lit(x: f64) -> String {
    if x.is_nan() {
        "nan".into()
    } else if x == f64::INFINITY {
        "inf".into()
    } else if x == f64::NEG_INFINITY {
        "-inf".into()
    } else {
        let s = format!("{x:?}");
        // `{:?}` prints `1e300` and `1.5`, both valid; make sure there is a
        // fraction or an exponent so that it lexes as an f64.
        if s.contains('.') || s.contains('e') {
            s
        } else {
            format!("{s}.0")
        }
    }
}

fn pick_int(rng: &mut Rng) -> i64 {
    if rng.chance(0.7) {
        INTS[rng.below(INTS.len())]
    } else {
        (rng.next_u64() as i64) >> rng.below(60)
    }
}

fn pick_float(rng: &mut Rng) -> f64 {
    if rng.chance(0.6) {
        FLOATS[rng.below(FLOATS.len())]
    } else {
        rng.float(-100.0, 100.0)
    }
}

struct B<'r> {
    lines: Vec<String>,
    fresh: usize,
    ints: Vec<String>,
    floats: Vec<String>,
    bools: Vec<String>,
    arrays: Vec<String>,
    block: String,
    depth: usize,
    rng: &'r mut Rng,
}

impl B<'_> {
    fn reg(&mut self, p: &str) -> String {
        self.fresh += 1;
        format!("%{p}{}", self.fresh)
    }

    fn label(&mut self, p: &str) -> String {
        self.fresh += 1;
        format!("{p}{}", self.fresh)
    }

    fn emit(&mut self, s: String) {
        self.lines.push(format!("    {s}"));
    }

    fn start(&mut self, l: &str) {
        self.lines.push(format!("{l}:"));
        self.block = l.to_string();
    }

    fn pick(rng: &mut Rng, pool: &[String]) -> String {
        let n = pool.len();
        let w = n.min(5);
        pool[n - 1 - rng.below(w)].clone()
    }

    /// An i64 operand: a register, or sometimes a literal.
    fn iop(&mut self) -> String {
        if self.ints.is_empty() || self.rng.chance(0.2) {
            pick_int(self.rng).to_string()
        } else {
            Self::pick(self.rng, &self.ints)
        }
    }

    fn fop(&mut self) -> String {
        if self.floats.is_empty() || self.rng.chance(0.15) {
            float_lit(pick_float(self.rng))
        } else {
            Self::pick(self.rng, &self.floats)
        }
    }

    fn def_i(&mut self, text: String) -> String {
        let r = self.reg("i");
        self.emit(format!("{r} = {text}"));
        self.ints.push(r.clone());
        r
    }

    fn def_f(&mut self, text: String) -> String {
        let r = self.reg("f");
        self.emit(format!("{r} = {text}"));
        self.floats.push(r.clone());
        r
    }

    fn def_b(&mut self, text: String) -> String {
        let r = self.reg("c");
        self.emit(format!("{r} = {text}"));
        self.bools.push(r.clone());
        r
    }

    /// A divisor that is never zero (most of the time) or anything.
    fn divisor(&mut self) -> String {
        let d = self.iop();
        if self.rng.chance(0.75) {
            let c = self.reg("nz");
            self.emit(format!("{c} = ne {d}, 0"));
            let g = self.reg("g");
            self.emit(format!("{g} = select {c}, {d}, 3"));
            g
        } else {
            d
        }
    }

    fn cond(&mut self) -> String {
        if !self.bools.is_empty() && self.rng.chance(0.3) {
            return Self::pick(self.rng, &self.bools);
        }
        let cmp = ["lt", "le", "gt", "ge", "eq", "ne"][self.rng.below(6)];
        if self.rng.chance(0.7) {
            let (a, b) = (self.iop(), self.iop());
            self.def_b(format!("{cmp} {a}, {b}"))
        } else {
            let (a, b) = (self.fop(), self.fop());
            self.def_b(format!("{cmp} {a}, {b}"))
        }
    }

    fn statement(&mut self, helpers: bool) {
        match self.rng.below(30) {
            0..=2 => {
                let op = ["add", "sub", "mul"][self.rng.below(3)];
                let (a, b) = (self.iop(), self.iop());
                self.def_i(format!("{op} {a}, {b}"));
            }
            3 | 4 => {
                let op = ["div", "rem"][self.rng.below(2)];
                let a = self.iop();
                let d = self.divisor();
                self.def_i(format!("{op} {a}, {d}"));
            }
            5 => {
                let op = ["min", "max"][self.rng.below(2)];
                let (a, b) = (self.iop(), self.iop());
                self.def_i(format!("{op} {a}, {b}"));
            }
            6 => {
                let a = self.iop();
                self.def_i(format!("neg {a}"));
            }
            7 | 8 => {
                let c = self.cond();
                let (a, b) = (self.iop(), self.iop());
                self.def_i(format!("select {c}, {a}, {b}"));
            }
            9 => {
                let (c, d) = (self.cond(), self.cond());
                let op = ["and", "or"][self.rng.below(2)];
                let r = self.def_b(format!("{op} {c}, {d}"));
                if self.rng.chance(0.5) {
                    self.def_b(format!("not {r}"));
                }
            }
            10 | 11 => {
                let f = self.fop();
                if self.rng.chance(0.5) {
                    // Clamp (nan still passes: min/max keep their first operand).
                    let lo = self.reg("cl");
                    self.emit(format!("{lo} = min {f}, 1e18"));
                    let hi = self.reg("cl");
                    self.emit(format!("{hi} = max {lo}, -1e18"));
                    self.def_i(format!("ftoi {hi}"));
                } else {
                    self.def_i(format!("ftoi {f}"));
                }
            }
            12 | 13 => {
                let a = self.iop();
                self.def_f(format!("itof {a}"));
            }
            14 | 15 => {
                let op = ["add", "sub", "mul", "div", "min", "max", "pow"][self.rng.below(7)];
                let (a, b) = (self.fop(), self.fop());
                self.def_f(format!("{op} {a}, {b}"));
            }
            16 => {
                let op = ["abs", "neg", "sqrt", "log", "exp", "sin", "nograd", "copy"]
                    [self.rng.below(8)];
                let a = self.fop();
                self.def_f(format!("{op} {a}"));
            }
            17 => {
                let c = self.cond();
                let (a, b) = (self.fop(), self.fop());
                self.def_f(format!("select {c}, {a}, {b}"));
            }
            18 => {
                // An array of data-dependent length (negative traps).
                let a = self.iop();
                let mut n = self.reg("n");
                self.emit(format!("{n} = rem {a}, 6"));
                if self.rng.chance(0.6) {
                    let m = self.reg("n");
                    self.emit(format!("{m} = max {n}, 4"));
                    n = m;
                }
                let arr = self.reg("arr");
                self.emit(format!("{arr} = anew {n}"));
                self.arrays.push(arr);
            }
            19 | 20 if !self.arrays.is_empty() => {
                let arr = Self::pick(self.rng, &self.arrays);
                let i = self.iop();
                let mut idx = self.reg("ix");
                self.emit(format!("{idx} = rem {i}, 4"));
                if self.rng.chance(0.6) {
                    let m = self.reg("ix");
                    self.emit(format!("{m} = max {idx}, 0"));
                    idx = m;
                }
                if self.rng.chance(0.5) {
                    let v = self.fop();
                    self.emit(format!("aset {arr}, {idx}, {v}"));
                } else {
                    self.def_f(format!("aget {arr}, {idx}"));
                }
            }
            21 if !self.arrays.is_empty() => {
                let arr = Self::pick(self.rng, &self.arrays);
                self.def_i(format!("alen {arr}"));
            }
            22 | 23 if helpers => {
                let (a, b) = (self.iop(), self.iop());
                if self.rng.chance(0.5) {
                    self.def_i(format!("call @ih({a}, {b})"));
                } else {
                    let n = self.reg("dn");
                    self.emit(format!("{n} = rem {a}, 260"));
                    self.def_i(format!("call @irec({n}, {b})"));
                }
            }
            24 | 25 if self.depth < 2 => self.diamond(helpers),
            26 if self.depth < 2 => self.data_loop(helpers),
            27 if self.depth < 2 => {
                if self.rng.chance(0.5) {
                    self.self_loop();
                } else {
                    self.data_loop(helpers);
                }
            }
            _ => {
                let op = ["add", "mul"][self.rng.below(2)];
                let (a, b) = (self.iop(), self.iop());
                self.def_i(format!("{op} {a}, {b}"));
            }
        }
    }

    fn scoped(&mut self, helpers: bool, n: usize) -> (String, String, String) {
        let saved = (
            self.ints.clone(),
            self.floats.clone(),
            self.bools.clone(),
            self.arrays.clone(),
        );
        self.depth += 1;
        for _ in 0..n {
            self.statement(helpers);
        }
        self.depth -= 1;
        let i = self.iop();
        let f = self.fop();
        let end = self.block.clone();
        (self.ints, self.floats, self.bools, self.arrays) = saved;
        (i, f, end)
    }

    fn diamond(&mut self, helpers: bool) {
        let c = self.cond();
        if self.rng.chance(0.15) {
            // Both edges of the branch go to one block: one phi entry.
            let j = self.label("same");
            let (v, pre) = (self.iop(), self.block.clone());
            self.emit(format!("br {c}, {j}, {j}"));
            self.start(&j);
            self.def_i(format!("phi [{pre}: {v}]"));
            return;
        }
        let (t, e, j) = (self.label("then"), self.label("else"), self.label("join"));
        self.emit(format!("br {c}, {t}, {e}"));
        self.start(&t);
        let n = 1 + self.rng.below(3);
        let (it, ft, et) = self.scoped(helpers, n);
        self.emit(format!("jmp {j}"));
        self.start(&e);
        let n = 1 + self.rng.below(3);
        let (ie, fe, ee) = self.scoped(helpers, n);
        self.emit(format!("jmp {j}"));
        self.start(&j);
        self.def_i(format!("phi [{et}: {it}], [{ee}: {ie}]"));
        self.def_f(format!("phi [{et}: {ft}], [{ee}: {fe}]"));
    }

    /// A loop whose trip count depends on the data: halving, subtracting a
    /// data-dependent step (possibly endless), or Collatz.
    fn data_loop(&mut self, helpers: bool) {
        let (h, body, exit) = (self.label("head"), self.label("body"), self.label("exit"));
        let init_src = self.iop();
        let init = self.reg("k0");
        self.emit(format!("{init} = rem {init_src}, 1000"));
        let acc0 = self.iop();
        let kind = self.rng.below(3);
        let step = if kind == 1 {
            let s = self.iop();
            let r = self.reg("st");
            self.emit(format!("{r} = rem {s}, 4"));
            Some(r)
        } else {
            None
        };
        let pre = self.block.clone();
        self.emit(format!("jmp {h}"));
        self.start(&h);
        let (k, acc, k2, acc2) = (
            self.reg("k"),
            self.reg("acc"),
            self.reg("k"),
            self.reg("acc"),
        );
        let phi_at = self.lines.len();
        self.emit(String::new());
        self.emit(String::new());
        // Sometimes a pair of phis that swap on every iteration (a copy
        // cycle on the back edge).
        let swap = if self.rng.chance(0.4) {
            let (s1, s2, a, b) = (self.reg("sw"), self.reg("sw"), self.iop(), self.iop());
            self.emit(format!("{s1} = phi [{pre}: {a}], [LATCH: {s2}]"));
            self.emit(format!("{s2} = phi [{pre}: {b}], [LATCH: {s1}]"));
            Some((s1, s2))
        } else {
            None
        };
        let c = self.reg("lc");
        let test = if kind == 2 { "gt" } else { "ne" };
        let bound = if kind == 2 { 1 } else { 0 };
        self.emit(format!("{c} = {test} {k}, {bound}"));
        self.emit(format!("br {c}, {body}, {exit}"));
        let saved = (
            self.ints.clone(),
            self.floats.clone(),
            self.bools.clone(),
            self.arrays.clone(),
        );
        self.start(&body);
        self.ints.push(k.clone());
        self.ints.push(acc.clone());
        self.depth += 1;
        let n = self.rng.below(3);
        for _ in 0..n {
            self.statement(helpers);
        }
        self.depth -= 1;
        match (kind, &step) {
            (0, _) => self.emit(format!("{k2} = div {k}, 2")),
            (1, Some(s)) => self.emit(format!("{k2} = sub {k}, {s}")),
            _ => {
                // Collatz: k even ? k / 2 : 3k + 1 (wrapping).
                let (r, ev, half, t3, odd) = (
                    self.reg("r"),
                    self.reg("ev"),
                    self.reg("h"),
                    self.reg("t"),
                    self.reg("o"),
                );
                self.emit(format!("{r} = rem {k}, 2"));
                self.emit(format!("{ev} = eq {r}, 0"));
                self.emit(format!("{half} = div {k}, 2"));
                self.emit(format!("{t3} = mul {k}, 3"));
                self.emit(format!("{odd} = add {t3}, 1"));
                self.emit(format!("{k2} = select {ev}, {half}, {odd}"));
            }
        }
        let v = self.iop();
        let op = ["add", "mul", "sub", "max"][self.rng.below(4)];
        self.emit(format!("{acc2} = {op} {acc}, {v}"));
        let latch = self.block.clone();
        self.emit(format!("jmp {h}"));
        self.lines[phi_at] = format!("    {k} = phi [{pre}: {init}], [{latch}: {k2}]");
        self.lines[phi_at + 1] = format!("    {acc} = phi [{pre}: {acc0}], [{latch}: {acc2}]");
        if swap.is_some() {
            for l in &mut self.lines[phi_at + 2..phi_at + 4] {
                *l = l.replace("LATCH", &latch);
            }
        }
        (self.ints, self.floats, self.bools, self.arrays) = saved;
        self.start(&exit);
        self.ints.push(k);
        self.ints.push(acc);
        if let Some((s1, s2)) = swap {
            self.ints.push(s1);
            self.ints.push(s2);
        }
    }

    /// A loop of one block that branches back to itself, with a rotation
    /// of three phis (a copy cycle) and the exit test after the update.
    fn self_loop(&mut self) {
        let (l, exit) = (self.label("self"), self.label("out"));
        let src = self.iop();
        let init = self.reg("k0");
        self.emit(format!("{init} = rem {src}, 100"));
        let (a, b, c) = (self.iop(), self.iop(), self.iop());
        let pre = self.block.clone();
        self.emit(format!("jmp {l}"));
        self.start(&l);
        let (k, k2, r1, r2, r3) = (
            self.reg("k"),
            self.reg("k"),
            self.reg("rot"),
            self.reg("rot"),
            self.reg("rot"),
        );
        self.emit(format!("{k} = phi [{pre}: {init}], [{l}: {k2}]"));
        self.emit(format!("{r1} = phi [{pre}: {a}], [{l}: {r2}]"));
        self.emit(format!("{r2} = phi [{pre}: {b}], [{l}: {r3}]"));
        self.emit(format!("{r3} = phi [{pre}: {c}], [{l}: {r1}]"));
        let op = ["div", "sub"][self.rng.below(2)];
        let by = if op == "div" { "2" } else { "1" };
        self.emit(format!("{k2} = {op} {k}, {by}"));
        let t = self.reg("rt");
        self.emit(format!("{t} = mul {r1}, 3"));
        let u = self.reg("rt");
        self.emit(format!("{u} = add {t}, {r3}"));
        let cond = self.reg("lc");
        self.emit(format!("{cond} = gt {k2}, 0"));
        self.emit(format!("br {cond}, {l}, {exit}"));
        self.start(&exit);
        for v in [k2, r1, r2, u] {
            self.ints.push(v);
        }
    }
}

/// The program for `seed`.
pub fn program(seed: u64) -> IntProgram {
    let mut rng = Rng::new(seed ^ 0x1_D1FF_E4E7);
    let mut out = String::new();

    // @ih: straight-line integer code.
    {
        let mut b = B {
            lines: vec!["entry:".into()],
            fresh: 0,
            ints: vec!["%p".into(), "%q".into()],
            floats: Vec::new(),
            bools: Vec::new(),
            arrays: Vec::new(),
            block: "entry".into(),
            depth: 2,
            rng: &mut rng,
        };
        let n = 1 + b.rng.below(5);
        for _ in 0..n {
            b.statement(false);
        }
        let r = B::pick(b.rng, &b.ints);
        let _ = writeln!(out, "fn @ih(%p: i64, %q: i64) -> i64 {{");
        for l in &b.lines {
            let _ = writeln!(out, "{l}");
        }
        let _ = writeln!(out, "    ret {r}\n}}\n");
    }
    // @irec: recursion n levels deep (past the depth limit for large n).
    let k = pick_int(&mut rng);
    let _ = write!(
        out,
        "fn @irec(%n: i64, %acc: i64) -> i64 {{\nentry:\n    %z = le %n, 0\n    br %z, base, step\nbase:\n    ret %acc\nstep:\n    %n2 = sub %n, 1\n    %t = mul %acc, {k}\n    %t2 = add %t, %n\n    %r = call @irec(%n2, %t2)\n    ret %r\n}}\n\n"
    );

    let ret = ["i64", "f64", "bool", "f64[]"][rng.below(4)];
    let mut b = B {
        lines: vec!["entry:".into()],
        fresh: 0,
        ints: vec!["%a".into(), "%b".into()],
        floats: vec!["%x".into()],
        bools: Vec::new(),
        arrays: vec!["%v".into()],
        block: "entry".into(),
        depth: 0,
        rng: &mut rng,
    };
    let n = 3 + b.rng.below(10);
    for _ in 0..n {
        b.statement(true);
    }
    // Combine the most recent values so that most of the work reaches the
    // result.
    let k = b.ints.len();
    let mut acc = b.ints[k.saturating_sub(4)].clone();
    let recent: Vec<String> = b.ints[k.saturating_sub(3)..].to_vec();
    for v in recent {
        let r = b.reg("s");
        b.emit(format!("{r} = add {acc}, {v}"));
        acc = r;
    }
    let result = match ret {
        "i64" => acc,
        "f64" => {
            let t = b.reg("rf");
            b.emit(format!("{t} = itof {acc}"));
            let f = B::pick(b.rng, &b.floats);
            let r = b.reg("rf");
            b.emit(format!("{r} = add {t}, {f}"));
            r
        }
        "bool" => {
            let c = b.cond();
            let r = b.reg("rb");
            let d = b.reg("rb");
            b.emit(format!("{r} = gt {acc}, 0"));
            b.emit(format!("{d} = and {r}, {c}"));
            d
        }
        _ => {
            let arr = B::pick(b.rng, &b.arrays);
            let f = B::pick(b.rng, &b.floats);
            let t = b.reg("rt");
            b.emit(format!("{t} = alen {arr}"));
            let c = b.reg("rc");
            b.emit(format!("{c} = gt {t}, 0"));
            let (w, j) = (b.label("wr"), b.label("out"));
            b.emit(format!("br {c}, {w}, {j}"));
            b.start(&w);
            b.emit(format!("aset {arr}, 0, {f}"));
            b.emit(format!("jmp {j}"));
            b.start(&j);
            arr
        }
    };
    b.emit(format!("ret {result}"));
    let _ = writeln!(
        out,
        "fn @main(%a: i64, %b: i64, %x: f64, %v: f64[]) -> {ret} {{"
    );
    for l in &b.lines {
        let _ = writeln!(out, "{l}");
    }
    out.push_str("}\n");

    let len = rng.below(5);
    let args = vec![
        Value::I64(pick_int(&mut rng)),
        Value::I64(pick_int(&mut rng)),
        Value::F64(pick_float(&mut rng)),
        Value::Arr((0..len).map(|_| pick_float(&mut rng)).collect()),
    ];
    IntProgram {
        source: out,
        entry: "main".into(),
        args,
    }
}
