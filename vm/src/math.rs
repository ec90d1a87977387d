//! The arithmetic that derived code adds to IEEE's: strong-zero products.
//!
//! In reverse code a contribution is a cotangent times a local derivative.
//! A zero cotangent must contribute exactly zero, whatever the local
//! derivative: the operand a `select`, `min` or `max` did not choose gets a
//! zero cotangent, and its own local derivative may be infinite or nan
//! there (`sqrt` at -1, `log` at 0, a division by zero). IEEE gives
//! `0 * inf = nan`, which would poison the gradient; this is JAX's and
//! PyTorch's "where" trap. The AD stage's products (`mul.z`, `acc.mul` and
//! their fused forms) and its quotients of a cotangent (`div.z`) use these
//! functions instead. They equal IEEE's result except where IEEE gives nan
//! and a zero is involved, so they cost one comparison on the common path.

/// `a * b`, but `0` when either factor is zero (even against an infinite or
/// nan other factor).
#[inline(always)]
pub fn mul_z(a: f64, b: f64) -> f64 {
    let p = a * b;
    if p.is_nan() {
        return mul_z_nan(a, b, p);
    }
    p
}

/// The rare case of [`mul_z`], out of the interpreter's handlers so that
/// each adds only a compare and a branch to its hot path.
#[cold]
#[inline(never)]
fn mul_z_nan(a: f64, b: f64, p: f64) -> f64 {
    if a == 0.0 || b == 0.0 {
        0.0
    } else {
        p
    }
}

/// `(g ⊙ a, g ⊙ b)`: two strong-zero products of one factor, with one test
/// on the common path (a nan in either product makes their sum nan).
#[inline(always)]
pub fn mul_z2(g: f64, a: f64, b: f64) -> (f64, f64) {
    let (p, q) = (g * a, g * b);
    if (p + q).is_nan() {
        return (mul_z(g, a), mul_z(g, b));
    }
    (p, q)
}

/// `a / b`, but `0` when `a` is zero (even where `b` is zero or nan).
#[inline(always)]
pub fn div_z(a: f64, b: f64) -> f64 {
    let q = a / b;
    if q.is_nan() {
        return div_z_nan(a, q);
    }
    q
}

#[cold]
#[inline(never)]
fn div_z_nan(a: f64, q: f64) -> f64 {
    if a == 0.0 {
        0.0
    } else {
        q
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zero_factor_wins_over_inf_and_nan() {
        for x in [f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 0.0, 1.5] {
            assert_eq!(mul_z(0.0, x), 0.0, "0 * {x}");
            assert_eq!(mul_z(x, 0.0), 0.0, "{x} * 0");
            assert_eq!(div_z(0.0, x), 0.0, "0 / {x}");
        }
        assert!(mul_z(f64::NAN, 2.0).is_nan());
        assert!(div_z(1.0, f64::NAN).is_nan());
        assert_eq!(div_z(1.0, 0.0), f64::INFINITY);
        assert_eq!(mul_z(3.0, 0.5).to_bits(), (3.0f64 * 0.5).to_bits());
        assert_eq!(mul_z(-0.0, 2.0).to_bits(), (-0.0f64).to_bits());
        // Two products of one factor: each as `mul_z` would give it,
        // including when only their sum is nan (inf and -inf).
        for (g, a, b) in [
            (0.0, f64::INFINITY, 2.0),
            (2.0, f64::INFINITY, f64::NEG_INFINITY),
            (0.0, f64::NAN, f64::NAN),
            (1.5, -2.0, 4.0),
            (f64::NAN, 1.0, 0.0),
        ] {
            let (p, q) = mul_z2(g, a, b);
            assert_eq!(p.to_bits(), mul_z(g, a).to_bits(), "{g} {a}");
            assert_eq!(q.to_bits(), mul_z(g, b).to_bits(), "{g} {b}");
        }
    }
}
