//! Raw → typed `[pools.<name>]` keys of the shape limiter and fair share (#41): `adaptive_limit`,
//! `limit_wait`, `[pools.<name>.max_concurrent]`, `fair_share`, `[pools.<name>.share_weights]`.

use std::collections::BTreeMap;
use std::num::NonZeroU32;
use std::time::Duration;

use super::check::{Checker, Zero};
use super::model::ShapeLimits;
use super::raw::{RawPool, Sp};

/// How long a statement over its limit waits by default.
const DEFAULT_WAIT: Duration = Duration::from_secs(1);

/// The pool's shape limits; every bad entry is reported with its path.
pub(crate) fn shape_limits(ck: &mut Checker<'_>, base: &str, raw: &RawPool) -> ShapeLimits {
    let mut max_concurrent = BTreeMap::new();
    for (key, value) in raw.max_concurrent.iter().flatten() {
        let path = format!("{base}.max_concurrent.{key}");
        let Some(limit) = positive(ck, value, &path) else { continue };
        match u64::from_str_radix(key.trim_start_matches("0x"), 16) {
            Ok(fingerprint) if !key.is_empty() => {
                max_concurrent.insert(fingerprint, limit);
            }
            _ => ck.report_at(
                value,
                &path,
                format!(
                    "\"{key}\" is not a shape's fingerprint_hex (16 hex digits, as GET /api/stats/digests shows it)"
                ),
            ),
        }
    }
    let mut share_weights = BTreeMap::new();
    for (user, value) in raw.share_weights.iter().flatten() {
        if let Some(weight) = positive(ck, value, &format!("{base}.share_weights.{user}")) {
            share_weights.insert(user.clone(), weight);
        }
    }
    let fair_share = raw.fair_share.as_ref().is_some_and(|v| *v.get_ref());
    if let (Some(first), false) = (raw.share_weights.iter().flatten().next(), fair_share) {
        ck.report_at(
            first.1,
            &format!("{base}.share_weights"),
            "share_weights has no effect without fair_share = true",
        );
    }
    ShapeLimits {
        adaptive: raw.adaptive_limit.as_ref().is_some_and(|v| *v.get_ref()),
        wait: ck.duration(&raw.limit_wait, &format!("{base}.limit_wait"), DEFAULT_WAIT, Zero::Allowed),
        max_concurrent,
        fair_share,
        share_weights,
    }
}

/// A count of at least 1, reported otherwise.
fn positive(ck: &mut Checker<'_>, value: &Sp<i64>, path: &str) -> Option<NonZeroU32> {
    let n = ck.int_in(&Some(value.clone()), path, 1, i64::from(u32::MAX))?;
    u32::try_from(n).ok().and_then(NonZeroU32::new)
}
