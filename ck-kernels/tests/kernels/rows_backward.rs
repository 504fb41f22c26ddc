//! The row operators' backward: each fp64 reference against central differences of its
//! forward's loss written here, the kernels on partial row tiles and on few blocks (each walking
//! several row tiles), and the column sums (`rows::column_sum`) that finish dγ and dβ: their
//! grid, workspace and chunks, exact sums of small integers, a pair of workspaces at once.

mod rmsnorm {
    use ck_core::host::{Device, DeviceBuffer};
    use ck_kernels::op::{HostCall, Rng};
    use ck_kernels::rows::rmsnorm_bwd::host::{launch_with_blocks, reference};

    /// `Σ dy · rmsnorm(x)` in f64, written here from the definition.
    fn loss(dy: &[f64], x: &[f64], g: &[f64], n: usize, eps: f64) -> f64 {
        let mut total = 0.0;
        for (row, dyr) in x.chunks(n).zip(dy.chunks(n)) {
            let r = 1.0 / (row.iter().map(|v| v * v).sum::<f64>() / n as f64 + eps).sqrt();
            total += (0..n).map(|j| dyr[j] * row[j] * r * g[j]).sum::<f64>();
        }
        total
    }

    #[test]
    fn the_reference_is_the_gradient_of_the_forward() {
        let (m, n, eps) = (3usize, 7usize, 1e-3);
        let mut rng = Rng(11);
        let (dy, x, g) = (
            rng.values(m * n, 1.0, 0.0),
            rng.values(m * n, 1.0, 0.0),
            rng.values(n, 1.0, 1.5),
        );
        let want = reference((&dy, &x, &g), (m as u32, n as u32), eps);
        let (dx, dgamma) = (want.dx, want.dgamma);
        let wide = |v: &[f32]| v.iter().map(|&a| a as f64).collect::<Vec<_>>();
        let (dy, x, g) = (wide(&dy), wide(&x), wide(&g));
        let h = 1e-6;
        let slope = |f: &dyn Fn(f64) -> f64| (f(h) - f(-h)) / (2.0 * h);
        for i in 0..m * n {
            let at = |d: f64| {
                let mut x = x.clone();
                x[i] += d;
                loss(&dy, &x, &g, n, eps as f64)
            };
            assert!(
                (slope(&at) - dx[i]).abs() < 1e-7,
                "dx[{i}]: {} vs {}",
                slope(&at),
                dx[i]
            );
        }
        for j in 0..n {
            let at = |d: f64| {
                let mut g = g.clone();
                g[j] += d;
                loss(&dy, &x, &g, n, eps as f64)
            };
            assert!((slope(&at) - dgamma[j]).abs() < 1e-7, "dgamma[{j}]");
        }
    }

    /// With `eps = 0` the rows past the end of a partial row tile (read as zeros) add nothing to
    /// `dgamma`: finite and the reference's, short rows and long ones.
    #[test]
    fn eps_zero_on_a_partial_row_tile() {
        let device = Device::emulator();
        for (m, n) in [(3usize, 100usize), (1, 9000)] {
            let mut rng = Rng(23);
            let (dy, x) = (rng.values(m * n, 1.0, 0.0), rng.values(m * n, 1.0, 0.0));
            let g = rng.values(n, 1.0, 1.5);
            let out = HostCall::new(&ck_kernels::rows::rmsnorm_bwd::OP)
                .input("dy", &dy, &[m, n])
                .input("x", &x, &[m, n])
                .input("gamma", &g, &[n])
                .scalar("eps", 0.0)
                .run(&device)
                .unwrap();
            let want = reference((&dy, &x, &g), (m as u32, n as u32), 0.0).dgamma;
            for (j, (a, b)) in out.output("dgamma").unwrap().iter().zip(want).enumerate() {
                assert!(
                    (*a as f64 - b).abs() <= 1e-5 * b.abs().max(1.0),
                    "{m}x{n} dgamma[{j}]: {a} vs {b}"
                );
            }
        }
    }

