//! Decode attention on the emulator against the fp64 reference (`checks::decode_case`: O
//! norm-wise within 1e-2, every LSE within 1e-3, −∞ exactly where a row sees no key, the cache's
//! bytes after the append as the contract says): contiguous and paged caches, every `sq` from 1
//! to 16, cache lengths 0, 1, 17, 130 and 1000, GQA, ragged batches, splits, append with both
//! RoPE styles; bad calls are errors with their rule.

use ck_core::host::Device;
use ck_kernels::attention::decode::host::{decode, reference, CacheLayout, Call, Options, Shape};
use ck_kernels::checks::{decode_case, DecodeCase};

fn shape(batch: u32, heads: u32, kv_heads: u32, sq: u32, head_dim: u32) -> Shape {
    Shape {
        batch,
        heads,
        kv_heads,
        sq,
        head_dim,
    }
}

const CAUSAL: Options = Options {
    causal: true,
    scale: None,
    splits: None,
};

fn check(case: DecodeCase) {
    let seed = case.seqlens.iter().map(|&l| l as u64).sum::<u64>() * 7 + case.shape.sq as u64;
    let outcome = decode_case(&Device::emulator(), &case, seed).unwrap();
    assert!(
        outcome.mismatch.is_none(),
        "{case:?}: {:?}",
        outcome.mismatch
    );
}

fn case(shape: Shape, page_size: Option<u32>, seqlens: &[i32]) -> DecodeCase {
    DecodeCase {
        shape,
        page_size,
        seqlens: seqlens.to_vec(),
        append: false,
        rope: None,
        options: CAUSAL,
    }
}

/// The lengths of the issue (0, 1, 17, 130, 1000) as one ragged batch, contiguous and in pages
/// of 16 and 64, one new token against GQA 4/2, causal and not, both head dims.
#[test]
fn ragged_lengths_contiguous_and_paged() {
    for head_dim in [64, 128] {
        for page_size in [None, Some(16), Some(64)] {
            for causal in [true, false] {
                let mut c = case(
                    shape(5, 4, 2, 1, head_dim),
                    page_size,
                    &[0, 1, 17, 130, 1000],
                );
                c.options.causal = causal;
                check(c);
            }
        }
    }
}

/// Every number of new tokens from 1 to 16 (causal among themselves), appended, against a
/// 130-key cache: up to 8 heads × 16 tokens = 128 rows, two row tiles of 64.
#[test]
fn every_sq_from_1_to_16_appended() {
    for sq in 1..=16 {
        let mut c = case(shape(2, 8, 1, sq, 64), Some(16), &[130, 17]);
        c.append = true;
        check(c);
    }
}

/// A key range split among 1, 3 and 17 items per sequence (each writing two partial results;
/// one split's two merged in the block, no scratch), more splits than a short sequence has
/// tiles, with row tiles merged in the kernel (4 heads × 2 tokens: 8 rows) and by the combine
/// launch (8 × 2: 16 rows). At 17, 4352 keys are 34 tiles, two a split: the last split's two
/// slots hold keys, past the 32 the combine loads at once and the 16 of the kernel's merge.
#[test]
fn forced_splits_agree_with_the_reference() {
    use ck_kernels::attention::decode::host::merges_in_kernel;
    for heads in [4, 8] {
        let s = shape(3, heads, 1, 2, 128);
        assert_eq!(merges_in_kernel(&s), heads == 4);
        for splits in [1, 3, 17] {
            let long = if splits == 17 { 4352 } else { 1000 };
            let mut c = case(s, None, &[long, 129, 5]);
            c.options.splits = Some(splits);
            check(c);
        }
    }
}

/// Append with RoPE, both styles, the rotary dim below the head dim, positions not starting at
/// 0, paged and contiguous: O, and the new rows of the cache (rotated keys, plain values).
#[test]
fn append_with_rope_both_styles() {
    for (rotary_dim, interleaved) in [(64, false), (32, true), (128, false)] {
        for page_size in [None, Some(64)] {
            let mut c = case(shape(2, 4, 2, 3, 128), page_size, &[40, 200]);
            c.append = true;
            c.rope = Some((rotary_dim, interleaved));
            check(c);
        }
    }
}

