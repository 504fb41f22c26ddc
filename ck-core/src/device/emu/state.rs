//! Per-block emulator state: the block's shared memory, the race detector, the access profile,
//! and the first fault found.
//!
//! The blocks of a cluster share one happens-before order (their threads synchronise through
//! each other's mbarriers and the cluster barrier), so the race detector names threads by their
//! index in the cluster, `rank · block_dim + thread` ("cluster ids"; a block's own thread index
//! where there are no clusters).

use std::prelude::rust_2021::*;

use super::clocks::{Clocks, Released};
use super::memory::EmuMemory;
use super::shadow::{Shadow, Stamp};
use crate::bank::{global_sectors, shared_wavefronts, LaneAccess};
use crate::report::{Fault, KernelError, LaunchStats};
use crate::wgmma::{Major, SmemMatrix};
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::num::NonZeroU32;
use std::panic::Location;
use std::rc::Rc;
use std::sync::Arc;

pub(crate) type Site = &'static Location<'static>;

/// A map keyed by the emulator's own small integers (offsets, thread and warp ids, sites), hashed
/// by [`WordHasher`]: std's SipHash, built to resist chosen keys, was a fifth of an emulated
/// launch's time in the access profile's and the copies' lookups.
pub(crate) type Map<K, V> = HashMap<K, V, BuildHasherDefault<WordHasher>>;

/// rustc's "Fx" hash: each word is folded in by a rotate, an xor and a multiplication by an odd
/// constant — a few cycles, and enough spread for keys that no adversary chooses.
#[derive(Default)]
pub(crate) struct WordHasher(u64);

impl Hasher for WordHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u64(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write_u32(&mut self, word: u32) {
        self.write_u64(word as u64);
    }

    fn write_usize(&mut self, word: usize) {
        self.write_u64(word as u64);
    }

    fn write_u8(&mut self, word: u8) {
        self.write_u64(word as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// What a memory access does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    Load,
    Store,
    Atomic,
}

impl Kind {
    fn verb(self) -> &'static str {
        match self {
            Kind::Load => "load",
            Kind::Store => "store",
            Kind::Atomic => "atomic update",
        }
    }
}

/// The call sites of a block's shared accesses, numbered in the order first seen.
#[derive(Default)]
struct Sites {
    all: Vec<Site>,
    index: Map<usize, u16>,
}

impl Sites {
    /// `site`'s number. A program with more than 65 536 call sites of shared accesses shares
    /// the last number among the rest: a race message could then name the wrong line for the
    /// other access (the race itself is still found).
    fn number(&mut self, site: Site) -> u16 {
        let next = u16::try_from(self.all.len()).unwrap_or(u16::MAX);
        let n = *self.index.entry(site as *const _ as usize).or_insert(next);
        if usize::from(n) == self.all.len() {
            self.all.push(site);
        }
        n
    }
}

/// An MMA operand: (descriptor, MN-major?, rows, K, bytes per element).
type OperandKey = (u64, bool, u32, u32, u32);

/// The shared bytes of an MMA operand of `rows` × `k` elements.
pub(crate) struct Operand {
    /// Element (r, j)'s byte address, at index `r · k + j`.
    pub addresses: Vec<u32>,
    /// Every byte the operand covers, as sorted runs `(start, length)` of adjacent bytes.
    pub runs: Vec<(u32, u32)>,
}

/// (thread, call site, kind, global?, warp epoch): which of a lane's accesses this is.
type OrdinalKey = (u32, usize, Kind, bool, u32);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct GroupKey {
    warp: u32,
    warp_epoch: u32,
    site: usize,
    kind: Kind,
    global: bool,
    ordinal: u32,
}

/// A `cp.async` issued but not landed: 16 bytes for shared byte `offset`.
#[derive(Clone)]
pub(crate) struct PendingCopy {
    pub offset: usize,
    pub words: [u32; 4],
}

/// A 16-byte shared chunk an asynchronous copy will write: who issued it (its cluster id: a
/// multicast copy writes other blocks' shared memory), where, and what lands it (`via`: the
/// mbarrier offset of a TMA copy; `None`: the issuer's `cp_async_wait`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct PendingChunk {
    pub writer: u32,
    pub site: Site,
    pub via: Option<usize>,
}

/// One mbarrier (keyed by its shared byte offset): arrivals and transaction bytes still due in
/// the current phase, the clocks released into it, those of the last completed phase of each
/// parity, and the TMA bytes that land when the phase completes.
pub(crate) struct MbarrierState {
    pub arrivals: u32,
    pub pending: u32,
    pub tx: i64,
    pub phase: u32,
    pub released: Released,
    pub completed: [Released; 2],
    pub landing: Vec<PendingCopy>,
}