    /// Few blocks, so that each walks several row tiles: the short rows' accumulators in
    /// registers, the long rows' in the workspace; the same bits as the full grid's `dx`, and a
    /// `dgamma` within rounding of it (the partial sums are grouped differently).
    #[test]
    fn blocks_that_walk_several_row_tiles() {
        let device = Device::emulator();
        for (m, n) in [(37u32, 100u32), (5, 8200)] {
            let mut rng = Rng(5);
            let len = (m * n) as usize;
            let (dy, x, g) = (
                rng.values(len, 1.0, 0.0),
                rng.values(len, 1.0, 0.0),
                rng.values(n as usize, 1.0, 1.5),
            );
            let up = |v: &[f32]| DeviceBuffer::from_slice(&device, v).unwrap();
            let (dyb, xb, gb) = (up(&dy), up(&x), up(&g));
            let (mut dx, mut dgamma) = (up(&vec![f32::NAN; len]), up(&vec![f32::NAN; n as usize]));
            let tensors = ((&dyb, &xb, &gb), (&mut dx, &mut dgamma));
            launch_with_blocks(&device, tensors, (m, n, 1e-6), Some(2)).unwrap();
            let full = HostCall::new(&ck_kernels::rows::rmsnorm_bwd::OP)
                .input("dy", &dy, &[m as usize, n as usize])
                .input("x", &x, &[m as usize, n as usize])
                .input("gamma", &g, &[n as usize])
                .run(&device)
                .unwrap();
            assert_eq!(
                dx.to_vec().unwrap(),
                full.output("dx").unwrap(),
                "{m}x{n} dx"
            );
            let (want, got) = (full.output("dgamma").unwrap(), dgamma.to_vec().unwrap());
            for (j, (a, b)) in got.iter().zip(want).enumerate() {
                assert!(
                    (a - b).abs() <= 1e-5 * b.abs().max(1.0),
                    "{m}x{n} dgamma[{j}]: {a} vs {b}"
                );
            }
        }
    }
}

mod add_rmsnorm {
    use ck_core::host::Device;
    use ck_kernels::op::{HostCall, Rng};
    use ck_kernels::rows::add_rmsnorm_bwd::host::reference;

    /// `Σ dy · y + Σ dr · r` of the forward `r = x + residual`, `y = rmsnorm(r) · g`, in f64,
    /// written here from the definition.
    fn loss(dy: &[f64], dr: &[f64], r: &[f64], g: &[f64], n: usize, eps: f64) -> f64 {
        let mut total = 0.0;
        for (i, row) in r.chunks(n).enumerate() {
            let s = 1.0 / (row.iter().map(|v| v * v).sum::<f64>() / n as f64 + eps).sqrt();
            for j in 0..n {
                total += dy[i * n + j] * row[j] * s * g[j] + dr[i * n + j] * row[j];
            }
        }
        total
    }

    /// The reference is the gradient of the fused forward's loss with respect to `x` (and so
    /// `residual`: `r` moves with either) and `gamma`, by central differences.
    #[test]
    fn the_reference_is_the_gradient_of_the_forward() {
        let (m, n, eps) = (3usize, 5usize, 1e-3);
        let mut rng = Rng(17);
        let mut draw = |len| rng.values(len, 1.0, 0.0);
        let (dy, dr, r) = (draw(m * n), draw(m * n), draw(m * n));
        let g: Vec<f32> = draw(n).iter().map(|v| v + 1.5).collect();
        let want = reference((&dy, &dr, &r, &g), (m as u32, n as u32), eps);
        let (dx, dgamma) = (want.dx, want.dgamma);
        let wide = |v: &[f32]| v.iter().map(|&a| a as f64).collect::<Vec<_>>();
        let (dy, dr, r, g) = (wide(&dy), wide(&dr), wide(&r), wide(&g));
        let h = 1e-6;
        let slope = |f: &dyn Fn(f64) -> f64| (f(h) - f(-h)) / (2.0 * h);
        for i in 0..m * n {
            let at = |d: f64| {
                let mut r = r.clone();
                r[i] += d;
                loss(&dy, &dr, &r, &g, n, eps as f64)
            };
            assert!((slope(&at) - dx[i]).abs() < 1e-7, "dx[{i}]");
        }
        for j in 0..n {
            let at = |d: f64| {
                let mut g = g.clone();
                g[j] += d;
                loss(&dy, &dr, &r, &g, n, eps as f64)
            };
            assert!((slope(&at) - dgamma[j]).abs() < 1e-7, "dgamma[{j}]");
        }
    }

