//! Timing shared by the examples: the calling thread's CPU time, so other processes on a busy
//! machine disturb the numbers less than wall-clock time would.

use std::time::{Duration, Instant};

/// CPU time used by this thread so far.
pub fn thread_cpu_time() -> Duration {
    let mut time = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `time` is a valid, writable timespec.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut time) };
    assert_eq!(status, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    Duration::new(time.tv_sec as u64, time.tv_nsec as u32)
}

/// The best CPU time of the runs of `run` in about `seconds` (at least one run), and what the last
/// run returned.
pub fn best_cpu_seconds(seconds: f64, mut run: impl FnMut() -> usize) -> (f64, usize) {
    let mut best = Duration::MAX;
    let mut result = 0;
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs_f64(seconds) || best == Duration::MAX {
        let before = thread_cpu_time();
        result = run();
        best = best.min(thread_cpu_time() - before);
    }
    (best.as_secs_f64(), result)
}
