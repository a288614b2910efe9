//! Q3's speed on an existing store (made by `tessera ssdb run --config C --dir D`): the 15
//! cold runs of start set `spec` (or the first `runs`), each after evicting the store from
//! the page cache, as `tessera ssdb run` times them; prints each run and the median.
//!
//! `cargo run --release -p tessera-ssdb --example q3_speed -- CONFIG DIR [runs]`

use std::path::PathBuf;
use std::time::Instant;

use tessera::{Config as EngineConfig, Context};
use tessera_ssdb::params::{Config, StartSet};
use tessera_ssdb::query::{cold, run_query, runs};

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(config), Some(dir)) = (args.next(), args.next()) else {
        eprintln!("usage: q3_speed CONFIG DIR [runs]");
        std::process::exit(2);
    };
    let config: Config = config.parse().expect("a configuration name (micro, tiny, very-small, ...)");
    let dir = PathBuf::from(dir);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(15);
    let results = std::env::temp_dir().join(format!("q3_speed_{}", std::process::id()));
    std::fs::create_dir_all(&results).expect("results folder");
    let mut secs = Vec::new();
    let mut sha = String::new();
    for p in runs(config, StartSet::Spec).into_iter().take(n) {
        cold::evict_dir(&dir).expect("evict");
        let ctx = Context::new(EngineConfig::default()).expect("context");
        let t0 = Instant::now();
        let v = run_query(&ctx, &dir, config, 3, &p, &results).expect("Q3");
        let s = t0.elapsed().as_secs_f64();
        sha = v["sha256_of_image_shas"].as_str().unwrap_or_default().to_owned();
        println!("run {:2} cycle {}: {s:.3} s", p.run, p.cycles[2]);
        secs.push(s);
    }
    std::fs::remove_dir_all(&results).ok();
    secs.sort_by(f64::total_cmp);
    let total: f64 = secs.iter().sum();
    println!(
        "Q3 {config:?}: {} runs, median {:.3} s, total {total:.2} s (last sha {})",
        secs.len(),
        secs[secs.len() / 2],
        &sha[..sha.len().min(16)]
    );
}
