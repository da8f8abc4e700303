# bench/local.mk — benchmarks, side by side with PyTorch (bench/*/run.sh);
# built on demand (make bench/loader/bench_loader), never run by make check.
EXTRA_PROGRAMS += bench/loader/bench_loader
bench_loader_bench_loader_SOURCES = bench/loader/bench_loader.c
EXTRA_DIST += bench/loader/run.sh bench/loader/torch_loader.py
CLEANFILES += bench/loader/bench_loader
