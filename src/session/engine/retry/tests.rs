//! `engine::retry`, table by table: one test per case, each a distinction a wire relies on.

use super::*;
use std::cell::Cell;
use std::num::NonZeroU32;

const PG: Protocol = Protocol::Postgres;
const MY: Protocol = Protocol::MySql;

/// Retries with 10 ms doubling to 50 ms, no jitter, within 1 s.
fn policy(attempts: u32) -> RetryPolicy {
    RetryPolicy {
        maximum_attempts: NonZeroU32::new(attempts).unwrap(),
        backoff_base: Duration::from_millis(10),
        backoff_max: Duration::from_millis(50),
        jitter: false,
        deadline: Duration::from_secs(1),
        notify_client: false,
    }
}

fn jittered(attempts: u32) -> RetryPolicy {
    RetryPolicy { jitter: true, ..policy(attempts) }
}

/// A statement every check lets through, from a client of `protocol`.
fn facts(protocol: Protocol) -> Arming {
    Arming {
        protocol,
        in_transaction: false,
        autocommit: true,
        on_read_pool: false,
        movable: true,
        relayed: false,
        size: 100,
    }
}

fn pg() -> Arming {
    facts(PG)
}

fn my() -> Arming {
    Arming { movable: false, ..facts(MY) }
}

fn same(p: RetryPolicy) -> RulePolicy {
    RulePolicy::Same(Some(p))
}

const NO_RULE: RulePolicy = RulePolicy::Same(None);

/// One `#[test]` per row `name: args => want;`, each checking `check(args) == want`.
macro_rules! cases {
    ($check:expr; $($name:ident: $($arg:expr),+ => $want:expr;)*) => {$(
        #[test]
        fn $name() {
            let check = $check;
            assert_eq!(check($($arg),+), $want);
        }
    )*};
}

cases! {
    |f: Arming, rules, pool, resend: bool| arm(&f, rules, pool, || resend);
    arm_pg_statement_outside_a_transaction: pg(), NO_RULE, policy(3), true => Ok(policy(3));
    arm_mysql_autocommit_statement: my(), NO_RULE, policy(3), true => Ok(policy(3));
    arm_unrouted_batch_follows_the_pool: pg(), RulePolicy::Unrouted, policy(2), true => Ok(policy(2));
    arm_the_rules_policy_replaces_the_pools: pg(), same(policy(4)), policy(1), true => Ok(policy(4));
    arm_a_rule_can_turn_retry_off: pg(), same(policy(1)), policy(3), true => Err(NotArmed::SingleAttempt);
    arm_rules_that_disagree_arm_nothing: pg(), RulePolicy::Mixed, policy(3), true => Err(NotArmed::RulesDisagree);
    arm_one_attempt_is_no_retry: pg(), NO_RULE, policy(1), true => Err(NotArmed::SingleAttempt);
    arm_two_attempts_is_one_retry: my(), NO_RULE, policy(2), true => Ok(policy(2));
    arm_not_inside_a_transaction_pg: Arming { in_transaction: true, ..pg() }, NO_RULE, policy(3), true
        => Err(NotArmed::InTransaction);
    arm_not_inside_a_transaction_mysql: Arming { in_transaction: true, ..my() }, NO_RULE, policy(3), true
        => Err(NotArmed::InTransaction);
    arm_not_with_autocommit_off: Arming { autocommit: false, ..my() }, NO_RULE, policy(3), true
        => Err(NotArmed::NoAutocommit);
    arm_a_movable_statement_on_the_read_pool: Arming { on_read_pool: true, ..pg() }, NO_RULE, policy(3), true
        => Ok(policy(3));
    arm_not_an_unmovable_statement_on_the_read_pool:
        Arming { on_read_pool: true, movable: false, ..pg() }, NO_RULE, policy(3), true => Err(NotArmed::ReadPool);
    arm_not_mysql_on_the_read_pool: Arming { on_read_pool: true, ..my() }, NO_RULE, policy(3), true
        => Err(NotArmed::ReadPool);
    arm_unmovable_is_fine_off_the_read_pool: Arming { movable: false, ..pg() }, NO_RULE, policy(3), true
        => Ok(policy(3));
    arm_not_after_a_flush_relayed_part: Arming { relayed: true, ..pg() }, NO_RULE, policy(3), true
        => Err(NotArmed::Relayed);
    arm_pg_at_the_size_limit: Arming { size: 64 * 1024, ..pg() }, NO_RULE, policy(3), true => Ok(policy(3));
    arm_not_pg_past_the_size_limit: Arming { size: 64 * 1024 + 1, ..pg() }, NO_RULE, policy(3), true
        => Err(NotArmed::TooLarge);
    arm_mysql_keeps_larger_commands_than_pg: Arming { size: 64 * 1024 + 1, ..my() }, NO_RULE, policy(3), true
        => Ok(policy(3));
    arm_mysql_at_the_size_limit: Arming { size: 1 << 20, ..my() }, NO_RULE, policy(3), true => Ok(policy(3));
    arm_not_mysql_past_the_size_limit: Arming { size: (1 << 20) + 1, ..my() }, NO_RULE, policy(3), true
        => Err(NotArmed::TooLarge);
    arm_not_what_the_wire_cannot_resend: pg(), NO_RULE, policy(3), false => Err(NotArmed::NotResendable);
    arm_not_a_mysql_command_it_cannot_resend: my(), NO_RULE, policy(3), false => Err(NotArmed::NotResendable);
    arm_disagreeing_rules_win_over_a_transaction:
        Arming { in_transaction: true, ..pg() }, RulePolicy::Mixed, policy(3), true => Err(NotArmed::RulesDisagree);
}

