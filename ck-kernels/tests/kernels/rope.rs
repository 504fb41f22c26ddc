//! `rope::host` on the emulator: Q, K and V in attention's layout, the query and key heads
//! rotated, against an fp64 rotation written here — both styles, a rotary dim below the head
//! dim, tables per position and per token (positions not starting at 0), bf16 and f32; the
//! backward as the transpose of that map; and the shape errors.

use ck_core::device::Bf16;
use ck_core::host::Device;
use ck_kernels::checks::Rng;
use ck_kernels::gemm::linear;
use ck_kernels::rope::host::{rope_qkv, rope_qkv_backward, RopeElement, Shape};

/// cos and sin `[rows, R/2]` of `pos(row) · θ_i`, θ_i = 10000^(−2i/R).
fn tables(rows: u32, rotary: u32, pos: impl Fn(u32) -> f64) -> (Vec<f32>, Vec<f32>) {
    let half = rotary / 2;
    let angle = |r: u32, i: u32| pos(r) * 10000f64.powf(-2.0 * i as f64 / rotary as f64);
    let all = |f: fn(f64) -> f64| -> Vec<f32> {
        (0..rows * half)
            .map(|x| f(angle(x / half, x % half)) as f32)
            .collect()
    };
    (all(f64::cos), all(f64::sin))
}

/// The expected Q, K, V `[B, heads, S, D]` from the definition (module docs of `rope`).
fn expected(qkv: &[f32], (cos, sin): (&[f32], &[f32]), s: &Shape) -> [Vec<f64>; 3] {
    let (d, r, half) = (
        s.head_dim as usize,
        s.rotary_dim as usize,
        s.rotary_dim as usize / 2,
    );
    let all = (s.heads + 2 * s.kv_heads) as usize;
    let mut out = [
        vec![0.0; s.batch as usize * s.heads as usize * s.seq as usize * d],
        vec![0.0; s.batch as usize * s.kv_heads as usize * s.seq as usize * d],
        vec![0.0; s.batch as usize * s.kv_heads as usize * s.seq as usize * d],
    ];
    for t in 0..s.tokens() as usize {
        let (b, pos) = (t / s.seq as usize, t % s.seq as usize);
        let row = t % s.table_rows as usize;
        for j in 0..all {
            let x = |e: usize| qkv[(t * all + j) * d + e] as f64;
            let (which, head, count) = if j < s.heads as usize {
                (0, j, s.heads as usize)
            } else if j < (s.heads + s.kv_heads) as usize {
                (1, j - s.heads as usize, s.kv_heads as usize)
            } else {
                (2, j - (s.heads + s.kv_heads) as usize, s.kv_heads as usize)
            };
            for e in 0..d {
                let v = if which == 2 || e >= r {
                    x(e)
                } else if s.interleaved {
                    let (c, sn) = (
                        cos[row * half + e / 2] as f64,
                        sin[row * half + e / 2] as f64,
                    );
                    if e % 2 == 0 {
                        x(e) * c - x(e + 1) * sn
                    } else {
                        x(e) * c + x(e - 1) * sn
                    }
                } else if e < half {
                    let (c, sn) = (cos[row * half + e] as f64, sin[row * half + e] as f64);
                    x(e) * c - x(e + half) * sn
                } else {
                    let (c, sn) = (
                        cos[row * half + e - half] as f64,
                        sin[row * half + e - half] as f64,
                    );
                    x(e) * c + x(e - half) * sn
                };
                out[which][((b * count + head) * s.seq as usize + pos) * d + e] = v;
            }
        }
    }
    out
}