    /// The module doc's worked example, on the emulator.
    #[test]
    fn the_worked_example() {
        let out = HostCall::new(&ck_kernels::rows::add_rmsnorm_bwd::OP)
            .input("dy", &[1.0, 0.0], &[1, 2])
            .input("dr", &[0.5, 0.5], &[1, 2])
            .input("r", &[3.0, 4.0], &[1, 2])
            .input("gamma", &[1.0, 1.0], &[2])
            .scalar("eps", 0.0)
            .run(&Device::emulator())
            .unwrap();
        let s = 1.0 / 12.5f64.sqrt();
        let want_dx = [0.5 + s - 3.0 * s.powi(3) * 1.5, 0.5 - 4.0 * s.powi(3) * 1.5];
        for (got, want) in out.output("dx").unwrap().iter().zip(want_dx) {
            assert!((*got as f64 - want).abs() < 1e-6, "{got} vs {want}");
        }
        let dgamma = out.output("dgamma").unwrap();
        assert!(
            (dgamma[0] as f64 - 3.0 * s).abs() < 1e-6 && dgamma[1] == 0.0,
            "{dgamma:?}"
        );
    }
}

mod softmax {
    use ck_kernels::op::Rng;
    use ck_kernels::rows::softmax_bwd::host::reference;

    /// `Σ dy · softmax(x)` in f64, written here from the definition.
    fn loss(dy: &[f64], x: &[f64], n: usize) -> f64 {
        let mut total = 0.0;
        for (row, dyr) in x.chunks(n).zip(dy.chunks(n)) {
            let e: Vec<f64> = row.iter().map(|v| v.exp()).collect();
            let sum: f64 = e.iter().sum();
            total += (0..n).map(|j| dyr[j] * e[j] / sum).sum::<f64>();
        }
        total
    }

    #[test]
    fn the_reference_is_the_gradient_of_the_forward() {
        let (m, n) = (3usize, 6usize);
        let mut rng = Rng(4);
        let (dy, x) = (rng.values(m * n, 1.0, 0.0), rng.values(m * n, 3.0, 0.0));
        let wide = |v: &[f32]| v.iter().map(|&a| a as f64).collect::<Vec<_>>();
        let (dy64, x64) = (wide(&dy), wide(&x));
        let mut y = Vec::new();
        for row in x64.chunks(n) {
            let sum: f64 = row.iter().map(|v| v.exp()).sum();
            y.extend(row.iter().map(|v| (v.exp() / sum) as f32));
        }
        let (dx, _) = reference((&dy, &y), (m as u32, n as u32));
        let h = 1e-6;
        for i in 0..m * n {
            let at = |d: f64| {
                let mut x = x64.clone();
                x[i] += d;
                loss(&dy64, &x, n)
            };
            let slope = (at(h) - at(-h)) / (2.0 * h);
            // y rounded to f32 for the reference: its gradient to that precision.
            assert!(
                (slope - dx[i]).abs() < 1e-6,
                "dx[{i}]: {slope} vs {}",
                dx[i]
            );
        }
    }
}

