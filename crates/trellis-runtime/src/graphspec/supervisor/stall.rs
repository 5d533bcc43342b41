//! How long this controller process itself was stopped (SIGSTOP, a suspended machine, a
//! debugger): a ticker thread notices the gaps in its own ticks, so a deadline can be judged on
//! the time the supervisor was actually able to watch.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How often the ticker wakes.
const TICK: Duration = Duration::from_millis(50);
/// A gap longer than this between two ticks counts as a stall; scheduling delays of a loaded
/// machine stay well below it, a stopped process is far above.
const STALL: Duration = Duration::from_millis(250);

struct Ticker {
    origin: Instant,
    /// Nanoseconds since `origin` of the last tick.
    last_tick: AtomicU64,
    /// Total nanoseconds of stalls noticed so far.
    stalled: AtomicU64,
}

fn ticker() -> &'static Ticker {
    static TICKER: OnceLock<&'static Ticker> = OnceLock::new();
    TICKER.get_or_init(|| {
        let ticker: &'static Ticker = Box::leak(Box::new(Ticker {
            origin: Instant::now(),
            last_tick: AtomicU64::new(0),
            stalled: AtomicU64::new(0),
        }));
        // Without the thread nothing is ever counted as a stall: deadlines stay strict.
        let _ = std::thread::Builder::new()
            .name("trellis-stall-clock".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(TICK);
                    let now = nanos(ticker.origin.elapsed());
                    let gap = now.saturating_sub(ticker.last_tick.load(Ordering::SeqCst));
                    // Counted before the tick moves on, so a reading in between counts the
                    // stall twice at worst (generous), never not at all.
                    if gap > nanos(STALL) {
                        ticker
                            .stalled
                            .fetch_add(gap.saturating_sub(nanos(TICK)), Ordering::SeqCst);
                    }
                    ticker.last_tick.store(now, Ordering::SeqCst);
                }
            });
        ticker
    })
}

fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// A reading of the stall clock.
#[derive(Debug, Clone, Copy)]
pub(super) struct StallMark(u64);

/// The stall clock now (counting a stall the ticker has not noticed yet: the process may be
/// resuming right now, before the ticker thread ran again).
pub(super) fn mark() -> StallMark {
    let ticker = ticker();
    let since_tick =
        nanos(ticker.origin.elapsed()).saturating_sub(ticker.last_tick.load(Ordering::SeqCst));
    let pending = if since_tick > nanos(STALL) {
        since_tick.saturating_sub(nanos(TICK))
    } else {
        0
    };
    StallMark(
        ticker
            .stalled
            .load(Ordering::SeqCst)
            .saturating_add(pending),
    )
}

/// How long the process was stopped between two readings.
pub(super) fn stalled_between(start: StallMark, end: StallMark) -> Duration {
    Duration::from_nanos(end.0.saturating_sub(start.0))
}
