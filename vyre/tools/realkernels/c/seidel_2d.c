/* seidel_2d: Gauss-Seidel sweeps of a 9-point stencil over an n x n grid, in place.
 * Follows PolyBench/C 4.2.1 stencils/seidel-2d/seidel-2d.c: init_array() and
 * kernel_seidel_2d() verbatim with DATA_TYPE float. Difference: tsteps and n from the
 * command line (MINI_DATASET is tsteps = 20, n = 40).
 * usage: seidel_2d OUT tsteps n */
#include "polybench.h"

static void init_array(int n, DATA_TYPE A[n][n]) {
    int i, j;
    for (i = 0; i < n; i++)
        for (j = 0; j < n; j++)
            A[i][j] = ((DATA_TYPE)i * (j + 2) + 2) / n;
}

static void kernel_seidel_2d(int tsteps, int n, DATA_TYPE A[n][n]) {
    int t, i, j;
    for (t = 0; t <= tsteps - 1; t++)
        for (i = 1; i <= n - 2; i++)
            for (j = 1; j <= n - 2; j++)
                A[i][j] = (A[i - 1][j - 1] + A[i - 1][j] + A[i - 1][j + 1]
                           + A[i][j - 1] + A[i][j] + A[i][j + 1]
                           + A[i + 1][j - 1] + A[i + 1][j] + A[i + 1][j + 1]) / SCALAR_VAL(9.0);
}

int main(int argc, char **argv) {
    int tsteps = arg_int(argc, argv, 2), n = arg_int(argc, argv, 3);
    DATA_TYPE (*A)[n] = alloc_array(n, n, sizeof(DATA_TYPE));
    init_array(n, A);
    kernel_seidel_2d(tsteps, n, A);
    FILE *f = out_open(argv[1]);
    out_f32(f, &A[0][0], n * n);
    fclose(f);
    return 0;
}