mod layernorm {
    use ck_core::host::{Device, DeviceBuffer};
    use ck_kernels::op::{HostCall, Rng, Sizes};
    use ck_kernels::rows::layernorm_bwd::host::{launch_with_blocks, reference, Tensors};

    /// Few blocks, so that each walks several row tiles (registers for short rows, the
    /// workspace for long ones): the full grid's `dx` bits, and parameter gradients within
    /// rounding of it (the partial sums are grouped differently).
    #[test]
    fn blocks_that_walk_several_row_tiles() {
        let device = Device::emulator();
        for (m, n) in [(37usize, 100usize), (5, 8200)] {
            let inputs = (ck_kernels::rows::layernorm_bwd::OP.sample)(
                &Sizes::rows(&[m]).with("N", n),
                &mut Rng(6),
            );
            let up = |v: &[f32]| DeviceBuffer::from_slice(&device, v).unwrap();
            let b: Vec<_> = inputs.iter().map(|v| up(v)).collect();
            let nan = |len: usize| up(&vec![f32::NAN; len]);
            let (mut dx, mut dgamma, mut dbeta) = (nan(m * n), nan(n), nan(n));
            let t = Tensors {
                dy: &b[0],
                x: &b[1],
                gamma: &b[2],
                mean: &b[3],
                rstd: &b[4],
                dx: &mut dx,
                dgamma: &mut dgamma,
                dbeta: &mut dbeta,
            };
            launch_with_blocks(&device, t, (m as u32, n as u32), Some(2)).unwrap();
            let shapes = [vec![m, n], vec![m, n], vec![n], vec![m], vec![m]];
            let mut call = HostCall::new(&ck_kernels::rows::layernorm_bwd::OP);
            for ((p, v), shape) in ck_kernels::rows::layernorm_bwd::OP
                .inputs()
                .zip(&inputs)
                .zip(&shapes)
            {
                call = call.input(p.name, v, shape);
            }
            let full = call.run(&device).unwrap();
            assert_eq!(
                dx.to_vec().unwrap(),
                full.output("dx").unwrap(),
                "{m}x{n} dx"
            );
            for (name, got) in [("dgamma", dgamma), ("dbeta", dbeta)] {
                let (got, want) = (got.to_vec().unwrap(), full.output(name).unwrap().to_vec());
                for (j, (a, b)) in got.iter().zip(&want).enumerate() {
                    assert!(
                        (a - b).abs() <= 1e-5 * b.abs().max(1.0),
                        "{m}x{n} {name}[{j}]: {a} vs {b}"
                    );
                }
            }
        }
    }

    /// `Σ dy · layernorm(x)` in f64 (beta = 0), written here from the definition.
    fn loss(dy: &[f64], x: &[f64], g: &[f64], n: usize) -> f64 {
        let mut total = 0.0;
        for (row, dyr) in x.chunks(n).zip(dy.chunks(n)) {
            let mu = row.iter().sum::<f64>() / n as f64;
            let var = row.iter().map(|v| (v - mu).powi(2)).sum::<f64>() / n as f64;
            let r = 1.0 / (var + 1e-5).sqrt();
            total += (0..n)
                .map(|j| dyr[j] * (row[j] - mu) * r * g[j])
                .sum::<f64>();
        }
        total
    }