fn check<T: RopeElement>(shape: Shape, first_position: u32, tol: f64) {
    let device = Device::Emulator { workers: 2 };
    let (qkv_len, ..) = shape.lens();
    let mut rng = Rng(0x40e ^ qkv_len);
    let qkv: Vec<f32> = (0..qkv_len)
        .map(|_| T::from_f32(2.0 * rng.f32()).to_f32())
        .collect();
    let seq = shape.seq;
    let (cos, sin) = tables(shape.table_rows, shape.rotary_dim, |row| {
        (first_position + row % seq) as f64
    });
    let ([q, k, v], _) = rope_qkv::<T>(&device, (&qkv, &cos, &sin), &shape).unwrap();
    let want = expected(&qkv, (&cos, &sin), &shape);
    for (name, got, want) in [
        ("q", &q, &want[0]),
        ("k", &k, &want[1]),
        ("v", &v, &want[2]),
    ] {
        assert_eq!(got.len(), want.len());
        for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
            assert!(
                (g as f64 - w).abs() <= tol * (w.abs() + 1.0),
                "{shape:?}: {name}[{i}] = {g}, want {w}"
            );
        }
    }
}

fn shape(batch: u32, seq: u32, heads: (u32, u32), dims: (u32, u32), interleaved: bool) -> Shape {
    Shape {
        batch,
        seq,
        heads: heads.0,
        kv_heads: heads.1,
        head_dim: dims.0,
        rotary_dim: dims.1,
        table_rows: seq,
        interleaved,
    }
}

#[test]
fn half_split_rotates_q_and_k_and_lays_out_q_k_v() {
    // GQA 4/2, head dim 128 whole and 64 of 128 rotated; a table per position, then per token
    // (positions from 5 in every sequence: the second sequence's rows are its own).
    check::<f32>(shape(2, 5, (4, 2), (128, 128), false), 0, 1e-6);
    check::<f32>(shape(2, 5, (4, 2), (128, 64), false), 0, 1e-6);
    let per_token = Shape {
        table_rows: 10,
        ..shape(2, 5, (4, 2), (64, 32), false)
    };
    check::<f32>(per_token, 5, 1e-6);
    check::<Bf16>(shape(1, 7, (2, 1), (128, 128), false), 3, 1.0 / 128.0);
}

#[test]
fn interleaved_pairs_rotate_in_place() {
    check::<f32>(shape(2, 3, (2, 2), (64, 64), true), 0, 1e-6);
    check::<f32>(shape(1, 6, (3, 1), (128, 48), true), 11, 1e-6);
    check::<Bf16>(shape(1, 4, (2, 2), (64, 32), true), 0, 1.0 / 128.0);
}

/// The backward of a linear map is its transpose: `⟨forward(x), g⟩ = ⟨x, backward(g)⟩` for every
/// `x` and `g` — here with the forward computed by the fp64 rotation above, random `x` and `g`,
/// and the kernel's backward (`dqkv` in the projection's layout).
fn check_transpose<T: RopeElement>(shape: Shape, first_position: u32, tol: f64) {
    let device = Device::Emulator { workers: 2 };
    let (qkv_len, q_len, kv_len, _) = shape.lens();
    let mut rng = Rng(0xb4c ^ qkv_len);
    let mut values = |len: u64| -> Vec<f32> {
        (0..len)
            .map(|_| T::from_f32(2.0 * rng.f32()).to_f32())
            .collect()
    };
    let seq = shape.seq;
    let (cos, sin) = tables(shape.table_rows, shape.rotary_dim, |row| {
        (first_position + row % seq) as f64
    });
    let g = [values(q_len), values(kv_len), values(kv_len)];
    let (dqkv, _) =
        rope_qkv_backward::<T>(&device, ([&g[0], &g[1], &g[2]], &cos, &sin), &shape).unwrap();
    for _ in 0..3 {
        let x = values(qkv_len);
        let fwd = expected(&x, (&cos, &sin), &shape);
        let terms = fwd.iter().zip(&g).flat_map(|(f, g)| f.iter().zip(g));
        let (lhs, size) = terms.fold((0.0, 0.0), |(s, a), (f, g)| {
            (s + f * *g as f64, a + (f * *g as f64).abs())
        });
        let rhs: f64 = x
            .iter()
            .zip(&dqkv)
            .map(|(a, b)| *a as f64 * *b as f64)
            .sum();
        assert!(
            (lhs - rhs).abs() <= tol * size,
            "{shape:?}: ⟨f(x), g⟩ = {lhs}, ⟨x, b(g)⟩ = {rhs}"
        );
    }
}

