//! Peak memory of the per-observation state of a run (the F1 key hash and grouping F2) against
//! the number of images, without the raw images: synthetic observations (objects drifting
//! slowly, each seen in about 70% of 40 images, so groups form and close) fed as `ssdb run` feeds them,
//! either streamed (what the run does: keys spilled once a cycle and merged at the end, closed
//! groups stored each cycle) or held in memory to the end (the run before issue 13's memory
//! item). Prints the observations, the F1/F2 hashes and the process's peak RSS.
//!
//! `cargo run --release -p tessera-ssdb --example group_memory [images] [objects] [held]`

use tessera::{Config, Context};
use tessera_ssdb::pipeline::peak_rss;
use tessera_ssdb::{
    create_groups, cycle_of, write_groups, F1Accumulator, F2Summary, GroupWriter, Grouper, KeySorter, Observation, D3,
};

fn main() {
    let mut args = std::env::args().skip(1);
    let images: i64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let objects: i64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(2000);
    let held = args.next().is_some_and(|a| a == "held");
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let ctx = Context::new(Config::new()).expect("context");
    create_groups(&ctx, dir).expect("groups arrays");
    let spill = dir.join("spill.tmp");
    let mut f1 =
        if held { F1Accumulator::default() } else { F1Accumulator::new(KeySorter::spilling(spill.join("F1"))) };
    let mut grouper = Grouper::new(D3::new(1, 2).expect("d3"));
    let mut writer = (!held).then(|| GroupWriter::new(&ctx, dir, spill.join("groups")));
    let mut id = 0;
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for t in 0..images {
        let mut obs = Vec::new();
        for k in 0..objects {
            if next() % 10 >= 7 {
                continue;
            }
            // Slot k of a 300-cell lattice holds an object for 40 images, drifting by a cell
            // every 8; then the next one, 150 cells away (too far to match): groups of ~28
            // members that close, as objects in SS-DB's images leave the field.
            let generation = (t + 7 * k) / 40;
            let x0 = 1000 + (k % 1000) as i32 * 300 + (generation % 2) as i32 * 150;
            let (cx, cy) = (x0 + ((t + 7 * k) % 40 / 8) as i32, 1000 + (k / 1000) as i32 * 300);
            id += 1;
            obs.push(Observation {
                id,
                t,
                cycle: cycle_of(t),
                cx,
                cy,
                pixel_sum: 1000 + (next() % 5000) as i64,
                avg_dist: 1.0,
                bbox: [cx - 2, cy - 2, cx + 2, cy + 2],
                polygon: vec![[cx, cy]],
            });
        }
        f1.add(&obs);
        grouper.push_image(t, &obs).expect("group");
        if (t + 1) % 20 == 0 {
            if let Some(w) = writer.as_mut() {
                f1.spill().expect("spill");
                w.write(grouper.take_closed()).expect("store groups");
            }
        }
    }
    let f1 = f1.finish().expect("F1");
    let f2 = match writer {
        Some(mut w) => {
            grouper.close_all();
            w.write(grouper.take_closed()).expect("store groups");
            w.finish(grouper.groups_created() as u64).expect("finish groups")
        }
        None => {
            let set = grouper.finish();
            write_groups(&ctx, dir, &set).expect("store groups");
            F2Summary::of(&set)
        }
    };
    println!(
        "{} images, {} observations, {} groups ({} multi), {}: peak RSS {:.0} MB\nF1 {}\nF2 {}",
        images,
        f1.count,
        f2.groups,
        f2.multi_member_groups,
        if held { "held to the end" } else { "streamed" },
        peak_rss() as f64 / 1e6,
        f1.observation_keys_sha256,
        f2.groups_sha256
    );
}