/// Sequences with no key at all (empty cache, nothing appended): O = 0 and LSE = −∞, beside a
/// sequence that has keys.
#[test]
fn a_sequence_without_keys_gives_zeros() {
    check(case(shape(3, 2, 2, 2, 64), Some(32), &[0, 50, 0]));
}

/// A length out of range — past the cache's capacity, or negative — cannot be attended: that
/// sequence's rows are NaN (the lengths live on the device, so the call cannot refuse them), the
/// others are right; with new tokens, a negative length appends nothing.
#[test]
fn a_length_out_of_range_gives_nan() {
    let s = shape(3, 2, 1, 1, 64);
    let layout = CacheLayout::Contiguous { capacity: 16 };
    let row = 2 * 64; // one sequence's O: 2 heads × 1 token × 64
    for append in [false, true] {
        let call = Call {
            q: vec![0.5; s.q_len() as usize],
            k_cache: vec![0.25; layout.len(&s) as usize],
            v_cache: vec![1.0; layout.len(&s) as usize],
            // With the appended token, 16 keys fill the capacity exactly; 17 pass it.
            seqlens: if append {
                vec![10, 16, -3]
            } else {
                vec![10, 17, -3]
            },
            // Sequence 2's new token is 7s: written anywhere, it would show in its cache rows.
            new_kv: append.then(|| {
                let new = |x: f32| [vec![x; 2 * 64], vec![7.0; 64]].concat();
                (new(0.25), new(1.0))
            }),
            ..Call::default()
        };
        let out = decode(&Device::emulator(), &call, s, layout, CAUSAL).unwrap();
        // Equal scores over values that are all 1: O = 1, LSE = ln(keys) + the common score.
        assert!(out.o[..row].iter().all(|&x| x == 1.0), "{:?}", &out.o[..4]);
        assert!(out.lse[..2].iter().all(|x| x.is_finite()));
        assert!(out.o[row..].iter().all(|x| x.is_nan()), "append {append}");
        assert!(out.lse[2..].iter().all(|x| x.is_nan()), "append {append}");
        // Sequence 2's cache rows (16 × 64 from 2 · 16 · 64) are as they were.
        let third = 2 * 16 * 64..3 * 16 * 64;
        assert!(out.k_cache[third.clone()].iter().all(|&x| x == 0.25));
        assert!(out.v_cache[third].iter().all(|&x| x == 1.0));
        // The reference, from the contract, says the same.
        let (o, lse) = reference(&call, s, layout, CAUSAL);
        assert!(o[row..].iter().all(|x| x.is_nan()) && lse[2..].iter().all(|x| x.is_nan()));
        assert!(o[..row].iter().all(|&x| (x - 1.0).abs() < 1e-12));
    }
}

/// Bad calls: their rule, and nothing launched.
#[test]
fn bad_calls_are_errors_with_their_rule() {
    let s = shape(1, 4, 2, 1, 64);
    let call = |layout: CacheLayout, s: Shape| Call {
        q: vec![0.0; s.q_len() as usize],
        k_cache: vec![0.0; layout.len(&s) as usize],
        v_cache: vec![0.0; layout.len(&s) as usize],
        seqlens: vec![1; s.batch as usize],
        page_table: vec![0; layout.table_len(s.batch) as usize],
        ..Call::default()
    };
    let run = |layout, s: Shape, options| {
        decode(&Device::emulator(), &call(layout, s), s, layout, options)
            .unwrap_err()
            .rule()
            .name()
    };
    let contiguous = CacheLayout::Contiguous { capacity: 8 };
    let paged = |page_size| CacheLayout::Paged {
        pages: 2,
        page_size,
        max_pages: 1,
    };
    assert_eq!(run(paged(24), s, CAUSAL), "shape-unsupported");
    assert_eq!(run(paged(8), s, CAUSAL), "shape-unsupported");
    assert_eq!(
        run(contiguous, shape(1, 4, 2, 1, 96), CAUSAL),
        "head-dim-unsupported"
    );
    assert_eq!(run(contiguous, shape(1, 4, 3, 1, 64), CAUSAL), "gqa-heads");
    let zero_splits = Options {
        splits: Some(0),
        ..CAUSAL
    };
    assert_eq!(run(contiguous, s, zero_splits), "argument-size");
    let bad_scale = Options {
        scale: Some(-1.0),
        ..CAUSAL
    };
    assert_eq!(run(contiguous, s, bad_scale), "bad-scale");
}