#[test]
fn the_backward_is_the_transpose_of_the_rotation_and_the_layout() {
    check_transpose::<f32>(shape(2, 5, (4, 2), (128, 64), false), 0, 1e-6);
    let per_token = Shape {
        table_rows: 10,
        ..shape(2, 5, (4, 2), (64, 32), false)
    };
    check_transpose::<f32>(per_token, 5, 1e-6);
    check_transpose::<f32>(shape(1, 6, (3, 1), (128, 48), true), 11, 1e-6);
    check_transpose::<Bf16>(shape(1, 7, (2, 1), (128, 128), false), 3, 1.0 / 128.0);
}

#[test]
fn shapes_the_kernel_cannot_run_are_refused() {
    let rule = |s: Shape| s.check().unwrap_err().rule();
    assert_eq!(
        rule(shape(1, 4, (2, 1), (256, 128), false)),
        "shape-unsupported"
    );
    assert_eq!(
        rule(shape(1, 4, (2, 1), (128, 40), false)),
        "shape-unsupported"
    );
    assert_eq!(
        rule(shape(1, 4, (2, 1), (64, 40), true)),
        "shape-unsupported"
    );
    let odd_table = Shape {
        table_rows: 3,
        ..shape(2, 4, (2, 1), (64, 64), false)
    };
    assert_eq!(rule(odd_table), "shape-mismatch");
    let device = Device::emulator();
    let s = shape(1, 4, (2, 1), (64, 64), false);
    let (cos, sin) = tables(4, 64, |r| r as f64);
    let e = rope_qkv::<f32>(&device, (&[0.0; 10], &cos, &sin), &s).unwrap_err();
    assert!(e.to_string().contains("`qkv` has 10 elements"), "{e}");
}

/// `linear::rope_projection` (the QKV GEMM with RoPE in its epilogue): C `[T, (H + 2·Hkv)·D]`
/// against the plain product in fp64 (of the bf16-rounded operands) rotated by [`expected`],
/// head row by head row.
fn check_projection(shape: Shape, k: u32, first_position: u32) {
    let device = Device::Emulator { workers: 2 };
    let (qkv_len, ..) = shape.lens();
    let (t, n) = (
        shape.tokens() as usize,
        qkv_len as usize / shape.tokens() as usize,
    );
    let mut rng = Rng(0x9e0 ^ qkv_len ^ k as u64);
    let mut values = |len: usize| -> Vec<f32> {
        (0..len)
            .map(|_| Bf16::from_f32(rng.f32() - 0.5).to_f32())
            .collect()
    };
    let (x, w) = (values(t * k as usize), values(n * k as usize));
    let seq = shape.seq;
    let (cos, sin) = tables(shape.table_rows, shape.rotary_dim, |row| {
        (first_position + row % seq) as f64
    });
    let (c, _) = linear::rope_projection(&device, (&x, &w), k, (&cos, &sin), &shape).unwrap();
    let product: Vec<f32> = (0..t * n)
        .map(|i| {
            let (r, j) = (i / n, i % n);
            let dot: f64 = (0..k as usize)
                .map(|e| x[r * k as usize + e] as f64 * w[j * k as usize + e] as f64)
                .sum();
            dot as f32
        })
        .collect();
    // Both in attention's layout: the kernel's C moved there unrotated (the rotation at 0°).
    let want = expected(&product, (&cos, &sin), &shape);
    let (ones, zeros) = (vec![1.0; cos.len()], vec![0.0; sin.len()]);
    let got = expected(&c, (&ones, &zeros), &shape);
    for (name, got, want) in [
        ("q", &got[0], &want[0]),
        ("k", &got[1], &want[1]),
        ("v", &got[2], &want[2]),
    ] {
        for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
            assert!(
                (g - w).abs() <= (w.abs() + 0.05) / 128.0,
                "{shape:?}, K = {k}: {name}[{i}] = {g}, want {w}"
            );
        }
    }
}

