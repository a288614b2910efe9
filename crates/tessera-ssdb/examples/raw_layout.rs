//! Measures layouts of the raw images array (tile shape, filters) on one cycle of a
//! configuration: generation speed, load time, bytes on disk, and read times of a cycle's `pix`
//! (Q1), a whole image's `pix` (cooking), and 100 x 100 windows of all attributes (Q8/Q9), with
//! the engine's statistics. `cargo run --release -p tessera-ssdb --example raw_layout [config]`.

use std::time::Instant;

use anyhow::Result;
use tessera::{stats, Array, Config as EngineConfig, Context, Layout, Mode, Subarray};
use tessera_ssdb::generator::{Band, Generator, ATTRS};
use tessera_ssdb::params::Config;
use tessera_ssdb::raw::{Codec, RawLayout, RawStore, IMAGES};
use tessera_ssdb::tiles::SkyTiles;

fn dir_bytes(p: &std::path::Path) -> u64 {
    let mut n = 0;
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            let m = e.metadata().map(|m| (m.is_dir(), m.len())).unwrap_or((false, 0));
            n += if m.0 { dir_bytes(&e.path()) } else { m.1 };
        }
    }
    n
}

fn main() -> Result<()> {
    let config: Config =
        std::env::args().nth(1).unwrap_or_else(|| "tiny".into()).parse().map_err(anyhow::Error::msg)?;
    let gen = Generator::new(config, SkyTiles::open(None)?);
    let s = config.side();
    // Generation alone.
    let mut band = Band::new(s as usize);
    let t0 = Instant::now();
    for t in 0..20 {
        gen.fill(t, 0, s as usize, &mut band);
    }
    let cells = 20.0 * (s * s) as f64;
    println!("generate: {:.0} Mcells/s", cells / t0.elapsed().as_secs_f64() / 1e6);
    let z = |c| [c; 11];
    let sz = |c| [Codec::ShuffleZstd(c); 11];
    let layouts = [
        ("none", RawLayout { tile_y: 250, tile_x: 500, codecs: z(Codec::None) }),
        ("lz4", RawLayout { tile_y: 250, tile_x: 500, codecs: z(Codec::Lz4) }),
        ("zstd1", RawLayout { tile_y: 250, tile_x: 500, codecs: z(Codec::Zstd(1)) }),
        ("shuffle+lz4", RawLayout { tile_y: 250, tile_x: 500, codecs: z(Codec::ShuffleLz4) }),
        ("shuffle+zstd1", RawLayout { tile_y: 250, tile_x: 500, codecs: sz(1) }),
        ("shuffle+zstd3", RawLayout { tile_y: 250, tile_x: 500, codecs: sz(3) }),
        ("shuffle+zstd1", RawLayout { tile_y: 100, tile_x: 100, codecs: sz(1) }),
        ("shuffle+zstd1", RawLayout { tile_y: 128, tile_x: 128, codecs: sz(1) }),
        ("shuffle+zstd1", RawLayout { tile_y: 250, tile_x: 250, codecs: sz(1) }),
        ("shuffle+zstd1", RawLayout { tile_y: 500, tile_x: 500, codecs: sz(1) }),
        ("shuffle+zstd1", RawLayout { tile_y: 1000, tile_x: 1000, codecs: sz(1) }),
    ];
    println!("| layout | load s | Mcells/s | MB on disk | ratio | Q1 cycle pix s | image pix s | 100 windows s | window bytes read |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for (codec, layout) in layouts {
        let (ey, ex) = layout.extents(s);
        let name = format!("{ey}x{ex} {codec}");
        let tmp = tempfile::tempdir_in(std::env::var("TMPDIR").unwrap_or_else(|_| "/tmp".into()))?;
        let ctx = Context::new(EngineConfig::new())?;
        let store = RawStore::create(&ctx, tmp.path(), config, &layout)?;
        let t0 = Instant::now();
        store.load(&gen, 0..20, &|_| {})?;
        let load = t0.elapsed().as_secs_f64();
        let bytes = dir_bytes(&tmp.path().join(IMAGES));
        // Fresh context for reads: no tile cache carried over.
        let mut cfg = EngineConfig::new();
        cfg.set("sm.tile_cache_size", "0")?;
        let ctx = Context::new(cfg)?;
        let a = Array::open(&ctx, tmp.path().join(IMAGES), Mode::Read)?;
        let t0 = Instant::now();
        let r = a.read(
            &Subarray::from_ranges(&[(0, 19), (0, (s - 1).into()), (0, (s - 1).into())]),
            &["pix"],
            Layout::RowMajor,
        )?;
        let q1 = t0.elapsed().as_secs_f64();
        assert_eq!(r.cells, 20 * (s * s) as u64);
        let t0 = Instant::now();
        let _ = a.read(
            &Subarray::from_ranges(&[(5, 5), (0, (s - 1).into()), (0, (s - 1).into())]),
            &["pix"],
            Layout::RowMajor,
        )?;
        let img = t0.elapsed().as_secs_f64();
        stats::reset();
        stats::enable();
        let t0 = Instant::now();
        for i in 0..100i64 {
            let (x, y) = ((i * 37) % (s - 100), (i * 53) % (s - 100));
            let _ = a.read(
                &Subarray::from_ranges(&[
                    ((i % 20).into(), (i % 20).into()),
                    (y.into(), (y + 99).into()),
                    (x.into(), (x + 99).into()),
                ]),
                &ATTRS,
                Layout::RowMajor,
            )?;
        }
        let win = t0.elapsed().as_secs_f64();
        let read = stats::snapshot().counter(stats::Counter::VfsReadTotalBytes);
        stats::disable();
        let raw = 20.0 * (s * s) as f64 * 44.0;
        println!(
            "| {name} | {load:.2} | {:.0} | {:.1} | {:.2} | {q1:.3} | {img:.3} | {win:.3} | {:.1} MB |",
            cells / load / 1e6,
            bytes as f64 / 1e6,
            raw / bytes as f64,
            read as f64 / 1e6
        );
    }
    Ok(())
}
