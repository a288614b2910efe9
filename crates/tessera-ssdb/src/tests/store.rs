//! Observations and groups written to Tessera and read back: whole, and by boxes compared with a
//! plain filter over everything.

use proptest::prelude::*;
use tessera::{Config, Context};

use crate::*;

fn ctx() -> Context {
    Context::new(Config::new()).unwrap()
}

fn obs(id: i64, t: i64, cx: i32, cy: i32, n: usize) -> Observation {
    Observation {
        id,
        t,
        cycle: cycle_of(t),
        cx,
        cy,
        pixel_sum: 1000 * id,
        avg_dist: id as f64 / 7.0,
        bbox: [cx - 1, cy - 2, cx + 3, cy + 1],
        polygon: (0..n as i32).map(|i| [cx + i, cy - i]).collect(),
    }
}

/// Random observations in time order with ids 1, 2, ...; centres in a small world window (across
/// a corner of four space tiles) so that groups form and some centres collide.
fn observations() -> impl Strategy<Value = Vec<Observation>> {
    prop::collection::vec((0i64..70, 0i32..3000, 0i32..3000, 1usize..6), 0..120).prop_map(|mut v| {
        v.sort_by_key(|p| p.0);
        v.iter()
            .enumerate()
            .map(|(i, &(t, x, y, n))| obs(i as i64 + 1, t, 499_985 + x / 100, 498_985 + y / 100, n))
            .collect()
    })
}