#[test]
fn the_projection_rotates_q_and_k_in_its_epilogue() {
    // Half-split: head dim 64 whole, 128 whole and 64 of 128 (GQA 4/2, 2/1); two row tiles
    // (150 tokens) with a table per position; a table per token from position 5.
    check_projection(shape(2, 5, (4, 2), (64, 64), false), 24, 0);
    check_projection(shape(3, 50, (2, 1), (128, 128), false), 40, 0);
    let per_token = Shape {
        table_rows: 10,
        ..shape(2, 5, (2, 1), (128, 64), false)
    };
    check_projection(per_token, 16, 5);
    // Interleaved, a rotary dim that splits a slice (48 of 64), and head dim 128 whole.
    check_projection(shape(1, 6, (3, 1), (64, 48), true), 8, 11);
    check_projection(shape(2, 3, (2, 1), (128, 128), true), 16, 0);
}

#[test]
fn the_projection_refuses_what_its_epilogue_cannot_rotate() {
    let device = Device::emulator();
    let s = shape(1, 4, (2, 1), (64, 32), false);
    let (cos, sin) = tables(4, 32, |r| r as f64);
    let (x, w) = (vec![0.0; 4 * 8], vec![0.0; 4 * 64 * 8]);
    let e = linear::rope_projection(&device, (&x, &w), 8, (&cos, &sin), &s).unwrap_err();
    assert_eq!(e.rule(), "shape-unsupported");
    assert!(e.to_string().contains("use rope_qkv"), "{e}");
    let s = shape(1, 4, (2, 1), (64, 64), false);
    let e = linear::rope_projection(&device, (&x, &w[..8]), 8, (&cos, &sin), &s).unwrap_err();
    assert!(e.to_string().contains("`weight` has 8 elements"), "{e}");
}

mod reference {
    use ck_core::host::Device;
    use ck_kernels::op::norm_relative_error;
    use ck_kernels::rope::describe::*;

    /// The fp64 reference's backward undoes its forward: rotating by θ then by −θ gives the
    /// projection back (the rotation is orthogonal), here through the stacked layout.
    #[test]
    fn the_references_backward_undoes_its_forward() {
        let sh = shape(&cases(None)[0]);
        let (cos, sin) = angles(&sh);
        let x: Vec<f32> = (0..sh.lens().0)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0)
            .collect();
        let forward: Vec<f32> = rotated(&x, (&cos, &sin), &sh)
            .iter()
            .map(|&v| v as f32)
            .collect();
        let back = rotated_back(&forward, (&cos, &sin), &sh);
        let err = norm_relative_error(&x, &back);
        assert!(err < 1e-6, "{err}");
    }

    /// Tables of neither S nor B·S rows are refused, naming both counts.
    #[test]
    fn tables_of_another_length_are_refused() {
        let device = Device::emulator();
        let out = ck_kernels::op::HostCall::new(&ROPE_QKV)
            .input("qkv", &[0.0; 2 * 3 * 3 * 16], &[2, 3, 3, 16])
            .input("cos", &[1.0; 4 * 8], &[4, 8])
            .input("sin", &[0.0; 4 * 8], &[4, 8])
            .scalar("heads", 1.0)
            .scalar("kv_heads", 1.0)
            .run(&device);
        let err = out.err().unwrap().to_string();
        assert!(
            err.contains("one per position of a sequence (3) or one per token (6)"),
            "{err}"
        );
    }
}
