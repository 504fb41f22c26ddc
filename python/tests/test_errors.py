"""Bad input is an exception carrying the CLI's rule name, never a crash."""

import numpy as np
import pytest

import ck_rs


def f32(*shape):
    return np.ones(shape, np.float32)


@pytest.mark.parametrize(
    "call,kind,rule",
    [
        (lambda: ck_rs.rmsnorm([[1.0]], f32(1)), TypeError, "not-a-tensor"),
        (lambda: ck_rs.rmsnorm(np.ones((2, 8)), np.ones(8)), TypeError, "dtype-unsupported"),
        (lambda: ck_rs.rmsnorm(f32(2, 8), np.ones(8, np.int32)), TypeError, "dtype-unsupported"),
        (lambda: ck_rs.rmsnorm(f32(2, 8), f32(7)), ValueError, "shape-mismatch"),
        (lambda: ck_rs.rmsnorm(f32(2, 8), f32(8), eps=-1.0), ValueError, "bad-eps"),
        (lambda: ck_rs.rmsnorm(f32(2, 8), f32(8), eps=float("nan")), ValueError, "bad-eps"),
        (lambda: ck_rs.rmsnorm(f32(2, 16)[:, ::2], f32(8)), ValueError, "not-contiguous"),
        (lambda: ck_rs.rmsnorm(f32(2, 8), f32(8), out=f32(2, 7)), ValueError, "shape-mismatch"),
        (lambda: ck_rs.layernorm(f32(2, 8), f32(8), f32(9)), ValueError, "shape-mismatch"),
        (lambda: ck_rs.softmax(np.zeros((), np.float32)), ValueError, "shape-mismatch"),
        (lambda: ck_rs.gemm(f32(2, 3), f32(4, 5)), ValueError, "shape-mismatch"),
        (lambda: ck_rs.gemm(f32(2, 3, 4), f32(4, 5)), ValueError, "shape-mismatch"),
        (lambda: ck_rs.gemm(f32(8, 8), f32(8, 8), activation="tanh"), ValueError, "bad-activation"),
        (lambda: ck_rs.gemm(f32(8, 8), f32(8, 8), bias=f32(7)), ValueError, "shape-mismatch"),
        (lambda: ck_rs.gemm(f32(8, 6), f32(6, 8), bias=f32(8)), ValueError, "shape-unsupported"),
        (lambda: ck_rs.gemm(f32(8, 8), f32(8, 8), out_dtype="bfloat16"), TypeError, "dtype-unsupported"),
        (lambda: ck_rs.grouped_mm(f32(5, 8), f32(2, 8, 8), [2, 2]), ValueError, "shape-mismatch"),
        (lambda: ck_rs.grouped_mm(f32(4, 8), f32(2, 8, 8), [4]), ValueError, "shape-mismatch"),
        (lambda: ck_rs.grouped_mm(f32(4, 8), f32(2, 8, 8), [6, -2]), ValueError, "shape-mismatch"),
        (lambda: ck_rs.grouped_mm(f32(4, 8), f32(2, 8, 8), np.array([[2, 2]])), ValueError, "shape-mismatch"),
        (lambda: ck_rs.grouped_mm(f32(4, 8), f32(2, 8, 8), np.array(4)), ValueError, "shape-mismatch"),
        (lambda: ck_rs.grouped_mm(f32(4, 8), f32(2, 8, 8), [2.5, 1.5]), ValueError, "shape-mismatch"),
        (lambda: ck_rs.grouped_mm(f32(4, 8), f32(2, 6, 8), [2, 2]), ValueError, "shape-mismatch"),
        (lambda: ck_rs.grouped_mm(f32(4, 8), f32(2, 8, 6), [2, 2]), ValueError, "shape-unsupported"),
        (lambda: ck_rs.attention(f32(1, 2, 4, 32), f32(1, 2, 4, 32), f32(1, 2, 4, 32)), ValueError, "head-dim-unsupported"),
        (lambda: ck_rs.attention(f32(1, 3, 4, 64), f32(1, 2, 4, 64), f32(1, 2, 4, 64)), ValueError, "gqa-heads"),
        (lambda: ck_rs.attention(f32(1, 2, 4, 64), f32(1, 2, 5, 64), f32(1, 2, 4, 64)), ValueError, "shape-mismatch"),
        (lambda: ck_rs.attention(f32(1, 2, 4, 64), f32(1, 2, 4, 64), f32(1, 2, 4, 64), scale=float("inf")), ValueError, "bad-scale"),
        (lambda: ck_rs.attention(f32(1, 2, 4, 64), f32(1, 2, 4, 64), f32(1, 2, 4, 64), scale=-0.5), ValueError, "bad-scale"),
    ],
)
def test_bad_input_raises_with_its_rule(call, kind, rule):
    with pytest.raises(kind) as e:
        call()
    assert str(e.value).startswith(f"error[{rule}]"), str(e.value)


def test_a_read_only_out_is_an_error_not_a_silent_copy():
    out = f32(2, 8)
    out.flags.writeable = False
    with pytest.raises(ValueError, match=r"^error\[read-only\]"):
        ck_rs.rmsnorm(f32(2, 8), f32(8), out=out)


def test_read_only_and_offset_arrays_are_fine_on_the_emulator():
    x = np.arange(1, 20, dtype=np.float32)[3:].reshape(2, 8)  # starts 12 bytes into its buffer
    x.flags.writeable = False
    y = ck_rs.rmsnorm(x, f32(8))
    want = x / np.sqrt((x.astype(np.float64) ** 2).mean(axis=1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(y, want, rtol=1e-6)


@pytest.mark.parametrize("dtype", ["float64", "float16", "bool", "complex64"])
def test_an_unsupported_dtype_is_named_as_numpy_and_torch_name_it(dtype):
    x = np.ones((2, 8), dtype)
    with pytest.raises(TypeError, match=rf"^error\[dtype-unsupported\]: `x` is {dtype}; the kernels take float32"):
        ck_rs.rmsnorm(x, f32(8))


def test_grouped_mm_takes_token_counts_as_any_integers():
    a, b = np.arange(32, dtype=np.float32).reshape(4, 8), np.ones((2, 8, 8), np.float32)
    # Expert 0 takes row 0, expert 1 rows 1..4; b is all ones: each output row is its row's sum.
    want = np.repeat(a.sum(axis=1, keepdims=True), 8, axis=1)
    np.testing.assert_allclose(ck_rs.grouped_mm(a, b, [1, 3]), want, rtol=1e-2)
    want = ck_rs.grouped_mm(a, b, [1, 3])
    for tokens in ((1, 3), np.array([1, 3], np.int64), list(np.array([1, 3]))):
        np.testing.assert_array_equal(ck_rs.grouped_mm(a, b, tokens), want)
    for tokens in ([1.0, 3.0], [True, 3], "13"):
        with pytest.raises(ValueError, match=r"^error\[shape-mismatch\]: tokens is"):
            ck_rs.grouped_mm(a, b, tokens)
