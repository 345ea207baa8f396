/* jacobi-1d in PolyBench/C 4.2.1's default double configuration (DATA_TYPE_IS_DOUBLE):
 * stencils/jacobi-1d/jacobi-1d.c, init_array() and kernel_jacobi_1d() verbatim. Difference:
 * tsteps and n from the command line (SMALL_DATASET is 40 steps, 120 points).
 * usage: jacobi_1d_f64 OUT tsteps n */
#define DATA_TYPE double
#define SCALAR_VAL(x) x
#define SQRT_FUN(x) sqrt(x)
#include "polybench.h"

static void init_array(int n, DATA_TYPE A[n], DATA_TYPE B[n]) {
    int i;
    for (i = 0; i < n; i++) {
        A[i] = ((DATA_TYPE) i + 2) / n;
        B[i] = ((DATA_TYPE) i + 3) / n;
    }
}

static void kernel_jacobi_1d(int tsteps, int n, DATA_TYPE A[n], DATA_TYPE B[n]) {
    int t, i;
    for (t = 0; t < tsteps; t++) {
        for (i = 1; i < n - 1; i++)
            B[i] = 0.33333 * (A[i - 1] + A[i] + A[i + 1]);
        for (i = 1; i < n - 1; i++)
            A[i] = 0.33333 * (B[i - 1] + B[i] + B[i + 1]);
    }
}

int main(int argc, char **argv) {
    int tsteps = arg_int(argc, argv, 2), n = arg_int(argc, argv, 3);
    DATA_TYPE *A = alloc_array(1, n, sizeof(DATA_TYPE)), *B = alloc_array(1, n, sizeof(DATA_TYPE));
    init_array(n, A, B);
    kernel_jacobi_1d(tsteps, n, A, B);
    FILE *f = out_open(argv[1]);
    out_f64(f, A, n);
    out_f64(f, B, n);
    fclose(f);
    return 0;
}
