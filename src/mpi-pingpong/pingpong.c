/*
 * mpi-pingpong: blocking ping-pong bandwidth between exactly two MPI ranks.
 *
 * Modes (after the OLCF MPI_ping_pong tutorial's three programs):
 *   cpu         host buffers passed to MPI
 *   staged      device buffer, copied through a host buffer around every MPI call
 *   cuda-aware  device buffer passed to MPI directly
 *
 * Every size: zero the receiver's buffer, fill the sender's with a pattern, run the warm-up
 * round trips, time `loops` round trips, then check on both ranks that the payload arrived
 * intact. Time per transfer is half a round trip; bandwidth is bytes / 2^30 / time (GB/s as
 * the tutorial prints it).
 *
 * Exit status: 0 all sizes passed, 1 a data check failed, 2 usage error, 3 allocation or
 * CUDA failure.
 */
#include <errno.h>
#include <getopt.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef COMMSTACK_CUDA
#include <cuda_runtime.h>
#endif

#define PP_VERSION "1.1"
#define TAG_PING 10
#define TAG_PONG 20

enum mode { MODE_CPU, MODE_STAGED, MODE_CUDA_AWARE };
static const char *mode_names[] = {"cpu", "staged", "cuda-aware"};

static int rank;

__attribute__((format(printf, 2, 3), noreturn)) static void die(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "mpi-pingpong: error (rank %d): ", rank);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);
}

#ifdef COMMSTACK_CUDA
#define CUDA_CHECK(call)                                                                     \
    do {                                                                                     \
        cudaError_t err_ = (call);                                                           \
        if (err_ != cudaSuccess)                                                             \
            die(3, "CUDA call failed: %s (%d)", cudaGetErrorString(err_), (int)err_);            \
    } while (0)
#endif

static unsigned char pattern_byte(size_t i, size_t size)
{
    /* depends on position and size, so a stale buffer from a smaller size cannot pass */
    return (unsigned char)((i * 131u + size * 7u + 1u) & 0xffu);
}

static void *host_alloc(size_t bytes)
{
    /* page-aligned, as OSU's buffers: malloc's 16-byte alignment costs up to 30% in
       shared-memory copies between 2 KiB and 512 KiB (benchmarks/pingpong_vs_osu.py) */
    void *p = NULL;
    if (posix_memalign(&p, (size_t)sysconf(_SC_PAGESIZE), bytes ? bytes : 1) != 0)
        die(3, "cannot allocate %zu bytes of host memory", bytes);
    return p;
}

/* One round trip. `buf` is what MPI sees; `host` and `dev` are used by the staged mode. */
static void round_trip(enum mode m, void *buf, void *host, void *dev, size_t bytes)
{
    int peer = 1 - rank;
    (void)host;
    (void)dev;
#ifdef COMMSTACK_CUDA
    if (m == MODE_STAGED) {
        if (rank == 0) {
            CUDA_CHECK(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost));
            MPI_Send(host, (int)bytes, MPI_BYTE, peer, TAG_PING, MPI_COMM_WORLD);
            MPI_Recv(host, (int)bytes, MPI_BYTE, peer, TAG_PONG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            CUDA_CHECK(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice));
        } else {
            MPI_Recv(host, (int)bytes, MPI_BYTE, peer, TAG_PING, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            CUDA_CHECK(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice));
            CUDA_CHECK(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost));
            MPI_Send(host, (int)bytes, MPI_BYTE, peer, TAG_PONG, MPI_COMM_WORLD);
        }
        return;
    }
#else
    (void)m;
#endif
    if (rank == 0) {
        MPI_Send(buf, (int)bytes, MPI_BYTE, peer, TAG_PING, MPI_COMM_WORLD);
        MPI_Recv(buf, (int)bytes, MPI_BYTE, peer, TAG_PONG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(buf, (int)bytes, MPI_BYTE, peer, TAG_PING, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(buf, (int)bytes, MPI_BYTE, peer, TAG_PONG, MPI_COMM_WORLD);
    }
}

static size_t parse_size(const char *opt, const char *s)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *s == '-' || end == s)
        die(2, "option %s needs a byte count, got '%s'", opt, s);
    switch (*end) {
    case 'K': case 'k': v <<= 10; end++; break;
    case 'M': case 'm': v <<= 20; end++; break;
    case 'G': case 'g': v <<= 30; end++; break;
    }
    if (*end != '\0')
        die(2, "option %s: bad size '%s' (suffix K, M or G)", opt, s);
    return (size_t)v;
}

