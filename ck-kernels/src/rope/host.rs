//! Host side of [`super`]: the problem's checks, the launch on device buffers, and the same from
//! host values.

pub use super::Shape;
use super::{RopeQkvBf16, RopeQkvBwdBf16, RopeQkvBwdF32, RopeQkvF32, MAX_HEAD_DIM, ROWS};
use ck_core::device::{Bf16, Real};
use ck_core::host::{Device, DeviceBuffer, LaunchConfig, LaunchError, LaunchStats};
use ck_core::rules;

impl Shape {
    /// Tokens: `batch · seq`.
    pub fn tokens(&self) -> u64 {
        self.batch as u64 * self.seq as u64
    }

    /// Elements of the QKV projection `[T, (H + 2·Hkv)·D]`, of Q `[B, H, S, D]`, of K (and V)
    /// `[B, Hkv, S, D]`, and of each table `[rows, R/2]`.
    pub fn lens(&self) -> (u64, u64, u64, u64) {
        let per_head = self.tokens() * self.head_dim as u64;
        let heads = self.heads as u64 + 2 * self.kv_heads as u64;
        (
            per_head * heads,
            per_head * self.heads as u64,
            per_head * self.kv_heads as u64,
            self.table_rows as u64 * (self.rotary_dim / 2) as u64,
        )
    }

    /// `shape-unsupported` or `argument-size` where the kernel cannot run the shape.
    pub fn check(&self) -> Result<(), LaunchError> {
        let unsupported = |m: String| Err(LaunchError::invalid(rules::SHAPE_UNSUPPORTED, m));
        let (d, r) = (self.head_dim, self.rotary_dim);
        if d == 0 || d > MAX_HEAD_DIM || !d.is_multiple_of(8) {
            return unsupported(format!(
                "head_dim {d}: a multiple of 8 from 8 to {MAX_HEAD_DIM} (a block's rows hold {MAX_HEAD_DIM} elements)"
            ));
        }
        if r > d || !r.is_multiple_of(16) {
            return unsupported(format!(
                "rotary_dim {r} with head_dim {d}: at most the head dim, and a multiple of 16 (each half, and each table row, whole 16-byte vectors)"
            ));
        }
        if self.table_rows != self.seq && self.table_rows as u64 != self.tokens() {
            return Err(LaunchError::invalid(
                rules::SHAPE_MISMATCH,
                format!(
                    "cos and sin have {} rows; give one per position of a sequence ({}) or one per token ({})",
                    self.table_rows,
                    self.seq,
                    self.tokens()
                ),
            ));
        }
        let (qkv, ..) = self.lens();
        if qkv > u32::MAX as u64 {
            return Err(LaunchError::invalid(
                rules::ARGUMENT_SIZE,
                format!("the QKV projection has {qkv} elements; the kernel indexes with 32 bits"),
            ));
        }
        Ok(())
    }
}

/// Element types with a RoPE kernel.
pub trait RopeElement: Real {
    /// The kernel's launch.
    #[allow(clippy::too_many_arguments)]
    fn launch(
        device: &Device,
        cfg: LaunchConfig,
        inputs: (&DeviceBuffer<Self>, &DeviceBuffer<f32>, &DeviceBuffer<f32>),
        outputs: (
            &mut DeviceBuffer<Self>,
            &mut DeviceBuffer<Self>,
            &mut DeviceBuffer<Self>,
        ),
        shape: &Shape,
    ) -> Result<LaunchStats, LaunchError>;
    /// The backward kernel's launch.
    fn launch_backward(
        device: &Device,
        cfg: LaunchConfig,
        grads: [&DeviceBuffer<Self>; 3],
        tables: (&DeviceBuffer<f32>, &DeviceBuffer<f32>),
        dqkv: &mut DeviceBuffer<Self>,
        shape: &Shape,
    ) -> Result<LaunchStats, LaunchError>;
}

