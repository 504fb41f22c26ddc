//! The race detector's shadow of a block's shared memory: for each byte, who wrote it last and
//! up to two threads that read it since ([`ByteStamps`]), kept once per 16-byte chunk while the
//! chunk's bytes agree.
//!
//! Most shared traffic moves whole 16-byte chunks (vector loads and stores, TMA, an MMA's
//! operand rows), so a chunk is one entry until an access covers part of it; it is then split
//! into its bytes' entries, and whole again when an access covers it and they agree. Worked example: a 16-byte store at
//! byte 32 stamps chunk 2 once; a 2-byte load at byte 36 splits it (bytes 32..48 take the
//! chunk's stamps, then bytes 36 and 37 record the read); a 16-byte store at 32 then checks the
//! 16 bytes one by one and, finding no race, leaves them equal: chunk 2 is one entry again.
//! Per byte throughout, the three stamps were half of an emulated GEMM's time (their loads
//! missed the cache: 48 bytes of them per shared byte then).

use std::prelude::rust_2021::*;

use std::num::NonZeroU32;
use std::ops::Range;

/// Who accessed a byte (its cluster id: below 8 · 1024 threads), when (the thread's own clock
/// then, from 1: see `Clocks`) and where (a number from the block's `Sites`), in 8 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stamp {
    pub clock: NonZeroU32,
    pub tid: u16,
    pub site: u16,
}

/// A byte's last write and up to two reads since, by different threads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ByteStamps {
    pub write: Option<Stamp>,
    pub reads: [Option<Stamp>; 2],
}

const CHUNK: usize = 16;

/// The stamps of `len` shared bytes.
pub(crate) struct Shadow {
    len: usize,
    /// Per chunk: its bytes' stamps while `split` is false.
    chunks: Vec<ByteStamps>,
    split: Vec<bool>,
    /// Per byte: its stamps where its chunk is split.
    bytes: Vec<ByteStamps>,
}

impl Shadow {
    pub fn new(len: usize) -> Shadow {
        let chunks = len.div_ceil(CHUNK);
        Shadow {
            len,
            chunks: vec![ByteStamps::default(); chunks],
            split: vec![false; chunks],
            // Zeroed pages: those of chunks never split are never touched.
            bytes: vec![ByteStamps::default(); len],
        }
    }

    /// Calls `f(byte, stamps)` for bytes `range` (in bounds) in order, once for each whole
    /// chunk the range covers (`byte` its first covered byte), until `f` returns an error.
    pub fn visit<E>(
        &mut self,
        range: Range<usize>,
        mut f: impl FnMut(usize, &mut ByteStamps) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut b = range.start;
        while b < range.end {
            let c = b / CHUNK;
            let chunk = c * CHUNK..(c * CHUNK + CHUNK).min(self.len);
            let end = range.end.min(chunk.end);
            let whole = b == chunk.start && end == chunk.end;
            if whole && !self.split[c] {
                f(b, &mut self.chunks[c])?;
            } else {
                if !self.split[c] {
                    self.bytes[chunk.clone()].fill(self.chunks[c]);
                    self.split[c] = true;
                }
                for byte in b..end {
                    f(byte, &mut self.bytes[byte])?;
                }
                let first = self.bytes[chunk.start];
                if whole && self.bytes[chunk].iter().all(|s| *s == first) {
                    self.chunks[c] = first;
                    self.split[c] = false;
                }
            }
            b = end;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp(tid: u16) -> Option<Stamp> {
        Some(Stamp {
            clock: NonZeroU32::MIN,
            tid,
            site: 0,
        })
    }

    /// Every access through the shadow sees, byte for byte, what a plain per-byte array sees:
    /// a sequence of writes and reads of mixed sizes and alignments (41 bytes: the last chunk
    /// short), each byte's stamps compared after every access.
    #[test]
    fn chunks_agree_with_a_byte_by_byte_shadow() {
        let len = 41;
        let mut shadow = Shadow::new(len);
        let mut plain = vec![ByteStamps::default(); len];
        let apply = |s: &mut ByteStamps, tid: u16, write: bool| {
            if write {
                *s = ByteStamps {
                    write: stamp(tid),
                    reads: [None, None],
                };
            } else if s.reads[0].is_none_or(|r| r.tid == tid) {
                s.reads[0] = stamp(tid);
            } else {
                s.reads[1] = stamp(tid);
            }
        };
        let mut state = 7u32;
        // Under miri (CI runs ck-core's unit tests there) a step costs ~1000× more.
        for step in 0..if cfg!(miri) { 60 } else { 2000 } {
            state = state.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            let start = (state >> 8) as usize % len;
            let size = [1, 2, 4, 8, 16, 32][(state >> 20) as usize % 6].min(len - start);
            let (tid, write) = ((state >> 24) as u16 % 3, state >> 30 == 0);
            let mut seen = Vec::new();
            shadow
                .visit(start..start + size, |b, s| {
                    seen.push(b);
                    apply(s, tid, write);
                    Ok::<(), ()>(())
                })
                .unwrap();
            for s in &mut plain[start..start + size] {
                apply(s, tid, write);
            }
            assert_eq!(seen[0], start, "step {step}");
            for (b, want) in plain.iter().enumerate() {
                let c = b / CHUNK;
                let got = if shadow.split[c] {
                    shadow.bytes[b]
                } else {
                    shadow.chunks[c]
                };
                assert_eq!(got, *want, "step {step}, byte {b}");
            }
        }
    }

    /// `f`'s error stops the visit at the byte it was called for: bytes 4..16 one by one
    /// (chunk 0 partly covered), then chunk 1 whole, from byte 16, which fails.
    #[test]
    fn an_error_stops_at_its_byte() {
        let mut shadow = Shadow::new(64);
        let mut calls = Vec::new();
        let r = shadow.visit(4..40, |b, _| {
            calls.push(b);
            if b == 16 {
                Err(b)
            } else {
                Ok(())
            }
        });
        assert_eq!(r, Err(16));
        assert_eq!(calls, (4..17).collect::<Vec<_>>());
    }
}
