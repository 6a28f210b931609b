//! The retry policy of SPEC §3: one pure schedule and one small executor.
//!
//! [`RetryPolicy::max_delay_after`] is the capped exponential envelope,
//! [`RetryPolicy::delay_after`] draws the full-jitter sleep from an injected
//! [`Jitter`], and [`retry`] runs an operation with a per-attempt timeout
//! through an injected sleep function, so tests drive it deterministically
//! with no clock and production drives it with the Workers timer.
//!
//! A timed-out attempt is *cancelled*: its future is dropped, which for a
//! fetch built with an abort signal aborts the request instead of leaving it
//! running in the background.

use std::future::Future;
use std::time::Duration;

use futures::future::{select, Either};
use hermes_protocol::limits;

/// Source of uniform random numbers for jitter.
pub trait Jitter {
    /// A uniform integer in `[0, bound)`; `bound` is at least 1.
    fn below(&mut self, bound: u64) -> u64;
}

/// Attempts, backoff envelope and per-attempt timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    attempts: u32,
    pub base: Duration,
    pub cap: Duration,
    pub attempt_timeout: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            attempts: limits::RETRY_ATTEMPTS,
            base: Duration::from_millis(limits::RETRY_BASE_MS),
            cap: Duration::from_millis(limits::RETRY_CAP_MS),
            attempt_timeout: Duration::from_millis(limits::ATTEMPT_TIMEOUT_MS),
        }
    }
}

impl RetryPolicy {
    /// The default policy with `attempts` attempts (at least 1).
    pub fn with_attempts(attempts: u32) -> Self {
        Self {
            attempts: attempts.max(1),
            ..Self::default()
        }
    }

    /// A policy for an operation that must run exactly once.
    pub fn once(attempt_timeout: Duration) -> Self {
        Self {
            attempts: 1,
            attempt_timeout,
            ..Self::default()
        }
    }

    pub fn with_attempt_timeout(mut self, timeout: Duration) -> Self {
        self.attempt_timeout = timeout;
        self
    }

    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// Upper bound (exclusive) of the sleep after failed attempt `k`
    /// (1-based): `min(cap, base · 2^(k-1))`. Saturates instead of
    /// overflowing for large `k`.
    pub fn max_delay_after(&self, failed_attempt: u32) -> Duration {
        let exp = failed_attempt.saturating_sub(1).min(63);
        let factor = 1u128 << exp;
        let envelope = self.base.as_millis().saturating_mul(factor);
        let capped = envelope.min(self.cap.as_millis());
        Duration::from_millis(u64::try_from(capped).unwrap_or(u64::MAX))
    }

    /// The sleep after failed attempt `k`, or `None` when `k` was the last
    /// attempt. Full jitter: uniform in `[0, max_delay_after(k))`.
    pub fn delay_after(&self, failed_attempt: u32, jitter: &mut impl Jitter) -> Option<Duration> {
        if failed_attempt >= self.attempts {
            return None;
        }
        let bound =
            u64::try_from(self.max_delay_after(failed_attempt).as_millis()).unwrap_or(u64::MAX);
        if bound == 0 {
            return Some(Duration::ZERO);
        }
        Some(Duration::from_millis(jitter.below(bound).min(bound - 1)))
    }
}

/// What an attempt reports when it fails.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptError<E> {
    /// Safe to try again (transient).
    Retryable(E),
    /// Retrying cannot help or would repeat a side effect.
    Fatal(E),
}

/// Why [`retry`] gave up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RetryError<E> {
    /// The last attempt failed with this error.
    Failed { error: E, attempts: u32 },
    /// The last attempt ran past the per-attempt timeout and was cancelled.
    TimedOut { attempts: u32 },
}

impl<E: std::fmt::Display> std::fmt::Display for RetryError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Failed { error, attempts } => write!(f, "{error} (after {attempts} attempt(s))"),
            Self::TimedOut { attempts } => write!(f, "timed out (after {attempts} attempt(s))"),
        }
    }
}

