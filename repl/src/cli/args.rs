//! Command-line arguments to and results from functions: JSON in, JSON or
//! text out (adasm.md §5).

use serde_json::{json, Value as Json};
use vm::{Type, Value};

/// Parse `--args` JSON for parameters of the given types.
///
/// Numbers for f64 and i64 (an i64 needs an integer), `true`/`false`, arrays
/// of numbers for `f64[]`. As an extension, the strings `"inf"`, `"-inf"`
/// and `"nan"` are accepted wherever an f64 is (the same spelling `--json`
/// output uses).
pub fn parse_json_args(text: &str, params: &[Type]) -> Result<Vec<Value>, String> {
    parse_json_args_from(text, params, "--args")
}

/// [`parse_json_args`] for JSON that came from `what` (`--args`, `the
/// arguments file a.json`), which error messages name.
pub fn parse_json_args_from(text: &str, params: &[Type], what: &str) -> Result<Vec<Value>, String> {
    let json: Json =
        serde_json::from_str(text).map_err(|e| format!("{what} is not valid JSON: {e}"))?;
    let Json::Array(items) = json else {
        return Err(format!(
            "{what} must hold a JSON array with one entry per parameter"
        ));
    };
    if items.len() != params.len() {
        return Err(format!(
            "{what} has {} entries, but the function takes {} parameter(s)",
            items.len(),
            params.len()
        ));
    }
    // serde_json keeps no spelling of a number: an i64 argument's is read
    // from the text (for `-0`, and to quote a number as written).
    let raw = top_level_items(text);
    items
        .iter()
        .zip(params)
        .enumerate()
        .map(|(i, (item, ty))| {
            let written = raw.get(i).copied().unwrap_or("");
            value(item, *ty, written).map_err(|e| format!("{what}, argument {}: {e}", i + 1))
        })
        .collect()
}

/// Parse a forward-mode direction (`advm jvp --dir`, adasm.md §8): a JSON
/// array with one entry per parameter, shaped like the arguments `args`: a
/// number for an `f64` parameter, an array of the argument's length for an
/// `f64[]` one, `null` for `i64` and `bool` ones. `null` is a zero
/// direction for any parameter; a parameter that `wrt` does not select
/// takes `null` or zero only (`0.0`, or an array of zeros). `names` are the
/// parameters' names, for messages; `what` names the flag.
pub fn parse_json_dir(
    text: &str,
    args: &[Value],
    wrt: &[bool],
    names: &[String],
    what: &str,
) -> Result<Vec<Option<Value>>, String> {
    let json: Json =
        serde_json::from_str(text).map_err(|e| format!("{what} is not valid JSON: {e}"))?;
    let Json::Array(items) = json else {
        return Err(format!(
            "{what} must hold a JSON array with one entry per parameter"
        ));
    };
    if items.len() != args.len() {
        return Err(format!(
            "{what} has {} entries, but the function takes {} parameter(s)",
            items.len(),
            args.len()
        ));
    }
    let mut dir = Vec::with_capacity(args.len());
    for (i, (item, arg)) in items.iter().zip(args).enumerate() {
        let name = names
            .get(i)
            .map_or_else(|| format!("{}", i + 1), |n| format!("%{n}"));
        let at = |m: String| format!("{what}, entry {} ({name}): {m}", i + 1);
        let selected = wrt.get(i).copied().unwrap_or(false);
        let d = match (item, arg) {
            (Json::Null, _) => None,
            (_, Value::I64(_) | Value::Bool(_)) => {
                return Err(at(format!(
                    "the parameter is {}, which has no derivative: write null",
                    arg.ty()
                )))
            }
            (_, Value::F64(_)) => Some(Value::F64(float(item).map_err(at)?)),
            (Json::Number(_), Value::Arr(_)) if !selected && float(item) == Ok(0.0) => None,
            (Json::Array(xs), Value::Arr(a)) => {
                let ds = xs.iter().map(float).collect::<Result<Vec<f64>, _>>();
                let ds = ds.map_err(at)?;
                if ds.len() != a.len() {
                    return Err(at(format!(
                        "{} element(s), but the argument has {}",
                        ds.len(),
                        a.len()
                    )));
                }
                Some(Value::Arr(ds))
            }
            (other, Value::Arr(_)) => {
                return Err(at(format!(
                    "the parameter is f64[]: expected an array of numbers or null, found {other}"
                )))
            }
        };
        let zero = match &d {
            None => true,
            Some(Value::F64(x)) => *x == 0.0,
            Some(Value::Arr(xs)) => xs.iter().all(|x| *x == 0.0),
            Some(_) => false,
        };
        if !selected && !zero {
            return Err(at(
                "the parameter is not differentiated (not in --wrt): its direction must be null or 0"
                    .into(),
            ));
        }
        dir.push(if selected { d } else { None });
    }
    Ok(dir)
}