impl MbarrierState {
    pub fn new(arrivals: u32) -> MbarrierState {
        MbarrierState {
            arrivals,
            pending: arrivals,
            tx: 0,
            phase: 0,
            released: Released::default(),
            completed: [Released::default(), Released::default()],
            landing: Vec::new(),
        }
    }
}

/// One named barrier (`barrier.sync id, count`): the count of the current generation, threads
/// arrived so far (those waiting among them), and what they released.
#[derive(Default)]
pub(crate) struct NamedBarrier {
    pub count: u32,
    pub arrived: u32,
    pub waiting: Vec<u32>,
    pub generation: u32,
    pub released: Released,
}

/// One thread's `cp.async` copies: those since its last commit, and its committed groups, oldest
/// first, until a wait retires them.
#[derive(Default)]
pub(crate) struct AsyncCopies {
    pub open: Vec<PendingCopy>,
    pub committed: VecDeque<Vec<PendingCopy>>,
}

/// One thread's TMA stores: the 16-byte shared chunks (offset / 16) read by those since its
/// last commit, and by its committed groups, oldest first, until a read-wait retires them.
#[derive(Default)]
pub(crate) struct BulkStores {
    pub open: Vec<usize>,
    pub committed: VecDeque<Vec<usize>>,
}

/// The last generic-proxy write (a thread's store, `stmatrix`, `cp.async`) to a 16-byte shared
/// chunk: the writer, how many `fence_proxy_async` it had executed then, and where.
#[derive(Clone, Copy)]
pub(crate) struct GenericWrite {
    pub tid: u32,
    pub fences: u32,
    pub site: Site,
}

/// State of one block while it runs (touched by one OS thread only).
pub(crate) struct BlockState {
    pub kernel: String,
    pub block: u32,
    /// Threads per block.
    pub block_dim: u32,
    /// Blocks per cluster (1 without clusters) and this block's rank in its cluster.
    pub cluster: u32,
    pub rank: u32,
    /// Every thread of the block has returned (a peer's remote access is then a fault).
    pub exited: Cell<bool>,
    pub shared: EmuMemory,
    /// The global buffers the launch received (what handles resolve to).
    pub buffers: Arc<[Arc<EmuMemory>]>,
    /// Happens-before among the cluster's threads (shared by its blocks), by cluster id.
    pub clocks: Rc<RefCell<Clocks>>,
    /// Warp-level rendezvous passed, per warp (what groups lanes' accesses into instructions).
    pub warp_epoch: RefCell<Vec<u32>>,
    shadow: RefCell<Shadow>,
    sites: RefCell<Sites>,
    /// MMA operands by descriptor and shape (see [`Self::operand`]).
    operands: RefCell<Map<OperandKey, Rc<Operand>>>,
    groups: RefCell<Map<GroupKey, Vec<LaneAccess>>>,
    ordinals: RefCell<Map<OrdinalKey, u32>>,
    pub error: RefCell<Option<KernelError>>,
    /// Per thread: its `cp.async` copies not yet retired by a wait.
    pub async_copies: RefCell<Vec<AsyncCopies>>,
    /// 16-byte shared chunks (offset / 16) with an asynchronous copy in flight.
    pub async_pending: RefCell<Map<usize, PendingChunk>>,
    /// Per thread: its TMA stores whose shared reads no wait has retired.
    pub bulk_stores: RefCell<Vec<BulkStores>>,
    /// 16-byte shared chunks (offset / 16) a TMA store may still read: its issuer and site.
    pub bulk_reading: RefCell<Map<usize, (u32, Site)>>,
    /// Per 16-byte shared chunk: its last generic-proxy write, which the copy engine (the async
    /// proxy) sees only once the writer has executed a `fence_proxy_async` after it.
    pub generic_writes: RefCell<Vec<Option<GenericWrite>>>,
    /// Per thread: the `fence_proxy_async` it has executed.
    pub proxy_fences: RefCell<Vec<u32>>,
    /// Initialised mbarriers by shared byte offset.
    pub mbarriers: RefCell<Map<usize, MbarrierState>>,
    /// Named barriers 1..=15 (index 0 unused: `block_sync`'s).
    pub named: RefCell<Vec<NamedBarrier>>,
}

