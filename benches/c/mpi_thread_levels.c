/* What MPI's thread level costs the exchange pardis-mpi makes per small frame (issue 31): on
 * 2 ranks, each iteration posts MPI_Isend of BYTES bytes to the other rank, MPI_Improbe
 * (any source, any tag) until a message is there, MPI_Mrecv, then MPI_Test until the send is
 * done; then the same exchange with the receive posted before the send (MPI_Irecv of the
 * other rank's message, MPI_Isend, MPI_Test of both until done: what a transport with
 * pre-posted receives would make); then pardis-mpi's own calls since session 8 with no engine
 * work around them (a receive from any source with any tag posted ahead into a 64 KiB landing
 * buffer, the payload copied behind a 56-byte header and sent with MPI_Isend, MPI_Test of the
 * landing receive until the peer's frame is there, its payload reduced (f32 sum) from the
 * landing buffer, the receive posted again, MPI_Test of the send: the floor under pardis-mpi's
 * small all-reduce at the same thread level); then the same number of MPI_Allreduce (f32 sum)
 * calls.
 *
 * Build: mpicc -O2 -o mpi_thread_levels benches/c/mpi_thread_levels.c
 * Run:   mpirun -n 2 ./mpi_thread_levels LEVEL BYTES [SAMPLES]
 *        LEVEL 0..3 = MPI_THREAD_SINGLE, FUNNELED, SERIALIZED, MULTIPLE (requested from
 *        MPI_Init_thread; the level provided is printed).
 *
 * SAMPLES (default 15) samples of 5000 iterations each; rank 0 prints the fastest sample of
 * each loop in microseconds per iteration: "level L provided P BYTES B exchange_us X
 * preposted_us Z landing_us W allreduce_us Y". One thread calls MPI throughout, so every level
 * is legal. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    int level = argc > 1 ? atoi(argv[1]) : 0;
    int n = argc > 2 ? atoi(argv[2]) : 1024;
    int samples = argc > 3 ? atoi(argv[3]) : 15;
    const int iters = 5000;
    int provided;
    MPI_Init_thread(&argc, &argv, level, &provided);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2 || level < 0 || level > 3 || n < 4 || samples < 1) {
        if (rank == 0) fprintf(stderr, "usage: mpirun -n 2 mpi_thread_levels LEVEL(0-3) BYTES [SAMPLES]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    enum { HEADER = 56, LANDING = HEADER + (64 << 10) };
    if (n >= (64 << 10)) {
        if (rank == 0) fprintf(stderr, "BYTES must be below 64 KiB (a packed frame)\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    char *packed = malloc(HEADER + n), *landing = malloc(LANDING);
    memset(packed, 0, HEADER);
    char *s = malloc(n), *r = malloc(n);
    float *fs = malloc(n), *fr = malloc(n);
    memset(s, 1, n);
    for (int i = 0; i < n / 4; i++) fs[i] = 1.0f;
    int peer = 1 - rank;
    double best_x = 1e30, best_p = 1e30, best_l = 1e30, best_a = 1e30;
    for (int k = 0; k < samples; k++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t = MPI_Wtime();
        for (int i = 0; i < iters; i++) {
            MPI_Request q;
            MPI_Isend(s, n, MPI_BYTE, peer, 7, MPI_COMM_WORLD, &q);
            int flag = 0;
            MPI_Message m;
            MPI_Status st;
            while (!flag) MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &m, &st);
            MPI_Mrecv(r, n, MPI_BYTE, &m, MPI_STATUS_IGNORE);
            int done = 0;
            while (!done) MPI_Test(&q, &done, MPI_STATUS_IGNORE);
        }
        double x = (MPI_Wtime() - t) / iters * 1e6;
        MPI_Barrier(MPI_COMM_WORLD);
        t = MPI_Wtime();
        for (int i = 0; i < iters; i++) {
            MPI_Request q[2];
            MPI_Irecv(r, n, MPI_BYTE, peer, 8, MPI_COMM_WORLD, &q[0]);
            MPI_Isend(s, n, MPI_BYTE, peer, 8, MPI_COMM_WORLD, &q[1]);
            int done = 0;
            while (!done) MPI_Testall(2, q, &done, MPI_STATUSES_IGNORE);
        }
        double p = (MPI_Wtime() - t) / iters * 1e6;
        MPI_Request land;
        MPI_Irecv(landing, LANDING, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &land);
        MPI_Barrier(MPI_COMM_WORLD);
        t = MPI_Wtime();
        for (int i = 0; i < iters; i++) {
            memcpy(packed + HEADER, fs, n);
            MPI_Request q;
            MPI_Isend(packed, HEADER + n, MPI_BYTE, peer, 9, MPI_COMM_WORLD, &q);
            int flag = 0;
            while (!flag) MPI_Test(&land, &flag, MPI_STATUS_IGNORE);
            const float *in = (const float *)(landing + HEADER);
            for (int j = 0; j < n / 4; j++) fr[j] = fs[j] + in[j];
            MPI_Irecv(landing, LANDING, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD,
                      &land);
            int done = 0;
            while (!done) MPI_Test(&q, &done, MPI_STATUS_IGNORE);
        }
        double l = (MPI_Wtime() - t) / iters * 1e6;
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Cancel(&land);
        MPI_Wait(&land, MPI_STATUS_IGNORE);
        MPI_Barrier(MPI_COMM_WORLD);
        t = MPI_Wtime();
        for (int i = 0; i < iters; i++)
            MPI_Allreduce(fs, fr, n / 4, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double a = (MPI_Wtime() - t) / iters * 1e6;
        if (x < best_x) best_x = x;
        if (p < best_p) best_p = p;
        if (l < best_l) best_l = l;
        if (a < best_a) best_a = a;
    }
    if (rank == 0)
        printf("level %d provided %d BYTES %d exchange_us %.2f preposted_us %.2f landing_us %.2f "
               "allreduce_us %.2f\n",
               level, provided, n, best_x, best_p, best_l, best_a);
    free(packed);
    free(landing);
    free(s);
    free(r);
    free(fs);
    free(fr);
    MPI_Finalize();
    return 0;
}
