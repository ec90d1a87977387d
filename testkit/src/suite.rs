//! The benchmark suite of `programs/bench/`: deterministic inputs and the
//! reference values from an independent implementation (issue text,
//! docs/benchmarks.md). Shared by the tests that check the programs and by
//! the criterion benches that time them.

use vm::Value;

/// One program of the suite.
#[derive(Clone, Debug)]
pub struct Case {
    /// File stem under `programs/bench/` and function name.
    pub file: &'static str,
    pub func: &'static str,
    pub args: Vec<Value>,
    /// Reference primal value.
    pub value: f64,
    /// Reference derivative with respect to the first argument, where the
    /// reference gives one.
    pub dfirst: Option<f64>,
}

/// `v[i] = sin(i)`, `n` elements.
pub fn sines(n: usize) -> Vec<f64> {
    (0..n).map(|i| (i as f64).sin()).collect()
}

/// All suite programs with their benchmark inputs.
pub fn cases() -> Vec<Case> {
    let (n, d) = (100usize, 10usize);
    let x: Vec<f64> = (0..n * d).map(|i| ((i + 1) as f64).sin()).collect();
    let y: Vec<f64> = (0..n)
        .map(|k| if k % 2 == 0 { 1.0 } else { -1.0 })
        .collect();
    let w: Vec<f64> = (0..d).map(|j| 0.1 * (j as f64).cos()).collect();
    let (h, dd) = (32usize, 10usize);
    let mx: Vec<f64> = (0..dd).map(|j| ((j + 1) as f64).sin()).collect();
    let w1: Vec<f64> = (0..h * dd)
        .map(|k| 0.1 * ((10 * (k / dd) + k % dd) as f64).sin())
        .collect();
    let b1: Vec<f64> = (0..h).map(|i| 0.01 * i as f64).collect();
    let w2: Vec<f64> = (0..h).map(|i| 0.1 * (i as f64).cos()).collect();
    vec![
        Case {
            file: "sincos",
            func: "sincos",
            args: vec![Value::F64(0.9)],
            value: 0.5823447254418763,
            dfirst: Some(-0.6367993086184733),
        },
        Case {
            file: "powloop",
            func: "pow",
            args: vec![Value::F64(1.0001), Value::I64(1000)],
            value: 1.0001f64.powi(1000),
            dfirst: Some(1105.054887114517),
        },
        Case {
            file: "logsumexp",
            func: "logsumexp",
            args: vec![Value::Arr(sines(1000))],
            value: 7.143453155999233,
            dfirst: None,
        },
        Case {
            file: "branchy",
            func: "branchy",
            args: vec![Value::Arr(sines(1000))],
            value: 246.57419208275957,
            dfirst: None,
        },
        Case {
            file: "recursion",
            func: "rec",
            args: vec![Value::F64(0.9), Value::I64(100)],
            value: 1.5039599427901016e-05,
            dfirst: Some(0.0016352415527060296),
        },
        Case {
            file: "logreg",
            func: "logreg",
            args: vec![
                Value::Arr(x),
                Value::Arr(y),
                Value::Arr(w),
                Value::I64(n as i64),
                Value::I64(d as i64),
            ],
            value: 0.7066841469262802,
            dfirst: None,
        },
        Case {
            file: "mlp",
            func: "mlp",
            args: vec![
                Value::Arr(mx),
                Value::Arr(w1),
                Value::Arr(b1),
                Value::Arr(w2),
                Value::F64(0.05),
            ],
            value: 0.0031897003229076192,
            dfirst: None,
        },
    ]
}

/// Path of a suite program relative to the workspace root.
pub fn path(case: &Case) -> String {
    format!("programs/bench/{}.adasm", case.file)
}
