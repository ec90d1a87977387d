//! The assembler on arbitrary text: it must return a module or diagnostics,
//! never panic; a module it accepts must lower and verify.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    match assembler::assemble(&text, "fuzz.adasm") {
        Ok(module) => {
            let program = vm::lower::lower_module(&module).expect("accepted modules lower");
            if let Err(e) = vm::verify::verify_program(&program) {
                panic!("accepted module failed verification: {e:?}");
            }
        }
        Err(d) => {
            let _ = d.render();
        }
    }
});