    #[test]
    fn the_reference_is_the_gradient_of_the_forward() {
        let (m, n) = (3usize, 7usize);
        let mut rng = Rng(8);
        let (dy, x, g) = (
            rng.values(m * n, 1.0, 0.0),
            rng.values(m * n, 1.0, 2.0),
            rng.values(n, 1.0, 1.5),
        );
        let wide = |v: &[f32]| v.iter().map(|&a| a as f64).collect::<Vec<_>>();
        let (dy64, x64, g64) = (wide(&dy), wide(&x), wide(&g));
        let (mut mean, mut rstd) = (Vec::new(), Vec::new());
        for row in x64.chunks(n) {
            let mu = row.iter().sum::<f64>() / n as f64;
            let var = row.iter().map(|v| (v - mu).powi(2)).sum::<f64>() / n as f64;
            mean.push(mu as f32);
            rstd.push((1.0 / (var + 1e-5).sqrt()) as f32);
        }
        let (dx, dgamma, dbeta, _) = reference((&dy, &x, &g), (&mean, &rstd), (m as u32, n as u32));
        let h = 1e-6;
        let slope = |f: &dyn Fn(f64) -> f64| (f(h) - f(-h)) / (2.0 * h);
        // The statistics are rounded to f32: the gradient to about that precision.
        for i in 0..m * n {
            let at = |d: f64| {
                let mut x = x64.clone();
                x[i] += d;
                loss(&dy64, &x, &g64, n)
            };
            assert!(
                (slope(&at) - dx[i]).abs() < 1e-5,
                "dx[{i}]: {} vs {}",
                slope(&at),
                dx[i]
            );
        }
        for j in 0..n {
            let at = |d: f64| {
                let mut g = g64.clone();
                g[j] += d;
                loss(&dy64, &x64, &g, n)
            };
            assert!((slope(&at) - dgamma[j]).abs() < 1e-5, "dgamma[{j}]");
            let want: f64 = (0..m).map(|i| dy64[i * n + j]).sum();
            assert!((dbeta[j] - want).abs() < 1e-12, "dbeta[{j}]");
        }
    }
}

mod column_sum {
    use ck_core::device::Bf16;
    use ck_core::host::{Device, DeviceBuffer};
    use ck_kernels::rows::column_sum::{chunks, grid, row_stride, workspace, ColumnSum};

    /// 4 blocks of 256 threads per SM of an H100 (132 SMs), in blocks of any size, each with
    /// at least 16 row tiles where there are enough; never more blocks than row tiles, never
    /// none.
    #[test]
    fn the_grid_of_a_backward() {
        assert_eq!(grid(65536, (1, 256), None), 4 * 132);
        assert_eq!(grid(65536, (1, 32), None), 65536 / 16);
        assert_eq!(grid(1 << 20, (1, 32), None), 8 * 4 * 132);
        assert_eq!(grid(65536, (4, 128), None), 65536 / 4 / 16);
        assert_eq!(grid(4096, (1, 128), None), 4096 / 16);
        assert_eq!(grid(100, (1, 32), None), 7);
        assert_eq!(grid(10, (4, 128), None), 1);
        assert_eq!(grid(0, (1, 32), None), 1);
        assert_eq!(grid(100, (1, 32), Some(2)), 2);
    }

    /// Rows 16 bytes apart; a workspace past 32-bit offsets is refused, saying so.
    #[test]
    fn the_workspace_of_a_backward() {
        assert_eq!(workspace(4, 7).unwrap(), (8, 32));
        assert_eq!(workspace(3, 1024).unwrap(), (1024, 3072));
        let e = workspace(528, 1 << 24).unwrap_err();
        assert_eq!(e.rule(), ck_core::rules::ARGUMENT_SIZE);
        assert!(e.to_string().contains("fewer rows"), "{e}");
    }

    #[test]
    fn the_cut_into_chunks() {
        assert_eq!(chunks(4224, 1024), (33, 128));
        assert_eq!(chunks(528, 8192), (5, 106));
        assert_eq!(chunks(528, 4096), (9, 59));
        assert_eq!(chunks(8, 1024), (1, 8));
        assert_eq!(chunks(1, 1), (1, 1));
        for (rows, n) in [(4224, 1024), (528, 300), (97, 5000), (33, 129)] {
            let (count, chunk) = chunks(rows, n);
            assert!(
                count * chunk >= rows && (count - 1) * chunk < rows,
                "{rows} x {n}"
            );
        }
    }

