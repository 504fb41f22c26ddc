//! The decode-attention check: a seeded cache (stale rows and unused pages full of NaN, pages
//! shuffled, unused page-table entries −1), optionally new tokens and RoPE tables, run on a
//! device and judged against the fp64 reference — O, the LSE, and the cache's bytes after the
//! append (new rows as the contract says, every other row untouched).

use super::attention::{LSE_TOLERANCE, O_TOLERANCE};
use super::{norm_relative_error, Outcome, Rng};
use crate::attention::decode::host::{
    cache_row, decode, reference, CacheLayout, Call, Options, Rope, Shape,
};
use ck_core::device::Bf16;
use ck_core::host::{Device, LaunchError};

/// One decode problem: the shape, the cache's page size (`None`: contiguous), each sequence's
/// cached length, whether `sq` new tokens are appended, and with which rotation.
#[derive(Clone, Debug)]
pub struct DecodeCase {
    pub shape: Shape,
    pub page_size: Option<u32>,
    pub seqlens: Vec<i32>,
    pub append: bool,
    pub rope: Option<(u32, bool)>,
    pub options: Options,
}

impl DecodeCase {
    /// Keys of sequence `b` after the call.
    fn keys(&self, b: usize) -> usize {
        self.seqlens[b].max(0) as usize
            + if self.append {
                self.shape.sq as usize
            } else {
                0
            }
    }

    /// The layout: room for the longest sequence plus a spare page (or 5 spare rows), and in
    /// a paged pool three pages nobody uses.
    pub fn layout(&self) -> CacheLayout {
        let longest = (0..self.seqlens.len())
            .map(|b| self.keys(b))
            .max()
            .unwrap_or(0) as u32;
        match self.page_size {
            None => CacheLayout::Contiguous {
                capacity: longest + 5,
            },
            Some(p) => {
                let max_pages = longest.div_ceil(p) + 1;
                CacheLayout::Paged {
                    pages: self.shape.batch * max_pages + 3,
                    page_size: p,
                    max_pages,
                }
            }
        }
    }

    /// The seeded call.
    pub fn call(&self, seed: u64) -> Call {
        let s = self.shape;
        let layout = self.layout();
        let mut rng = Rng(seed.max(1));
        let mut random = |len: u64, amp: f32| -> Vec<f32> {
            (0..len)
                .map(|_| Bf16::from_f32(amp * rng.f32()).to_f32())
                .collect()
        };
        let q = random(s.q_len(), 2.0);
        let mut page_table = Vec::new();
        if let CacheLayout::Paged {
            pages,
            page_size,
            max_pages,
        } = layout
        {
            // Pages handed out in a shuffled order; the entries a sequence does not need are −1.
            let mut order: Vec<i32> = (0..pages as i32).collect();
            let mut shuffle = Rng(seed.wrapping_mul(31).max(1));
            for i in (1..order.len()).rev() {
                order.swap(i, (shuffle.bits() % (i as u64 + 1)) as usize);
            }
            let mut next = order.into_iter();
            for b in 0..s.batch as usize {
                let need = self.keys(b).div_ceil(page_size as usize);
                for p in 0..max_pages as usize {
                    page_table.push(if p < need {
                        next.next().unwrap_or(-1)
                    } else {
                        -1
                    });
                }
            }
        }
        let mut call = Call {
            q,
            k_cache: vec![f32::NAN; layout.len(&s) as usize],
            v_cache: vec![f32::NAN; layout.len(&s) as usize],
            seqlens: self.seqlens.clone(),
            page_table,
            new_kv: None,
            rope: None,
        };
        let row = (s.kv_heads * s.head_dim) as usize;
        for b in 0..s.batch as usize {
            for j in 0..self.seqlens[b].max(0) as usize {
                let at = cache_row(&call, &layout, b, j) * row;
                call.k_cache[at..at + row].copy_from_slice(&random(row as u64, 1.0));
                call.v_cache[at..at + row].copy_from_slice(&random(row as u64, 1.0));
            }
        }
        if self.append {
            call.new_kv = Some((random(s.new_kv_len(), 1.0), random(s.new_kv_len(), 1.0)));
        }
        if let Some((rotary_dim, interleaved)) = self.rope {
            let rows = (0..s.batch as usize)
                .map(|b| self.keys(b))
                .max()
                .unwrap_or(0)
                + 1;
            let half = rotary_dim as usize / 2;
            let (mut cos, mut sin) = (Vec::new(), Vec::new());
            for pos in 0..rows {
                for i in 0..half {
                    let angle = pos as f64 * 10_000f64.powf(-((2 * i) as f64) / rotary_dim as f64);
                    cos.push(angle.cos() as f32);
                    sin.push(angle.sin() as f32);
                }
            }
            let rope = Rope {
                rotary_dim,
                interleaved,
                table_rows: rows as u32,
            };
            call.rope = Some((rope, cos, sin));
        }
        call
    }
}

