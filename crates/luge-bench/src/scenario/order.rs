//! The order a trial runs its servers or conditions in.
//!
//! Interleaved trials let a ratio be taken within a trial, but a fixed order within every trial
//! still gives one side a systematic place: the first server meets a cold box (page cache, CPU
//! frequency, a neighbour's burst winding down), the last one its warmed state. Counterbalancing
//! ("ABBA") cancels a drift that is linear in time over each pair of trials: even trials run the
//! list forward, odd ones backward.

/// `items` in the order trial `trial` (0-based) runs them: forward in even trials, backward in
/// odd ones.
pub(crate) fn in_trial_order<T>(trial: usize, items: &[T]) -> Vec<&T> {
    let mut order: Vec<&T> = items.iter().collect();
    if trial % 2 == 1 {
        order.reverse();
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_trials_run_the_list_backward() {
        let items = ["luge", "echo", "hyper"];
        assert_eq!(in_trial_order(0, &items), [&"luge", &"echo", &"hyper"]);
        assert_eq!(in_trial_order(1, &items), [&"hyper", &"echo", &"luge"]);
        assert_eq!(in_trial_order(2, &items), [&"luge", &"echo", &"hyper"]);
        assert!(in_trial_order::<u8>(1, &[]).is_empty());
    }
}
