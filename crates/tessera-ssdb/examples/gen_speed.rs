//! Generator speed alone (no storage): cells per second over all cores, best of 5 passes over
//! the first cycle's images. `cargo run --release -p tessera-ssdb --example gen_speed [config]`.

use std::time::Instant;

use anyhow::Result;
use tessera_ssdb::generator::{Band, Generator};
use tessera_ssdb::params::Config;
use tessera_ssdb::tiles::SkyTiles;

fn main() -> Result<()> {
    let config: Config =
        std::env::args().nth(1).unwrap_or_else(|| "tiny".into()).parse().map_err(anyhow::Error::msg)?;
    let gen = Generator::new(config, SkyTiles::open(None)?);
    let s = config.side();
    let rows = 250.min(s);
    let mut band = Band::new(usize::try_from(s)?);
    let mut best = 0.0f64;
    for _ in 0..5 {
        let t0 = Instant::now();
        let mut cells = 0u64;
        for t in 0..20 {
            let mut y = 0;
            while y < s {
                let n = rows.min(s - y);
                gen.fill(t, y, usize::try_from(n)?, &mut band);
                cells += (n * s).unsigned_abs();
                y += n;
            }
        }
        best = best.max(cells as f64 / t0.elapsed().as_secs_f64());
    }
    println!("{config}: {:.0} Mcells/s ({} threads)", best / 1e6, rayon::current_num_threads());
    Ok(())
}
