//! [`Program`]: a compiled source; [`Function`]: one of its functions,
//! ready to run and differentiate.

use crate::results::{Gradient, Hessian, Hvp, Jacobian, Jvp, Partials, Vjp};
use crate::{Error, Result};
use std::path::Path;
use vm::ir::{self, FuncId};
use vm::{Limits, Type, Value};

/// The language of a source.
///
/// [`Program::from_file`] tells it from the file's extension. Both compile
/// to the same IR (docs/language.md, docs/adl.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Lang {
    /// `.adasm`, the SSA assembly language (docs/language.md).
    Adasm,
    /// `.adl`, the structured language (docs/adl.md): loops and branches,
    /// phis placed by the compiler.
    Adl,
}

impl Lang {
    /// The language of `path`, from its extension (`.adasm` or `.adl`).
    pub fn from_path(path: &Path) -> Result<Lang> {
        match path.extension().and_then(|e| e.to_str()) {
            Some("adasm") => Ok(Lang::Adasm),
            Some("adl") => Ok(Lang::Adl),
            _ => Err(Error::Usage(format!(
                "{}: cannot tell the language of the source: expected a .adasm or .adl file",
                path.display()
            ))),
        }
    }

    /// The file extension of the language, without the dot.
    pub fn extension(self) -> &'static str {
        match self {
            Lang::Adasm => "adasm",
            Lang::Adl => "adl",
        }
    }
}

/// Arguments (or a direction) for a call: one [`Value`] per parameter.
///
/// Implemented for slices, arrays and vectors of [`Value`]s and of `f64`s
/// (every parameter an `f64`); [`args!`](crate::args!) builds a mixed list.
pub trait Args {
    /// The values, one per parameter.
    fn into_values(self) -> Vec<Value>;
}

impl Args for Vec<Value> {
    fn into_values(self) -> Vec<Value> {
        self
    }
}

impl Args for &[Value] {
    fn into_values(self) -> Vec<Value> {
        self.to_vec()
    }
}

impl Args for &Vec<Value> {
    fn into_values(self) -> Vec<Value> {
        self.clone()
    }
}

impl<const N: usize> Args for [Value; N] {
    fn into_values(self) -> Vec<Value> {
        self.into()
    }
}

impl<const N: usize> Args for &[Value; N] {
    fn into_values(self) -> Vec<Value> {
        self.to_vec()
    }
}

impl Args for &[f64] {
    fn into_values(self) -> Vec<Value> {
        self.iter().map(|x| Value::F64(*x)).collect()
    }
}

impl Args for Vec<f64> {
    fn into_values(self) -> Vec<Value> {
        self.as_slice().into_values()
    }
}

impl Args for &Vec<f64> {
    fn into_values(self) -> Vec<Value> {
        self.as_slice().into_values()
    }
}

impl<const N: usize> Args for [f64; N] {
    fn into_values(self) -> Vec<Value> {
        self.as_slice().into_values()
    }
}

impl<const N: usize> Args for &[f64; N] {
    fn into_values(self) -> Vec<Value> {
        self.as_slice().into_values()
    }
}

/// Arguments of mixed kinds: `args![2.0, 10, vec![1.0, 2.0], true]` is an
/// array of [`Value`]s (`F64`, `I64`, `Arr`, `Bool`), one per parameter.
#[macro_export]
macro_rules! args {
    ($($x:expr),* $(,)?) => {
        [$($crate::Value::from($x)),*]
    };
}

/// A compiled program: its functions lowered to bytecode and verified, and
/// the derived code of every derivative taken so far (built on first use,
/// then reused).
///
/// `Program` is `Clone + Send + Sync`. A clone shares the bytecode and the
/// derived code built so far, and has a VM of its own: one clone per thread
/// runs and differentiates in parallel without deriving anything again.
///
/// ```
/// use rayon::prelude::*;
///
/// let src = "fn @f(%x: f64) -> f64 {\nentry:\n    %s = sin %x\n    ret %s\n}\n";
/// let mut program = advm::Program::parse(src)?;
/// // Build the gradient's code once, before the clones share it.
/// program.function("f")?.derive()?;
/// let points: Vec<f64> = (0..64).map(|i| f64::from(i) / 8.0).collect();
/// let slopes = points
///     .par_iter()
///     .map_init(
///         || program.clone(),
///         |p, &x| Ok(p.grad("f", [x])?.f64("x").unwrap_or(f64::NAN)),
///     )
///     .collect::<Result<Vec<f64>, advm::Error>>()?;
/// for (x, s) in points.iter().zip(&slopes) {
///     assert!((s - x.cos()).abs() < 1e-15);
/// }
/// # Ok::<(), advm::Error>(())
/// ```
#[derive(Clone)]
pub struct Program {
    engine: ad::Engine,
}

