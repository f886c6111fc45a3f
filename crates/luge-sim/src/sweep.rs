//! Parallel runs of independent simulation points on scoped threads, and the "maximum sustainable
//! load at a target" search by bisection. Both are generic over closures so that any workload,
//! policy and overhead model can be swept.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::engine::SimError;
use crate::record::Report;

/// Runs `run` on every item on up to `threads` threads; `progress(done, total)` is called after
/// each item. Results come back in the order of `items`, whatever the thread interleaving, so a
/// sweep is as deterministic as its points.
pub fn sweep<T, R, F, P>(items: &[T], threads: usize, run: F, progress: P) -> Vec<R>
where
    T: Sync,
    R: Send,
    F: Fn(&T) -> R + Sync,
    P: Fn(usize, usize) + Sync,
{
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let results: Mutex<Vec<(usize, R)>> = Mutex::new(Vec::with_capacity(items.len()));
    std::thread::scope(|s| {
        for _ in 0..threads.clamp(1, items.len().max(1)) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    let r = run(item);
                    if let Ok(mut v) = results.lock() {
                        v.push((i, r));
                    }
                    progress(done.fetch_add(1, Ordering::Relaxed) + 1, items.len());
                }
            });
        }
    });
    let mut v = results.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
    v.sort_by_key(|(i, _)| *i);
    v.into_iter().map(|(_, r)| r).collect()
}

/// The largest load in `[lo, hi]` at which `meets(report)` holds, to within `tolerance`, by
/// bisection (assumes the target gets harder as load grows). Returns 0 if even `lo` fails, and
/// `hi` if `hi` passes.
pub fn max_sustainable<F, M>(
    lo: f64,
    hi: f64,
    tolerance: f64,
    run: F,
    meets: M,
) -> Result<f64, SimError>
where
    F: Fn(f64) -> Result<Report, SimError>,
    M: Fn(&Report) -> bool,
{
    if !meets(&run(lo)?) {
        return Ok(0.0);
    }
    if meets(&run(hi)?) {
        return Ok(hi);
    }
    let (mut good, mut bad) = (lo, hi);
    while bad - good > tolerance {
        let mid = 0.5 * (good + bad);
        if meets(&run(mid)?) {
            good = mid;
        } else {
            bad = mid;
        }
    }
    Ok(good)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweep_keeps_item_order() {
        let items: Vec<u64> = (0..50).collect();
        let out = sweep(&items, 4, |&x| x * x, |_, _| {});
        assert_eq!(out, items.iter().map(|x| x * x).collect::<Vec<_>>());
    }
}
