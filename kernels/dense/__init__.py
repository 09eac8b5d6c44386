"""Dense (bf16) kernels for what cuBLAS serves poorly: the skinny decode GEMV of unquantized small projections."""