#[test]
fn observations_round_trip_with_shared_centres() {
    let dir = tempfile::tempdir().unwrap();
    let (ctx, uri) = (ctx(), dir.path().join(OBSERVATIONS));
    create_observations(&ctx, &uri).unwrap();
    // Two observations of one image with the same centre (a ring and the object in its hole).
    let first = vec![obs(1, 0, 10, 20, 16), obs(2, 0, 10, 20, 1), obs(3, 5, 0, 0, 3)];
    let second = vec![obs(4, 21, WORLD_MAX, WORLD_MAX, 0), obs(5, 39, 5000, 7, 2)];
    write_observations(&ctx, &uri, &first).unwrap();
    write_observations(&ctx, &uri, &second).unwrap();
    let all = read_observations(&ctx, &uri, &ObsBox::all()).unwrap();
    assert_eq!(all, [first.clone(), second.clone()].concat());
    assert_eq!(read_observations(&ctx, &uri, &ObsBox::cycle(1, (0, 1 << 30), (-5, 1 << 30))).unwrap(), second);
    assert_eq!(read_observations(&ctx, &uri, &ObsBox::cycle(0, (10, 10), (20, 20))).unwrap(), first[..2].to_vec());
    assert!(read_observations(&ctx, &uri, &ObsBox::cycle(7, (0, 100), (0, 100))).unwrap().is_empty());
    // Point reads by member: the ring and the cell in its hole share (t, cy, cx); the id tells.
    let members: Vec<Member> = [&first[1], &first[0], &second[0]].iter().map(|o| Member::of(o)).collect();
    assert_eq!(
        read_member_observations(&ctx, &uri, &members).unwrap(),
        vec![first[1].clone(), first[0].clone(), second[0].clone()]
    );
    let missing = Member { id: 99, ..members[0] };
    assert!(matches!(read_member_observations(&ctx, &uri, &[missing]), Err(StoreError::Corrupt { .. })));
    // Out of the domain: refused, nothing written.
    let bad = vec![obs(6, 40, 1, 1, 1), obs(7, 40, -1, 1, 1)];
    assert!(matches!(write_observations(&ctx, &uri, &bad), Err(StoreError::OutOfDomain { what: "cx", .. })));
    assert_eq!(read_observations(&ctx, &uri, &ObsBox::all()).unwrap().len(), 5);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    #[test]
    fn stored_observations_and_groups_answer_boxes_like_a_scan(
        all in observations(),
        boxes in prop::collection::vec((0i64..4, 499_975i64..500_025, 0i64..40, 498_975i64..499_025, 0i64..40), 1..6),
        streamed in any::<bool>(),
        take_every in 1i64..30,
        flush_items in prop_oneof![Just(usize::MAX), 1usize..40],
    ) {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ctx();
        let uri = dir.path().join(OBSERVATIONS);
        create_observations(&ctx, &uri).unwrap();
        // One fragment per cycle, as a run writes them.
        for c in 0..4 {
            let part: Vec<Observation> = all.iter().filter(|o| o.cycle == c).cloned().collect();
            write_observations(&ctx, &uri, &part).unwrap();
        }
        let set = group_all(&all, D3::new(1, 2).unwrap()).unwrap();
        create_groups(&ctx, dir.path()).unwrap();
        if streamed {
            // As a run stores them: what the grouper closes, taken every few images, then the
            // rest and the singletons at the end; the same arrays as the whole grouping stored
            // at once.
            let d3 = D3::new(1, 2).unwrap();
            let (mut grouper, spill) = (Grouper::new(d3), dir.path().join("spill"));
            let mut writer = GroupWriter::new(&ctx, dir.path(), &spill).with_flush_items(flush_items);
            let mut i = 0;
            while i < all.len() {
                let t = all[i].t;
                let j = i + all[i..].iter().take_while(|o| o.t == t).count();
                grouper.push_image(t, &all[i..j]).unwrap();
                if t % take_every == 0 {
                    writer.write(grouper.take_closed()).unwrap();
                }
                i = j;
            }
            grouper.close_all();
            writer.write(grouper.take_closed()).unwrap();
            let f2 = writer.finish(grouper.groups_created() as u64).unwrap();
            prop_assert_eq!(f2, F2Summary::of(&set));
            prop_assert!(!spill.exists(), "spill files left");
        } else {
            write_groups(&ctx, dir.path(), &set).unwrap();
        }
        prop_assert_eq!(read_all_groups(&ctx, dir.path()).unwrap(), set.clone());
        // The data makes groups of several members (not only singletons).
        prop_assert!(all.len() < 40 || F2Summary::of(&set).multi_member_groups > 0);
        let meta = read_groups_meta(&ctx, dir.path()).unwrap();
        prop_assert_eq!(meta.groups as usize, set.groups.len());
        prop_assert_eq!(meta.singletons as u64, F2Summary::of(&set).singletons);
        let ids: Vec<i64> = all.iter().map(|o| o.id).chain([0, 10_000]).collect();
        prop_assert_eq!(read_memberships(&ctx, dir.path(), &ids).unwrap(), set.memberships());
        for &(c, x0, dx, y0, dy) in &boxes {
            let (x, y) = ((x0, x0 + dx), (y0, y0 + dy));
            let want: Vec<Observation> = all
                .iter()
                .filter(|o| o.cycle == c && (x.0..=x.1).contains(&i64::from(o.cx)) && (y.0..=y.1).contains(&i64::from(o.cy)))
                .cloned()
                .collect();
            prop_assert_eq!(read_observations(&ctx, &uri, &ObsBox::cycle(c, x, y)).unwrap(), want);
            // The groups whose members' boxes' union meets the box (a group can meet it between
            // its members: its centre, or a trajectory segment).
            let want: Vec<Group> = set
                .groups
                .iter()
                .filter(|g| {
                    let xs0 = g.members.iter().map(|m| i64::from(m.bbox[0])).min().unwrap();
                    let ys0 = g.members.iter().map(|m| i64::from(m.bbox[1])).min().unwrap();
                    let xs1 = g.members.iter().map(|m| i64::from(m.bbox[2])).max().unwrap();
                    let ys1 = g.members.iter().map(|m| i64::from(m.bbox[3])).max().unwrap();
                    xs0 <= x.1 && xs1 >= x.0 && ys0 <= y.1 && ys1 >= y.0
                })
                .cloned()
                .collect();
            let got = read_groups_meeting(&ctx, dir.path(), x, y).unwrap();
            // Their members' observations (polygons for Q9) by point reads.
            for g in got.iter().take(3) {
                let want: Vec<&Observation> = g.members.iter().map(|m| all.iter().find(|o| o.id == m.id).unwrap()).collect();
                let obs = read_member_observations(&ctx, &uri, &g.members).unwrap();
                prop_assert_eq!(obs.iter().collect::<Vec<_>>(), want);
            }
            prop_assert_eq!(&got, &want);
            // Every group whose exact centre (Q7's test) is in the box is among them.
            for g in &set.groups {
                let (n, (sx, sy)) = (g.members.len() as i64, g.center_sums());
                if x.0 * n <= sx && sx < (x.1 + 1) * n && y.0 * n <= sy && sy < (y.1 + 1) * n {
                    prop_assert!(got.contains(g));
                }
            }
        }
    }
}
