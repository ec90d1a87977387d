//! What the facade's calls return, as plain numbers by parameter name.

use std::slice;
use vm::Value;

/// The derivative with respect to one parameter: a number for an `f64`
/// parameter, one number per element for an `f64[]` one.
#[derive(Clone, Debug, PartialEq)]
pub enum Derivative {
    /// For an `f64` parameter.
    Scalar(f64),
    /// For an `f64[]` parameter, one entry per element.
    Array(Vec<f64>),
}

impl Derivative {
    /// The number, for an `f64` parameter (`None` for an array).
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Derivative::Scalar(x) => Some(*x),
            Derivative::Array(_) => None,
        }
    }

    /// The entries: one for an `f64` parameter, one per element for an
    /// `f64[]` one.
    pub fn values(&self) -> &[f64] {
        match self {
            Derivative::Scalar(x) => slice::from_ref(x),
            Derivative::Array(xs) => xs,
        }
    }

    /// From the engine's entry (`F64` or `Arr`; anything else is no
    /// derivative).
    fn from_value(v: Option<Value>) -> Option<Derivative> {
        match v? {
            Value::F64(x) => Some(Derivative::Scalar(x)),
            Value::Arr(xs) => Some(Derivative::Array(xs)),
            Value::I64(_) | Value::Bool(_) => None,
        }
    }
}

/// One derivative per parameter, by name and in parameter order: a
/// gradient, a vector-Jacobian or Hessian-vector product, the tangents of
/// array arguments. Parameters not differentiated (`i64`, `bool`, or left
/// out of [`Function::wrt`](crate::Function::wrt)) have none.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Partials {
    names: Vec<String>,
    entries: Vec<Option<Derivative>>,
}

impl Partials {
    /// From the parameters' names and the engine's entries (one per
    /// parameter).
    pub(crate) fn new(names: Vec<String>, entries: Vec<Option<Value>>) -> Partials {
        let entries = entries.into_iter().map(Derivative::from_value).collect();
        Partials { names, entries }
    }

    /// The derivative with respect to parameter `name` (`%` optional);
    /// `None` if there is no such parameter or it was not differentiated.
    pub fn get(&self, name: &str) -> Option<&Derivative> {
        let name = name.strip_prefix('%').unwrap_or(name);
        let i = self.names.iter().position(|n| n == name)?;
        self.entries.get(i)?.as_ref()
    }

    /// The derivative with respect to the `f64` parameter `name`; `None`
    /// if there is none or it is an array.
    pub fn f64(&self, name: &str) -> Option<f64> {
        self.get(name)?.as_f64()
    }

    /// The differentiated parameters' names and derivatives, in parameter
    /// order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Derivative)> {
        self.names
            .iter()
            .zip(&self.entries)
            .filter_map(|(n, d)| Some((n.as_str(), d.as_ref()?)))
    }

    /// Every parameter's entry, in order (`None` for those not
    /// differentiated).
    pub fn entries(&self) -> &[Option<Derivative>] {
        &self.entries
    }

    /// Every parameter's name, in order.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The derivatives flattened in parameter order (an array parameter's
    /// entries in place): the vector an optimiser steps along.
    pub fn to_vec(&self) -> Vec<f64> {
        self.iter().flat_map(|(_, d)| d.values()).copied().collect()
    }
}

/// Value and gradient of a function returning `f64`
/// ([`Function::grad`](crate::Function::grad)).
///
/// ```
/// let mut p = advm::Program::parse(
///     "fn @f(%x: f64, %n: i64) -> f64 {\nentry:\n    %y = mul %x, %x\n    ret %y\n}\n",
/// )?;
/// let g = p.grad("f", advm::args![3.0, 7])?;
/// assert_eq!(g.value, 9.0);
/// assert_eq!(g.f64("x"), Some(6.0));
/// assert_eq!(g.get("n"), None); // an i64: no derivative
/// assert_eq!(g.iter().map(|(name, _)| name).collect::<Vec<_>>(), ["x"]);
/// # Ok::<(), advm::Error>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Gradient {
    /// The function's value.
    pub value: f64,
    /// The derivatives by parameter.
    pub grad: Partials,
}

impl Gradient {
    /// [`Partials::get`] of the gradient.
    pub fn get(&self, name: &str) -> Option<&Derivative> {
        self.grad.get(name)
    }

    /// [`Partials::f64`] of the gradient.
    pub fn f64(&self, name: &str) -> Option<f64> {
        self.grad.f64(name)
    }

    /// [`Partials::iter`] of the gradient.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Derivative)> {
        self.grad.iter()
    }

    /// [`Partials::to_vec`] of the gradient.
    pub fn to_vec(&self) -> Vec<f64> {
        self.grad.to_vec()
    }
}

/// Value and vector-Jacobian product `seedᵀ·J`
/// ([`Function::vjp`](crate::Function::vjp)).
#[derive(Clone, Debug, PartialEq)]
pub struct Vjp {
    /// The function's result (`F64` or `Arr`).
    pub value: Value,
    /// `seedᵀ·J` by parameter.
    pub grad: Partials,
}

/// Value and directional derivative ([`Function::jvp`](crate::Function::jvp)).
#[derive(Clone, Debug, PartialEq)]
pub struct Jvp {
    /// The function's result.
    pub value: Value,
    /// The derivative of the result along the direction: `F64` or `Arr`
    /// like the result; `None` for an `i64` or `bool` result or none.
    pub tangent: Option<Value>,
    /// For each differentiated `f64[]` parameter, the tangent of its
    /// contents after the call (a function may write into its arrays).
    pub arg_tangents: Partials,
}

/// Value, gradient and Hessian-vector product `H·dir`
/// ([`Function::hvp`](crate::Function::hvp)).
#[derive(Clone, Debug, PartialEq)]
pub struct Hvp {
    /// The function's value.
    pub value: f64,
    /// The gradient by parameter.
    pub grad: Partials,
    /// `H·dir` by parameter, shaped like the gradient.
    pub hvp: Partials,
}

/// Value, gradient and dense Hessian ([`Function::hessian`](crate::Function::hessian)).
#[derive(Clone, Debug, PartialEq)]
pub struct Hessian {
    /// The function's value.
    pub value: f64,
    /// The gradient by parameter.
    pub grad: Partials,
    /// The flattened inputs the rows and columns stand for, in order: `x`
    /// for an `f64` parameter, `w[0]`, `w[1]`, ... for an `f64[]` one.
    pub inputs: Vec<String>,
    /// The symmetric matrix, one row per input.
    pub matrix: Vec<Vec<f64>>,
}

/// Value and dense Jacobian ([`Function::jacobian`](crate::Function::jacobian)).
#[derive(Clone, Debug, PartialEq)]
pub struct Jacobian {
    /// The function's result (`F64` or `Arr`).
    pub value: Value,
    /// The flattened inputs the columns stand for, as in [`Hessian::inputs`].
    pub inputs: Vec<String>,
    /// One row per result element (one row for an `f64` result), one
    /// column per input.
    pub matrix: Vec<Vec<f64>>,
}
