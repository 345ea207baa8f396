/* ludcmp: LU decomposition in place (no pivoting), then forward and back substitution.
 * Follows PolyBench/C 4.2.1 linear-algebra/solvers/ludcmp/ludcmp.c: init_array() and
 * kernel_ludcmp() verbatim with DATA_TYPE float (init_array's `(i+1)/fn/2.0 + 4` is
 * evaluated in double there and here). Difference: n from the command line (MINI_DATASET
 * is 40).
 * usage: ludcmp OUT n */
#include "polybench.h"

static void init_array(int n, DATA_TYPE A[n][n], DATA_TYPE b[n], DATA_TYPE x[n], DATA_TYPE y[n]) {
    int i, j;
    DATA_TYPE fn = (DATA_TYPE)n;
    for (i = 0; i < n; i++) {
        x[i] = 0;
        y[i] = 0;
        b[i] = (i + 1) / fn / 2.0 + 4;
    }
    for (i = 0; i < n; i++) {
        for (j = 0; j <= i; j++)
            A[i][j] = (DATA_TYPE)(-j % n) / n + 1;
        for (j = i + 1; j < n; j++) {
            A[i][j] = 0;
        }
        A[i][i] = 1;
    }
    /* Make the matrix positive semi-definite. */
    /* not necessary for LU, but using same code as cholesky */
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

static void kernel_ludcmp(int n, DATA_TYPE A[n][n], DATA_TYPE b[n], DATA_TYPE x[n], DATA_TYPE y[n]) {
    int i, j, k;
    DATA_TYPE w;
    for (i = 0; i < n; i++) {
        for (j = 0; j < i; j++) {
            w = A[i][j];
            for (k = 0; k < j; k++) {
                w -= A[i][k] * A[k][j];
            }
            A[i][j] = w / A[j][j];
        }
        for (j = i; j < n; j++) {
            w = A[i][j];
            for (k = 0; k < i; k++) {
                w -= A[i][k] * A[k][j];
            }
            A[i][j] = w;
        }
    }
    for (i = 0; i < n; i++) {
        w = b[i];
        for (j = 0; j < i; j++)
            w -= A[i][j] * y[j];
        y[i] = w;
    }
    for (i = n - 1; i >= 0; i--) {
        w = y[i];
        for (j = i + 1; j < n; j++)
            w -= A[i][j] * x[j];
        x[i] = w / A[i][i];
    }
}

int main(int argc, char **argv) {
    int n = arg_int(argc, argv, 2);
    DATA_TYPE (*A)[n] = alloc_array(n, n, sizeof(DATA_TYPE));
    DATA_TYPE *b = alloc_array(1, n, sizeof(DATA_TYPE)), *x = alloc_array(1, n, sizeof(DATA_TYPE));
    DATA_TYPE *y = alloc_array(1, n, sizeof(DATA_TYPE));
    init_array(n, A, b, x, y);
    kernel_ludcmp(n, A, b, x, y);
    FILE *f = out_open(argv[1]);
    out_f32(f, &A[0][0], n * n);
    out_f32(f, y, n);
    out_f32(f, x, n);
    fclose(f);
    return 0;
}
