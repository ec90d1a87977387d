//! One point of `advm sweep` (`docs/sweep.md`): a line of JSON arguments
//! in, a line of JSON results out, as the mode's single call (`advm run
//! --json`, `advm grad --json`) would print them, with the line's index.
//! The binary's `sweep` module reads, schedules and writes the lines; this
//! is the work of one line, shared with the benchmarks.

use super::args::{float_json, parse_json_args_from, value_json};
use ad::{AdError, Engine, Gradient};
use serde_json::Value as Json;
use std::fmt::Write as _;
use vm::ir::FuncId;
use vm::Type;

/// What each point computes, with what it needs. Each mode is one arm
/// here and one in [`Worker::result_line`].
#[derive(Clone, Debug)]
pub enum Job {
    /// The value, as `advm run --json`.
    Run,
    /// Value and gradient, as `advm grad --json`, with respect to the
    /// parameters of the mask (`None`: every f64 and f64[] one).
    Grad(Option<Vec<bool>>),
    /// Value and tangent, as `advm jvp --json`, along the direction `dir`
    /// (JSON text shaped like the arguments, parsed per point since array
    /// lengths may differ), with respect to the parameters of `mask`.
    Jvp {
        /// One flag per parameter: differentiated.
        mask: Vec<bool>,
        /// The direction's JSON text.
        dir: String,
        /// The parameters' names, for messages about the direction.
        names: Vec<String>,
    },
    /// Value, gradient and Hessian-vector product along `dir`, as `advm
    /// hvp --json` (the direction as for [`Job::Jvp`]).
    Hvp {
        /// One flag per parameter: differentiated.
        mask: Vec<bool>,
        /// The direction's JSON text.
        dir: String,
        /// The parameters' names, for messages about the direction.
        names: Vec<String>,
    },
}

/// What every point of a sweep shares: the function, its parameters'
/// types, the job.
#[derive(Clone, Debug)]
pub struct Task {
    /// The function every point calls.
    pub f: FuncId,
    /// Its parameters' types, to read each point's arguments by.
    pub params: Vec<Type>,
    /// What to compute at each point.
    pub job: Job,
    /// The program's source text, if known: a trap's message shows its
    /// instruction as its source line ([`vm::Trap::show_source_line`]).
    pub source: Option<std::sync::Arc<str>>,
}

impl Task {
    /// The task of running `job` on `f` of `engine`'s module.
    pub fn new(engine: &Engine, f: FuncId, job: Job) -> Task {
        Task {
            f,
            params: engine.module().func(f).param_types(),
            job,
            source: None,
        }
    }
}

/// One worker thread's state: its engine (a clone of the sweep's, see
/// [`ad::Engine`]'s `Clone`) and its reused buffers.
pub struct Worker {
    engine: Engine,
    grad: Gradient,
}

impl Worker {
    /// A worker running on `engine` (one per thread).
    pub fn new(engine: Engine) -> Worker {
        Worker {
            engine,
            grad: Gradient::default(),
        }
    }

    /// Evaluate the point `text` (the line of index `i`, without its line
    /// end) and write its result line, without a newline, into `out`
    /// (cleared first): `{"i":I,"value":...}` and the mode's other fields,
    /// or `{"i":I,"error":MESSAGE}`. `true` if the point succeeded.
    pub fn result_line(&mut self, task: &Task, i: usize, text: &[u8], out: &mut String) -> bool {
        out.clear();
        let _ = write!(out, "{{\"i\":{i}");
        match self.fields(task, text, out) {
            Ok(()) => true,
            Err(e) => {
                out.clear();
                let _ = write!(out, "{{\"i\":{i},\"error\":{}}}", Json::String(e));
                false
            }
        }
    }

    /// Append `,"value":...` (and the mode's other fields) and the closing
    /// brace to `out`, or give the error message.
    fn fields(&mut self, task: &Task, text: &[u8], out: &mut String) -> Result<(), String> {
        let text = std::str::from_utf8(text).map_err(|e| {
            format!(
                "the point is not UTF-8 text (invalid byte at column {})",
                e.valid_up_to() + 1
            )
        })?;
        let args = parse_json_args_from(text, &task.params, "the point")?;
        let message = |e: AdError| match (e, &task.source) {
            (AdError::Trap(mut t), Some(src)) => {
                t.show_source_line(src, 1);
                t.to_string()
            }
            (e, _) => e.to_string(),
        };
        match &task.job {
            Job::Run => {
                let v = self.engine.run(task.f, &args).map_err(message)?;
                let _ = write!(out, ",\"value\":{}}}", value_json(&v));
            }
            Job::Grad(mask) => {
                let Worker { engine, grad } = self;
                match mask {
                    Some(m) => engine.grad_wrt_into(task.f, &args, m, grad),
                    None => engine.grad_into(task.f, &args, grad),
                }
                .map_err(message)?;
                let _ = write!(out, ",\"value\":{},\"grad\":[", float_json(grad.value));
                for (k, g) in grad.grad.iter().enumerate() {
                    if k > 0 {
                        out.push(',');
                    }
                    match g {
                        Some(v) => {
                            let _ = write!(out, "{}", value_json(v));
                        }
                        None => out.push_str("null"),
                    }
                }
                out.push_str("]}");
            }
            Job::Jvp { mask, dir, names } => {
                let dir = super::args::parse_json_dir(dir, &args, mask, names, "--dir")?;
                let t = self
                    .engine
                    .jvp_wrt(task.f, &args, &dir, mask)
                    .map_err(message)?;
                let unit = self.engine.module().func(task.f).ret == vm::ir::RetType::Unit;
                let obj = Json::Object(super::args::tangent_json(&t, unit));
                // `{"value":...}` without its opening brace, after `"i"`.
                let text = obj.to_string();
                out.push(',');
                out.push_str(text.strip_prefix('{').unwrap_or(&text));
            }
            Job::Hvp { mask, dir, names } => {
                let dir = super::args::parse_json_dir(dir, &args, mask, names, "--dir")?;
                let h = self
                    .engine
                    .hvp_wrt(task.f, &args, &dir, mask)
                    .map_err(message)?;
                let list = |vs: &[Option<vm::Value>]| -> Json {
                    vs.iter()
                        .map(|v| v.as_ref().map_or(Json::Null, value_json))
                        .collect::<Vec<Json>>()
                        .into()
                };
                let _ = write!(
                    out,
                    ",\"value\":{},\"grad\":{},\"hvp\":{}}}",
                    float_json(h.value),
                    list(&h.grad),
                    list(&h.hvp)
                );
            }
        }
        Ok(())
    }
}
