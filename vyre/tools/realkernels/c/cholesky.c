/* cholesky: in-place Cholesky factorisation (lower triangle) of an n x n symmetric positive
 * definite matrix.
 * Follows PolyBench/C 4.2.1 linear-algebra/solvers/cholesky/cholesky.c: init_array() and
 * kernel_cholesky() verbatim with DATA_TYPE float. Differences: n from the command line
 * (MINI_DATASET is 40), and the whole matrix is written (print_array prints j <= i; the
 * upper triangle keeps init_array's values).
 * usage: cholesky OUT n */
#include "polybench.h"

static void init_array(int n, DATA_TYPE A[n][n]) {
    int i, j;
    for (i = 0; i < n; i++) {
        for (j = 0; j <= i; j++)
            A[i][j] = (DATA_TYPE)(-j % n) / n + 1;
        for (j = i + 1; j < n; j++) {
            A[i][j] = 0;
        }
        A[i][i] = 1;
    }
    /* Make the matrix positive semi-definite. */
    int r, s, t;
    DATA_TYPE (*B)[n] = alloc_array(n, n, sizeof(DATA_TYPE));
    for (r = 0; r < n; ++r)
        for (s = 0; s < n; ++s)
            B[r][s] = 0;
    for (t = 0; t < n; ++t)
        for (r = 0; r < n; ++r)
            for (s = 0; s < n; ++s)
                B[r][s] += A[r][t] * A[s][t];
    for (r = 0; r < n; ++r)
        for (s = 0; s < n; ++s)
            A[r][s] = B[r][s];
    free(B);
}

static void kernel_cholesky(int n, DATA_TYPE A[n][n]) {
    int i, j, k;
    for (i = 0; i < n; i++) {
        /* j<i */
        for (j = 0; j < i; j++) {
            for (k = 0; k < j; k++) {
                A[i][j] -= A[i][k] * A[j][k];
            }
            A[i][j] /= A[j][j];
        }
        /* i==j case */
        for (k = 0; k < i; k++) {
            A[i][i] -= A[i][k] * A[i][k];
        }
        A[i][i] = SQRT_FUN(A[i][i]);
    }
}

int main(int argc, char **argv) {
    int n = arg_int(argc, argv, 2);
    DATA_TYPE (*A)[n] = alloc_array(n, n, sizeof(DATA_TYPE));
    init_array(n, A);
    kernel_cholesky(n, A);
    FILE *f = out_open(argv[1]);
    out_f32(f, &A[0][0], n * n);
    fclose(f);
    return 0;
}
