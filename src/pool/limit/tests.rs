use std::collections::BTreeMap;
use std::num::NonZeroU32;
use std::time::{Duration, Instant};

use super::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn policy(adaptive: bool, fixed: &[(u64, u32)], fair_share: bool) -> ShapeLimits {
    let nz = |n: u32| NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN);
    ShapeLimits {
        adaptive,
        wait: ms(100),
        max_concurrent: fixed.iter().map(|(d, n)| (*d, nz(*n))).collect(),
        fair_share,
        share_weights: BTreeMap::new(),
    }
}

fn shape(digest: u64, user: &str) -> Shape<'_> {
    Shape { digest: Some(digest), text: "SELECT pg_sleep($1), count(*) FROM pgbench_accounts", user }
}

/// A checkout of `user` the table follows no shape of (a lookup, say), queueing in the pool.
fn waits(user: &str) -> Shape<'_> {
    Shape { digest: None, text: "", user }
}

fn go(admit: Admit) -> Grant {
    match admit {
        Admit::Go(g) => g,
        Admit::Wait(t) => panic!("ticket {t} queued where a grant was expected"),
    }
}

fn ticket(admit: Admit) -> Ticket {
    match admit {
        Admit::Wait(t) => t,
        Admit::Go(g) => panic!("granted {g:?} where a wait was expected"),
    }
}

/// A closed-loop load of `clients` statements of one shape on a pool that serves `room` of
/// them at once without queueing: each round the shape runs `min(limit, clients)`, and its
/// samples report a queue when that is over `room`. Returns the limit after each round.
fn drive(aimd: &mut Aimd, clients: u32, room: u32, rounds: usize, start: Instant) -> Vec<u32> {
    let mut limits = Vec::with_capacity(rounds);
    for round in 0..rounds {
        let now = start + ms(20) * u32::try_from(round).unwrap_or(u32::MAX);
        let running = aimd.limit().min(clients);
        for _ in 0..running {
            let queued = running > room;
            // Queued checkouts waited for a connection: their latency grows with the queue.
            let latency = if queued { ms(20) * running / room } else { ms(20) };
            aimd.sample(Sample { latency, queued, in_use: running }, now);
        }
        limits.push(aimd.limit());
    }
    limits
}

#[test]
fn a_learned_limit_settles_around_what_the_pool_serves_without_a_queue() {
    let mut aimd = Aimd::new(64);
    let limits = drive(&mut aimd, 64, 6, 400, Instant::now());
    let tail = &limits[300..];
    let (lo, hi) = (tail.iter().min().copied(), tail.iter().max().copied());
    // It overshoots to 7 (a queue), is cut to 5 (7 * 0.8), grows back about one a round.
    assert!(lo >= Some(4) && hi <= Some(7), "settled between {lo:?} and {hi:?}: {tail:?}");
    assert!(limits[0] < 64, "the first congested round cuts at once");
}

#[test]
fn a_learned_limit_recovers_once_the_pool_stops_queueing() {
    let mut aimd = Aimd::new(16);
    let start = Instant::now();
    let low = drive(&mut aimd, 16, 1, 300, start);
    // Room for one: it probes 2 now and then and is cut back.
    assert!(low[250..].iter().all(|l| *l <= 2), "{low:?}");
    // The pool has room again: one more permit per round trip, up to the pool's capacity.
    let limits = drive(&mut aimd, 16, 16, 400, start + Duration::from_secs(10));
    assert_eq!(limits.last().copied(), Some(16));
    assert!(limits.windows(2).all(|w| w[1] >= w[0]), "no cut without congestion: {limits:?}");
}

#[test]
fn a_learned_limit_never_goes_below_one() {
    let mut aimd = Aimd::new(8);
    let start = Instant::now();
    for i in 0..10_000u32 {
        let sample = Sample { latency: ms(500), queued: true, in_use: 1 };
        aimd.sample(sample, start + ms(1) * i * 1000);
        assert!(aimd.limit() >= 1);
    }
    assert_eq!(aimd.limit(), 1);
}

#[test]
fn one_congested_round_is_one_cut() {
    let mut aimd = Aimd::new(10);
    let now = Instant::now();
    for _ in 0..10 {
        aimd.sample(Sample { latency: ms(20), queued: true, in_use: 10 }, now);
    }
    assert_eq!(aimd.limit(), 8);
}

#[test]
fn a_fixed_limit_queues_the_excess_and_serves_it_in_arrival_order() {
    let mut t = Table::new(&policy(false, &[(7, 2)], false), 8);
    let now = Instant::now();
    let (a, b) = (go(t.admit(&shape(7, "app"))), go(t.admit(&shape(7, "app"))));
    let (first, second) = (ticket(t.admit(&shape(7, "app"))), ticket(t.admit(&shape(7, "app"))));
    assert_eq!(t.rows()[0].in_use, 2);
    assert_eq!(t.rows()[0].queued, 2);
    // Other shapes are not held back.
    assert!(!go(t.admit(&shape(8, "app"))).is_tracked());
    assert_eq!(t.release(&a, Some(Sample { latency: ms(20), queued: false, in_use: 0 }), now), vec![first]);
    assert_eq!(t.claim(second), None);
    let granted = t.claim(first);
    assert!(granted.is_some());
    assert_eq!(t.release(&b, None, now), vec![second]);
    assert_eq!((t.rows()[0].in_use, t.rows()[0].queued), (2, 0));
}

