//! Grouping against the O(n²) reference, and hand-worked cases of SSDB.md §3.

use proptest::prelude::*;

use super::reference;
use crate::*;

fn obs(id: i64, t: i64, cx: i32, cy: i32) -> Observation {
    Observation {
        id,
        t,
        cycle: cycle_of(t),
        cx,
        cy,
        pixel_sum: 1000 + id,
        avg_dist: 0.5,
        bbox: [cx - 1, cy - 1, cx + 1, cy + 1],
        polygon: vec![[cx, cy]],
    }
}

fn ids(set: &GroupSet) -> Vec<Vec<i64>> {
    set.groups.iter().map(|g| g.members.iter().map(|m| m.id).collect()).collect()
}

#[test]
fn hand_worked_groups() {
    let d3 = D3::parse("0.1").unwrap();
    assert_eq!(d3, D3 { p: 1, q: 10 });
    // Ids in time order: 1 (t0) is matched by 3 and 4 of t10 (d² = 1 <= 0.1·10): one group
    // {1, 3, 4} (4 sees the group 3 made at once). 5 at t30 is 20 after t10 and 30 after t0:
    // d² = 1 <= 2 matches 3 and 4, both in that group, so it joins it once. 6 at t31 is too
    // far from everything; 2 at t0 never matches: both are singletons, after the groups.
    let all = vec![
        obs(1, 0, 100, 100),
        obs(2, 0, 500, 500),
        obs(3, 10, 101, 100),
        obs(4, 10, 100, 101),
        obs(5, 30, 101, 101),
        obs(6, 31, 300, 100),
    ];
    let set = group_all(&all, d3).unwrap();
    assert_eq!(ids(&set), vec![vec![1, 3, 4, 5], vec![2], vec![6]]);
    // Exactly at the limit and one beyond: d² = 2 at dt = 20 matches, d² = 3 does not.
    assert!(d3.matches(1, 1, 20) && !d3.matches(1, 1, 19) && !d3.matches(2, 0, 39) && d3.matches(2, 0, 40));
    let s = F2Summary::of(&set);
    assert_eq!((s.groups, s.multi_member_groups, s.singletons), (3, 1, 2));
    assert_eq!(set.memberships()[0], (1, vec![1]));
}

#[test]
fn an_observation_may_be_in_several_groups() {
    let d3 = D3::new(1, 1).unwrap();
    // 1 and 2 (t0) far apart; 3 (t1) matches neither; 4 (t5) matches 1 and 2 → groups {1,4},
    // {2,4}; 5 (t6) matches 4 → joins both.
    let all = vec![obs(1, 0, 0, 0), obs(2, 0, 4, 0), obs(3, 1, 50, 50), obs(4, 5, 2, 0), obs(5, 6, 2, 1)];
    let set = group_all(&all, d3).unwrap();
    assert_eq!(ids(&set), vec![vec![1, 4, 5], vec![2, 4, 5], vec![3]]);
    assert_eq!(set.memberships()[3], (4, vec![1, 2]));
    assert_eq!(set.groups[0].center_sums(), (4, 1));
}

