//! Fuzz target `fragment_meta_file`: the body is `tessera::fuzz::TARGETS`' entry of that name.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let target = tessera::fuzz::TARGETS.iter().find(|t| t.0 == "fragment_meta_file").map(|t| t.1);
    if let Some(run) = target {
        run(data);
    }
});
