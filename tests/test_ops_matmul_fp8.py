"""tmagen.ops.matmul on fp8 tensors, on the CPU: every argument it refuses is named with its value,
the limit and the fix before anything reaches a GPU (the products are tests/gpu/test_fp8_matmul_gpu.py's)."""

from __future__ import annotations

import pytest

from tmagen.errors import ArgumentError

torch = pytest.importorskip("torch")
from tmagen import ops  # noqa: E402


def _fp8(*shape: int):
    return torch.zeros(*shape).to(torch.float8_e4m3fn)


def _refused(**kwargs) -> str:
    args = {"a": _fp8(64, 256), "b": _fp8(128, 256).t(), **kwargs}
    with pytest.raises(ArgumentError) as err:
        ops.matmul(args.pop("a"), args.pop("b"), **args)
    return str(err.value)


def test_scales_must_be_float32() -> None:
    text = _refused(scale_a=torch.tensor(1.0, dtype=torch.float64))
    assert "scale_a.dtype" in text and "float32" in text and "scale_a.float()" in text


def test_a_scale_is_one_value_or_one_per_row() -> None:
    text = _refused(scale_a=torch.ones(3))
    assert "scale_a.shape" in text and "64" in text
    text = _refused(scale_b=torch.ones(5, 1))
    assert "scale_b.shape" in text and "128" in text


def test_block_scales_have_their_blocks_shape() -> None:
    # a [64, 256] times b [256, 128]: scale_b is blocked as b is, [K/128, N/128] (torch._scaled_mm's layout)
    text = _refused(scale_a=torch.ones(64, 2), scale_b=torch.ones(2, 2))
    assert "scale_b.shape" in text and "(2, 1)" in text and "128 x 128" in text
    text = _refused(scale_a=torch.ones(64, 2), scale_b=torch.ones(1, 2))  # w's [N/128, K/128], not transposed
    assert "scale_b.shape" in text and "(2, 1)" in text and ".t()" in text
    text = _refused(scale_a=torch.ones(64, 2))
    assert "scale_b" in text and "pairs" in text


def test_with_k_one_block_a_row_scale_beside_column_blocks_is_block_scales() -> None:
    # K = 128: scale_a [M, 1] is a row's one block, and scale_b [1, N/128] can only be blocks
    with pytest.raises(ArgumentError) as err:
        ops.matmul(_fp8(64, 128), _fp8(256, 128).t(), scale_a=torch.ones(64, 1), scale_b=torch.ones(1, 2),
                   use_fast_accum=True)
    assert "use_fast_accum" in str(err.value) and "promoted" in str(err.value)
    text = _refused(scale_a=torch.ones(64, 1), scale_b=torch.ones(1, 3))  # K = 256: per row, and 3 is no N
    assert "scale_b.shape" in text and "ceil(K/128)" in text


def test_fp8_multiplies_fp8_and_matrices_only() -> None:
    text = _refused(b=torch.zeros(256, 128, dtype=torch.bfloat16))
    assert "b.dtype" in text and "float8_e4m3fn" in text
    text = _refused(a=_fp8(2, 64, 256))
    assert "a.ndim" in text and "matrix" in text
    text = _refused(b=_fp8(128, 200).t())
    assert "b.shape" in text and "K = 256" in text


def test_the_output_type_is_checked() -> None:
    text = _refused(scale_a=torch.tensor(1.0), out_dtype=torch.int32)
    assert "out_dtype" in text and "bfloat16, float16 or float32" in text


def test_cpu_tensors_are_refused_with_the_fix() -> None:
    text = _refused(scale_a=torch.tensor(1.0), scale_b=torch.tensor(1.0))
    assert "x.cuda()" in text or "GPU" in text


def test_fast_accumulation_takes_per_tensor_or_per_row_scales_and_a_bool() -> None:
    text = _refused(scale_a=torch.ones(64, 2), scale_b=torch.ones(1, 2), use_fast_accum=True)
    assert "use_fast_accum" in text and "promoted" in text and "use_fast_accum=False" in text
    text = _refused(scale_a=torch.tensor(1.0), use_fast_accum="yes")
    assert "use_fast_accum" in text and "'yes'" in text and "bool" in text


def test_fast_accumulation_is_fp8_s() -> None:
    a = torch.zeros(64, 256, dtype=torch.bfloat16)
    with pytest.raises(ArgumentError) as err:
        ops.matmul(a, a.t(), use_fast_accum=True)
    assert "use_fast_accum" in str(err.value) and "fp8" in str(err.value)
