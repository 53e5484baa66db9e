/*
 * mpi-pingpong: blocking ping-pong bandwidth between exactly two MPI ranks.
 *
 * Modes (after the OLCF MPI_ping_pong tutorial's three programs):
 *   cpu         host buffers passed to MPI
 *   staged      device buffer, copied through a host buffer around every MPI call
 *   cuda-aware  device buffer passed to MPI directly
 *
 * Measured as OSU 7's osu_latency, so the two agree (perf/pingpong_vs_osu.py): one send and one
 * receive buffer per rank, page-aligned, allocated once at the largest size; rank 0 sends from
 * its send buffer and receives into its receive buffer, rank 1 the reverse. Every size: fill the
 * send buffers with a pattern of the sending rank, zero the receive buffers, barrier, then
 * `warmup` + `loops` round trips in one loop, rank 0 timing each timed round trip on its own and
 * summing. Afterwards both ranks check that their receive buffer holds the peer's pattern. Time
 * per transfer is half a round trip; bandwidth is bytes / 2^30 / time (GB/s as the tutorial
 * prints it).
 *
 * Exit status: 0 all sizes passed, 1 a data check failed, 2 usage error, 3 allocation or
 * CUDA failure (no CUDA device included).
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
#if defined(OPEN_MPI) && defined(__has_include)
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h> /* MPIX_Query_cuda_support: refuse device pointers an MPI cannot take */
#endif
#endif
#endif

#define PP_VERSION "1.2"
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

static unsigned char pattern_byte(size_t i, size_t size, int from)
{
    /* depends on position, size and sending rank, so neither a stale buffer from a smaller size
       nor the receiver's own data can pass */
    return (unsigned char)((i * 131u + size * 7u + (size_t)from * 29u + 1u) & 0xffu);
}

static void *host_alloc(size_t bytes)
{
    /* page-aligned, as OSU's buffers: malloc's 16-byte alignment costs up to 30% in
       shared-memory copies between 2 KiB and 512 KiB (perf/pingpong_vs_osu.py) */
    void *p = NULL;
    if (posix_memalign(&p, (size_t)sysconf(_SC_PAGESIZE), bytes ? bytes : 1) != 0)
        die(3, "cannot allocate %zu bytes of host memory", bytes);
    return p;
}

/* One rank's buffers, allocated once at the largest size. `send` and `recv` are what MPI sees:
   the host buffers in the cpu and staged modes, the device ones in the cuda-aware mode. */
struct buffers {
    unsigned char *host_send, *host_recv;
    void *dev_send, *dev_recv;
    void *send, *recv;
};

/* staged mode: the device buffers go through the host ones around every MPI call */
static void staged_copy(enum mode m, void *dst, const void *src, size_t bytes, int to_device)
{
#ifdef COMMSTACK_CUDA
    if (m == MODE_STAGED)
        CUDA_CHECK(cudaMemcpy(dst, src, bytes, to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost));
#else
    (void)m, (void)dst, (void)src, (void)bytes, (void)to_device;
#endif
}

