//! Value types and host-side values.

use std::fmt;

/// The type of a register, an SSA value, a parameter or a return value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    /// IEEE-754 double; differentiable.
    F64,
    /// 64-bit signed integer; never differentiable.
    I64,
    /// `true` / `false`; never differentiable.
    Bool,
    /// `f64[]`: a mutable array of f64 held in the VM heap, passed by
    /// reference (registers hold a handle).
    Arr,
}

impl Type {
    /// Whether values of this type can carry a derivative.
    pub fn is_differentiable(self) -> bool {
        matches!(self, Type::F64 | Type::Arr)
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Type::F64 => "f64",
            Type::I64 => "i64",
            Type::Bool => "bool",
            Type::Arr => "f64[]",
        })
    }
}

/// A value crossing the host boundary (arguments and results).
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// An `f64`.
    F64(f64),
    /// An `i64`.
    I64(i64),
    /// A `bool`.
    Bool(bool),
    /// The contents of an `f64[]`.
    Arr(Vec<f64>),
}

impl Value {
    /// The type this value has as an argument or a result.
    pub fn ty(&self) -> Type {
        match self {
            Value::F64(_) => Type::F64,
            Value::I64(_) => Type::I64,
            Value::Bool(_) => Type::Bool,
            Value::Arr(_) => Type::Arr,
        }
    }
}

impl From<f64> for Value {
    fn from(x: f64) -> Value {
        Value::F64(x)
    }
}

impl From<i64> for Value {
    fn from(x: i64) -> Value {
        Value::I64(x)
    }
}

/// An integer literal (`i32` by default in Rust), as an `i64`.
impl From<i32> for Value {
    fn from(x: i32) -> Value {
        Value::I64(i64::from(x))
    }
}

impl From<bool> for Value {
    fn from(x: bool) -> Value {
        Value::Bool(x)
    }
}

impl From<Vec<f64>> for Value {
    fn from(xs: Vec<f64>) -> Value {
        Value::Arr(xs)
    }
}

impl From<&[f64]> for Value {
    fn from(xs: &[f64]) -> Value {
        Value::Arr(xs.to_vec())
    }
}

impl<const N: usize> From<[f64; N]> for Value {
    fn from(xs: [f64; N]) -> Value {
        Value::Arr(xs.to_vec())
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::F64(x) => write!(f, "{x}"),
            Value::I64(x) => write!(f, "{x}"),
            Value::Bool(x) => write!(f, "{x}"),
            Value::Arr(xs) => {
                f.write_str("[")?;
                for (i, x) in xs.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{x}")?;
                }
                f.write_str("]")
            }
        }
    }
}
