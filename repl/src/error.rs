//! The one error type of the facade: [`Error`].

use std::fmt;
use std::path::PathBuf;

/// Why a program could not be loaded, run or differentiated.
///
/// [`Display`](fmt::Display) gives the message the command line would
/// print: assembly diagnostics with `file:line:col`, the source line and a
/// caret; traps with the function, block and instruction; usage mistakes
/// with the closest name when one is close.
///
/// ```
/// let err = advm::Program::parse("fn @f() -> f64 {\nentry:\n    ret 2\n}\n")
///     .expect_err("an integer literal is not an f64");
/// assert!(err.to_string().starts_with("<input>:3:9: error: expected f64"));
/// assert_eq!(err.exit_status(), 2);
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The source did not assemble: every independent error, each with its
    /// location.
    Assembly(assembler::Diagnostics),
    /// The program trapped (a runtime error, or a limit reached).
    Trap(vm::Trap),
    /// A mistake in the call: a function or parameter that does not exist,
    /// arguments that do not match the parameters, a selection of
    /// parameters that cannot be differentiated.
    Usage(String),
    /// The function cannot be differentiated that way (it does not return
    /// `f64`, say, or its derived code would not fit a frame).
    NotDifferentiable(String),
    /// A source file could not be read.
    Io {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// A bug in advm (please report it).
    Internal(String),
}

/// The facade's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The exit status the `advm` command line gives this error: 1 trap,
    /// 2 assembly error, 64 usage (also a file that cannot be read or a
    /// function that cannot be differentiated), 70 internal error.
    pub fn exit_status(&self) -> u8 {
        match self {
            Error::Trap(_) => 1,
            Error::Assembly(_) => 2,
            Error::Usage(_) | Error::NotDifferentiable(_) => 64,
            Error::Io { .. } => 64,
            Error::Internal(_) => 70,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Assembly(d) => f.write_str(d.render().trim_end()),
            Error::Trap(t) => write!(f, "{t}"),
            Error::Usage(m) | Error::NotDifferentiable(m) => f.write_str(m),
            Error::Io { path, source } => write!(f, "cannot read {}: {source}", path.display()),
            Error::Internal(m) => write!(f, "internal error of advm (please report): {m}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Trap(t) => Some(t),
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<assembler::Diagnostics> for Error {
    /// An assembly error; the assembler's out of memory
    /// ([`assembler::Diagnostics::out_of_memory`]) is the trap `out of
    /// memory`, as a run's.
    fn from(d: assembler::Diagnostics) -> Error {
        if d.is_out_of_memory() {
            return Error::Trap(vm::Trap::host(vm::TrapKind::OutOfMemory));
        }
        Error::Assembly(d)
    }
}

impl From<ad::AdError> for Error {
    fn from(e: ad::AdError) -> Error {
        match e {
            ad::AdError::Trap(t) => Error::Trap(t),
            ad::AdError::Args(_) => Error::Usage(e.to_string()),
            ad::AdError::NotDifferentiable(_)
            | ad::AdError::TooLarge { .. }
            | ad::AdError::TooMuchWork { .. } => Error::NotDifferentiable(e.to_string()),
            // Only a module built by hand ([`crate::Program::from_module`]).
            ad::AdError::InvalidModule(_) => Error::Usage(e.to_string()),
            ad::AdError::Internal(m) => Error::Internal(m),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_assemblers_out_of_memory_is_the_trap() {
        let e = Error::from(assembler::Diagnostics::out_of_memory("f.adasm"));
        assert!(matches!(&e, Error::Trap(t) if t.kind == vm::TrapKind::OutOfMemory));
        assert_eq!(e.to_string(), "trap: out of memory");
        assert_eq!(e.exit_status(), 1);
    }
}