/* One round trip, as osu_latency: rank 0 sends then receives, rank 1 receives then sends. */
static void round_trip(enum mode m, const struct buffers *b, size_t bytes)
{
    int peer = 1 - rank;
    if (rank == 0) {
        staged_copy(m, b->host_send, b->dev_send, bytes, 0);
        MPI_Send(b->send, (int)bytes, MPI_BYTE, peer, TAG_PING, MPI_COMM_WORLD);
        MPI_Recv(b->recv, (int)bytes, MPI_BYTE, peer, TAG_PONG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        staged_copy(m, b->dev_recv, b->host_recv, bytes, 1);
    } else {
        MPI_Recv(b->recv, (int)bytes, MPI_BYTE, peer, TAG_PING, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        staged_copy(m, b->dev_recv, b->host_recv, bytes, 1);
        staged_copy(m, b->host_send, b->dev_send, bytes, 0);
        MPI_Send(b->send, (int)bytes, MPI_BYTE, peer, TAG_PONG, MPI_COMM_WORLD);
    }
}

#ifdef COMMSTACK_CUDA
/* Picks this rank's GPU; on failure writes why into `why` (empty when all is well). */
static void select_device(enum mode m, char *why, size_t len)
{
    /* local rank from a shared-memory split: works under srun, mpirun and containers */
    MPI_Comm node;
    int local, ndev = 0;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);
    MPI_Comm_free(&node);
    cudaError_t err = cudaGetDeviceCount(&ndev);
    if (err != cudaSuccess)
        snprintf(why, len, "no usable CUDA device (no GPU, or no driver or too old a one): %s (cudaGetDeviceCount error %d)",
                 cudaGetErrorString(err), (int)err);
    else if (ndev == 0)
        snprintf(why, len, "no CUDA device on this node");
    else if ((err = cudaSetDevice(local % ndev)) != cudaSuccess)
        snprintf(why, len, "cannot use CUDA device %d: %s (%d)", local % ndev, cudaGetErrorString(err), (int)err);
#if defined(MPIX_CUDA_AWARE_SUPPORT)
    else if (m == MODE_CUDA_AWARE && !MPIX_Query_cuda_support())
        snprintf(why, len, "this MPI library is not CUDA-aware (MPIX_Query_cuda_support() = 0)");
#else
    (void)m;
#endif
}
#endif

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
    if (m != MODE_CPU) {
        /* every rank learns whether all have a device, so none is left waiting in MPI */
        char why[256] = "";
        select_device(m, why, sizeof why);
        int ok = why[0] == '\0', all_ok;
        MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (!ok)
            fprintf(stderr, "mpi-pingpong: error (rank %d): mode '%s': %s\n", rank, mode_names[m], why);
        if (!all_ok) {
            MPI_Finalize();
            return 3;
        }
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
    struct buffers b = {host_alloc(max_bytes), host_alloc(max_bytes), NULL, NULL, NULL, NULL};
    b.send = b.host_send;
    b.recv = b.host_recv;
#ifdef COMMSTACK_CUDA
    if (m != MODE_CPU) {
        if (cudaMalloc(&b.dev_send, max_bytes) != cudaSuccess || cudaMalloc(&b.dev_recv, max_bytes) != cudaSuccess)
            die(3, "cannot allocate 2 x %zu bytes of device memory", max_bytes);
        if (m == MODE_CUDA_AWARE) {
            b.send = b.dev_send;
            b.recv = b.dev_recv;
        }
    }
#endif
    for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
        for (size_t i = 0; i < bytes; i++)
            b.host_send[i] = pattern_byte(i, bytes, rank);
        memset(b.host_recv, 0, bytes);
#ifdef COMMSTACK_CUDA
        if (m != MODE_CPU) {
            CUDA_CHECK(cudaMemcpy(b.dev_send, b.host_send, bytes, cudaMemcpyHostToDevice));
            CUDA_CHECK(cudaMemcpy(b.dev_recv, b.host_recv, bytes, cudaMemcpyHostToDevice));
        }
#endif
        /* as osu_latency: warm-up and timed round trips in one loop after one barrier, each
           timed round trip timed on its own */
        MPI_Barrier(MPI_COMM_WORLD);
        double elapsed = 0.0;
        for (long i = 0; i < warmup + loops; i++) {
            double t0 = MPI_Wtime();
            round_trip(m, &b, bytes);
            if (i >= warmup)
                elapsed += MPI_Wtime() - t0;
        }

#ifdef COMMSTACK_CUDA
        if (m != MODE_CPU)
            CUDA_CHECK(cudaMemcpy(b.host_recv, b.dev_recv, bytes, cudaMemcpyDeviceToHost));
#endif
        long long bad_at = -1;
        for (size_t i = 0; i < bytes; i++)
            if (b.host_recv[i] != pattern_byte(i, bytes, 1 - rank)) {
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
    if (m != MODE_CPU) {
        CUDA_CHECK(cudaFree(b.dev_send));
        CUDA_CHECK(cudaFree(b.dev_recv));
    }
#endif
    free(b.host_send);
    free(b.host_recv);
    if (rank == 0)
        printf("# mpi-pingpong done: %s\n", failures ? "data check FAILED" : "all sizes passed");
    MPI_Finalize();
    return failures ? 1 : 0;
}