impl BlockState {
    /// Block `block`, rank `rank` of a cluster of `cluster` blocks whose threads' order is
    /// `clocks` (`cluster · block_dim` threads).
    pub fn new(
        kernel: &str,
        (block, block_dim): (u32, u32),
        (cluster, rank, clocks): (u32, u32, Rc<RefCell<Clocks>>),
        shared_bytes: usize,
        buffers: Arc<[Arc<EmuMemory>]>,
    ) -> BlockState {
        BlockState {
            kernel: kernel.to_string(),
            block,
            block_dim,
            cluster,
            rank,
            exited: Cell::new(false),
            shared: EmuMemory::new(shared_bytes),
            buffers,
            clocks,
            warp_epoch: RefCell::new(vec![0; block_dim.div_ceil(32) as usize]),
            shadow: RefCell::new(Shadow::new(shared_bytes)),
            sites: RefCell::new(Sites::default()),
            operands: RefCell::new(Map::default()),
            groups: RefCell::new(Map::default()),
            ordinals: RefCell::new(Map::default()),
            error: RefCell::new(None),
            async_copies: RefCell::new((0..block_dim).map(|_| AsyncCopies::default()).collect()),
            async_pending: RefCell::new(Map::default()),
            bulk_stores: RefCell::new((0..block_dim).map(|_| BulkStores::default()).collect()),
            bulk_reading: RefCell::new(Map::default()),
            generic_writes: RefCell::new(vec![None; shared_bytes.div_ceil(16)]),
            proxy_fences: RefCell::new(vec![0; block_dim as usize]),
            mbarriers: RefCell::new(Map::default()),
            named: RefCell::new((0..16).map(|_| NamedBarrier::default()).collect()),
        }
    }

    /// Thread `tid` wrote shared bytes `offset..offset + bytes` through the generic proxy.
    pub fn note_generic_write(&self, tid: u32, site: Site, offset: usize, bytes: u32) {
        let fences = self.proxy_fences.borrow()[tid as usize];
        let mut writes = self.generic_writes.borrow_mut();
        for chunk in offset / 16..(offset + bytes as usize).div_ceil(16) {
            writes[chunk] = Some(GenericWrite { tid, fences, site });
        }
    }

    /// The write to the 16-byte shared chunk `chunk` whose writer has not executed a
    /// `fence_proxy_async` since, if any: what the copy engine may not see yet.
    pub fn unfenced_write(&self, chunk: usize) -> Option<GenericWrite> {
        let fences = self.proxy_fences.borrow();
        self.generic_writes.borrow()[chunk].filter(|w| fences[w.tid as usize] == w.fences)
    }

    /// An MMA operand's shared bytes: `rows` × `k` elements of `bytes` bytes from descriptor
    /// `desc`, laid out `major`; worked out once per operand and block (its 128 threads each
    /// read from it).
    pub fn operand(
        &self,
        (desc, major): (u64, Major),
        (rows, k, bytes): (u32, u32, u32),
    ) -> Rc<Operand> {
        let key = (desc, major == Major::MN, rows, k, bytes);
        if let Some(op) = self.operands.borrow().get(&key) {
            return op.clone();
        }
        let m = SmemMatrix::from_descriptor(desc);
        let addresses: Vec<u32> = (0..rows)
            .flat_map(|r| (0..k).map(move |kk| m.element_address(major, r, kk, bytes)))
            .collect();
        let mut starts = addresses.clone();
        starts.sort_unstable();
        starts.dedup();
        let mut runs: Vec<(u32, u32)> = Vec::new();
        for s in starts {
            match runs.last_mut() {
                Some((start, len)) if *start + *len >= s => *len = (*len).max(s + bytes - *start),
                _ => runs.push((s, bytes)),
            }
        }
        let op = Rc::new(Operand { addresses, runs });
        self.operands.borrow_mut().insert(key, op.clone());
        op
    }

    /// The cluster id of this block's thread `tid`.
    pub fn cluster_id(&self, tid: u32) -> u32 {
        self.rank * self.block_dim + tid
    }

    /// "thread 5", or in a cluster "thread 5 of cluster rank 1", for cluster id `g`.
    pub fn name(&self, g: u32) -> String {
        if self.cluster == 1 {
            format!("thread {g}")
        } else {
            format!(
                "thread {} of cluster rank {}",
                g % self.block_dim,
                g / self.block_dim
            )
        }
    }

    /// Records a fault (the first one wins).
    pub fn fault(&self, fault: Fault, threads: Vec<u32>, address: Option<u64>, message: String) {
        let mut e = self.error.borrow_mut();
        if e.is_none() {
            *e = Some(KernelError {
                fault,
                kernel: self.kernel.clone(),
                block: self.block,
                threads,
                address,
                message,
            });
        }
    }