impl std::fmt::Debug for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Program")
            .field("functions", &self.functions().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Program {
    /// Assemble `.adasm` source text (named `<input>` in diagnostics).
    ///
    /// ```
    /// let src = "fn @sq(%x: f64) -> f64 {\nentry:\n    %y = mul %x, %x\n    ret %y\n}\n";
    /// let mut program = advm::Program::parse(src)?;
    /// assert_eq!(program.run("sq", [3.0])?, advm::Value::F64(9.0));
    /// # Ok::<(), advm::Error>(())
    /// ```
    pub fn parse(source: &str) -> Result<Program> {
        Program::from_source(source, "<input>", Lang::Adasm)
    }

    /// Compile `source` in language `lang`; `name` is the file name the
    /// diagnostics give.
    pub fn from_source(source: &str, name: &str, lang: Lang) -> Result<Program> {
        let module = match lang {
            Lang::Adasm => assembler::assemble(source, name)?,
            Lang::Adl => adl::compile(source, name)?,
        };
        Program::from_module(module)
    }

    /// Read and compile a source file, its language told by its extension
    /// ([`Lang::from_path`]). A file that is not UTF-8 is an assembly error
    /// located at its first bad byte; a leading byte-order mark is skipped.
    ///
    /// ```
    /// let err = advm::Program::from_file("model.txt").expect_err("no language");
    /// assert!(matches!(err, advm::Error::Usage(_)));
    /// let err = advm::Program::from_file("no/such/file.adasm").expect_err("missing");
    /// assert!(err.to_string().starts_with("cannot read no/such/file.adasm"));
    /// ```
    pub fn from_file(path: impl AsRef<Path>) -> Result<Program> {
        let path = path.as_ref();
        let lang = Lang::from_path(path)?;
        let name = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let text = assembler::decode(&bytes, &name)?;
        Program::from_source(&text, &name, lang)
    }

    /// A program from an IR module built by hand (see [`vm::ir`]); it is
    /// checked and verified first. Small callees are inlined.
    pub fn from_module(module: ir::Module) -> Result<Program> {
        Program::from_module_with(module, true)
    }

    /// [`Program::from_module`], inlining small callees (`true`, the
    /// default) or running every call as written (`false`, the command
    /// line's `--no-inline`).
    pub fn from_module_with(module: ir::Module, inlining: bool) -> Result<Program> {
        let policy = if inlining {
            ad::Policy::default()
        } else {
            ad::Policy::NONE
        };
        Ok(Program {
            engine: ad::Engine::with_inlining(module, &policy)?,
        })
    }

    /// The names of the program's functions, in source order.
    pub fn functions(&self) -> impl Iterator<Item = &str> {
        self.engine.module().funcs.iter().map(|f| f.name.as_str())
    }

    /// Function `name` (`@` optional), to run or differentiate. A name the
    /// program does not define is [`Error::Usage`], naming the closest one.
    ///
    /// ```
    /// let src = "fn @pow2(%x: f64) -> f64 {\nentry:\n    %y = mul %x, %x\n    ret %y\n}\n";
    /// let mut program = advm::Program::parse(src)?;
    /// let err = program.function("pow").expect_err("no such function");
    /// assert_eq!(err.to_string(), "no function @pow; did you mean @pow2?");
    /// # Ok::<(), advm::Error>(())
    /// ```
    pub fn function(&mut self, name: &str) -> Result<Function<'_>> {
        let id = self.engine.find(name).ok_or_else(|| {
            let bare = name.strip_prefix('@').unwrap_or(name);
            let hint = assembler::closest(bare, self.functions())
                .map(|c| format!("; did you mean @{c}?"))
                .unwrap_or_default();
            Error::Usage(format!("no function @{bare}{hint}"))
        })?;
        Ok(Function {
            engine: &mut self.engine,
            id,
            wrt: None,
        })
    }

    /// Run function `name` on `args`: `function(name)?.run(args)`.
    pub fn run(&mut self, name: &str, args: impl Args) -> Result<Value> {
        self.function(name)?.run(args)
    }

    /// Value and gradient of function `name` at `args` with respect to
    /// every `f64` and `f64[]` parameter: `function(name)?.grad(args)`.
    pub fn grad(&mut self, name: &str, args: impl Args) -> Result<Gradient> {
        self.function(name)?.grad(args)
    }

    /// The limits of the VM (fuel, depth, memory: `docs/reliability.md`);
    /// reaching one is an [`Error::Trap`].
    pub fn limits_mut(&mut self) -> &mut Limits {
        self.engine.vm_mut().limits_mut()
    }

    /// The engine underneath, for what the facade does not offer
    /// (prepared gradients that allocate nothing per call, listings).
    pub fn engine_mut(&mut self) -> &mut ad::Engine {
        &mut self.engine
    }

    /// The engine underneath, by value.
    pub fn into_engine(self) -> ad::Engine {
        self.engine
    }
}