#[test]
fn bad_feeding_is_refused_and_changes_nothing() {
    let mut g = Grouper::new(D3::parse("0.1").unwrap());
    g.push_image(5, &[obs(1, 5, 0, 0)]).unwrap();
    assert!(matches!(g.push_image(5, &[obs(2, 5, 0, 0)]), Err(GroupError::TimeOrder { t: 5, last: 5 })));
    assert!(matches!(g.push_image(6, &[obs(1, 6, 0, 0)]), Err(GroupError::BadObservation { .. })));
    assert!(matches!(g.push_image(6, &[obs(2, 7, 0, 0)]), Err(GroupError::BadObservation { .. })));
    assert_eq!(g.observations(), 1);
    g.push_image(6, &[obs(2, 6, 0, 0)]).unwrap();
    assert_eq!(ids(&g.finish()), vec![vec![1, 2]]);
    assert!(D3::parse("x").is_err() && D3::parse("").is_err() && D3::new(1, 0).is_err());
    assert_eq!(D3::parse("0.25").unwrap(), D3 { p: 1, q: 4 });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn grouping_equals_the_pairwise_reference(
        pts in prop::collection::vec((0i64..60, 0i32..12, 0i32..12), 0..80),
        d3 in prop_oneof![Just((1u64, 10u64)), Just((1, 5)), Just((1, 20)), Just((3, 2)), Just((0, 1))],
    ) {
        let mut pts = pts;
        pts.sort_by_key(|p| p.0);
        let all: Vec<Observation> =
            pts.iter().enumerate().map(|(i, &(t, x, y))| obs(i as i64 + 1, t, 1000 + x, 2000 + y)).collect();
        let set = group_all(&all, D3::new(d3.0, d3.1).unwrap()).unwrap();
        let refobs: Vec<reference::RefObs> =
            all.iter().map(|o| (o.id, o.t, i64::from(o.cx), i64::from(o.cy), o.pixel_sum)).collect();
        let want = reference::group(&refobs, d3.0 as i64, d3.1 as i64);
        prop_assert_eq!(ids(&set), want);
        for (i, g) in set.groups.iter().enumerate() {
            prop_assert_eq!(g.id, i as i64 + 1);
            prop_assert!(g.members.windows(2).all(|w| (w[0].t, w[0].id) < (w[1].t, w[1].id)));
        }
    }

    /// The grouper holds only the window: after each image, the observations of the last 21
    /// images (the new one and the 20 it matched against) and the groups with a member there;
    /// everything else went to the outbox, and outbox plus what is left give the whole grouping.
    #[test]
    fn the_grouper_holds_only_the_window(
        per_image in prop::collection::vec(prop::collection::vec((0i32..40, 0i32..40), 0..6), 30..120),
    ) {
        let d3 = D3::new(1, 2).unwrap();
        let mut all = Vec::new();
        for (t, pts) in per_image.iter().enumerate() {
            for &(x, y) in pts {
                all.push(obs(all.len() as i64 + 1, t as i64, 1000 + x, 2000 + y));
            }
        }
        let whole = group_all(&all, d3).unwrap();
        let mut g = Grouper::new(d3);
        let mut taken = Closed::default();
        let mut lo = 0;
        for (t, pts) in per_image.iter().enumerate() {
            let t = t as i64;
            let hi = lo + pts.len();
            g.push_image(t, &all[lo..hi]).unwrap();
            lo = hi;
            let in_window = |m: &Member| t - m.t <= T_MATCH;
            let window = all[..hi].iter().filter(|o| in_window(&Member::of(o))).count();
            prop_assert_eq!(g.window_observations(), window);
            // Groups (of the whole grouping, created by now) with a member in the window.
            let open = whole.groups[..g.groups_created()]
                .iter()
                .filter(|gr| gr.members.iter().any(|m| m.id <= hi as i64 && in_window(m)))
                .count();
            prop_assert_eq!(g.open_groups(), open);
            let closed = g.take_closed();
            taken.groups.extend(closed.groups);
            taken.singletons.extend(closed.singletons);
        }
        // The rest, as finish gives it.
        let rest = g.finish();
        let created = whole.groups.iter().filter(|gr| gr.members.len() > 1).count() as i64;
        taken.groups.extend(rest.groups.iter().filter(|gr| gr.id <= created).cloned());
        taken.groups.sort_by_key(|gr| gr.id);
        taken.singletons.extend(rest.groups.iter().filter(|gr| gr.id > created).map(|gr| gr.members[0]));
        let singles: Vec<Group> = taken
            .singletons
            .iter()
            .enumerate()
            .map(|(i, &m)| Group { id: created + 1 + i as i64, members: vec![m] })
            .collect();
        taken.groups.extend(singles);
        prop_assert_eq!(taken.groups, whole.groups);
    }
}
