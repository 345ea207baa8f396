/* trisolv in PolyBench/C 4.2.1's default double configuration (DATA_TYPE_IS_DOUBLE):
 * linear-algebra/solvers/trisolv/trisolv.c, init_array() and kernel_trisolv() verbatim,
 * as c/trisolv.c with DATA_TYPE double (every division an f64 division).
 * usage: trisolv_f64 OUT n */
#define DATA_TYPE double
#define SCALAR_VAL(x) x
#define SQRT_FUN(x) sqrt(x)
#include "polybench.h"

static void init_array(int n, DATA_TYPE L[n][n], DATA_TYPE x[n], DATA_TYPE b[n]) {
    int i, j;
    for (i = 0; i < n; i++) {
        x[i] = -999;
        b[i] = i;
        for (j = 0; j <= i; j++)
            L[i][j] = (DATA_TYPE)(i + n - j + 1) * 2 / n;
    }
}

static void kernel_trisolv(int n, DATA_TYPE L[n][n], DATA_TYPE x[n], DATA_TYPE b[n]) {
    int i, j;
    for (i = 0; i < n; i++) {
        x[i] = b[i];
        for (j = 0; j < i; j++)
            x[i] -= L[i][j] * x[j];
        x[i] = x[i] / L[i][i];
    }
}

int main(int argc, char **argv) {
    int n = arg_int(argc, argv, 2);
    DATA_TYPE (*L)[n] = alloc_array(n, n, sizeof(DATA_TYPE));
    DATA_TYPE *x = alloc_array(1, n, sizeof(DATA_TYPE)), *b = alloc_array(1, n, sizeof(DATA_TYPE));
    init_array(n, L, x, b);
    kernel_trisolv(n, L, x, b);
    FILE *f = out_open(argv[1]);
    out_f64(f, x, n);
    fclose(f);
    return 0;
}