macro_rules! rope_element {
    ($t:ty, $kernel:ident, $backward:ident) => {
        impl RopeElement for $t {
            fn launch(
                device: &Device,
                cfg: LaunchConfig,
                (qkv, cos, sin): (&DeviceBuffer<$t>, &DeviceBuffer<f32>, &DeviceBuffer<f32>),
                (q, k, v): (
                    &mut DeviceBuffer<$t>,
                    &mut DeviceBuffer<$t>,
                    &mut DeviceBuffer<$t>,
                ),
                s: &Shape,
            ) -> Result<LaunchStats, LaunchError> {
                $kernel::launch(
                    device,
                    cfg,
                    qkv,
                    cos,
                    sin,
                    q,
                    k,
                    v,
                    s.batch,
                    s.seq,
                    s.heads,
                    s.kv_heads,
                    s.head_dim,
                    s.rotary_dim,
                    s.table_rows,
                    s.interleaved as u32,
                )
            }

            fn launch_backward(
                device: &Device,
                cfg: LaunchConfig,
                [dq, dk, dv]: [&DeviceBuffer<$t>; 3],
                (cos, sin): (&DeviceBuffer<f32>, &DeviceBuffer<f32>),
                dqkv: &mut DeviceBuffer<$t>,
                s: &Shape,
            ) -> Result<LaunchStats, LaunchError> {
                $backward::launch(
                    device,
                    cfg,
                    dq,
                    dk,
                    dv,
                    cos,
                    sin,
                    dqkv,
                    s.batch,
                    s.seq,
                    s.heads,
                    s.kv_heads,
                    s.head_dim,
                    s.rotary_dim,
                    s.table_rows,
                    s.interleaved as u32,
                )
            }
        }
    };
}
rope_element!(Bf16, RopeQkvBf16, RopeQkvBwdBf16);
rope_element!(f32, RopeQkvF32, RopeQkvBwdF32);

/// Rotates the query and key heads of the projection `qkv` by the angles of `cos`, `sin` and
/// writes Q, K, V in `[B, heads, S, D]` (see the module documentation). Errors: `shape-mismatch`
/// naming the buffer whose length is not the shape's, and [`Shape::check`]'s.
pub fn launch<T: RopeElement>(
    device: &Device,
    (qkv, cos, sin): (&DeviceBuffer<T>, &DeviceBuffer<f32>, &DeviceBuffer<f32>),
    (q, k, v): (
        &mut DeviceBuffer<T>,
        &mut DeviceBuffer<T>,
        &mut DeviceBuffer<T>,
    ),
    shape: &Shape,
) -> Result<LaunchStats, LaunchError> {
    let rows = check_buffers(
        shape,
        [
            ("qkv", qkv.len()),
            ("cos", cos.len()),
            ("sin", sin.len()),
            ("q", q.len()),
            ("k", k.len()),
            ("v", v.len()),
        ],
    )?;
    if rows == 0 {
        return Ok(LaunchStats::default());
    }
    let cfg = LaunchConfig::new(rows.div_ceil(ROWS), 256);
    T::launch(device, cfg, (qkv, cos, sin), (q, k, v), shape)
}

/// [`Shape::check`], then each buffer's length (the projection's, the two tables', Q's, K's and
/// V's, named as given) against the shape's: the head rows to launch for.
fn check_buffers(shape: &Shape, buffers: [(&str, usize); 6]) -> Result<u32, LaunchError> {
    shape.check()?;
    let (l_qkv, l_q, l_kv, l_table) = shape.lens();
    let wants = [l_qkv, l_table, l_table, l_q, l_kv, l_kv];
    for ((name, len), want) in buffers.into_iter().zip(wants) {
        if len as u64 != want {
            return Err(LaunchError::invalid(
                rules::SHAPE_MISMATCH,
                format!("`{name}` has {len} elements; for {shape:?} it needs {want}"),
            ));
        }
    }
    Ok((l_qkv / shape.head_dim.max(1) as u64) as u32)
}

