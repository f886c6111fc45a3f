//! CPU affinity of the calling thread: read it, restrict it. The runtime pins its workers with
//! it, and the benchmarks pin servers and load generators to their cores with the same code.

/// The CPUs the calling thread may run on (empty if unknown).
pub fn affinity() -> Vec<usize> {
    // SAFETY: `set` is a plain bit set, zero-initialised before use and filled by the kernel;
    // CPU_ISSET bounds-checks the index against the set size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize).filter(|&c| libc::CPU_ISSET(c, &set)).collect()
    }
}

/// Restricts the calling thread (and the threads and processes it starts from now on) to
/// `cpus`; false if the kernel refused (e.g. none of them exists).
pub fn set_affinity(cpus: &[usize]) -> bool {
    // SAFETY: as in `affinity`; CPU_SET bounds-checks each index against the set size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        for &c in cpus {
            libc::CPU_SET(c, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

#[cfg(test)]
#[allow(clippy::expect_used)] // tests: a panic is the failure report
mod tests {
    use super::*;

    #[test]
    fn a_thread_can_be_restricted_and_restored() {
        let all = affinity();
        assert!(!all.is_empty());
        let (first, all_clone) = (all[0], all.clone());
        std::thread::spawn(move || {
            assert!(set_affinity(&[first]));
            assert_eq!(affinity(), [first]);
            assert!(set_affinity(&all_clone));
            assert_eq!(affinity(), all_clone);
        })
        .join()
        .expect("the pinned thread");
        assert!(!set_affinity(&[]), "an empty set is refused");
    }
}
