//! `advm cfg`: the DOT pictures match the IR one for one (a node per block,
//! an edge per successor edge, in both the primal and the derived CFGs), and
//! Graphviz accepts them.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use vm::ir::{Function, Term};

fn advm(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_advm"))
        .args(args)
        .current_dir(testkit::workspace_root())
        .output()
        .expect("advm runs")
}

/// Nodes (`prefix_N`) and edges (`prefix_A -> prefix_B` with their labels)
/// of one cluster of a DOT text.
#[derive(Debug, Default)]
struct Picture {
    nodes: Vec<usize>,
    edges: Vec<(usize, usize, String)>,
}

fn parse(dot: &str, prefix: &str) -> Picture {
    let mut p = Picture::default();
    let node =
        |s: &str| -> Option<usize> { s.strip_prefix(prefix)?.strip_prefix('_')?.parse().ok() };
    for line in dot.lines().map(str::trim) {
        let head = line.split(' ').next().unwrap_or("");
        if let Some((a, rest)) = line.split_once(" -> ") {
            let (Some(a), Some(b)) = (node(a), node(rest.split([' ', ';']).next().unwrap_or("")))
            else {
                continue;
            };
            let label = rest
                .split_once("label=\"")
                .and_then(|(_, l)| l.split_once('"'))
                .map_or(String::new(), |(l, _)| l.to_string());
            p.edges.push((a, b, label));
        } else if let Some(n) = node(head)
            && line[head.len()..].trim_start().starts_with("[label=<")
        {
            p.nodes.push(n);
        }
    }
    p
}

/// The picture must show exactly the IR's blocks and successor edges.
fn check(picture: &Picture, f: &Function, what: &str) {
    let blocks: Vec<usize> = (0..f.blocks.len()).collect();
    assert_eq!(picture.nodes, blocks, "{what}: one node per block");
    let mut want: Vec<(usize, usize, String)> = Vec::new();
    for (i, b) in f.blocks.iter().enumerate() {
        match &b.term {
            Term::Jmp(t) => want.push((i, t.index(), String::new())),
            Term::Br { then_, else_, .. } => {
                want.push((i, then_.index(), "then".into()));
                want.push((i, else_.index(), "else".into()));
            }
            Term::BlkPop(ts) => {
                for (k, t) in ts.iter().enumerate() {
                    want.push((i, t.index(), format!("blk.pop {k}")));
                }
            }
            Term::Ret(_) | Term::RetN(_) => {}
        }
        assert_eq!(
            b.term.successors().len(),
            want.iter().filter(|e| e.0 == i).count(),
            "{what}: successor count of block {}",
            b.name
        );
    }
    let mut got = picture.edges.clone();
    got.sort();
    want.sort();
    assert_eq!(got, want, "{what}: one edge per successor edge");
}

fn programs() -> Vec<PathBuf> {
    let root = testkit::workspace_root();
    let mut files = Vec::new();
    for dir in ["programs", "programs/bench"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "adasm") {
                files.push(p);
            }
        }
    }
    files.sort();
    files
}

fn rel(p: &Path) -> String {
    p.strip_prefix(testkit::workspace_root())
        .unwrap_or(p)
        .display()
        .to_string()
}

/// Graphviz must accept every picture; `None` when it is not installed.
fn dot_accepts(texts: &[String]) -> Option<()> {
    Command::new("dot").arg("-V").output().ok()?;
    for text in texts {
        let mut child = Command::new("dot")
            .arg("-Tsvg")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("dot runs");
        let mut stdin = child.stdin.take().expect("stdin");
        let input = text.clone();
        let writer = std::thread::spawn(move || {
            let _ = stdin.write_all(input.as_bytes());
        });
        let o = child.wait_with_output().expect("dot finishes");
        let _ = writer.join();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "dot rejected:\n{err}\n{text}");
        assert!(
            !err.contains("Warning") && !err.contains("Error"),
            "dot:\n{err}\n{text}"
        );
        let svg = String::from_utf8_lossy(&o.stdout);
        assert_eq!(svg.matches("<svg").count(), 1, "{text}");
    }
    Some(())
}