    /// Small integers, whose f32 sums are exact in any order: every column's sum, through one
    /// launch and through chunks, f32 and bf16, rows `row_stride(n)` apart (the padding NaN,
    /// which no sum may read).
    #[test]
    fn sums_by_chunks_are_the_column_sums() {
        let device = Device::emulator();
        for (rows, n) in [(8u32, 200u32), (300, 130), (1000, 64), (40, 7)] {
            let value = |i: u32, j: u32| ((i * 7 + j * 3) % 11) as f32 - 5.0;
            let stride = row_stride(n);
            let at = |k: u32| (k / stride, k % stride);
            let partial: Vec<f32> = (0..rows * stride)
                .map(|k| match at(k) {
                    (i, j) if j < n => value(i, j),
                    _ => f32::NAN,
                })
                .collect();
            let want: Vec<f32> = (0..n)
                .map(|j| (0..rows).map(|i| value(i, j)).sum())
                .collect();
            let p = DeviceBuffer::from_slice(&device, &partial).unwrap();
            let mut out = DeviceBuffer::from_slice(&device, &vec![f32::NAN; n as usize]).unwrap();
            f32::column_sum(&device, &p, &mut out, (rows, n, stride)).unwrap();
            assert_eq!(
                out.to_vec().unwrap(),
                want,
                "{rows} x {n}, {:?}",
                chunks(rows, n)
            );
            let mut out =
                DeviceBuffer::from_slice(&device, &vec![Bf16(0x7fc0); n as usize]).unwrap();
            Bf16::column_sum(&device, &p, &mut out, (rows, n, stride)).unwrap();
            let got: Vec<f32> = out.to_vec().unwrap().iter().map(|x| x.to_f32()).collect();
            let rounded: Vec<f32> = want.iter().map(|&x| Bf16::from_f32(x).to_f32()).collect();
            assert_eq!(got, rounded, "bf16 {rows} x {n}");
        }
    }

    /// Two workspaces summed by the same launches: each output its own workspace's column
    /// sums, exact (small integers), through one launch and through chunks.
    #[test]
    fn a_pair_of_workspaces_sums_each_into_its_own_output() {
        let device = Device::emulator();
        for (rows, n) in [(8u32, 200u32), (300, 130), (40, 7)] {
            let stride = row_stride(n);
            let value = |k: u32, i: u32, j: u32| ((i * 7 + j * (3 + k) + k) % 11) as f32 - 5.0;
            let workspace = |k: u32| -> Vec<f32> {
                (0..rows * stride)
                    .map(|e| match (e / stride, e % stride) {
                        (i, j) if j < n => value(k, i, j),
                        _ => f32::NAN,
                    })
                    .collect()
            };
            let up = |v: &[f32]| DeviceBuffer::from_slice(&device, v).unwrap();
            let (pa, pb) = (up(&workspace(0)), up(&workspace(1)));
            let (mut oa, mut ob) = (
                up(&vec![f32::NAN; n as usize]),
                up(&vec![f32::NAN; n as usize]),
            );
            f32::column_sums(
                &device,
                &[&pa, &pb],
                &mut [&mut oa, &mut ob],
                (rows, n, stride),
            )
            .unwrap();
            for (k, out) in [(0, oa), (1, ob)] {
                let want: Vec<f32> = (0..n)
                    .map(|j| (0..rows).map(|i| value(k, i, j)).sum())
                    .collect();
                assert_eq!(out.to_vec().unwrap(), want, "workspace {k}, {rows} x {n}");
            }
            // The block that completed each column block's count set its ticket back.
            if let Some(t) = device
                .take_workspace::<u32>(ck_kernels::rows::column_sum::host::TICKETS, 1)
                .unwrap()
            {
                assert!(t.to_vec().unwrap().iter().all(|&t| t == 0), "{rows} x {n}");
                device.keep_workspace(ck_kernels::rows::column_sum::host::TICKETS, t);
            }
        }
    }
}