/// One function of a [`Program`], with the parameters to differentiate
/// with respect to (all `f64` and `f64[]` ones unless [`Function::wrt`]
/// says otherwise).
///
/// Arguments and directions are [`Args`]: one value per parameter.
///
/// ```
/// let src = "
/// fn @f(%x: f64, %y: f64) -> f64 {
/// entry:
///     %p = mul %x, %y
///     %s = sin %p
///     ret %s
/// }";
/// let mut program = advm::Program::parse(src)?;
/// let g = program.function("f")?.wrt(["y"])?.grad([1.0, 2.0])?;
/// assert_eq!(g.value, 2f64.sin());
/// assert_eq!(g.f64("y"), Some(2f64.cos()));
/// assert_eq!(g.get("x"), None); // not selected
///
/// let err = program.function("f")?.wrt(["xx"]).expect_err("no parameter xx");
/// assert_eq!(err.to_string(), "@f has no parameter %xx; did you mean %x?");
/// let err = program.function("f")?.wrt(["rate"]).expect_err("no parameter rate");
/// assert_eq!(err.to_string(), "@f has no parameter %rate (its parameters: %x, %y)");
/// # Ok::<(), advm::Error>(())
/// ```
pub struct Function<'p> {
    engine: &'p mut ad::Engine,
    id: FuncId,
    /// One flag per parameter; `None`: every `f64` and `f64[]` one.
    wrt: Option<Vec<bool>>,
}

impl std::fmt::Debug for Function<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Function")
            .field("name", &self.name())
            .field("params", &self.params())
            .field("wrt", &self.mask())
            .finish()
    }
}