/// Run `op` under `policy`. `op` receives the 1-based attempt number.
/// `sleep` is used both for backoff and to time out attempts.
pub async fn retry<T, E, Op, OpFut, Sleep, SleepFut, J>(
    policy: &RetryPolicy,
    jitter: &mut J,
    sleep: Sleep,
    mut op: Op,
) -> Result<T, RetryError<E>>
where
    Op: FnMut(u32) -> OpFut,
    OpFut: Future<Output = Result<T, AttemptError<E>>>,
    Sleep: Fn(Duration) -> SleepFut,
    SleepFut: Future<Output = ()>,
    J: Jitter,
{
    let mut attempt = 1;
    loop {
        let attempt_fut = std::pin::pin!(op(attempt));
        let timer = std::pin::pin!(sleep(policy.attempt_timeout));
        let outcome = match select(attempt_fut, timer).await {
            Either::Left((result, _timer)) => result.map_err(Some),
            // Dropping the attempt future here cancels it.
            Either::Right(((), _attempt)) => Err(None),
        };
        let failure = match outcome {
            Ok(value) => return Ok(value),
            Err(Some(AttemptError::Fatal(error))) => {
                return Err(RetryError::Failed {
                    error,
                    attempts: attempt,
                })
            }
            Err(Some(AttemptError::Retryable(error))) => RetryError::Failed {
                error,
                attempts: attempt,
            },
            Err(None) => RetryError::TimedOut { attempts: attempt },
        };
        match policy.delay_after(attempt, jitter) {
            Some(delay) => {
                if !delay.is_zero() {
                    sleep(delay).await;
                }
                attempt += 1;
            }
            None => return Err(failure),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::executor::block_on;
    use futures::future::{pending, ready};
    use proptest::prelude::*;
    use std::cell::RefCell;

    /// Returns `bound - 1` (the top of the range) or a scripted fraction.
    struct MaxJitter;
    impl Jitter for MaxJitter {
        fn below(&mut self, bound: u64) -> u64 {
            bound - 1
        }
    }
    struct FixedJitter(u64);
    impl Jitter for FixedJitter {
        fn below(&mut self, bound: u64) -> u64 {
            self.0 % bound
        }
    }

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn envelope_doubles_and_caps() {
        let p = RetryPolicy::with_attempts(10);
        let got: Vec<u64> = (1..=8)
            .map(|k| p.max_delay_after(k).as_millis() as u64)
            .collect();
        assert_eq!(got, vec![250, 500, 1000, 2000, 4000, 5000, 5000, 5000]);
        assert_eq!(p.max_delay_after(u32::MAX), ms(5000));
    }

    #[test]
    fn no_sleep_after_last_attempt() {
        let p = RetryPolicy::default();
        assert_eq!(p.attempts(), 3);
        assert_eq!(p.delay_after(1, &mut MaxJitter), Some(ms(249)));
        assert_eq!(p.delay_after(2, &mut MaxJitter), Some(ms(499)));
        assert_eq!(p.delay_after(3, &mut MaxJitter), None);
    }

    #[test]
    fn attempts_at_least_one() {
        let p = RetryPolicy::with_attempts(0);
        assert_eq!(p.attempts(), 1);
        assert_eq!(p.delay_after(1, &mut MaxJitter), None);
    }

    proptest! {
        #[test]
        fn jittered_delay_stays_in_range(k in 1u32..20, r in any::<u64>()) {
            let p = RetryPolicy::with_attempts(25);
            let d = p.delay_after(k, &mut FixedJitter(r)).unwrap();
            prop_assert!(d < p.max_delay_after(k));
        }
    }

    /// A recording sleeper: records every requested sleep and completes at
    /// once, except sleeps equal to the attempt timeout, which complete only
    /// when `fire_timeouts` is set (to model a hung attempt).
    fn run<T: Clone>(
        policy: RetryPolicy,
        script: Vec<Option<Result<T, AttemptError<&'static str>>>>,
    ) -> (Result<T, RetryError<&'static str>>, Vec<u64>, u32) {
        let slept = RefCell::new(Vec::new());
        let calls = RefCell::new(0u32);
        let result = block_on(retry(
            &policy,
            &mut MaxJitter,
            |d: Duration| {
                slept.borrow_mut().push(d.as_millis() as u64);
                ready(())
            },
            |attempt| {
                *calls.borrow_mut() += 1;
                let step = script[(attempt - 1) as usize].clone();
                async move {
                    match step {
                        Some(r) => r,
                        None => pending().await, // hangs until the timer wins
                    }
                }
            },
        ));
        let slept = slept.into_inner();
        (result, slept, calls.into_inner())
    }

    #[test]
    fn retries_retryable_then_succeeds() {
        let (r, slept, calls) = run(
            RetryPolicy::default(),
            vec![
                Some(Err(AttemptError::Retryable("a"))),
                Some(Err(AttemptError::Retryable("b"))),
                Some(Ok(7)),
            ],
        );
        assert_eq!(r, Ok(7));
        assert_eq!(calls, 3);
        // Each attempt arms a 30 s timer; between attempts the jittered backoff.
        assert_eq!(slept, vec![30_000, 249, 30_000, 499, 30_000]);
    }

    #[test]
    fn fatal_error_stops_at_once() {
        let (r, slept, calls) = run::<u8>(
            RetryPolicy::default(),
            vec![Some(Err(AttemptError::Fatal("boom"))), None, None],
        );
        assert_eq!(
            r,
            Err(RetryError::Failed {
                error: "boom",
                attempts: 1
            })
        );
        assert_eq!(calls, 1);
        assert_eq!(slept, vec![30_000]);
    }

    #[test]
    fn gives_up_after_last_attempt_without_sleeping() {
        let (r, slept, calls) = run::<u8>(
            RetryPolicy::with_attempts(2),
            vec![Some(Err(AttemptError::Retryable("x"))); 2],
        );
        assert_eq!(
            r,
            Err(RetryError::Failed {
                error: "x",
                attempts: 2
            })
        );
        assert_eq!(calls, 2);
        assert_eq!(slept, vec![30_000, 249, 30_000]);
    }

    #[test]
    fn hung_attempt_is_timed_out_and_retried() {
        // The recording sleeper completes immediately, so a pending attempt
        // loses the race to its timer: it is cancelled and retried.
        let (r, _slept, calls) = run(RetryPolicy::default(), vec![None, None, Some(Ok(1))]);
        assert_eq!(r, Ok(1));
        assert_eq!(calls, 3);
        let (r, _slept, calls) = run::<u8>(RetryPolicy::default(), vec![None, None, None]);
        assert_eq!(r, Err(RetryError::TimedOut { attempts: 3 }));
        assert_eq!(calls, 3);
    }

    #[test]
    fn once_means_once() {
        let (r, _slept, calls) = run::<u8>(
            RetryPolicy::once(ms(1000)),
            vec![Some(Err(AttemptError::Retryable("x"))), None],
        );
        assert_eq!(
            r,
            Err(RetryError::Failed {
                error: "x",
                attempts: 1
            })
        );
        assert_eq!(calls, 1);
    }

    #[test]
    fn cancelled_attempt_is_dropped() {
        struct DropFlag<'a>(&'a RefCell<bool>);
        impl Drop for DropFlag<'_> {
            fn drop(&mut self) {
                *self.0.borrow_mut() = true;
            }
        }
        let dropped = RefCell::new(false);
        let r: Result<(), _> = block_on(retry(
            &RetryPolicy::once(ms(5)),
            &mut MaxJitter,
            |_d| ready(()),
            |_| {
                let flag = DropFlag(&dropped);
                async move {
                    let _keep = flag;
                    pending::<Result<(), AttemptError<()>>>().await
                }
            },
        ));
        assert_eq!(r, Err(RetryError::TimedOut { attempts: 1 }));
        assert!(
            *dropped.borrow(),
            "the timed-out attempt must be dropped (cancelled)"
        );
    }
}
