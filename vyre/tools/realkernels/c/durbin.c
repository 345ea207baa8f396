/* durbin: Levinson-Durbin recursion (Toeplitz system solver), y from the vector r.
 * Follows PolyBench/C 4.2.1 linear-algebra/solvers/durbin/durbin.c: init_array() and
 * kernel_durbin() verbatim with DATA_TYPE float. Difference: n from the command line
 * (MINI_DATASET is 40; z is allocated, not a stack array of N).
 * usage: durbin OUT n */
#include "polybench.h"

static void init_array(int n, DATA_TYPE r[n]) {
    int i;
    for (i = 0; i < n; i++) {
        r[i] = (n + 1 - i);
    }
}

static void kernel_durbin(int n, DATA_TYPE r[n], DATA_TYPE y[n]) {
    DATA_TYPE *z = alloc_array(1, n, sizeof(DATA_TYPE));
    DATA_TYPE alpha;
    DATA_TYPE beta;
    DATA_TYPE sum;
    int i, k;
    y[0] = -r[0];
    beta = SCALAR_VAL(1.0);
    alpha = -r[0];
    for (k = 1; k < n; k++) {
        beta = (1 - alpha * alpha) * beta;
        sum = SCALAR_VAL(0.0);
        for (i = 0; i < k; i++) {
            sum += r[k - i - 1] * y[i];
        }
        alpha = -(r[k] + sum) / beta;
        for (i = 0; i < k; i++) {
            z[i] = y[i] + alpha * y[k - i - 1];
        }
        for (i = 0; i < k; i++) {
            y[i] = z[i];
        }
        y[k] = alpha;
    }
    free(z);
}

int main(int argc, char **argv) {
    int n = arg_int(argc, argv, 2);
    DATA_TYPE *r = alloc_array(1, n, sizeof(DATA_TYPE)), *y = alloc_array(1, n, sizeof(DATA_TYPE));
    init_array(n, r);
    kernel_durbin(n, r, y);
    FILE *f = out_open(argv[1]);
    out_f32(f, y, n);
    fclose(f);
    return 0;
}
