//! Dense load and read benchmark (issue 2), printed beside the machine's own limits measured in
//! the same run: memcpy of the same bytes and a sequential fsynced file write of the same bytes.
//!
//! `cargo bench -p tessera --bench dense -- [--rows R] [--cols C] [--tile-rows TR]
//! [--tile-cols TC] [--reps N] [--dir PATH] [--cell-order O] [--tile-order O]` (orders:
//! row-major, col-major, z, hilbert). Defaults: 15000 x 17500 int32 (1.05 GB), tiles of
//! 1000 x 2500 cells (10 MB), value at (i, j) = i % ncols + j.
#![allow(missing_docs, clippy::unwrap_used, clippy::panic)]

use std::io::Write;
use std::time::{Duration, Instant};

use tessera::*;

struct Args {
    rows: i128,
    cols: i128,
    tile_rows: u64,
    tile_cols: u64,
    reps: usize,
    dir: std::path::PathBuf,
    cell_order: CellOrder,
    tile_order: CellOrder,
}

fn parse_args() -> Args {
    let mut a = Args {
        rows: 15000,
        cols: 17500,
        tile_rows: 1000,
        tile_cols: 2500,
        reps: 7,
        dir: std::env::temp_dir().join("tessera-bench-dense"),
        cell_order: CellOrder::RowMajor,
        tile_order: CellOrder::RowMajor,
    };
    let v: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < v.len() {
        let next = || v.get(i + 1).cloned().unwrap_or_default();
        match v[i].as_str() {
            "--rows" => a.rows = next().parse().unwrap(),
            "--cols" => a.cols = next().parse().unwrap(),
            "--tile-rows" => a.tile_rows = next().parse().unwrap(),
            "--tile-cols" => a.tile_cols = next().parse().unwrap(),
            "--reps" => a.reps = next().parse().unwrap(),
            "--dir" => a.dir = next().into(),
            "--cell-order" => a.cell_order = CellOrder::parse(&next()).unwrap(),
            "--tile-order" => a.tile_order = CellOrder::parse(&next()).unwrap(),
            _ => {
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    a
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn time<R>(reps: usize, mut f: impl FnMut() -> R) -> Duration {
    median(
        (0..reps)
            .map(|_| {
                let t = Instant::now();
                std::hint::black_box(f());
                t.elapsed()
            })
            .collect(),
    )
}

fn mbps(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / 1e6 / d.as_secs_f64()
}

fn row(name: &str, bytes: u64, d: Duration, limit: Option<(&str, f64)>) {
    let rate = mbps(bytes, d);
    let vs = limit.map_or(String::new(), |(n, l)| format!("{:>6.0}% of {n}", 100.0 * rate / l));
    println!("{name:<44} {:>10.3} ms {:>10.0} MB/s  {vs}", d.as_secs_f64() * 1e3, rate);
}

fn main() {
    let a = parse_args();
    let cells = (a.rows * a.cols) as usize;
    let bytes = cells as u64 * 4;
    println!(
        "# dense benchmark: {} x {} int32 ({:.2} GB), tiles {} x {} ({:.1} MB), cell order {}, tile order {}, \
         {} reps (median), {} threads",
        a.rows,
        a.cols,
        bytes as f64 / 1e9,
        a.tile_rows,
        a.tile_cols,
        (a.tile_rows * a.tile_cols * 4) as f64 / 1e6,
        a.cell_order.name(),
        a.tile_order.name(),
        a.reps,
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    let _ = std::fs::remove_dir_all(&a.dir);
    std::fs::create_dir_all(&a.dir).unwrap();
    let ncols = a.cols as i32;
    let data: Vec<i32> = (0..a.rows as i32).flat_map(|i| (0..a.cols as i32).map(move |j| i % ncols + j)).collect();
    let raw: &[u8] = bytemuck::cast_slice(&data);

    // The machine's limits on the same bytes.
    let mut dst = vec![0u8; raw.len()];
    let memcpy_all = time(3, || dst.copy_from_slice(raw));
    let seq_path = a.dir.join("seq.bin");
    let seq = time(3, || {
        let _ = std::fs::remove_file(&seq_path);
        let mut f = std::fs::File::create(&seq_path).unwrap();
        for chunk in raw.chunks(8 << 20) {
            f.write_all(chunk).unwrap();
        }
        f.sync_all().unwrap();
    });
    std::fs::remove_file(&seq_path).unwrap();
    drop(dst);
    let tile_bytes = a.tile_rows * a.tile_cols * 4;
    let tile_src = &raw[..tile_bytes as usize];
    let mut tile_dst = vec![0u8; tile_bytes as usize];
    let memcpy_tile = time(a.reps * 3, || tile_dst.copy_from_slice(tile_src));
    println!("\n## machine limits");
    row("memcpy, whole array", bytes, memcpy_all, None);
    row("sequential write + fsync, whole array", bytes, seq, None);
    row("memcpy, one tile", tile_bytes, memcpy_tile, None);
    let seq_rate = mbps(bytes, seq);
    let memcpy_rate = mbps(tile_bytes, memcpy_tile);

    for (label, filters) in [("none", vec![]), ("zstd-3", vec![Filter::Zstd { level: 3 }])] {
        for mode in ["pread", "mmap"] {
            let mut config = Config::new();
            config.set("vfs.read_mode", mode).unwrap();
            let ctx = Context::new(config).unwrap();
            let uri = a.dir.join(format!("array-{label}"));
            let mut attr = Attribute::new("a", Datatype::Int32);
            attr.filters = FilterPipeline::new(filters.clone());
            let schema = ArraySchema::builder(ArrayType::Dense)
                .dim(Dimension::new("rows", Datatype::Int64, (1, a.rows), a.tile_rows))
                .dim(Dimension::new("cols", Datatype::Int64, (1, a.cols), a.tile_cols))
                .attr(attr)
                .cell_order(a.cell_order)
                .tile_order(a.tile_order)
                .build()
                .unwrap();
            if mode == "pread" {
                // Load once per filter setting (the median of 3 loads).
                let load = time(3, || {
                    let _ = std::fs::remove_dir_all(&uri);
                    Array::create(&ctx, &uri, &schema).unwrap();
                    let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
                    w.write(&Subarray::full(&schema), Layout::RowMajor, &[AttrInput::fixed("a", raw)]).unwrap();
                });
                let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
                let stored: u64 = r.fragments().iter().map(|f| f.stored_bytes()).sum();
                println!(
                    "\n## filters: {label} (stored {:.1} MB, ratio {:.2})",
                    stored as f64 / 1e6,
                    bytes as f64 / stored as f64
                );
                row("load whole array (write + commit)", bytes, load, Some(("seq write", seq_rate)));
            }
            let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
            let (tr, tc) = (a.tile_rows as i128, a.tile_cols as i128);
            let reads = [
                ("one tile", vec![(1, tr), (1, tc)]),
                ("rectangle one cell inside a tile", vec![(2, tr - 1), (2, tc - 1)]),
                ("one full column", vec![(1, a.rows), (2, 2)]),
            ];
            for (name, ranges) in reads {
                let sub = Subarray::from_ranges(&ranges);
                let out_bytes = ranges.iter().map(|(l, h)| (h - l + 1) as u64).product::<u64>() * 4;
                // Check once, then time.
                let res = r.read(&sub, &["a"], Layout::RowMajor).unwrap();
                let first = i32::from_le_bytes(res.attrs[0].data[..4].try_into().unwrap());
                let (i0, j0) = (ranges[0].0 as i32 - 1, ranges[1].0 as i32 - 1);
                assert_eq!(first, i0 % ncols + j0);
                let d = time(a.reps, || r.read(&sub, &["a"], Layout::RowMajor).unwrap());
                row(&format!("read {name} [{mode}]"), out_bytes, d, Some(("memcpy", memcpy_rate)));
                // Into the caller's buffer, already touched (as memcpy's destination is).
                let mut buf = vec![1u8; out_bytes as usize];
                let d = time(a.reps, || {
                    let mut q = r.read_query(&sub, &["a"], Layout::RowMajor).unwrap();
                    let st = q.submit(&mut [AttrBuffer { data: &mut buf, offsets: None, validity: None }]).unwrap();
                    assert!(st.complete);
                });
                row(&format!("read {name} into caller's buffer [{mode}]"), out_bytes, d, Some(("memcpy", memcpy_rate)));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&a.dir);
}
