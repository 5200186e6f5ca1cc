//! The rate buckets: one shared by /open, /edit and /command, one for /credential, one for /sound.

use std::num::NonZeroU32;

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};

/// Which bucket a route draws from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bucket {
    /// /open, /edit, /command: 10/s, burst 5.
    Shared,
    /// /credential: 30/s, burst 15 (a clone with many HTTPS submodules asks in a burst).
    Credential,
    /// /sound: 10/s, burst 5, apart so chimes cannot spend what an OAuth redirect needs.
    Sound,
}

impl Bucket {
    /// The refill rate per second and the burst.
    pub const fn limits(self) -> (u32, u32) {
        match self {
            Bucket::Shared | Bucket::Sound => (10, 5),
            Bucket::Credential => (30, 15),
        }
    }

    /// The governor quota for these limits.
    pub fn quota(self) -> Quota {
        let (per_second, burst) = self.limits();
        let nz = |n| NonZeroU32::new(n).expect("bucket limits are non-zero constants");
        Quota::per_second(nz(per_second)).allow_burst(nz(burst))
    }
}

/// The three buckets of one daemon.
#[derive(Debug)]
pub struct Buckets {
    shared: DefaultDirectRateLimiter,
    credential: DefaultDirectRateLimiter,
    sound: DefaultDirectRateLimiter,
}

impl Default for Buckets {
    fn default() -> Self {
        Buckets {
            shared: RateLimiter::direct(Bucket::Shared.quota()),
            credential: RateLimiter::direct(Bucket::Credential.quota()),
            sound: RateLimiter::direct(Bucket::Sound.quota()),
        }
    }
}

impl Buckets {
    /// Takes one token from `bucket`; false when it is empty (429).
    pub fn take(&self, bucket: Bucket) -> bool {
        let limiter = match bucket {
            Bucket::Shared => &self.shared,
            Bucket::Credential => &self.credential,
            Bucket::Sound => &self.sound,
        };
        limiter.check().is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use governor::clock::FakeRelativeClock;
    use std::time::Duration;

    #[test]
    fn burst_then_refill_at_the_rate() {
        for bucket in [Bucket::Shared, Bucket::Credential, Bucket::Sound] {
            let (per_second, burst) = bucket.limits();
            let clock = FakeRelativeClock::default();
            let limiter = RateLimiter::direct_with_clock(bucket.quota(), clock.clone());
            for i in 0..burst {
                assert!(limiter.check().is_ok(), "{bucket:?} request {i}");
            }
            assert!(limiter.check().is_err(), "{bucket:?}: burst + 1 is refused");
            clock.advance(Duration::from_secs(1) / per_second);
            assert!(
                limiter.check().is_ok(),
                "{bucket:?}: one token back after 1/rate"
            );
            assert!(limiter.check().is_err());
        }
    }

    #[test]
    fn buckets_are_separate() {
        let buckets = Buckets::default();
        while buckets.take(Bucket::Shared) {}
        assert!(buckets.take(Bucket::Sound));
        assert!(buckets.take(Bucket::Credential));
    }
}