/// Runs `case` on `device`; the output is O's bits then the LSE's.
pub fn decode_case(device: &Device, case: &DecodeCase, seed: u64) -> Result<Outcome, LaunchError> {
    let call = case.call(seed);
    let layout = case.layout();
    let out = decode(device, &call, case.shape, layout, case.options)?;
    let (want_o, want_lse) = reference(&call, case.shape, layout, case.options);
    let o_err = norm_relative_error(&out.o, &want_o);
    let lse_bad = out.lse.iter().zip(&want_lse).position(|(&g, &w)| {
        if w == f64::NEG_INFINITY {
            g != f32::NEG_INFINITY
        } else {
            (g as f64 - w).abs() > LSE_TOLERANCE * w.abs().max(1.0) || g.is_nan()
        }
    });
    let mismatch = if o_err > O_TOLERANCE || o_err.is_nan() {
        Some(format!(
            "O: relative error {o_err:.3e} > {O_TOLERANCE:e} against fp64"
        ))
    } else if let Some(i) = lse_bad {
        Some(format!(
            "LSE of row {i}: {} against fp64 {}",
            out.lse[i], want_lse[i]
        ))
    } else {
        cache_mismatch(case, &call, &layout, &out.k_cache, &out.v_cache)
    };
    Ok(Outcome {
        output: out.o.iter().chain(&out.lse).map(|v| v.to_bits()).collect(),
        stats: out.stats,
        mismatch,
    })
}

/// The caches after the call against the contract: row `seqlens[b] + t` of sequence `b` holds
/// new token `t`'s value and its key rotated (in fp64, then rounded to bf16: within one bf16
/// step), every other row its old bits.
fn cache_mismatch(
    case: &DecodeCase,
    call: &Call,
    layout: &CacheLayout,
    k_after: &[f32],
    v_after: &[f32],
) -> Option<String> {
    let s = case.shape;
    let (hkv, d) = (s.kv_heads as usize, s.head_dim as usize);
    let mut k_want: Vec<Option<f64>> = call.k_cache.iter().map(|_| None).collect();
    let mut v_want = k_want.clone();
    if let Some((k_new, v_new)) = &call.new_kv {
        for b in 0..s.batch as usize {
            let cached = case.seqlens[b].max(0) as usize;
            for t in 0..s.sq as usize {
                for g in 0..hkv {
                    let src = ((b * s.sq as usize + t) * hkv + g) * d;
                    let dst = (cache_row(call, layout, b, cached + t) * hkv + g) * d;
                    let mut k: Vec<f64> = k_new[src..src + d].iter().map(|&x| x as f64).collect();
                    if let Some((r, cos, sin)) = &call.rope {
                        crate::attention::decode::host::rotate(&mut k, r, (cos, sin), cached + t);
                    }
                    for e in 0..d {
                        k_want[dst + e] = Some(k[e]);
                        v_want[dst + e] = Some(v_new[src + e] as f64);
                    }
                }
            }
        }
    }
    let check = |name: &str, before: &[f32], after: &[f32], want: &[Option<f64>]| {
        (0..after.len()).find_map(|i| {
            let ok = match want[i] {
                Some(w) => (after[i] as f64 - w).abs() <= w.abs() / 128.0 + 1e-30,
                None => after[i].to_bits() == Bf16::from_f32(before[i]).to_f32().to_bits(),
            };
            (!ok).then(|| {
                format!(
                    "{name} element {i} after the call is {} (expected {:?}, was {})",
                    after[i], want[i], before[i]
                )
            })
        })
    };
    check("k_cache", &call.k_cache, k_after, &k_want)
        .or_else(|| check("v_cache", &call.v_cache, v_after, &v_want))
}