#[test]
fn pictures_match_the_ir_of_every_program() {
    let files = programs();
    assert!(files.len() >= 10, "the corpus is missing: {files:?}");
    let mut texts = Vec::new();
    let mut ad_pictures = 0;
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for file in &files {
        let name = rel(file);
        let src = std::fs::read_to_string(file).expect("reads");
        let Ok(module) = assembler::assemble(&src, &name) else {
            // Not this test's business (the corpus test checks the programs).
            eprintln!("note: {name} does not assemble; skipped");
            continue;
        };
        let mut engine = ad::Engine::new(module.clone()).expect("engine");
        // The pictures are of what runs: small callees inlined.
        let module = engine.module().clone();
        for (i, f) in module.funcs.iter().enumerate() {
            let o = advm(&["cfg", &name, "--fn", &f.name]);
            assert_eq!(o.status.code(), Some(0), "{name} @{}", f.name);
            let dot = String::from_utf8_lossy(&o.stdout).into_owned();
            check(&parse(&dot, "primal"), f, &format!("{name} @{}", f.name));
            *counts.entry("blocks").or_default() += f.blocks.len();
            texts.push(dot);

            let o = advm(&["cfg", &name, "--fn", &f.name, "--ad"]);
            let Ok(d) = engine.derive(vm::ir::FuncId(i as u32)) else {
                // Not differentiable (does not return f64): bad usage.
                assert_eq!(o.status.code(), Some(64), "{name} @{}", f.name);
                continue;
            };
            assert_eq!(o.status.code(), Some(0), "{name} @{} --ad", f.name);
            let dot = String::from_utf8_lossy(&o.stdout).into_owned();
            let fwd = engine.derived_ir(d.fwd).expect("forward IR");
            let rev = engine.derived_ir(d.rev).expect("reverse IR");
            check(
                &parse(&dot, "fwd"),
                fwd,
                &format!("{name} @{} forward", f.name),
            );
            check(
                &parse(&dot, "rev"),
                rev,
                &format!("{name} @{} reverse", f.name),
            );
            assert_eq!(dot.matches("subgraph cluster_").count(), 2, "{dot}");
            // Marked: phi-edge blocks and comms traffic.
            for b in rev.blocks.iter().filter(|b| b.name.starts_with("edge.")) {
                assert!(dot.contains(&format!("<b>{}:</b>", b.name)), "{dot}");
            }
            let edge_nodes = dot
                .lines()
                .filter(|l| l.trim_start().starts_with("rev_") && l.contains("fillcolor"))
                .count();
            assert_eq!(
                edge_nodes,
                rev.blocks
                    .iter()
                    .filter(|b| b.name.starts_with("edge."))
                    .count(),
                "{dot}"
            );
            let comms = |g: &Function, op: vm::op::Op| {
                g.blocks
                    .iter()
                    .flat_map(|b| &b.insts)
                    .filter(|i| i.op == op)
                    .count()
            };
            assert_eq!(
                dot.matches("⇡ comms.push").count(),
                comms(fwd, vm::op::Op::CommsPush) + comms(rev, vm::op::Op::CommsPush)
            );
            assert_eq!(
                dot.matches("comms.pop</font>").count(),
                comms(fwd, vm::op::Op::CommsPop) + comms(rev, vm::op::Op::CommsPop)
            );
            *counts.entry("dispatch edges").or_default() += dot.matches("blk.pop ").count();
            ad_pictures += 1;
            texts.push(dot);
        }
    }
    assert!(ad_pictures >= 10, "{ad_pictures} AD pictures");
    assert!(counts["dispatch edges"] > 0, "{counts:?}");
    if dot_accepts(&texts).is_none() {
        eprintln!("note: Graphviz `dot` is not installed; DOT syntax not checked");
    }
}

#[test]
fn powloop_picture() {
    let o = advm(&["cfg", "programs/bench/powloop.adasm", "--fn", "@pow"]);
    assert_eq!(o.status.code(), Some(0));
    let dot = String::from_utf8_lossy(&o.stdout);
    let p = parse(&dot, "primal");
    // entry, head, body, done; entry->head, head->body, head->done, body->head.
    assert_eq!(p.nodes.len(), 4, "{dot}");
    assert_eq!(p.edges.len(), 4, "{dot}");
    assert!(
        dot.contains("label=\"then\"") && dot.contains("label=\"else\""),
        "{dot}"
    );
    let o = advm(&["cfg", "programs/bench/powloop.adasm", "--fn", "pow", "--ad"]);
    let ad = String::from_utf8_lossy(&o.stdout);
    assert!(
        ad.contains("cluster_fwd") && ad.contains("cluster_rev"),
        "{ad}"
    );
    // The loop is counted: the reverse header steps the counter and
    // branches (then: leave by the entry edge; else: back into the loop),
    // with no block ids.
    let rev = parse(&ad, "rev");
    assert!(!ad.contains("blk.pop"), "{ad}");
    assert!(
        ad.contains("<b>rev.head:</b>") && ad.contains("%iv.head = sub.i"),
        "{ad}"
    );
    assert_eq!(
        rev.edges.len(),
        4,
        "start, body -> head; head -> exit, body:\n{ad}"
    );
    assert!(
        ad.contains("comms.push") && ad.contains("comms.pop"),
        "{ad}"
    );
    // A branch joining inside a loop is replayed from the block stack:
    // dashed dispatch edges, one per predecessor (walk's condition reads a
    // value its loop overwrites, so it keeps its branches).
    let o = advm(&[
        "cfg",
        "programs/branch_in_loop.adasm",
        "--fn",
        "walk",
        "--ad",
    ]);
    let ad = String::from_utf8_lossy(&o.stdout);
    assert!(
        ad.contains("label=\"blk.pop 0\"") && ad.contains("label=\"blk.pop 1\""),
        "{ad}"
    );
    assert!(ad.contains("style=dashed"), "{ad}");
}

#[test]
fn exit_statuses() {
    let dir = tempfile::tempdir().expect("temp dir");
    let bad = dir.path().join("bad.adasm");
    std::fs::write(&bad, "fn @f() -> f64 {\nentry:\n    ret 2\n}\n").expect("writes");
    let bad = bad.to_str().expect("utf-8");
    let pow = "programs/bench/powloop.adasm";
    let cases: &[(&[&str], i32)] = &[
        (&["cfg", pow, "--fn", "pow"], 0),
        (&["cfg", pow], 0),
        (&["cfg", "programs/mutual.adasm"], 64),
        (&["cfg", pow, "--fn", "nope"], 64),
        (&["cfg", pow, "--fn", "pow", "--frob"], 64),
        (&["cfg", "no/such/file.adasm", "--fn", "f"], 64),
        (&["cfg", bad, "--fn", "f"], 2),
        (&["cfg", bad, "--fn", "f", "--ad"], 2),
    ];
    for (args, code) in cases {
        let o = advm(args);
        assert_eq!(o.status.code(), Some(*code), "{args:?}");
        if *code != 0 {
            assert!(o.stdout.is_empty(), "{args:?}");
        }
    }
    let o = advm(&["cfg", bad, "--fn", "f"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("bad.adasm:3:9: error:") && err.contains('^'),
        "{err}"
    );
}