    /// Adds one lane's access to its warp-level group: the `n`-th access a lane makes from one
    /// call site between two warp rendezvous pairs with the `n`-th access of the other lanes.
    pub fn profile(
        &self,
        tid: u32,
        site: Site,
        kind: Kind,
        global: bool,
        address: u64,
        bytes: u32,
    ) {
        let warp_epoch = self.warp_epoch.borrow()[(tid / 32) as usize];
        let site_id = site as *const _ as usize;
        let mut ord = self.ordinals.borrow_mut();
        let n = ord
            .entry((tid, site_id, kind, global, warp_epoch))
            .or_insert(0);
        let key = GroupKey {
            warp: tid / 32,
            warp_epoch,
            site: site_id,
            kind,
            global,
            ordinal: *n,
        };
        *n += 1;
        self.groups
            .borrow_mut()
            .entry(key)
            .or_default()
            .push(LaneAccess {
                lane: tid % 32,
                byte_address: address,
                bytes,
            });
    }

    /// Records a `shared-race` if the access touches bytes a `cp.async` has not landed in yet
    /// (its thread has not waited for it): on the GPU they may hold the old or the new bytes.
    fn touches_pending_copy(
        &self,
        g: u32,
        site: Site,
        kind: Kind,
        offset: usize,
        bytes: u32,
    ) -> bool {
        let pending = self.async_pending.borrow();
        if pending.is_empty() {
            return false;
        }
        let hit = (offset / 16..(offset + bytes as usize).div_ceil(16))
            .find_map(|chunk| pending.get(&chunk).map(|&w| (chunk, w)));
        let Some((chunk, c)) = hit else {
            return false;
        };
        drop(pending);
        let byte = offset.max(chunk * 16);
        let (writer, copy_site) = (self.name(c.writer), c.site);
        let verb = match kind {
            Kind::Load => "read",
            _ => "write",
        };
        let me = self.name(g);
        let message = match c.via {
            None => format!(
                "{me} {verb}s shared byte {byte} (at {site}) before {writer}'s cp_async_16 into it \
                 (at {copy_site}) has landed: {writer} must cp_async_wait for that copy's group \
                 (and a block_sync must follow) before any thread touches those bytes"
            ),
            Some(bar) => format!(
                "{me} {verb}s shared byte {byte} (at {site}) before the TMA copy into it that {writer} \
                 issued (at {copy_site}) has completed: wait for the mbarrier at shared byte {bar} it signals \
                 before touching those bytes"
            ),
        };
        self.fault(
            Fault::SharedRace,
            vec![c.writer % self.block_dim, g % self.block_dim],
            Some(byte as u64),
            message,
        );
        true
    }

    /// A write of `bytes` bytes at `offset` into bytes a TMA store may still read: a fault.
    fn overwrites_bulk_source(&self, g: u32, site: Site, offset: usize, bytes: u32) -> bool {
        let reading = self.bulk_reading.borrow();
        if reading.is_empty() {
            return false;
        }
        let hit = (offset / 16..(offset + bytes as usize).div_ceil(16))
            .find_map(|chunk| reading.get(&chunk).map(|&r| (chunk, r)));
        let Some((chunk, (issuer, store_site))) = hit else {
            return false;
        };
        drop(reading);
        let byte = offset.max(chunk * 16);
        let (me, issuer_name) = (self.name(g), self.name(self.cluster_id(issuer)));
        self.fault(
            Fault::SharedRace,
            vec![issuer, g % self.block_dim],
            Some(byte as u64),
            format!(
                "{me} writes shared byte {byte} (at {site}) while the TMA store that {issuer_name} \
                 issued (at {store_site}) may still read it: {issuer_name} must bulk_commit_group and \
                 bulk_wait_group_read for that store (and a barrier must follow) before the bytes are written again"
            ),
        );
        true
    }

    /// Checks a shared access of `bytes` bytes at `offset` by this block's thread `tid` against
    /// earlier accesses of the same barrier interval; a write-write pair that stores the value
    /// already there is benign.
    pub fn check_race(
        &self,
        tid: u32,
        site: Site,
        kind: Kind,
        offset: usize,
        bytes: u32,
        same_value: bool,
    ) {
        self.check_race_by(
            self.cluster_id(tid),
            site,
            kind,
            (offset, bytes),
            same_value,
        );
    }

