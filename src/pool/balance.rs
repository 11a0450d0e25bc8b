//! Per-statement backend choice (#22), pure: given the eligible backends of a pool (healthy and,
//! for a causal read, caught up) with their weights, smooth round-robin credits and the
//! statements this core has outstanding on each, name the one the next checkout should use.
//! The pool then reuses an idle connection to it, so the choice is made per statement rather
//! than only when a connection is opened. No I/O, no clock.

use crate::config::Balance;

/// One eligible backend as the chooser sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Candidate {
    /// Index of the backend in its pool.
    pub index: usize,
    /// Configured `weight` (≥ 1).
    pub weight: i64,
    /// Smooth weighted round-robin credit, carried between choices by the caller.
    pub credit: i64,
    /// Connections of this core lent out on the backend now (one statement or transaction each).
    pub outstanding: u32,
}

/// Chooses among `candidates` under `policy` and updates their credits; returns the chosen
/// backend's index (`None` when there is no candidate).
///
/// - `weighted`: smooth weighted round-robin (each candidate gains its weight, the richest wins
///   and pays the total), so over any run of choices each backend's share follows its weight,
///   interleaved; equal credit goes to the backend with fewer outstanding statements.
/// - `round_robin`: the same with every weight 1.
/// - `least_outstanding`: the fewest outstanding statements per unit of weight, counted in whole
///   units (`outstanding / weight`, rounded down); ties by the weighted credits. So an idle or
///   lightly loaded pool follows the weights exactly, and load decides only once a backend is
///   a whole weight's worth of statements busier than another: with weights 3:1 and one
///   statement in flight on the first, the next still goes by credit rather than to the idle
///   second, which would otherwise take far more than its share at low concurrency.
pub(crate) fn choose(policy: Balance, candidates: &mut [Candidate]) -> Option<usize> {
    let weight = |c: &Candidate| if policy == Balance::RoundRobin { 1 } else { c.weight.max(1) };
    let total: i64 = candidates.iter().map(weight).sum();
    for c in candidates.iter_mut() {
        c.credit += weight(c);
    }
    // least_outstanding compares whole units of load per weight; then more credit wins, then
    // fewer outstanding statements.
    let units = |c: &Candidate| i64::from(c.outstanding) / weight(c);
    let load = |a: &Candidate, b: &Candidate| {
        if policy != Balance::LeastOutstanding {
            return std::cmp::Ordering::Equal;
        }
        units(a).cmp(&units(b))
    };
    let best = candidates
        .iter_mut()
        .min_by(|a, b| load(a, b).then(b.credit.cmp(&a.credit)).then(a.outstanding.cmp(&b.outstanding)))?;
    best.credit -= total;
    Some(best.index)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidates(weights: &[i64]) -> Vec<Candidate> {
        weights
            .iter()
            .enumerate()
            .map(|(index, &weight)| Candidate { index, weight, credit: 0, outstanding: 0 })
            .collect()
    }

    fn shares(policy: Balance, weights: &[i64], rounds: usize) -> Vec<usize> {
        let mut c = candidates(weights);
        let mut counts = vec![0; weights.len()];
        for _ in 0..rounds {
            if let Some(n) = choose(policy, &mut c).and_then(|i| counts.get_mut(i)) {
                *n += 1;
            }
        }
        counts
    }

    #[test]
    fn weighted_follows_weights_interleaved() {
        assert_eq!(shares(Balance::Weighted, &[3, 1], 400), vec![300, 100]);
        let mut c = candidates(&[3, 1]);
        let order: Vec<_> = (0..8).filter_map(|_| choose(Balance::Weighted, &mut c)).collect();
        assert_eq!(order, vec![0, 0, 1, 0, 0, 0, 1, 0], "interleaved, not 3 then 1");
    }

    #[test]
    fn round_robin_ignores_weights() {
        assert_eq!(shares(Balance::RoundRobin, &[3, 1], 400), vec![200, 200]);
    }

    #[test]
    fn equal_credit_goes_to_the_less_busy_backend() {
        let mut c = candidates(&[1, 1]);
        if let Some(first) = c.first_mut() {
            first.outstanding = 2;
        }
        assert_eq!(choose(Balance::Weighted, &mut c), Some(1));
    }

    #[test]
    fn least_outstanding_weighs_load_by_weight() {
        let mut c = candidates(&[3, 1]);
        c[0].outstanding = 2; // 0 whole units per weight
        c[1].outstanding = 1; // 1
        assert_eq!(choose(Balance::LeastOutstanding, &mut c), Some(0));
        c[0].outstanding = 3; // 1: a tie, broken by credit
        assert!(choose(Balance::LeastOutstanding, &mut c).is_some());
        c[0].outstanding = 6; // 2
        assert_eq!(choose(Balance::LeastOutstanding, &mut c), Some(1));
        let mut c = candidates(&[3, 1]);
        c[0].outstanding = 1; // one in flight on the heavier backend: still by credit
        assert_eq!(choose(Balance::LeastOutstanding, &mut c), Some(0));
        assert_eq!(shares(Balance::LeastOutstanding, &[3, 1], 400), vec![300, 100], "idle: by weight");
    }

    #[test]
    fn no_candidate_no_choice() {
        assert_eq!(choose(Balance::Weighted, &mut []), None);
    }
}