/// Parse `advm vjp --seed` JSON for a function returning `ret`: a number
/// for an `f64` result, an array of numbers for an `f64[]` one (its length
/// is checked against the result when the function has run).
pub fn parse_json_seed(text: &str, ret: Type) -> Result<Value, String> {
    let json: Json =
        serde_json::from_str(text).map_err(|e| format!("--seed is not valid JSON: {e}"))?;
    match ret {
        Type::F64 | Type::Arr => value(&json, ret, text.trim()).map_err(|e| format!("--seed: {e}")),
        Type::I64 | Type::Bool => Err(format!(
            "the function returns {ret}, which has no derivative: vjp needs an f64 or f64[] result"
        )),
    }
}

/// A REPL direction `[1.0, [0.5, 2], null, -inf]` as JSON: the bare words
/// `inf`, `-inf` and `nan` of the literal syntax become the strings JSON
/// arguments use (numbers, arrays and `null` are JSON already).
pub fn literal_list_to_json(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        let word: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '.')
            .collect();
        let signed = c == '-' && rest[1..].starts_with("inf");
        if signed {
            out.push_str("\"-inf\"");
            rest = &rest[4..];
        } else if !word.is_empty() && (word == "inf" || word == "nan") {
            out.push('"');
            out.push_str(&word);
            out.push('"');
            rest = &rest[word.len()..];
        } else if !word.is_empty() {
            out.push_str(&word);
            rest = &rest[word.len()..];
        } else {
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// The text of each entry of the top-level JSON array `text` (valid JSON),
/// trimmed, in order.
fn top_level_items(text: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let (mut depth, mut in_string, mut escape) = (0usize, false, false);
    let mut start = None;
    for (i, c) in text.char_indices() {
        if in_string {
            match c {
                _ if escape => escape = false,
                '\\' => escape = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '[' | '{' => {
                depth += 1;
                if depth == 1 {
                    start = Some(i + 1);
                    continue;
                }
            }
            ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        if (depth == 0 && c == ']') || (depth == 1 && c == ',') {
            if let Some(s) = start {
                let item = text[s..i].trim();
                if !item.is_empty() || c == ',' {
                    items.push(item);
                }
            }
            start = Some(i + 1);
            if depth == 0 {
                break;
            }
        }
    }
    items
}

/// `s` for a message: at most 40 characters of it (with `...` where cut).
fn quoted(s: &str) -> String {
    match s.char_indices().nth(40) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_string(),
    }
}

/// An i64 argument: an integer in range (`-0` is 0), or why it is not one,
/// quoting the number as `written`.
fn int(n: &serde_json::Number, written: &str) -> Result<i64, String> {
    if let Some(k) = n.as_i64() {
        return Ok(k);
    }
    if written == "-0" {
        return Ok(0);
    }
    let shown = if written.is_empty() {
        n.to_string()
    } else {
        quoted(written)
    };
    // Integers beyond i64 arrive as u64 or, below i64::MIN, as an f64 (the
    // spelling tells whether it was written as an integer).
    let integer = !written.is_empty() && !written.contains(['.', 'e', 'E']);
    let out_of_range = n.is_u64()
        || integer
        || n.as_f64()
            .is_some_and(|x| x.fract() == 0.0 && x.abs() >= -(i64::MIN as f64));
    if out_of_range {
        Err(format!(
            "the parameter is i64: {shown} is out of the i64 range ({} to {})",
            i64::MIN,
            i64::MAX
        ))
    } else {
        Err(format!(
            "the parameter is i64: expected an integer, found {shown}"
        ))
    }
}

fn float(item: &Json) -> Result<f64, String> {
    match item {
        Json::Number(n) => n.as_f64().ok_or_else(|| format!("{n} is not an f64")),
        Json::String(s) if s == "inf" => Ok(f64::INFINITY),
        Json::String(s) if s == "-inf" => Ok(f64::NEG_INFINITY),
        Json::String(s) if s == "nan" => Ok(f64::NAN),
        other => Err(format!("expected a number, found {other}")),
    }
}

fn value(item: &Json, ty: Type, written: &str) -> Result<Value, String> {
    match ty {
        Type::F64 => float(item).map(Value::F64),
        Type::I64 => match item {
            Json::Number(n) => int(n, written).map(Value::I64),
            other => Err(format!(
                "the parameter is i64: expected an integer, found {other}"
            )),
        },
        Type::Bool => match item {
            Json::Bool(b) => Ok(Value::Bool(*b)),
            other => Err(format!("expected true or false, found {other}")),
        },
        Type::Arr => match item {
            Json::Array(xs) => xs
                .iter()
                .map(float)
                .collect::<Result<_, _>>()
                .map(Value::Arr),
            other => Err(format!(
                "the parameter is f64[]: expected an array of numbers, found {other}"
            )),
        },
    }
}

/// An f64 as JSON: a number, or `"inf"`, `"-inf"`, `"nan"`.
pub fn float_json(x: f64) -> Json {
    if x.is_nan() {
        json!("nan")
    } else if x.is_infinite() {
        json!(if x > 0.0 { "inf" } else { "-inf" })
    } else {
        json!(x)
    }
}

/// A value as JSON: a number (non-finite ones as [`float_json`] spells
/// them), a boolean, or an array of numbers.
pub fn value_json(v: &Value) -> Json {
    match v {
        Value::F64(x) => float_json(*x),
        Value::I64(i) => json!(i),
        Value::Bool(b) => json!(b),
        Value::Arr(xs) => Json::Array(xs.iter().map(|x| float_json(*x)).collect()),
    }
}

/// A value as text; arrays longer than `max` (if given) are shortened to
/// their first and last few elements.
pub fn value_text(v: &Value, max: Option<usize>) -> String {
    match v {
        Value::Arr(xs) => match max {
            Some(max) if xs.len() > max => {
                let head: Vec<String> = xs[..max / 2].iter().map(|x| x.to_string()).collect();
                let tail: Vec<String> = xs[xs.len() - max / 2..]
                    .iter()
                    .map(|x| x.to_string())
                    .collect();
                format!(
                    "[{}, … {} more …, {}] (length {})",
                    head.join(", "),
                    xs.len() - max,
                    tail.join(", "),
                    xs.len()
                )
            }
            _ => v.to_string(),
        },
        other => other.to_string(),
    }
}

/// The mask of `--wrt NAMES` (REPL: `grad @f(args) wrt NAMES`): which
/// parameters of `f` to differentiate with respect to, from a comma- or
/// space-separated list of parameter names (`%` optional). Every name must
/// be a parameter of type f64 or f64[].
pub fn wrt_mask(f: &vm::ir::Function, names: &str) -> Result<Vec<bool>, String> {
    let mut mask = vec![false; f.params.len()];
    let param_list = || differentiable_params(f);
    let mut any = false;
    for name in names.split([',', ' ']).filter(|n| !n.is_empty()) {
        let bare = name.strip_prefix('%').unwrap_or(name);
        let Some(i) = f
            .params
            .iter()
            .position(|p| f.values[p.index()].name.as_deref() == Some(bare))
        else {
            return Err(format!(
                "@{} has no parameter %{bare} (it can be differentiated with respect to {})",
                f.name,
                param_list()
            ));
        };
        let ty = f.ty(f.params[i]);
        if !ty.is_differentiable() {
            return Err(format!(
                "cannot differentiate @{} with respect to %{bare}: it is {ty}, not f64 or f64[]",
                f.name
            ));
        }
        mask[i] = true;
        any = true;
    }
    if !any {
        return Err(format!(
            "--wrt names no parameter (@{} can be differentiated with respect to {})",
            f.name,
            param_list()
        ));
    }
    Ok(mask)
}

/// The parameters of `f` a gradient can be taken with respect to (f64 and
/// f64[]), as `%x, %v`.
pub fn differentiable_params(f: &vm::ir::Function) -> String {
    f.params
        .iter()
        .filter(|p| f.ty(**p).is_differentiable())
        .filter_map(|p| f.values.get(p.index()).and_then(|v| v.name.as_ref()))
        .map(|n| format!("%{n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The `--json` object of a forward-mode result (`advm jvp`, `advm sweep
/// --mode jvp`): `value` and `tangent` (`null` for a function with no
/// result, `unit`), and `arg_tangents` when an `f64[]` parameter was
/// differentiated.
pub fn tangent_json(t: &ad::Tangent, unit: bool) -> serde_json::Map<String, Json> {
    let mut obj = serde_json::Map::new();
    let value = if unit {
        Json::Null
    } else {
        value_json(&t.value)
    };
    obj.insert("value".into(), value);
    obj.insert(
        "tangent".into(),
        t.tangent.as_ref().map_or(Json::Null, value_json),
    );
    if t.arg_tangents.iter().any(Option::is_some) {
        let tangents: Vec<Json> = t
            .arg_tangents
            .iter()
            .map(|v| v.as_ref().map_or(Json::Null, value_json))
            .collect();
        obj.insert("arg_tangents".into(), tangents.into());
    }
    obj
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_all_kinds() {
        let v = parse_json_args(
            r#"[1.5, 2, true, [1, 2.5], "inf"]"#,
            &[Type::F64, Type::I64, Type::Bool, Type::Arr, Type::F64],
        )
        .expect("parses");
        assert_eq!(v[0], Value::F64(1.5));
        assert_eq!(v[1], Value::I64(2));
        assert_eq!(v[3], Value::Arr(vec![1.0, 2.5]));
        assert_eq!(v[4], Value::F64(f64::INFINITY));
    }

    #[test]
    fn rejects_mismatches() {
        assert!(parse_json_args("[1.5", &[Type::F64]).is_err());
        assert!(parse_json_args("{}", &[Type::F64]).is_err());
        assert!(parse_json_args("[1.5]", &[Type::I64]).is_err());
        assert!(parse_json_args("[1, 2]", &[Type::I64]).is_err());
        assert!(parse_json_args("[[1, true]]", &[Type::Arr]).is_err());
    }

    #[test]
    fn minus_zero_is_an_i64_and_numbers_are_quoted_as_written() {
        let v = parse_json_args("[-0, -0.0]", &[Type::I64, Type::F64]).expect("parses");
        assert_eq!(v[0], Value::I64(0));
        assert!(matches!(v[1], Value::F64(x) if x == 0.0 && x.is_sign_negative()));
        let err = |text: &str| parse_json_args(text, &[Type::F64, Type::I64]).expect_err(text);
        assert_eq!(
            err("[1.0, 99999999999999999999999]"),
            "--args, argument 2: the parameter is i64: 99999999999999999999999 is out \
             of the i64 range (-9223372036854775808 to 9223372036854775807)"
        );
        assert!(err("[ -1e-3 , -9223372036854775809 ]")
            .contains(": -9223372036854775809 is out of the i64 range"));
        assert!(err("[2.5, 1.50]").ends_with("expected an integer, found 1.50"));
        assert!(err("[1, -0.0]").ends_with("expected an integer, found -0.0"));
        assert!(err("[1, 1e3]").ends_with("expected an integer, found 1e3"));
        let long = format!("[1, {}]", "9".repeat(300));
        assert!(err(&long).contains(&format!(": {}... is out of", "9".repeat(40))));
    }

    #[test]
    fn top_level_items_are_split_outside_strings_and_nesting() {
        assert_eq!(
            top_level_items(r#" [ 1 , "x,\"]" , [2, 3], {"a": [4]} ,-0] "#),
            vec!["1", r#""x,\"]""#, "[2, 3]", r#"{"a": [4]}"#, "-0"]
        );
        assert_eq!(top_level_items("[]"), Vec::<&str>::new());
    }

    #[test]
    fn parses_directions() {
        let args = [Value::F64(1.0), Value::I64(2), Value::Arr(vec![1.0, 2.0])];
        let names: Vec<String> = ["x", "n", "v"].iter().map(|s| s.to_string()).collect();
        let all = [true, false, true];
        let d = parse_json_dir(r#"[0.5, null, [1, "inf"]]"#, &args, &all, &names, "--dir")
            .expect("parses");
        assert_eq!(
            d,
            vec![
                Some(Value::F64(0.5)),
                None,
                Some(Value::Arr(vec![1.0, f64::INFINITY]))
            ]
        );
        // Zero or null outside wrt; anything else there is refused.
        let only_x = [true, false, false];
        let d = parse_json_dir("[1, null, 0.0]", &args, &only_x, &names, "--dir").expect("parses");
        assert_eq!(d, vec![Some(Value::F64(1.0)), None, None]);
        let e = parse_json_dir("[1, null, [1, 0]]", &args, &only_x, &names, "--dir");
        assert!(e.is_err_and(|e| e.contains("%v") && e.contains("--wrt")));
        for bad in [
            "[1, 2, [1, 2]]",
            "[1, null, [1]]",
            "[1, null]",
            "[[1], null, [1, 2]]",
            "[1, null, 3]",
            "{}",
            "[1, null, [1, 2]",
        ] {
            assert!(
                parse_json_dir(bad, &args, &all, &names, "--dir").is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn repl_directions_become_json() {
        assert_eq!(
            literal_list_to_json("[1.5, -inf, [nan, 2], null, inf]"),
            r#"[1.5, "-inf", ["nan", 2], null, "inf"]"#
        );
    }

    #[test]
    fn non_finite_json() {
        assert_eq!(float_json(f64::NAN), json!("nan"));
        assert_eq!(float_json(f64::NEG_INFINITY), json!("-inf"));
        assert_eq!(
            value_json(&Value::Arr(vec![1.0, f64::INFINITY])),
            json!([1.0, "inf"])
        );
    }
}