    /// [`Self::check_race`] for the thread with cluster id `g`, which may be another block's
    /// (a multicast copy it issued writes here).
    pub fn check_race_by(
        &self,
        g: u32,
        site: Site,
        kind: Kind,
        (offset, bytes): (usize, u32),
        same_value: bool,
    ) {
        if self.touches_pending_copy(g, site, kind, offset, bytes)
            || (kind != Kind::Load && self.overwrites_bulk_source(g, site, offset, bytes))
        {
            return;
        }
        let clocks = self.clocks.borrow();
        let ordered = |s: &Stamp| clocks.ordered(g, s.tid.into(), s.clock.get());
        let me = Stamp {
            clock: NonZeroU32::new(clocks.own(g)).expect("clocks start at 1"),
            tid: g as u16,
            site: self.sites.borrow_mut().number(site),
        };
        let mut shadow = self.shadow.borrow_mut();
        let found = shadow.visit(offset..offset + bytes as usize, |b, s| {
            let conflict = match kind {
                Kind::Load => s
                    .write
                    .filter(|w| !ordered(w))
                    .map(|w| ("reads", w, "wrote")),
                Kind::Store | Kind::Atomic => s
                    .write
                    .filter(|w| !ordered(w) && !same_value)
                    .map(|w| ("writes", w, "wrote"))
                    .or_else(|| {
                        s.reads
                            .iter()
                            .flatten()
                            .find(|r| !ordered(r))
                            .map(|r| ("writes", *r, "read"))
                    }),
            };
            if let Some(race) = conflict {
                return Err((b, race));
            }
            match kind {
                Kind::Load => {
                    if s.reads[0].is_none_or(|r| r.tid == me.tid) {
                        s.reads[0] = Some(me);
                    } else {
                        s.reads[1] = Some(me);
                    }
                }
                Kind::Store | Kind::Atomic => {
                    s.write = Some(me);
                    s.reads = [None, None];
                }
            }
            Ok(())
        });
        drop(shadow);
        if let Err((b, (what, other, other_did))) = found {
            self.fault(
                Fault::SharedRace,
                vec![u32::from(other.tid) % self.block_dim, g % self.block_dim],
                Some(b as u64),
                format!(
                    "{} {what} shared byte {b} (at {site}) while {} {other_did} it (at {}) \
                     with nothing ordering the two (a {}, a warp operation, or an mbarrier the \
                     first thread arrived at and the second waited for)",
                    self.name(g),
                    self.name(other.tid.into()),
                    self.sites.borrow().all[usize::from(other.site)],
                    if self.cluster == 1 {
                        "block_sync"
                    } else {
                        "block_sync or cluster_sync"
                    }
                ),
            );
        }
    }

    /// The block's shared and global traffic, by the bank and sector models.
    pub fn stats(&self) -> LaunchStats {
        let mut st = LaunchStats::default();
        for (key, lanes) in self.groups.borrow().iter() {
            if key.global {
                let sectors = global_sectors(lanes) as u64;
                match key.kind {
                    Kind::Load => {
                        st.global_load_sectors += sectors;
                        st.global_load_requests += 1;
                    }
                    Kind::Store => {
                        st.global_store_sectors += sectors;
                        st.global_store_requests += 1;
                    }
                    Kind::Atomic => st.global_atomic_requests += 1,
                }
            } else {
                let c = shared_wavefronts(lanes);
                match key.kind {
                    Kind::Load => {
                        st.shared_load_wavefronts += c.wavefronts as u64;
                        st.shared_load_conflicts += c.conflicts() as u64;
                        st.shared_load_requests += 1;
                    }
                    Kind::Store => {
                        st.shared_store_wavefronts += c.wavefronts as u64;
                        st.shared_store_conflicts += c.conflicts() as u64;
                        st.shared_store_requests += 1;
                    }
                    Kind::Atomic => st.shared_atomic_requests += 1,
                }
            }
        }
        st
    }

    /// Records an out-of-bounds access: `what` = (space, kind), `at` = (first element, element
    /// count, element type), `len` = the array's length.
    pub fn out_of_bounds(
        &self,
        tid: u32,
        site: Site,
        what: (&str, Kind),
        at: (u64, u32, &str),
        len: u64,
    ) {
        let ((space, kind), (index, count, elem)) = (what, at);
        self.fault(
            Fault::OutOfBounds,
            vec![tid],
            Some(index),
            format!(
                "thread {tid}: out-of-bounds {space} {} of {count} × {elem} at element {index} (at {site}); the {space} \
                 array has {len} elements",
                kind.verb()
            ),
        );
    }
}