#[test]
fn a_newcomer_does_not_pass_a_waiter_of_its_shape() {
    let mut t = Table::new(&policy(false, &[(7, 1)], false), 8);
    let held = go(t.admit(&shape(7, "app")));
    let waiting = ticket(t.admit(&shape(7, "app")));
    // The release grants the waiter at once: the permit is never free for a newcomer.
    assert_eq!(t.release(&held, None, Instant::now()), vec![waiting]);
    ticket(t.admit(&shape(7, "app")));
}

#[test]
fn a_waiter_giving_up_is_refused_naming_the_shape_and_counted() {
    let mut t = Table::new(&policy(false, &[(0xabc, 1)], false), 8);
    let _held = go(t.admit(&shape(0xabc, "app")));
    let waiting = ticket(t.admit(&shape(0xabc, "app")));
    let (over, woken) = t.abandon(waiting, true, Instant::now());
    assert!(woken.is_empty());
    let Some(over) = over else { panic!("nothing blamed") };
    assert_eq!(
        over.to_string(),
        "too many statements of shape 0000000000000abc (\"SELECT pg_sleep($1), count(*) FROM pgbench_accounts\") \
         running at once: its limit is 1"
    );
    assert_eq!((t.rows()[0].queued, t.rows()[0].rejected), (0, 1));
    // A client leaving mid-wait is no refusal.
    let leaving = ticket(t.admit(&shape(0xabc, "app")));
    t.abandon(leaving, false, Instant::now());
    assert_eq!(t.rows()[0].rejected, 1);
}

#[test]
fn a_grant_given_up_as_it_came_goes_to_the_next_in_line() {
    let mut t = Table::new(&policy(false, &[(7, 1)], false), 8);
    let held = go(t.admit(&shape(7, "app")));
    let (first, second) = (ticket(t.admit(&shape(7, "app"))), ticket(t.admit(&shape(7, "app"))));
    assert_eq!(t.release(&held, None, Instant::now()), vec![first]);
    let (over, woken) = t.abandon(first, true, Instant::now());
    assert_eq!((over, woken), (None, vec![second]));
}

#[test]
fn a_user_refused_for_its_share_is_told_so() {
    let mut t = Table::new(&policy(false, &[], true), 4);
    let _alice: Vec<Grant> = (0..2).map(|_| go(t.admit(&shape(1, "alice")))).collect();
    t.pool_waiting(&waits("bob"), true);
    let waiting = ticket(t.admit(&shape(1, "alice")));
    let (over, _) = t.abandon(waiting, true, Instant::now());
    assert_eq!(
        over.map(|o| o.to_string()),
        Some("user \"alice\" holds its fair share of 2 connections while other users wait".to_owned())
    );
}

#[test]
fn nothing_is_tracked_without_a_policy_or_a_digest() {
    let mut t = Table::new(&policy(false, &[(7, 1)], false), 8);
    assert!(!go(t.admit(&Shape { digest: None, text: "", user: "app" })).is_tracked());
    let mut adaptive = Table::new(&policy(true, &[], false), 8);
    assert!(!go(adaptive.admit(&Shape::default())).is_tracked());
    assert!(go(adaptive.admit(&shape(1, "app"))).is_tracked());
    assert!(t.rows().is_empty());
}

#[test]
fn the_table_of_learned_shapes_is_bounded() {
    let mut t = Table::new(&policy(true, &[], false), 8);
    let held: Vec<Grant> = (0..MAX_SHAPES as u64).map(|d| go(t.admit(&shape(d, "app")))).collect();
    // Every shape is busy: a new one runs unlimited rather than evicting one.
    assert!(!go(t.admit(&shape(u64::MAX, "app"))).is_tracked());
    t.release(&held[5], None, Instant::now());
    // An idle one makes room.
    assert!(go(t.admit(&shape(u64::MAX, "app"))).is_tracked());
    assert_eq!(t.rows().len(), MAX_SHAPES);
}

#[test]
fn a_user_takes_the_whole_pool_alone_but_only_its_share_while_another_waits() {
    let mut t = Table::new(&policy(false, &[], true), 4);
    let now = Instant::now();
    let alice: Vec<Grant> = (0..4).map(|_| go(t.admit(&shape(1, "alice")))).collect();
    // Bob queues in the pool for a connection: Alice is held to half of the pool.
    assert!(t.pool_waiting(&waits("bob"), true).is_empty());
    let next = ticket(t.admit(&shape(1, "alice")));
    // A release that leaves her at her share grants nothing while Bob waits...
    assert!(t.release(&alice[0], None, now).is_empty());
    assert!(t.release(&alice[1], None, now).is_empty());
    assert_eq!(t.claim(next), None);
    // ...and Bob no longer waiting (he got his connection) lets her have more again.
    assert!(go(t.admit(&shape(1, "bob"))).is_tracked());
    assert_eq!(t.pool_waiting(&waits("bob"), false), vec![next]);
    assert!(t.claim(next).is_some());
}