#[test]
fn arm_asks_the_wire_to_scan_only_when_everything_else_holds() {
    let asked = Cell::new(0);
    let resendable = || {
        asked.set(asked.get() + 1);
        true
    };
    assert_eq!(arm(&pg(), NO_RULE, policy(1), resendable), Err(NotArmed::SingleAttempt));
    assert_eq!(arm(&Arming { size: 1 << 30, ..pg() }, NO_RULE, policy(3), resendable), Err(NotArmed::TooLarge));
    assert_eq!(asked.get(), 0, "an oversized batch is never scanned");
    assert_eq!(arm(&pg(), NO_RULE, policy(3), resendable), Ok(policy(3)));
    assert_eq!(asked.get(), 1);
}

/// The policy a batch gets after its statements' rule policies were noted in order.
fn resolved(notes: &[Option<RetryPolicy>], pool: RetryPolicy) -> Option<RetryPolicy> {
    let mut r = RulePolicy::default();
    for n in notes {
        r.note(*n);
    }
    r.resolve(pool)
}

cases! {
    |notes: &[Option<RetryPolicy>]| resolved(notes, policy(1));
    rules_nothing_routed_takes_the_pools: &[] => Some(policy(1));
    rules_none_takes_the_pools: &[None] => Some(policy(1));
    rules_all_without_a_policy_take_the_pools: &[None, None, None] => Some(policy(1));
    rules_one_policy_is_followed: &[Some(policy(3))] => Some(policy(3));
    rules_agreeing_policies_are_followed: &[Some(policy(3)), Some(policy(3))] => Some(policy(3));
    rules_a_policy_then_none_disagree: &[Some(policy(3)), None] => None;
    rules_none_then_a_policy_disagree: &[None, Some(policy(3))] => None;
    rules_two_policies_disagree: &[Some(policy(3)), Some(policy(2))] => None;
    rules_once_mixed_stay_mixed: &[Some(policy(3)), Some(policy(2)), Some(policy(3))] => None;
    rules_policies_differing_in_jitter_only_disagree: &[Some(policy(3)), Some(jittered(3))] => None;
}

fn error(sqlstate: Option<&[u8; 5]>, code: Option<u16>) -> ServerError {
    ServerError { sqlstate: sqlstate.copied(), code }
}

cases! {
    |protocol, state: Option<&[u8; 5]>, code| retryable(protocol, error(state, code));
    classify_pg_serialization_failure: PG, Some(b"40001"), None => true;
    classify_pg_deadlock: PG, Some(b"40P01"), None => true;
    classify_pg_not_transaction_rollback: PG, Some(b"40002"), None => false;
    classify_pg_not_lock_not_available: PG, Some(b"55P03"), None => false;
    classify_pg_not_query_canceled: PG, Some(b"57014"), None => false;
    classify_pg_not_unique_violation: PG, Some(b"23505"), None => false;
    classify_pg_not_without_a_code: PG, None, None => false;
    classify_pg_ignores_native_numbers: PG, None, Some(1213) => false;
    classify_mysql_deadlock_number: MY, Some(b"40001"), Some(1213) => true;
    classify_mysql_deadlock_with_a_generic_state: MY, Some(b"HY000"), Some(1213) => true;
    classify_mysql_deadlock_without_a_state: MY, None, Some(1213) => true;
    classify_mysql_serialization_state_with_another_number: MY, Some(b"40001"), Some(3101) => true;
    classify_mysql_not_lock_wait_timeout: MY, Some(b"HY000"), Some(1205) => false;
    classify_mysql_not_duplicate_key: MY, Some(b"23000"), Some(1062) => false;
    classify_mysql_not_the_pg_deadlock_state: MY, Some(b"40P01"), None => false;
    classify_mysql_not_an_undecodable_error: MY, None, None => false;
}