/// A page-table entry the call reads must name a page of the pool (on the host, where `decode`
/// has the table; a kernel cannot refuse one); entries past a sequence's pages are never read.
#[test]
fn pages_outside_the_pool_are_refused_where_the_table_is_read() {
    let s = shape(2, 2, 1, 1, 64);
    let layout = CacheLayout::Paged {
        pages: 4,
        page_size: 16,
        max_pages: 3,
    };
    let call = |seqlens: Vec<i32>, page_table: Vec<i32>, append: bool| Call {
        q: vec![0.0; s.q_len() as usize],
        k_cache: vec![0.0; layout.len(&s) as usize],
        v_cache: vec![1.0; layout.len(&s) as usize],
        seqlens,
        page_table,
        new_kv: append.then(|| (vec![0.0; 2 * 64], vec![1.0; 2 * 64])),
        ..Call::default()
    };
    let run = |c: Call| decode(&Device::emulator(), &c, s, layout, CAUSAL);
    // Sequence 0 holds 17 keys (pages 0 and 1 of its row), sequence 1 holds 16 (page 0 only):
    // the −1 and 9 after them are never read.
    let fine = run(call(vec![17, 16], vec![0, 1, -1, 2, 9, -1], false)).unwrap();
    assert!(fine.o.iter().all(|&x| x == 1.0));
    for (seqlens, table, append, at) in [
        (
            vec![17, 16],
            vec![0, 4, -1, 2, 9, -1],
            false,
            "page_table[0][1] is 4",
        ),
        (
            vec![17, 16],
            vec![0, 1, -1, -2, 9, -1],
            false,
            "page_table[1][0] is -2",
        ),
        // The appended token is key 16 of sequence 1: its page 1 is read too.
        (
            vec![17, 16],
            vec![0, 1, -1, 2, 9, -1],
            true,
            "page_table[1][1] is 9",
        ),
    ] {
        let e = run(call(seqlens, table, append)).unwrap_err();
        assert_eq!(e.rule().name(), "bad-page-table");
        assert!(e.message().starts_with(at), "{}", e.message());
    }
    // A length out of range reads no page (its rows are NaN): its entries are not checked.
    let nan = run(call(vec![17, -1], vec![0, 1, -1, 7, 7, 7], false)).unwrap();
    assert!(nan.o[..128].iter().all(|&x| x == 1.0) && nan.o[128..].iter().all(|x| x.is_nan()));
}

/// One persistent block (an emulator with one worker) walks every item: its Q buffers and
/// key/value stages turn over many times, across sequences of different lengths.
#[test]
fn one_persistent_block_walks_every_item() {
    let device = Device::Emulator { workers: 1 };
    let c = case(shape(5, 8, 4, 1, 128), None, &[1000, 700, 3, 1000, 0]);
    let outcome = decode_case(&device, &c, 3).unwrap();
    assert!(outcome.mismatch.is_none(), "{:?}", outcome.mismatch);
}

