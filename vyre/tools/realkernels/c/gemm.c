/* gemm: C := alpha*A*B + beta*C (A ni x nk, B nk x nj, C ni x nj).
 * Follows PolyBench/C 4.2.1 linear-algebra/blas/gemm/gemm.c: init_array() and kernel_gemm()
 * verbatim with DATA_TYPE float (alpha = 1.5 and beta = 1.2 stored in float). Difference:
 * ni, nj and nk from the command line (MINI_DATASET is 20, 25, 30).
 * usage: gemm OUT ni nj nk */
#include "polybench.h"

static void init_array(int ni, int nj, int nk, DATA_TYPE *alpha, DATA_TYPE *beta,
                       DATA_TYPE C[ni][nj], DATA_TYPE A[ni][nk], DATA_TYPE B[nk][nj]) {
    int i, j;
    *alpha = 1.5;
    *beta = 1.2;
    for (i = 0; i < ni; i++)
        for (j = 0; j < nj; j++)
            C[i][j] = (DATA_TYPE)((i * j + 1) % ni) / ni;
    for (i = 0; i < ni; i++)
        for (j = 0; j < nk; j++)
            A[i][j] = (DATA_TYPE)(i * (j + 1) % nk) / nk;
    for (i = 0; i < nk; i++)
        for (j = 0; j < nj; j++)
            B[i][j] = (DATA_TYPE)(i * (j + 2) % nj) / nj;
}

static void kernel_gemm(int ni, int nj, int nk, DATA_TYPE alpha, DATA_TYPE beta,
                        DATA_TYPE C[ni][nj], DATA_TYPE A[ni][nk], DATA_TYPE B[nk][nj]) {
    int i, j, k;
    for (i = 0; i < ni; i++) {
        for (j = 0; j < nj; j++)
            C[i][j] *= beta;
        for (k = 0; k < nk; k++) {
            for (j = 0; j < nj; j++)
                C[i][j] += alpha * A[i][k] * B[k][j];
        }
    }
}

int main(int argc, char **argv) {
    int ni = arg_int(argc, argv, 2), nj = arg_int(argc, argv, 3), nk = arg_int(argc, argv, 4);
    DATA_TYPE alpha, beta;
    DATA_TYPE (*C)[nj] = alloc_array(ni, nj, sizeof(DATA_TYPE));
    DATA_TYPE (*A)[nk] = alloc_array(ni, nk, sizeof(DATA_TYPE));
    DATA_TYPE (*B)[nj] = alloc_array(nk, nj, sizeof(DATA_TYPE));
    init_array(ni, nj, nk, &alpha, &beta, C, A, B);
    kernel_gemm(ni, nj, nk, alpha, beta, C, A, B);
    FILE *f = out_open(argv[1]);
    out_f32(f, &C[0][0], ni * nj);
    fclose(f);
    return 0;
}
