"""The fp8 quantize kernels: a bf16/fp16/fp32 matrix cast to fp8 with block scales, optionally transposed."""
