/* gramschmidt: QR decomposition of an m x n matrix by modified Gram-Schmidt (A becomes the
 * residual, Q and R the factors).
 * Follows PolyBench/C 4.2.1 linear-algebra/solvers/gramschmidt/gramschmidt.c: init_array()
 * and kernel_gramschmidt() verbatim with DATA_TYPE float. Difference: m and n from the
 * command line (MINI_DATASET is m = 20, n = 30).
 * usage: gramschmidt OUT m n */
#include "polybench.h"

static void init_array(int m, int n, DATA_TYPE A[m][n], DATA_TYPE R[n][n], DATA_TYPE Q[m][n]) {
    int i, j;
    for (i = 0; i < m; i++)
        for (j = 0; j < n; j++) {
            A[i][j] = (((DATA_TYPE)((i * j) % m) / m) * 100) + 10;
            Q[i][j] = 0.0;
        }
    for (i = 0; i < n; i++)
        for (j = 0; j < n; j++)
            R[i][j] = 0.0;
}

static void kernel_gramschmidt(int m, int n, DATA_TYPE A[m][n], DATA_TYPE R[n][n],
                               DATA_TYPE Q[m][n]) {
    int i, j, k;
    DATA_TYPE nrm;
    for (k = 0; k < n; k++) {
        nrm = SCALAR_VAL(0.0);
        for (i = 0; i < m; i++)
            nrm += A[i][k] * A[i][k];
        R[k][k] = SQRT_FUN(nrm);
        for (i = 0; i < m; i++)
            Q[i][k] = A[i][k] / R[k][k];
        for (j = k + 1; j < n; j++) {
            R[k][j] = SCALAR_VAL(0.0);
            for (i = 0; i < m; i++)
                R[k][j] += Q[i][k] * A[i][j];
            for (i = 0; i < m; i++)
                A[i][j] = A[i][j] - Q[i][k] * R[k][j];
        }
    }
}

int main(int argc, char **argv) {
    int m = arg_int(argc, argv, 2), n = arg_int(argc, argv, 3);
    DATA_TYPE (*A)[n] = alloc_array(m, n, sizeof(DATA_TYPE));
    DATA_TYPE (*R)[n] = alloc_array(n, n, sizeof(DATA_TYPE));
    DATA_TYPE (*Q)[n] = alloc_array(m, n, sizeof(DATA_TYPE));
    init_array(m, n, A, R, Q);
    kernel_gramschmidt(m, n, A, R, Q);
    FILE *f = out_open(argv[1]);
    out_f32(f, &A[0][0], m * n);
    out_f32(f, &R[0][0], n * n);
    out_f32(f, &Q[0][0], m * n);
    fclose(f);
    return 0;
}