/// The backward of [`launch`]: `dqkv` (the projection's layout) from `dq`, `dk`, `dv`
/// (`[B, heads, S, D]`), the query's and key's rotary dims rotated back by minus each angle.
/// Errors as [`launch`]'s.
pub fn launch_backward<T: RopeElement>(
    device: &Device,
    (grads, cos, sin): (
        [&DeviceBuffer<T>; 3],
        &DeviceBuffer<f32>,
        &DeviceBuffer<f32>,
    ),
    dqkv: &mut DeviceBuffer<T>,
    shape: &Shape,
) -> Result<LaunchStats, LaunchError> {
    let rows = check_buffers(
        shape,
        [
            ("dqkv", dqkv.len()),
            ("cos", cos.len()),
            ("sin", sin.len()),
            ("dq", grads[0].len()),
            ("dk", grads[1].len()),
            ("dv", grads[2].len()),
        ],
    )?;
    if rows == 0 {
        return Ok(LaunchStats::default());
    }
    let cfg = LaunchConfig::new(rows.div_ceil(ROWS), 256);
    T::launch_backward(device, cfg, grads, (cos, sin), dqkv, shape)
}

/// [`launch`] from host values (rounded to `T`; the tables stay f32): Q, K and V widened to f32.
pub fn rope_qkv<T: RopeElement>(
    device: &Device,
    (qkv, cos, sin): (&[f32], &[f32], &[f32]),
    shape: &Shape,
) -> Result<([Vec<f32>; 3], LaunchStats), LaunchError> {
    shape.check()?;
    let (_, l_q, l_kv, _) = shape.lens();
    let up = |v: &[f32]| {
        let rounded: Vec<T> = v.iter().map(|&x| T::from_f32(x)).collect();
        DeviceBuffer::from_slice(device, &rounded)
    };
    let nan = |len: u64| up(&vec![f32::NAN; len as usize]);
    let (xd, cd, sd) = (
        up(qkv)?,
        DeviceBuffer::from_slice(device, cos)?,
        DeviceBuffer::from_slice(device, sin)?,
    );
    let (mut q, mut k, mut v) = (nan(l_q)?, nan(l_kv)?, nan(l_kv)?);
    let stats = launch(device, (&xd, &cd, &sd), (&mut q, &mut k, &mut v), shape)?;
    let back = |b: &DeviceBuffer<T>| -> Result<Vec<f32>, LaunchError> {
        Ok(b.to_vec()?.iter().map(|x| x.to_f32()).collect())
    };
    Ok(([back(&q)?, back(&k)?, back(&v)?], stats))
}

/// [`launch_backward`] from host values (dQ, dK, dV rounded to `T`; the tables stay f32): dqkv
/// widened to f32.
pub fn rope_qkv_backward<T: RopeElement>(
    device: &Device,
    ([dq, dk, dv], cos, sin): ([&[f32]; 3], &[f32], &[f32]),
    shape: &Shape,
) -> Result<(Vec<f32>, LaunchStats), LaunchError> {
    shape.check()?;
    let up = |v: &[f32]| {
        let rounded: Vec<T> = v.iter().map(|&x| T::from_f32(x)).collect();
        DeviceBuffer::from_slice(device, &rounded)
    };
    let (gq, gk, gv) = (up(dq)?, up(dk)?, up(dv)?);
    let (cd, sd) = (
        DeviceBuffer::from_slice(device, cos)?,
        DeviceBuffer::from_slice(device, sin)?,
    );
    let mut dqkv = up(&vec![f32::NAN; shape.lens().0 as usize])?;
    let stats = launch_backward(device, ([&gq, &gk, &gv], &cd, &sd), &mut dqkv, shape)?;
    Ok((dqkv.to_vec()?.iter().map(|x| x.to_f32()).collect(), stats))
}
