/* symm: C := alpha*A*B + beta*C with A symmetric (its lower triangle stored), m x m; B and C
 * m x n.
 * Follows PolyBench/C 4.2.1 linear-algebra/blas/symm/symm.c: init_array() and kernel_symm()
 * verbatim with DATA_TYPE float (alpha = 1.5 and beta = 1.2 are double literals stored in
 * float, as there). Difference: m and n from the command line (MINI_DATASET is m = 20,
 * n = 30).
 * usage: symm OUT m n */
#include "polybench.h"

static void init_array(int m, int n, DATA_TYPE *alpha, DATA_TYPE *beta, DATA_TYPE C[m][n],
                       DATA_TYPE A[m][m], DATA_TYPE B[m][n]) {
    int i, j;
    *alpha = 1.5;
    *beta = 1.2;
    for (i = 0; i < m; i++)
        for (j = 0; j < n; j++) {
            C[i][j] = (DATA_TYPE)((i + j) % 100) / m;
            B[i][j] = (DATA_TYPE)((n + i - j) % 100) / m;
        }
    for (i = 0; i < m; i++) {
        for (j = 0; j <= i; j++)
            A[i][j] = (DATA_TYPE)((i + j) % 100) / m;
        for (j = i + 1; j < m; j++)
            A[i][j] = -999; /* regions of arrays that should not be used */
    }
}

static void kernel_symm(int m, int n, DATA_TYPE alpha, DATA_TYPE beta, DATA_TYPE C[m][n],
                        DATA_TYPE A[m][m], DATA_TYPE B[m][n]) {
    int i, j, k;
    DATA_TYPE temp2;
    for (i = 0; i < m; i++)
        for (j = 0; j < n; j++) {
            temp2 = 0;
            for (k = 0; k < i; k++) {
                C[k][j] += alpha * B[i][j] * A[i][k];
                temp2 += B[k][j] * A[i][k];
            }
            C[i][j] = beta * C[i][j] + alpha * B[i][j] * A[i][i] + alpha * temp2;
        }
}

int main(int argc, char **argv) {
    int m = arg_int(argc, argv, 2), n = arg_int(argc, argv, 3);
    DATA_TYPE alpha, beta;
    DATA_TYPE (*C)[n] = alloc_array(m, n, sizeof(DATA_TYPE));
    DATA_TYPE (*A)[m] = alloc_array(m, m, sizeof(DATA_TYPE));
    DATA_TYPE (*B)[n] = alloc_array(m, n, sizeof(DATA_TYPE));
    init_array(m, n, &alpha, &beta, C, A, B);
    kernel_symm(m, n, alpha, beta, C, A, B);
    FILE *f = out_open(argv[1]);
    out_f32(f, &C[0][0], m * n);
    fclose(f);
    return 0;
}
