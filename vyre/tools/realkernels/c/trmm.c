/* trmm: B := alpha * A^T * B with A unit lower triangular (m x m), B m x n, in place.
 * Follows PolyBench/C 4.2.1 linear-algebra/blas/trmm/trmm.c: init_array() and kernel_trmm()
 * verbatim with DATA_TYPE float (alpha = 1.5 stored in float). Difference: m and n from the
 * command line (MINI_DATASET is m = 20, n = 30).
 * usage: trmm OUT m n */
#include "polybench.h"

static void init_array(int m, int n, DATA_TYPE *alpha, DATA_TYPE A[m][m], DATA_TYPE B[m][n]) {
    int i, j;
    *alpha = 1.5;
    for (i = 0; i < m; i++) {
        for (j = 0; j < i; j++) {
            A[i][j] = (DATA_TYPE)((i + j) % m) / m;
        }
        A[i][i] = 1.0;
        for (j = 0; j < n; j++) {
            B[i][j] = (DATA_TYPE)((n + (i - j)) % n) / n;
        }
    }
}

static void kernel_trmm(int m, int n, DATA_TYPE alpha, DATA_TYPE A[m][m], DATA_TYPE B[m][n]) {
    int i, j, k;
    for (i = 0; i < m; i++)
        for (j = 0; j < n; j++) {
            for (k = i + 1; k < m; k++)
                B[i][j] += A[k][i] * B[k][j];
            B[i][j] = alpha * B[i][j];
        }
}

int main(int argc, char **argv) {
    int m = arg_int(argc, argv, 2), n = arg_int(argc, argv, 3);
    DATA_TYPE alpha;
    DATA_TYPE (*A)[m] = alloc_array(m, m, sizeof(DATA_TYPE));
    DATA_TYPE (*B)[n] = alloc_array(m, n, sizeof(DATA_TYPE));
    init_array(m, n, &alpha, A, B);
    kernel_trmm(m, n, alpha, A, B);
    FILE *f = out_open(argv[1]);
    out_f32(f, &B[0][0], m * n);
    fclose(f);
    return 0;
}
