//! Happens-before between the threads of a block, by vector clocks (the race detector's order).
//!
//! Every thread `t` has a clock `C[t][t]` that advances each time it *releases* (arrives at a
//! barrier of any kind), and knows `C[t][u]`: the latest clock of thread `u` that is ordered
//! before `t`'s next access. An access is stamped `(t, C[t][t])`; a later access by `u` is
//! ordered after it iff `u == t` or `C[u][t] ≥ C[t][t]` at the time of the stamp.
//!
//! Worked example, two threads, one barrier: both start at `C = [[1, 0], [0, 1]]`. Thread 0
//! writes byte b (stamp (0, 1)); thread 1 reading b now sees `C[1][0] = 0 < 1`: a race. After a
//! block barrier both know the join `[1, 1]`, then each advances its own clock:
//! `C = [[2, 1], [1, 2]]`; the read now sees `C[1][0] = 1 ≥ 1`: ordered. A write by thread 0
//! after the barrier is stamped (0, 2), which thread 1 does not know yet.
//!
//! Synchronisation is one of three shapes:
//! * a **rendezvous** (block barrier, warp operation, named barrier): every participant learns
//!   the join of all participants' clocks;
//! * a **release** into a sync object (mbarrier arrive, a TMA copy's completion): the object
//!   accumulates the join of the releasers' clocks for its current phase;
//! * an **acquire** from it (a successful mbarrier wait): the waiter learns what the phase
//!   accumulated.

use std::prelude::rust_2021::*;

/// The vector clocks of a block's `n` threads (`n × n`, row `t` = what thread `t` knows).
pub(crate) struct Clocks {
    n: usize,
    known: Vec<u32>,
}

/// What a sync object (an mbarrier phase) has accumulated from the threads that released into
/// it: the join of their clocks at release.
#[derive(Clone, Debug, Default)]
pub(crate) struct Released(Vec<u32>);

impl Clocks {
    /// Every thread at clock 1, knowing nothing of the others.
    pub fn new(n: usize) -> Clocks {
        let mut known = vec![0; n * n];
        for t in 0..n {
            known[t * n + t] = 1;
        }
        Clocks { n, known }
    }

    /// Thread `t`'s own clock (the stamp of its next access).
    pub fn own(&self, t: u32) -> u32 {
        self.known[t as usize * self.n + t as usize]
    }

    /// Is an access stamped `(by, clock)` ordered before thread `t`'s next access?
    pub fn ordered(&self, t: u32, by: u32, clock: u32) -> bool {
        by == t || self.known[t as usize * self.n + by as usize] >= clock
    }

    fn row(&self, t: u32) -> &[u32] {
        let t = t as usize;
        &self.known[t * self.n..(t + 1) * self.n]
    }

    fn row_mut(&mut self, t: u32) -> &mut [u32] {
        let t = t as usize;
        &mut self.known[t * self.n..(t + 1) * self.n]
    }

    /// A rendezvous of `threads`: each learns the join of all their clocks, then advances its own.
    pub fn rendezvous(&mut self, threads: &[u32]) {
        let mut join = vec![0u32; self.n];
        for &t in threads {
            for (j, &k) in join.iter_mut().zip(self.row(t)) {
                *j = (*j).max(k);
            }
        }
        for &t in threads {
            self.row_mut(t).copy_from_slice(&join);
            self.row_mut(t)[t as usize] += 1;
        }
    }

    /// Thread `t` releases into `into` (joins its clock there), then advances its own clock, so
    /// its later accesses are not covered by the release.
    pub fn release(&mut self, t: u32, into: &mut Released) {
        if into.0.is_empty() {
            into.0 = vec![0; self.n];
        }
        for (j, &k) in into.0.iter_mut().zip(self.row(t)) {
            *j = (*j).max(k);
        }
        self.row_mut(t)[t as usize] += 1;
    }

    /// Thread `t` acquires what `from` accumulated.
    pub fn acquire(&mut self, t: u32, from: &Released) {
        for (k, &r) in self.row_mut(t).iter_mut().zip(&from.0) {
            *k = (*k).max(r);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worked_example() {
        let mut c = Clocks::new(2);
        assert_eq!((c.own(0), c.own(1)), (1, 1));
        assert!(!c.ordered(1, 0, 1), "unsynchronised threads are unordered");
        c.rendezvous(&[0, 1]);
        assert_eq!(c.known, vec![2, 1, 1, 2]);
        assert!(
            c.ordered(1, 0, 1),
            "the access before the barrier is ordered"
        );
        assert!(!c.ordered(1, 0, 2), "an access after the barrier is not");
    }

    #[test]
    fn release_then_acquire_orders_only_what_came_before_the_release() {
        let mut c = Clocks::new(3);
        let mut phase = Released::default();
        let before = c.own(0);
        c.release(0, &mut phase);
        let after = c.own(0);
        c.acquire(2, &phase);
        assert!(c.ordered(2, 0, before));
        assert!(!c.ordered(2, 0, after));
        assert!(
            !c.ordered(1, 0, before),
            "a thread that did not acquire learns nothing"
        );
    }

    #[test]
    fn order_is_transitive_through_a_chain_of_syncs() {
        // 0 releases to an mbarrier, 1 acquires it and then meets 2 at a rendezvous.
        let mut c = Clocks::new(3);
        let mut phase = Released::default();
        let stamp = c.own(0);
        c.release(0, &mut phase);
        c.acquire(1, &phase);
        c.rendezvous(&[1, 2]);
        assert!(c.ordered(2, 0, stamp));
    }
}