/// `launch` refuses a split count of 0 asked for (its scratch would be empty while the kernel
/// writes a split's partial results).
#[test]
fn launch_refuses_zero_splits() {
    use ck_core::device::Bf16;
    use ck_core::host::DeviceBuffer;
    use ck_kernels::attention::decode::host::{launch, CacheBuffers, Scratch};
    let device = Device::emulator();
    let s = shape(1, 2, 1, 1, 64);
    let layout = CacheLayout::Contiguous { capacity: 8 };
    let bf = |n: u64| DeviceBuffer::<Bf16>::zeros(&device, n as usize).unwrap();
    let f32s = |n: usize| DeviceBuffer::<f32>::zeros(&device, n).unwrap();
    let (q, mut k, mut v) = (bf(s.q_len()), bf(layout.len(&s)), bf(layout.len(&s)));
    let seqlens = DeviceBuffer::from_slice(&device, &[3i32]).unwrap();
    let (mut o, mut lse, mut o_part, mut lse_part) = (bf(s.q_len()), f32s(2), f32s(0), f32s(0));
    let err = launch(
        &device,
        &q,
        CacheBuffers {
            k: &mut k,
            v: &mut v,
            seqlens: &seqlens,
            page_table: None,
        },
        None,
        (&mut o, &mut lse),
        Scratch {
            o_part: &mut o_part,
            lse_part: &mut lse_part,
            q_rotated: None,
        },
        (s, layout),
        Options {
            splits: Some(0),
            ..CAUSAL
        },
    )
    .unwrap_err();
    assert_eq!(err.rule().name(), "argument-size");
}

/// The items of `tiles` (key tiles per sequence) cut into chunks of `c`, `per` items a split.
fn items_of(tiles: &[u64], per: u64) -> impl Fn(u32) -> u64 + '_ {
    move |c| {
        tiles
            .iter()
            .map(|t| t.div_ceil(c as u64).max(1))
            .sum::<u64>()
            * per
    }
}

/// The balanced chunk on the bench's cases (132 SMs, 8 items per split; worked by hand): one
/// long sequence fills one wave, not one and a bit; a batch that fills the machine unsplit
/// stays unsplit.
#[test]
fn the_balanced_chunk_fills_whole_waves() {
    use ck_kernels::attention::decode::schedule::balanced_chunk;
    let chunk = |tiles: &[u64]| {
        let work = tiles.iter().sum::<u64>() * 8;
        balanced_chunk(work, tiles.len() as u64 * 8, 132, items_of(tiles, 8))
    };
    // B1 × 128k: the share 63 makes 17 splits, 136 items; 16 splits fit one wave at 67.
    assert_eq!(chunk(&[1024]), 67);
    assert_eq!(items_of(&[1024], 8)(67), 128);
    // B16 × 2k: 128 items unsplit, one wave.
    assert_eq!(chunk(&[16; 16]), 16);
    // B64 × 2k: 512 items unsplit (4 waves); the share, half a block's work, is 32 tiles.
    assert_eq!(chunk(&[16; 64]), 32);
    // B16 × 32k: the share 249 makes 256 items, two waves, which fit at ⌈32768 / 136⌉ = 241.
    assert_eq!(chunk(&[256; 16]), 241);
    assert_eq!(items_of(&[256; 16], 8)(241), 256);
}

/// Over random batches: the chunk never needs more waves of items than one block's share of
/// the work (half a share when the batch alone passes a wave) would.
#[test]
fn the_balanced_chunk_never_adds_a_wave() {
    use ck_kernels::attention::decode::schedule::balanced_chunk;
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = |n: u64| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) % n
    };
    for _ in 0..2000 {
        let batch = 1 + next(40) as usize;
        let tiles: Vec<u64> = (0..batch).map(|_| next(2000)).collect();
        let per = [1, 2, 4, 8, 16][next(5) as usize];
        let grid = [1, 2, 16, 132][next(4) as usize];
        let (work, base) = (tiles.iter().sum::<u64>() * per, batch as u64 * per);
        let items = items_of(&tiles, per);
        let c = balanced_chunk(work, base, grid, &items);
        let shares = if base > grid { 2 * grid } else { grid };
        let share = work.div_ceil(shares).max(1) as u32;
        let waves = |c: u32| items(c).div_ceil(grid);
        assert!(
            c >= 1 && waves(c) <= waves(share),
            "{tiles:?} per {per} grid {grid}: {c}"
        );
    }
}