impl Function<'_> {
    fn ir(&self) -> &ir::Function {
        self.engine.module().func(self.id)
    }

    /// The function's name (without `@`).
    pub fn name(&self) -> &str {
        &self.ir().name
    }

    /// The parameters' names (without `%`) and types, in order.
    pub fn params(&self) -> Vec<(String, Type)> {
        let func = self.ir();
        func.params
            .iter()
            .enumerate()
            .map(|(i, p)| (param_name(func, i, *p), func.ty(*p)))
            .collect()
    }

    fn names(&self) -> Vec<String> {
        self.params().into_iter().map(|(n, _)| n).collect()
    }

    /// Differentiate with respect to the parameters `names` only (`%`
    /// optional): the others get no derivative, and the derived code does
    /// none of their work. A name that is not a parameter, or names an
    /// `i64` or `bool` one, is [`Error::Usage`].
    pub fn wrt<S: AsRef<str>>(mut self, names: impl IntoIterator<Item = S>) -> Result<Self> {
        let params = self.params();
        let mut mask = vec![false; params.len()];
        for name in names {
            let name = name.as_ref();
            let bare = name.strip_prefix('%').unwrap_or(name);
            let Some(i) = params.iter().position(|(n, _)| n == bare) else {
                let hint = assembler::closest(bare, params.iter().map(|(n, _)| n.as_str()))
                    .map(|c| format!("; did you mean %{c}?"))
                    .unwrap_or_else(|| {
                        let all: Vec<String> =
                            params.iter().map(|(n, _)| format!("%{n}")).collect();
                        if all.is_empty() {
                            " (it has none)".to_string()
                        } else {
                            format!(" (its parameters: {})", all.join(", "))
                        }
                    });
                return Err(Error::Usage(format!(
                    "@{} has no parameter %{bare}{hint}",
                    self.name()
                )));
            };
            if !params[i].1.is_differentiable() {
                return Err(Error::Usage(format!(
                    "cannot differentiate @{} with respect to %{bare}: it is {}, not f64 or f64[]",
                    self.name(),
                    params[i].1
                )));
            }
            mask[i] = true;
        }
        self.wrt = Some(mask);
        Ok(self)
    }

    /// The selection: one flag per parameter.
    fn mask(&self) -> Vec<bool> {
        match &self.wrt {
            Some(m) => m.clone(),
            None => self
                .params()
                .iter()
                .map(|(_, t)| t.is_differentiable())
                .collect(),
        }
    }

    /// Build the derived code a gradient runs now rather than on the first
    /// call (the forward and reverse functions, and those of its callees):
    /// clones of the program made afterwards share it.
    pub fn derive(&mut self) -> Result<()> {
        let mask = self.mask();
        self.engine.derive_wrt(self.id, &mask)?;
        Ok(())
    }

    /// Run the function on `args`.
    pub fn run(&mut self, args: impl Args) -> Result<Value> {
        Ok(self.engine.run(self.id, &args.into_values())?)
    }

    /// Value and gradient at `args` (reverse mode), for a function
    /// returning `f64`.
    ///
    /// A gradient-descent loop, as a user of the crate writes one: f(x, y)
    /// = (x - 3)² + 10 (y + 1)² + exp(x - 3) - (x - 3) has its minimum 1
    /// at (3, -1).
    ///
    /// ```
    /// let mut program = advm::Program::parse("
    /// fn @f(%x: f64, %y: f64) -> f64 {
    /// entry:
    ///     %a = sub %x, 3.0
    ///     %b = add %y, 1.0
    ///     %a2 = mul %a, %a
    ///     %b2 = mul %b, %b
    ///     %b10 = mul %b2, 10.0
    ///     %e = exp %a
    ///     %s = add %a2, %b10
    ///     %t = add %s, %e
    ///     %u = sub %t, %a
    ///     ret %u
    /// }")?;
    /// let mut f = program.function("f")?;
    /// let mut x = vec![0.0, 2.0];
    /// let mut steps = 0;
    /// loop {
    ///     let g = f.grad(&x)?;
    ///     let (gx, gy) = (g.f64("x").unwrap_or(0.0), g.f64("y").unwrap_or(0.0));
    ///     if gx.hypot(gy) < 1e-10 || steps == 10_000 {
    ///         break;
    ///     }
    ///     x[0] -= 0.04 * gx;
    ///     x[1] -= 0.04 * gy;
    ///     steps += 1;
    /// }
    /// assert!(steps < 10_000, "converged");
    /// assert!((x[0] - 3.0).abs() < 1e-9 && (x[1] + 1.0).abs() < 1e-9, "{x:?}");
    /// let advm::Value::F64(min) = f.run(&x)? else { unreachable!("@f returns f64") };
    /// assert!((min - 1.0).abs() < 1e-15, "{min}");
    ///
    /// // A function that does not exist is an error whose Display is the message:
    /// let err = program.grad("g", [1.0, 2.0]).expect_err("no @g");
    /// assert_eq!(err.to_string(), "no function @g; did you mean @f?");
    /// # Ok::<(), advm::Error>(())
    /// ```
    pub fn grad(&mut self, args: impl Args) -> Result<Gradient> {
        let mask = self.mask();
        let g = self.engine.grad_wrt(self.id, &args.into_values(), &mask)?;
        Ok(Gradient {
            value: g.value,
            grad: Partials::new(self.names(), g.grad),
        })
    }

    /// Value and `seedᵀ·J` at `args` (reverse mode with output cotangent
    /// `seed`: a number for an `f64` result, an array of the result's
    /// length for an `f64[]` one).
    pub fn vjp(&mut self, args: impl Args, seed: impl Into<Value>) -> Result<Vjp> {
        let mask = self.mask();
        let v = self
            .engine
            .vjp_wrt(self.id, &args.into_values(), &seed.into(), &mask)?;
        Ok(Vjp {
            value: v.value,
            grad: Partials::new(self.names(), v.grad),
        })
    }

    /// Value and derivative along `dir` at `args` (forward mode, one
    /// pass). `dir` has one entry per parameter, shaped like the argument;
    /// the entries of `i64` and `bool` parameters and of parameters not
    /// selected are ignored.
    ///
    /// ```
    /// let src = "fn @f(%x: f64, %y: f64) -> f64 {\nentry:\n    %p = mul %x, %y\n    ret %p\n}\n";
    /// let mut program = advm::Program::parse(src)?;
    /// let t = program.function("f")?.jvp([3.0, 4.0], [1.0, 0.5])?;
    /// assert_eq!(t.tangent, Some(advm::Value::F64(4.0 * 1.0 + 3.0 * 0.5)));
    /// # Ok::<(), advm::Error>(())
    /// ```
    pub fn jvp(&mut self, args: impl Args, dir: impl Args) -> Result<Jvp> {
        let args = args.into_values();
        let (mask, dir) = self.direction(dir)?;
        let t = self.engine.jvp_wrt(self.id, &args, &dir, &mask)?;
        Ok(Jvp {
            value: t.value,
            tangent: t.tangent,
            arg_tangents: Partials::new(self.names(), t.arg_tangents),
        })
    }

    /// Value, gradient and Hessian-vector product `H·dir` at `args`
    /// (forward over reverse), for a function returning `f64`; `dir` as for
    /// [`Function::jvp`].
    pub fn hvp(&mut self, args: impl Args, dir: impl Args) -> Result<Hvp> {
        let args = args.into_values();
        let (mask, dir) = self.direction(dir)?;
        let h = self.engine.hvp_wrt(self.id, &args, &dir, &mask)?;
        let names = self.names();
        Ok(Hvp {
            value: h.value,
            grad: Partials::new(names.clone(), h.grad),
            hvp: Partials::new(names, h.hvp),
        })
    }

    /// Value, gradient and dense Hessian at `args` over the selected
    /// parameters' entries (one Hessian-vector product per entry), for a
    /// function returning `f64`.
    ///
    /// ```
    /// let src = "fn @f(%x: f64, %y: f64) -> f64 {\nentry:\n    %p = mul %x, %y\n    %q = mul %p, %x\n    ret %q\n}\n";
    /// let mut program = advm::Program::parse(src)?; // x²y
    /// let h = program.function("f")?.hessian([3.0, 2.0])?;
    /// assert_eq!(h.inputs, ["x", "y"]);
    /// assert_eq!(h.matrix, [[4.0, 6.0], [6.0, 0.0]]); // [[2y, 2x], [2x, 0]]
    /// # Ok::<(), advm::Error>(())
    /// ```
    pub fn hessian(&mut self, args: impl Args) -> Result<Hessian> {
        let args = args.into_values();
        let mask = self.mask();
        let h = self.engine.hessian_wrt(self.id, &args, &mask)?;
        let names = self.names();
        Ok(Hessian {
            value: h.value,
            inputs: inputs(&names, &args, &mask),
            grad: Partials::new(names, h.grad),
            matrix: h.hessian,
        })
    }

    /// Value and dense Jacobian at `args` (forward mode, one pass per
    /// selected input entry), for a function returning `f64` or `f64[]`.
    pub fn jacobian(&mut self, args: impl Args) -> Result<Jacobian> {
        let args = args.into_values();
        let mask = self.mask();
        let j = self.engine.jacobian_wrt(self.id, &args, &mask)?;
        Ok(Jacobian {
            value: j.value,
            inputs: inputs(&self.names(), &args, &mask),
            matrix: j.jacobian,
        })
    }

    /// The selection and `dir` as the engine takes it: `None` for the
    /// parameters not selected.
    fn direction(&self, dir: impl Args) -> Result<(Vec<bool>, Vec<Option<Value>>)> {
        let mask = self.mask();
        let dir = dir.into_values();
        if dir.len() != mask.len() {
            return Err(Error::Usage(format!(
                "the direction has {} entr{}, but @{} takes {} parameter(s)",
                dir.len(),
                if dir.len() == 1 { "y" } else { "ies" },
                self.name(),
                mask.len()
            )));
        }
        let dir = dir
            .into_iter()
            .zip(&mask)
            .map(|(d, w)| w.then_some(d))
            .collect();
        Ok((mask, dir))
    }
}

/// The name of parameter `i` (`p`) of `func`, or its position if it has
/// none (a module built by hand).
fn param_name(func: &ir::Function, i: usize, p: vm::ir::ValueId) -> String {
    func.values
        .get(p.index())
        .and_then(|v| v.name.clone())
        .unwrap_or_else(|| i.to_string())
}

/// The flattened inputs of a Hessian or Jacobian: `x`, `w[0]`, `w[1]`, ...
fn inputs(names: &[String], args: &[Value], mask: &[bool]) -> Vec<String> {
    let mut out = Vec::new();
    for ((name, a), w) in names.iter().zip(args).zip(mask) {
        match (a, w) {
            (Value::F64(_), true) => out.push(name.clone()),
            (Value::Arr(xs), true) => out.extend((0..xs.len()).map(|k| format!("{name}[{k}]"))),
            _ => {}
        }
    }
    out
}
