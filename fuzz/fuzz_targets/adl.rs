//! The `.adl` front end on arbitrary text: it must return a module or
//! diagnostics, never panic (nor report an internal error); a module it
//! accepts must print as `.adasm` that assembles, and build an engine
//! (lowering and verification) without an error.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let src = String::from_utf8_lossy(data);
    match adl::compile(&src, "fuzz.adl") {
        Ok(module) => {
            let text = assembler::print_module(&module);
            if let Err(d) = assembler::assemble(&text, "ir.adasm") {
                panic!("the --ir text does not assemble:\n{}\n{text}", d.render());
            }
            if let Err(e) = ad::Engine::new(module) {
                panic!("an accepted module does not build: {e}");
            }
        }
        Err(d) => {
            let r = d.render();
            assert!(!r.contains("internal error"), "{r}");
        }
    }
});
