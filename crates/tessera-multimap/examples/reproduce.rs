//! `cargo run --release -p tessera-multimap --example reproduce [-- --out DIR]`: prints the
//! paper's Table 3 reproduced on the modelled disk (and writes `DIR/table3.json`, `DIR/table3.md`
//! and the paper's Figures 12 and 13 as `DIR/figure12a.svg` ... `DIR/figure13b.svg`).

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let mut out = None;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--out" => out = Some(args.next().ok_or_else(|| anyhow::anyhow!("--out needs a directory"))?.into()),
            other => anyhow::bail!("unknown argument {other:?}; usage: reproduce [--out DIR]"),
        }
    }
    tessera_multimap::run_reproduce_command(out)
}
