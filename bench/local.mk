# bench/local.mk — benchmarks, side by side with PyTorch (bench/*/run.sh);
# built on demand (make bench/loader/bench_loader), never run by make check.
EXTRA_PROGRAMS += bench/loader/bench_loader
bench_loader_bench_loader_SOURCES = bench/loader/bench_loader.c
EXTRA_DIST += bench/loader/run.sh bench/loader/torch_loader.py
CLEANFILES += bench/loader/bench_loader
# The GEMM benchmark (bench/gemm/run.sh): torc_matmul through the cpu
# plugin beside torch.matmul.
EXTRA_PROGRAMS += bench/gemm/bench_gemm
bench_gemm_bench_gemm_SOURCES = bench/gemm/bench_gemm.c
EXTRA_DIST += bench/gemm/run.sh
CLEANFILES += bench/gemm/bench_gemm
