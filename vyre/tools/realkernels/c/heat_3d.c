/* heat_3d: explicit 3-D heat equation, ping-pong between A and B.
 * Follows PolyBench/C 4.2.1 stencils/heat-3d/heat-3d.c: init_array() and kernel_heat_3d()
 * verbatim with DATA_TYPE float (the kernel's `t <= TSTEPS` reads tsteps). Difference:
 * tsteps and n from the command line (MINI_DATASET is tsteps = 20, n = 10).
 * usage: heat_3d OUT tsteps n */
#include "polybench.h"

static void init_array(int n, DATA_TYPE A[n][n][n], DATA_TYPE B[n][n][n]) {
    int i, j, k;
    for (i = 0; i < n; i++)
        for (j = 0; j < n; j++)
            for (k = 0; k < n; k++)
                A[i][j][k] = B[i][j][k] = (DATA_TYPE)(i + j + (n - k)) * 10 / (n);
}

static void kernel_heat_3d(int tsteps, int n, DATA_TYPE A[n][n][n], DATA_TYPE B[n][n][n]) {
    int t, i, j, k;
    for (t = 1; t <= tsteps; t++) {
        for (i = 1; i < n - 1; i++) {
            for (j = 1; j < n - 1; j++) {
                for (k = 1; k < n - 1; k++) {
                    B[i][j][k] = SCALAR_VAL(0.125) * (A[i + 1][j][k] - SCALAR_VAL(2.0) * A[i][j][k] + A[i - 1][j][k])
                               + SCALAR_VAL(0.125) * (A[i][j + 1][k] - SCALAR_VAL(2.0) * A[i][j][k] + A[i][j - 1][k])
                               + SCALAR_VAL(0.125) * (A[i][j][k + 1] - SCALAR_VAL(2.0) * A[i][j][k] + A[i][j][k - 1])
                               + A[i][j][k];
                }
            }
        }
        for (i = 1; i < n - 1; i++) {
            for (j = 1; j < n - 1; j++) {
                for (k = 1; k < n - 1; k++) {
                    A[i][j][k] = SCALAR_VAL(0.125) * (B[i + 1][j][k] - SCALAR_VAL(2.0) * B[i][j][k] + B[i - 1][j][k])
                               + SCALAR_VAL(0.125) * (B[i][j + 1][k] - SCALAR_VAL(2.0) * B[i][j][k] + B[i][j - 1][k])
                               + SCALAR_VAL(0.125) * (B[i][j][k + 1] - SCALAR_VAL(2.0) * B[i][j][k] + B[i][j][k - 1])
                               + B[i][j][k];
                }
            }
        }
    }
}

int main(int argc, char **argv) {
    int tsteps = arg_int(argc, argv, 2), n = arg_int(argc, argv, 3);
    DATA_TYPE (*A)[n][n] = calloc((size_t)n * n * n, sizeof(DATA_TYPE));
    DATA_TYPE (*B)[n][n] = calloc((size_t)n * n * n, sizeof(DATA_TYPE));
    if (!A || !B) { perror("calloc"); return 1; }
    init_array(n, A, B);
    kernel_heat_3d(tsteps, n, A, B);
    FILE *f = out_open(argv[1]);
    out_f32(f, &A[0][0][0], n * n * n);
    out_f32(f, &B[0][0][0], n * n * n);
    fclose(f);
    return 0;
}