#[test]
fn weights_split_the_pool() {
    let mut p = policy(false, &[], true);
    p.share_weights.insert("heavy".to_owned(), NonZeroU32::new(3).unwrap_or(NonZeroU32::MIN));
    let mut t = Table::new(&p, 8);
    let _h: Vec<Grant> = (0..6).map(|_| go(t.admit(&shape(1, "heavy")))).collect();
    t.pool_waiting(&waits("light"), true);
    // heavy: 8 * 3 / 4 = 6 of 8 while light waits.
    assert!(matches!(t.admit(&shape(1, "heavy")), Admit::Wait(_)));
    assert_eq!(t.share("light"), 2);
}

#[test]
fn a_learned_limit_holds_a_shape_once_a_lighter_one_queued_behind_it() {
    let mut t = Table::new(&policy(true, &[], false), 8);
    let start = Instant::now();
    let grants: Vec<Grant> = (0..8).map(|_| go(t.admit(&shape(9, "app")))).collect();
    assert!(matches!(t.admit(&shape(9, "app")), Admit::Wait(_)));
    // A lookup (never measured: lighter than anything) waits for a connection; its own
    // checkouts queueing would not have counted. The round is cut by a fifth, once.
    let _lookup = go(t.admit(&shape(10, "app")));
    t.pool_waiting(&shape(10, "app"), true);
    for (i, g) in grants.iter().enumerate() {
        let at = start + ms(20) + Duration::from_micros(u64::try_from(i).unwrap_or(0));
        t.release(g, Some(Sample { latency: ms(40), queued: true, in_use: 0 }), at);
    }
    let report = t.rows().into_iter().find(|r| r.digest == 9);
    assert_eq!(report.map(|r| (r.limit, r.fixed)), Some((6, false)));
}

#[test]
fn a_shape_giving_its_connection_back_while_others_queue_for_one_is_cut() {
    let mut t = Table::new(&policy(true, &[], false), 8);
    let start = Instant::now();
    let mut held: Vec<Grant> = (0..8).map(|_| go(t.admit(&shape(9, "app")))).collect();
    let uncongested = Sample { latency: ms(20), queued: false, in_use: 0 };
    // One measured round trip (20 ms), nobody waiting: no cut.
    if let Some(g) = held.pop() {
        t.release(&g, Some(uncongested), start);
    }
    held.push(go(t.admit(&shape(9, "app"))));
    assert_eq!(t.rows()[0].limit, 8);
    // Its own checkouts never queued, but a lighter shape's checkout waits for a connection.
    let _lookup = go(t.admit(&shape(10, "app")));
    t.pool_waiting(&shape(10, "app"), true);
    t.release(&held[0], Some(uncongested), start + ms(20));
    assert_eq!(t.rows()[0].limit, 6);
    // Nobody waits any more: while it uses its limit, it grows back.
    t.pool_waiting(&shape(10, "app"), false);
    t.release(&held[6], Some(uncongested), start + ms(40));
    t.release(&held[7], Some(uncongested), start + ms(40));
    for i in 3..30u32 {
        let again = go(t.admit(&shape(9, "app")));
        t.release(&again, Some(uncongested), start + ms(20) * i);
    }
    assert!(t.rows()[0].limit > 6, "{:?}", t.rows());
}

#[test]
fn only_a_lighter_shape_waiting_congests_a_heavier_one() {
    let mut t = Table::new(&policy(true, &[], false), 8);
    let now = Instant::now();
    let (report, lookup) = (shape(1, "app"), shape(2, "app"));
    // Each has run once, uncongested: the report's round trip is 20 ms, the lookup's 1 ms.
    let r = go(t.admit(&report));
    t.release(&r, Some(Sample { latency: ms(20), queued: false, in_use: 0 }), now);
    let l = go(t.admit(&lookup));
    t.release(&l, Some(Sample { latency: ms(1), queued: false, in_use: 0 }), now);
    let (r, l) = (go(t.admit(&report)), go(t.admit(&lookup)));
    // The report waits for a connection: the lookup giving its back is not congested by it...
    t.pool_waiting(&report, true);
    t.release(&l, Some(Sample { latency: ms(1), queued: false, in_use: 0 }), now + ms(5));
    let limit = |t: &Table, d: u64| t.rows().iter().find(|row| row.digest == d).map(|row| row.limit);
    assert_eq!(limit(&t, 2), Some(8));
    t.pool_waiting(&report, false);
    // ...while the lookup waiting congests the report.
    t.pool_waiting(&lookup, true);
    t.release(&r, Some(Sample { latency: ms(20), queued: false, in_use: 0 }), now + ms(50));
    assert_eq!(limit(&t, 1), Some(6));
}
