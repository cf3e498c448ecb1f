//! The CPU time of the calling thread, for budgets that a busy machine must not trip.
//!
//! Splitting a text has a time budget ([`crate::pretokenize`]). Measured on the wall clock, it ran
//! out on a machine whose cores were shared with other work: the thread waited for a core while
//! the clock ran. The CPU time this thread spent is what the budget means. On Linux it is
//! `clock_gettime(CLOCK_THREAD_CPUTIME_ID)`; elsewhere (and if that call fails) the wall clock.

use std::time::Duration;
#[cfg(not(target_os = "linux"))]
use std::time::Instant;

/// A reading of the calling thread's CPU-time clock. Compare readings of one thread only.
#[derive(Clone, Copy, Debug)]
pub struct CpuInstant {
    #[cfg(target_os = "linux")]
    since_thread_start: Duration,
    #[cfg(not(target_os = "linux"))]
    wall: Instant,
}

impl CpuInstant {
    /// The calling thread's CPU time so far.
    #[cfg(target_os = "linux")]
    pub fn now() -> Self {
        let mut time = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `time` is a valid, writable timespec; the call only writes it.
        let status = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut time) };
        assert_eq!(status, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
        let since_thread_start = Duration::new(
            u64::try_from(time.tv_sec).unwrap_or(0),
            u32::try_from(time.tv_nsec).unwrap_or(0),
        );
        Self { since_thread_start }
    }

    /// The wall clock, where the thread's CPU-time clock is not available.
    #[cfg(not(target_os = "linux"))]
    pub fn now() -> Self {
        Self { wall: Instant::now() }
    }

    /// The time from `earlier` to this reading (zero if `earlier` is later).
    #[cfg(target_os = "linux")]
    pub fn since(self, earlier: Self) -> Duration {
        self.since_thread_start.saturating_sub(earlier.since_thread_start)
    }

    /// The time from `earlier` to this reading (zero if `earlier` is later).
    #[cfg(not(target_os = "linux"))]
    pub fn since(self, earlier: Self) -> Duration {
        self.wall.saturating_duration_since(earlier.wall)
    }

    /// The time since this reading.
    pub fn elapsed(self) -> Duration {
        Self::now().since(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_work_not_waiting() {
        let started = CpuInstant::now();
        std::thread::sleep(Duration::from_millis(200));
        let slept = started.elapsed();
        let mut sum = 0u64;
        let busy_start = CpuInstant::now();
        while busy_start.elapsed() < Duration::from_millis(20) {
            sum = std::hint::black_box(sum.wrapping_add(1));
        }
        assert!(busy_start.elapsed() >= Duration::from_millis(20));
        if cfg!(target_os = "linux") {
            assert!(slept < Duration::from_millis(100), "sleeping counted {slept:?} of CPU time");
        }
    }
}
