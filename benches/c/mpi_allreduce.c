/* MPI_Allreduce as MPI users call it, for scripts/compare-collectives-mpi: plain MPI_Init
 * (no threads), f32 sum, one call per iteration on the same buffers.
 *
 * Build: mpicc -O2 -o mpi_allreduce benches/c/mpi_allreduce.c
 * Run:   mpirun -n RANKS ./mpi_allreduce MIN_BYTES MAX_BYTES REPS
 *
 * For each size (MIN_BYTES, 2x, ... up to MAX_BYTES): ITERS = clamp(64 MiB / bytes, 20, 2000)
 * calls of warm-up, then REPS samples of (barrier; ITERS calls), each sample's time the slowest
 * rank's. Rank 0 prints "bytes ranks median_us min_us max_us" per size, microseconds per call
 * (the same protocol as the `compare_collectives_mpi` example). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long min = argc > 1 ? atol(argv[1]) : 1024;
    long max = argc > 2 ? atol(argv[2]) : (1L << 20);
    int reps = argc > 3 ? atoi(argv[3]) : 7;
    if (min < 4 || max < min || reps < 1) {
        if (rank == 0) fprintf(stderr, "usage: mpi_allreduce MIN_BYTES MAX_BYTES REPS\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (rank == 0) {
        char version[MPI_MAX_LIBRARY_VERSION_STRING];
        int len;
        MPI_Get_library_version(version, &len);
        for (int i = 0; i < len; i++) {
            if (version[i] == '\n' || version[i] == ',') { version[i] = '\0'; break; }
        }
        printf("# c MPI_Allreduce; library: %s\n", version);
    }
    float *send = malloc((size_t)max), *recv = malloc((size_t)max);
    double *samples = malloc(sizeof(double) * (size_t)reps);
    if (!send || !recv || !samples) MPI_Abort(MPI_COMM_WORLD, 3);
    for (long i = 0; i < max / 4; i++) send[i] = 1.0f;
    for (long bytes = min; bytes <= max; bytes *= 2) {
        int count = (int)(bytes / 4);
        long it = (64L << 20) / bytes;
        int iters = (int)(it < 20 ? 20 : it > 2000 ? 2000 : it);
        for (int i = 0; i < iters; i++)
            MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        for (int r = 0; r < reps; r++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            for (int i = 0; i < iters; i++)
                MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            double t = MPI_Wtime() - t0, slowest;
            MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            samples[r] = slowest / iters * 1e6;
        }
        if (recv[0] != (float)size) {
            fprintf(stderr, "rank %d: wrong sum %f\n", rank, recv[0]);
            MPI_Abort(MPI_COMM_WORLD, 4);
        }
        qsort(samples, (size_t)reps, sizeof(double), cmp_double);
        if (rank == 0)
            printf("%ld %d %.3f %.3f %.3f\n", bytes, size, samples[reps / 2], samples[0],
                   samples[reps - 1]);
    }
    free(send);
    free(recv);
    free(samples);
    MPI_Finalize();
    return 0;
}