static void usage(void)
{
    if (rank == 0)
        fprintf(stderr,
                "usage: mpi-pingpong [-m cpu|staged|cuda-aware] [-b MIN] [-e MAX] [-n LOOPS] [-w WARMUP]\n"
                "  sizes in bytes (suffix K, M, G), doubling from MIN to MAX; default 8 to 1G,\n"
                "  50 timed and 5 warm-up round trips per size; exactly 2 MPI ranks.\n");
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    enum mode m = MODE_CPU;
    size_t min_bytes = 8, max_bytes = (size_t)1 << 30;
    long loops = 50, warmup = 5;
    int opt;
    while ((opt = getopt(argc, argv, "m:b:e:n:w:h")) != -1) {
        switch (opt) {
        case 'm':
            if (!strcmp(optarg, "cpu")) m = MODE_CPU;
            else if (!strcmp(optarg, "staged")) m = MODE_STAGED;
            else if (!strcmp(optarg, "cuda-aware")) m = MODE_CUDA_AWARE;
            else die(2, "unknown mode '%s' (cpu, staged, cuda-aware)", optarg);
            break;
        case 'b': min_bytes = parse_size("-b", optarg); break;
        case 'e': max_bytes = parse_size("-e", optarg); break;
        case 'n': loops = atol(optarg); break;
        case 'w': warmup = atol(optarg); break;
        case 'h': usage(); MPI_Finalize(); return 0;
        default: usage(); MPI_Finalize(); return 2;
        }
    }
    if (optind < argc) {
        usage();
        die(2, "unexpected argument '%s'", argv[optind]);
    }
    if (nranks != 2) {
        if (rank == 0)
            fprintf(stderr, "mpi-pingpong: error: needs exactly 2 MPI ranks, got %d\n", nranks);
        MPI_Finalize();
        return 2;
    }
    /* MPI counts are int: the largest message is 2^31 - 1 bytes */
    if (min_bytes < 1 || max_bytes < min_bytes || max_bytes > (size_t)INT32_MAX || loops < 1 || warmup < 0)
        die(2, "bad range: need 1 <= MIN <= MAX < 2G, LOOPS >= 1, WARMUP >= 0");

#ifdef COMMSTACK_CUDA
    int ndev = 0;
    if (m != MODE_CPU) {
        /* local rank from a shared-memory split: works under srun, mpirun and containers */
        MPI_Comm node;
        int local;
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
        MPI_Comm_rank(node, &local);
        MPI_Comm_free(&node);
        CUDA_CHECK(cudaGetDeviceCount(&ndev));
        CUDA_CHECK(cudaSetDevice(local % ndev));
    }
#else
    if (m != MODE_CPU)
        die(2, "mode '%s' needs a CUDA build (make CUDA=1)", mode_names[m]);
#endif

    if (rank == 0) {
        printf("# mpi-pingpong v%s mode=%s ranks=2 loops=%ld warmup=%ld min=%zu max=%zu\n", PP_VERSION,
               mode_names[m], loops, warmup, min_bytes, max_bytes);
        fflush(stdout);
    }

    int failures = 0;
    /* one buffer for all sizes, as OSU: every size runs on warm, already-mapped pages */
    unsigned char *host = host_alloc(max_bytes);
    void *dev = NULL, *buf = host;
#ifdef COMMSTACK_CUDA
    if (m != MODE_CPU) {
        if (cudaMalloc(&dev, max_bytes) != cudaSuccess)
            die(3, "cannot allocate %zu bytes of device memory", max_bytes);
        buf = dev;
    }
#endif
    for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
        for (size_t i = 0; i < bytes; i++)
            host[i] = rank == 0 ? pattern_byte(i, bytes) : 0;
#ifdef COMMSTACK_CUDA
        if (m != MODE_CPU)
            CUDA_CHECK(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice));
#endif
        for (long i = 0; i < warmup; i++)
            round_trip(m, buf, host, dev, bytes);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (long i = 0; i < loops; i++)
            round_trip(m, buf, host, dev, bytes);
        double elapsed = MPI_Wtime() - t0;

#ifdef COMMSTACK_CUDA
        if (m != MODE_CPU)
            CUDA_CHECK(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost));
#endif
        long long bad_at = -1;
        for (size_t i = 0; i < bytes; i++)
            if (host[i] != pattern_byte(i, bytes)) {
                bad_at = (long long)i;
                break;
            }
        long long peer_bad_at = bad_at;
        if (rank == 1)
            MPI_Send(&bad_at, 1, MPI_LONG_LONG, 0, TAG_PONG, MPI_COMM_WORLD);
        else
            MPI_Recv(&peer_bad_at, 1, MPI_LONG_LONG, 1, TAG_PONG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);

        if (rank == 0) {
            int ok = bad_at < 0 && peer_bad_at < 0;
            double per_transfer = elapsed / (2.0 * (double)loops);
            double gib = (double)bytes / (double)(1u << 30);
            if (!ok) {
                failures++;
                fprintf(stderr, "DATA VALIDATION ERROR: size %zu, first wrong byte at %lld on rank %d\n", bytes,
                        bad_at >= 0 ? bad_at : peer_bad_at, bad_at >= 0 ? 0 : 1);
            }
            printf("Transfer size (B): %10zu, Transfer Time (s): %15.9f, Bandwidth (GB/s): %15.9f, Check: %s\n", bytes,
                   per_transfer, gib / per_transfer, ok ? "Pass" : "Fail");
            fflush(stdout);
        }
    }
#ifdef COMMSTACK_CUDA
    if (dev)
        CUDA_CHECK(cudaFree(dev));
#endif
    free(host);
    if (rank == 0)
        printf("# mpi-pingpong done: %s\n", failures ? "data check FAILED" : "all sizes passed");
    MPI_Finalize();
    return failures ? 1 : 0;
}