cases! {
    |p: RetryPolicy, retry, unit| backoff(&p, retry, unit).as_micros();
    backoff_first_retry_waits_the_base: policy(9), 1, 0.5 => 10_000;
    backoff_second_retry_doubles: policy(9), 2, 0.5 => 20_000;
    backoff_third_retry_doubles_again: policy(9), 3, 0.5 => 40_000;
    backoff_fourth_retry_is_capped: policy(9), 4, 0.5 => 50_000;
    backoff_retry_zero_waits_the_base: policy(9), 0, 0.5 => 10_000;
    backoff_huge_retry_does_not_overflow: policy(9), u32::MAX, 0.5 => 50_000;
    backoff_without_jitter_ignores_the_unit: policy(9), 1, 0.0 => 10_000;
    backoff_jitter_zero_waits_nothing: jittered(9), 2, 0.0 => 0;
    backoff_jitter_takes_a_share: jittered(9), 2, 0.5 => 10_000;
    backoff_jitter_takes_a_share_of_the_cap: jittered(9), 9, 0.5 => 25_000;
    backoff_jitter_near_one_stays_below_the_wait: jittered(9), 1, 0.999 => 9_990;
    backoff_jitter_clamps_above_one: jittered(9), 1, 7.0 => 10_000;
    backoff_jitter_clamps_below_zero: jittered(9), 1, -0.5 => 0;
    backoff_jitter_nan_waits_nothing: jittered(9), 1, f64::NAN => 0;
    backoff_jitter_infinity_waits_nothing: jittered(9), 1, f64::INFINITY => 0;
}

#[test]
fn backoff_a_base_above_the_cap_is_capped() {
    let p = RetryPolicy { backoff_base: Duration::from_millis(80), ..policy(3) };
    assert_eq!(backoff(&p, 1, 0.5), Duration::from_millis(50));
}

