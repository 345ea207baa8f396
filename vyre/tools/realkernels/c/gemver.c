/* gemver: A := A + u1 v1^T + u2 v2^T; x := beta A^T y + z; w := alpha A x.
 * Follows PolyBench/C 4.2.1 linear-algebra/blas/gemver/gemver.c: init_array() and
 * kernel_gemver() verbatim with DATA_TYPE float (alpha = 1.5, beta = 1.2 stored in float;
 * init_array's `((i+1)/fn)/2.0` etc. evaluated in double, as there). Difference: n from the
 * command line (MINI_DATASET is 40), and A and x are written too.
 * usage: gemver OUT n */
#include "polybench.h"

static void init_array(int n, DATA_TYPE *alpha, DATA_TYPE *beta, DATA_TYPE A[n][n],
                       DATA_TYPE u1[n], DATA_TYPE v1[n], DATA_TYPE u2[n], DATA_TYPE v2[n],
                       DATA_TYPE w[n], DATA_TYPE x[n], DATA_TYPE y[n], DATA_TYPE z[n]) {
    int i, j;
    *alpha = 1.5;
    *beta = 1.2;
    DATA_TYPE fn = (DATA_TYPE)n;
    for (i = 0; i < n; i++) {
        u1[i] = i;
        u2[i] = ((i + 1) / fn) / 2.0;
        v1[i] = ((i + 1) / fn) / 4.0;
        v2[i] = ((i + 1) / fn) / 6.0;
        y[i] = ((i + 1) / fn) / 8.0;
        z[i] = ((i + 1) / fn) / 9.0;
        x[i] = 0.0;
        w[i] = 0.0;
        for (j = 0; j < n; j++)
            A[i][j] = (DATA_TYPE)(i * j % n) / n;
    }
}

static void kernel_gemver(int n, DATA_TYPE alpha, DATA_TYPE beta, DATA_TYPE A[n][n],
                          DATA_TYPE u1[n], DATA_TYPE v1[n], DATA_TYPE u2[n], DATA_TYPE v2[n],
                          DATA_TYPE w[n], DATA_TYPE x[n], DATA_TYPE y[n], DATA_TYPE z[n]) {
    int i, j;
    for (i = 0; i < n; i++)
        for (j = 0; j < n; j++)
            A[i][j] = A[i][j] + u1[i] * v1[j] + u2[i] * v2[j];
    for (i = 0; i < n; i++)
        for (j = 0; j < n; j++)
            x[i] = x[i] + beta * A[j][i] * y[j];
    for (i = 0; i < n; i++)
        x[i] = x[i] + z[i];
    for (i = 0; i < n; i++)
        for (j = 0; j < n; j++)
            w[i] = w[i] + alpha * A[i][j] * x[j];
}

int main(int argc, char **argv) {
    int n = arg_int(argc, argv, 2);
    DATA_TYPE alpha, beta;
    DATA_TYPE (*A)[n] = alloc_array(n, n, sizeof(DATA_TYPE));
    DATA_TYPE *v[8];
    for (int i = 0; i < 8; i++) v[i] = alloc_array(1, n, sizeof(DATA_TYPE));
    DATA_TYPE *u1 = v[0], *v1 = v[1], *u2 = v[2], *v2 = v[3], *w = v[4], *x = v[5], *y = v[6], *z = v[7];
    init_array(n, &alpha, &beta, A, u1, v1, u2, v2, w, x, y, z);
    kernel_gemver(n, alpha, beta, A, u1, v1, u2, v2, w, x, y, z);
    FILE *f = out_open(argv[1]);
    out_f32(f, w, n);
    out_f32(f, &A[0][0], n * n);
    out_f32(f, x, n);
    fclose(f);
    return 0;
}
