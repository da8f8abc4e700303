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
# The side-by-side comparison with PyTorch (bench/compare.sh): training,
# evaluation, per-op overhead, latency, GEMM, conv, RSS and start-up.
EXTRA_PROGRAMS += bench/compare/bench_compare
bench_compare_bench_compare_SOURCES = bench/compare/bench_compare.c
EXTRA_DIST += bench/compare.sh bench/setup-torch.sh bench/compare/torch_compare.py \
	bench/compare/ort_compare.py bench/compare/mlp.ini
CLEANFILES += bench/compare/bench_compare
# The machine's fp32 FMA peak (threads x AVX-512 or AVX2 FMA chains), the
# yardstick of bench/compare.sh's GEMM and conv rows.
EXTRA_PROGRAMS += bench/compare/peak
bench_compare_peak_SOURCES = bench/compare/peak.c
bench_compare_peak_LDADD = -lpthread
CLEANFILES += bench/compare/peak
# Linked with no libtool wrapper script (rpath into the build tree), so that
# compare.sh times the program itself from exec to exit.
bench_compare_bench_compare_LDFLAGS = -no-install
# The one prepared GPU check (bench/gpu/check.sh, docs/gpu-check.md): its
# per-op overhead on a device, and PyTorch's side on CUDA.
EXTRA_PROGRAMS += bench/gpu/op_overhead
bench_gpu_op_overhead_SOURCES = bench/gpu/op_overhead.c
bench_gpu_op_overhead_LDFLAGS = -no-install
EXTRA_DIST += bench/gpu/check.sh bench/gpu/torch_cuda.py
CLEANFILES += bench/gpu/op_overhead
# One LSTM or GRU layer's forward and backward (bench/rnn/bench_rnn.c):
# the fused cells' effect on a recurrent layer.
EXTRA_PROGRAMS += bench/rnn/bench_rnn
bench_rnn_bench_rnn_SOURCES = bench/rnn/bench_rnn.c
CLEANFILES += bench/rnn/bench_rnn
# Training in several processes: 2 ranks x 1 thread against 1 rank x 2
# threads (bench/dist.sh).
EXTRA_DIST += bench/dist.sh
