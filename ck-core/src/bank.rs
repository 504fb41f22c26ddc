//! The NVIDIA shared-memory bank model and global-memory sector count, as `ncu` counts them.
//!
//! Shared memory has 32 banks of 4 bytes: word `w = byte_address / 4` lives in bank `w % 32`.
//! A warp-level access is served in *phases* of lanes, by access width:
//!
//! | bytes per lane | phases | lanes per phase |
//! |---|---|---|
//! | ≤ 4 | 1 | 32 |
//! | 8 | 2 | 16 (lanes 0–15, 16–31) |
//! | 16 | 4 | 8 (lanes 0–7, 8–15, …) |
//!
//! A phase costs the largest number of *distinct* words that fall into one bank (lanes reading
//! the same word share it; a 16-byte access covers 4 consecutive words). `wavefronts` is the sum
//! over phases, `conflicts = wavefronts − phases` (what
//! `l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{ld,st}.sum` counts).
//!
//! ```
//! use ck_core::bank::{shared_wavefronts, LaneAccess};
//! // 32 lanes reading 4 bytes with a stride of 32 words: every lane in bank 0 -> 32-way.
//! let column: Vec<LaneAccess> = (0..32).map(|l| LaneAccess { lane: l, byte_address: l as u64 * 128, bytes: 4 }).collect();
//! assert_eq!(shared_wavefronts(&column).wavefronts, 32);
//! // Stride 33 words: 32 different banks -> conflict-free.
//! let padded: Vec<LaneAccess> = (0..32).map(|l| LaneAccess { lane: l, byte_address: l as u64 * 132, bytes: 4 }).collect();
//! assert_eq!(shared_wavefronts(&padded).conflicts(), 0);
//! ```

/// One lane's part of a warp-level access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaneAccess {
    /// Lane in the warp (0..32).
    pub lane: u32,
    /// Byte address of the first byte.
    pub byte_address: u64,
    /// Bytes accessed (1, 2, 4, 8 or 16).
    pub bytes: u32,
}

/// Cost of one warp-level shared access.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SharedCost {
    /// Wavefronts (sum over phases of the worst bank's distinct words).
    pub wavefronts: u32,
    /// Phases with at least one active lane.
    pub phases: u32,
}

impl SharedCost {
    /// Extra wavefronts caused by bank conflicts.
    pub const fn conflicts(&self) -> u32 {
        self.wavefronts - self.phases
    }
}

/// Lanes served per phase by accesses of `bytes` per lane.
pub const fn lanes_per_phase(bytes: u32) -> u32 {
    match bytes {
        16 => 8,
        8 => 16,
        _ => 32,
    }
}

/// The cost of one warp-level shared-memory access (see the module docs). Accesses of lanes
/// outside 0..32 are ignored. A `const fn`, so layouts can be checked at compile time.
pub const fn shared_wavefronts(accesses: &[LaneAccess]) -> SharedCost {
    let mut width = 0;
    let mut i = 0;
    while i < accesses.len() {
        if accesses[i].bytes > width {
            width = accesses[i].bytes;
        }
        i += 1;
    }
    let per_phase = lanes_per_phase(width);
    let mut cost = SharedCost {
        wavefronts: 0,
        phases: 0,
    };
    let mut phase = 0;
    while phase < 32 / per_phase {
        let p = worst_bank(accesses, phase, per_phase);
        if p.any {
            cost.wavefronts += p.ways;
            cost.phases += 1;
        }
        phase += 1;
    }
    cost
}

/// The worst bank of one phase: how many distinct words fall into it (its *ways*, the phase's
/// wavefronts), which bank, and the lanes that brought those words (first lane per word).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PhaseCost {
    /// Distinct words in the worst bank (0 when no lane of the phase is active).
    pub ways: u32,
    /// The worst bank (the lowest one among equals).
    pub bank: u32,
    /// Lanes whose words fall into that bank, `lanes[..ways]`.
    pub lanes: [u32; 32],
    /// Whether any lane of the phase is active.
    pub any: bool,
}

/// The worst bank of phase `phase` (lanes `phase·per_phase ..`) of a warp-level access: the
/// one model behind [`shared_wavefronts`] and the compile-time check
/// [`LdsLayout::assert_max_ways`](crate::lds::LdsLayout::assert_max_ways).
pub const fn worst_bank(accesses: &[LaneAccess], phase: u32, per_phase: u32) -> PhaseCost {
    // A phase of no lanes is one of every lane (a zero would divide below).
    let per_phase = if per_phase == 0 { 32 } else { per_phase };
    // Distinct words of this phase (at most 32 lanes × 4 words) and the first lane of each.
    let mut words = [0u64; 128];
    let mut first_lane = [0u32; 128];
    let mut n = 0;
    let mut i = 0;
    while i < accesses.len() {
        let a = accesses[i];
        if a.lane < 32 && a.lane / per_phase == phase {
            let bytes = if a.bytes == 0 { 1 } else { a.bytes };
            let mut w = a.byte_address / 4;
            let last = (a.byte_address + bytes as u64 - 1) / 4;
            while w <= last {
                let mut seen = false;
                let mut j = 0;
                while j < n {
                    if words[j] == w {
                        seen = true;
                    }
                    j += 1;
                }
                if !seen && n < words.len() {
                    words[n] = w;
                    first_lane[n] = a.lane;
                    n += 1;
                }
                w += 1;
            }
        }
        i += 1;
    }
    let mut per_bank = [0u32; 32];
    let (mut ways, mut bank) = (0, 0);
    let mut j = 0;
    while j < n {
        let b = (words[j] % 32) as usize;
        per_bank[b] += 1;
        if per_bank[b] > ways || (per_bank[b] == ways && (b as u32) < bank) {
            ways = per_bank[b];
            bank = b as u32;
        }
        j += 1;
    }
    let mut lanes = [0u32; 32];
    let mut k = 0;
    j = 0;
    while j < n {
        if words[j] % 32 == bank as u64 && k < 32 {
            lanes[k] = first_lane[j];
            k += 1;
        }
        j += 1;
    }
    PhaseCost {
        ways,
        bank,
        lanes,
        any: n > 0,
    }
}

/// Distinct 32-byte sectors touched by one warp-level global access.
pub fn global_sectors(accesses: &[LaneAccess]) -> u32 {
    let mut sectors = [0u64; 64];
    let mut n = 0;
    for a in accesses {
        let first = a.byte_address / 32;
        let last = (a.byte_address + a.bytes.max(1) as u64 - 1) / 32;
        for s in first..=last {
            if !sectors[..n].contains(&s) && n < sectors.len() {
                sectors[n] = s;
                n += 1;
            }
        }
    }
    n as u32
}