fn deadlock(protocol: Protocol) -> Failure {
    let error = match protocol {
        Protocol::Postgres => error(Some(b"40P01"), None),
        Protocol::MySql => error(Some(b"40001"), Some(1213)),
    };
    Failure { protocol, relayed: false, error }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The verdict on a first failure `f` under `p`, attempts started at `started` ms and judged at
/// `now` ms after the same instant.
fn first_verdict(p: RetryPolicy, f: Failure, started: u64, now: u64, unit: f64) -> Verdict {
    let t0 = Instant::now() + ms(1000);
    Attempts::new(p, t0 + ms(started)).after_error(&f, t0 + ms(now), unit)
}

fn lock_wait_timeout() -> Failure {
    Failure { protocol: MY, relayed: false, error: error(Some(b"HY000"), Some(1205)) }
}

cases! {
    first_verdict;
    after_error_first_retry_waits_the_base: policy(3), deadlock(PG), 0, 0, 0.0 => Verdict::RetryAfter(ms(10));
    after_error_one_attempt_gives_up_at_once: policy(1), deadlock(MY), 0, 0, 0.0 => Verdict::GaveUp(Outcome::Exhausted);
    after_error_a_backoff_ending_at_the_deadline_starts: policy(10), deadlock(MY), 0, 990, 0.0
        => Verdict::RetryAfter(ms(10));
    after_error_a_backoff_ending_past_the_deadline_does_not: policy(10), deadlock(MY), 0, 991, 0.0
        => Verdict::GaveUp(Outcome::Deadline);
    after_error_the_deadline_counts_from_the_first_attempt: policy(10), deadlock(PG), 500, 1400, 0.0
        => Verdict::RetryAfter(ms(10));
    after_error_a_clock_before_the_start_counts_as_no_time: policy(3), deadlock(PG), 100, 0, 0.0
        => Verdict::RetryAfter(ms(10));
    after_error_relays_once_something_reached_the_client: policy(3), Failure { relayed: true, ..deadlock(PG) }, 0, 0, 0.0
        => Verdict::Reached;
    after_error_relays_an_error_another_attempt_cannot_fix: policy(3), lock_wait_timeout(), 0, 0, 0.0
        => Verdict::NotRetryable;
    after_error_judges_codes_by_the_failures_protocol: policy(3), Failure { protocol: MY, ..deadlock(PG) }, 0, 0, 0.0
        => Verdict::NotRetryable;
}

#[test]
fn after_error_relaying_spends_no_attempt() {
    let t0 = Instant::now();
    let mut a = Attempts::new(policy(3), t0);
    assert_eq!(a.after_error(&Failure { relayed: true, ..deadlock(PG) }, t0, 0.0), Verdict::Reached);
    assert_eq!(a.after_error(&lock_wait_timeout(), t0, 0.0), Verdict::NotRetryable);
    assert_eq!(a.made(), 1);
}

#[test]
fn after_error_waits_then_exhausts_the_attempts() {
    let t0 = Instant::now();
    let mut a = Attempts::new(policy(3), t0);
    assert_eq!(a.after_error(&deadlock(PG), t0, 0.0), Verdict::RetryAfter(ms(10)));
    assert_eq!(a.after_error(&deadlock(PG), t0, 0.0), Verdict::RetryAfter(ms(20)));
    assert_eq!(a.made(), 3);
    assert_eq!(a.after_error(&deadlock(PG), t0, 0.0), Verdict::GaveUp(Outcome::Exhausted));
    assert_eq!(a.made(), 3, "giving up makes no attempt");
}

#[test]
fn after_error_stops_before_a_backoff_past_the_deadline() {
    let t0 = Instant::now();
    let mut a = Attempts::new(policy(10), t0);
    assert_eq!(a.after_error(&deadlock(PG), t0 + ms(985), 0.0), Verdict::RetryAfter(ms(10)));
    let late = a.after_error(&deadlock(PG), t0 + ms(985), 0.0);
    assert_eq!(late, Verdict::GaveUp(Outcome::Deadline), "985 + 20 > 1000");
    assert_eq!(a.made(), 2);
}

#[test]
fn after_error_jitter_uses_the_callers_random_number() {
    let t0 = Instant::now();
    let mut a = Attempts::new(jittered(5), t0);
    assert_eq!(a.after_error(&deadlock(PG), t0, 0.25), Verdict::RetryAfter(Duration::from_micros(2_500)));
    assert_eq!(a.after_error(&deadlock(PG), t0, 0.75), Verdict::RetryAfter(ms(15)));
}

#[test]
fn after_error_a_jittered_deadline_is_judged_on_the_drawn_wait() {
    let t0 = Instant::now();
    let mut a = Attempts::new(jittered(5), t0);
    assert_eq!(a.after_error(&deadlock(PG), t0 + ms(995), 0.4), Verdict::RetryAfter(ms(4)), "995 + 4 fits");
    let mut b = Attempts::new(jittered(5), t0);
    assert_eq!(b.after_error(&deadlock(PG), t0 + ms(995), 0.9), Verdict::GaveUp(Outcome::Deadline));
}

#[test]
fn after_error_a_reached_client_is_no_give_up_even_when_attempts_ran_out() {
    let t0 = Instant::now();
    let mut a = Attempts::new(policy(2), t0);
    assert_eq!(a.after_error(&deadlock(PG), t0, 0.0), Verdict::RetryAfter(ms(10)));
    let reached = Failure { relayed: true, ..deadlock(PG) };
    assert_eq!(a.after_error(&reached, t0, 0.0), Verdict::Reached, "not counted as a give-up");
}

#[test]
fn settled_only_after_a_retry() {
    let t0 = Instant::now();
    let mut a = Attempts::new(policy(3), t0);
    assert_eq!(a.settled(), None, "a first attempt that succeeds is no retry");
    assert_eq!(a.after_error(&deadlock(PG), t0, 0.0), Verdict::RetryAfter(ms(10)));
    assert_eq!(a.settled(), Some(Outcome::Settled));
}

#[test]
fn attempts_keep_their_policy() {
    let a = Attempts::new(jittered(7), Instant::now());
    assert_eq!(*a.policy(), jittered(7));
    assert_eq!(a.made(), 1);
}

cases! {
    interrupted;
    interrupt_none_waits: false, false => None;
    interrupt_a_cancel_stops: true, false => Some(Outcome::Cancelled);
    interrupt_a_drain_stops: false, true => Some(Outcome::Shutdown);
    interrupt_a_cancel_wins_over_a_drain: true, true => Some(Outcome::Cancelled);
}
