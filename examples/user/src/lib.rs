//! What a user of the `advm` crate writes: a gradient-descent minimiser over
//! a function of `f64` parameters, chosen by name.

/// Minimise function `name` of `program` by gradient descent from `start`
/// (one value per parameter), with step `rate`, until the gradient's norm
/// is below `tol` or after `max_steps` steps. Returns the point and the
/// number of steps taken.
pub fn minimise(
    program: &mut advm::Program,
    name: &str,
    start: &[f64],
    rate: f64,
    tol: f64,
    max_steps: usize,
) -> Result<(Vec<f64>, usize), advm::Error> {
    let mut x = start.to_vec();
    for step in 0..max_steps {
        let g = program.function(name)?.grad(&x)?.to_vec();
        if g.iter().map(|d| d * d).sum::<f64>().sqrt() < tol {
            return Ok((x, step));
        }
        for (xi, gi) in x.iter_mut().zip(&g) {
            *xi -= rate * gi;
        }
    }
    Ok((x, max_steps))
}
