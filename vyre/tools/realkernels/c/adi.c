/* adi: alternating direction implicit solver of 2-D heat diffusion (a tridiagonal solve per
 * column, then per row, each time step).
 * Follows PolyBench/C 4.2.1 stencils/adi/adi.c: init_array() and kernel_adi() verbatim with
 * DATA_TYPE float. Difference: tsteps and n from the command line (MINI_DATASET is
 * tsteps = 20, n = 20), and v, p, q are written too.
 * usage: adi OUT tsteps n */
#include "polybench.h"

static void init_array(int n, DATA_TYPE u[n][n]) {
    int i, j;
    for (i = 0; i < n; i++)
        for (j = 0; j < n; j++) {
            u[i][j] = (DATA_TYPE)(i + n - j) / n;
        }
}

static void kernel_adi(int tsteps, int n, DATA_TYPE u[n][n], DATA_TYPE v[n][n], DATA_TYPE p[n][n],
                       DATA_TYPE q[n][n]) {
    int t, i, j;
    DATA_TYPE DX, DY, DT;
    DATA_TYPE B1, B2;
    DATA_TYPE mul1, mul2;
    DATA_TYPE a, b, c, d, e, f;
    DX = SCALAR_VAL(1.0) / (DATA_TYPE)n;
    DY = SCALAR_VAL(1.0) / (DATA_TYPE)n;
    DT = SCALAR_VAL(1.0) / (DATA_TYPE)tsteps;
    B1 = SCALAR_VAL(2.0);
    B2 = SCALAR_VAL(1.0);
    mul1 = B1 * DT / (DX * DX);
    mul2 = B2 * DT / (DY * DY);
    a = -mul1 / SCALAR_VAL(2.0);
    b = SCALAR_VAL(1.0) + mul1;
    c = a;
    d = -mul2 / SCALAR_VAL(2.0);
    e = SCALAR_VAL(1.0) + mul2;
    f = d;
    for (t = 1; t <= tsteps; t++) {
        /* Column Sweep */
        for (i = 1; i < n - 1; i++) {
            v[0][i] = SCALAR_VAL(1.0);
            p[i][0] = SCALAR_VAL(0.0);
            q[i][0] = v[0][i];
            for (j = 1; j < n - 1; j++) {
                p[i][j] = -c / (a * p[i][j - 1] + b);
                q[i][j] = (-d * u[j][i - 1] + (SCALAR_VAL(1.0) + SCALAR_VAL(2.0) * d) * u[j][i]
                           - f * u[j][i + 1] - a * q[i][j - 1]) / (a * p[i][j - 1] + b);
            }
            v[n - 1][i] = SCALAR_VAL(1.0);
            for (j = n - 2; j >= 1; j--) {
                v[j][i] = p[i][j] * v[j + 1][i] + q[i][j];
            }
        }
        /* Row Sweep */
        for (i = 1; i < n - 1; i++) {
            u[i][0] = SCALAR_VAL(1.0);
            p[i][0] = SCALAR_VAL(0.0);
            q[i][0] = u[i][0];
            for (j = 1; j < n - 1; j++) {
                p[i][j] = -f / (d * p[i][j - 1] + e);
                q[i][j] = (-a * v[i - 1][j] + (SCALAR_VAL(1.0) + SCALAR_VAL(2.0) * a) * v[i][j]
                           - c * v[i + 1][j] - d * q[i][j - 1]) / (d * p[i][j - 1] + e);
            }
            u[i][n - 1] = SCALAR_VAL(1.0);
            for (j = n - 2; j >= 1; j--) {
                u[i][j] = p[i][j] * u[i][j + 1] + q[i][j];
            }
        }
    }
}

int main(int argc, char **argv) {
    int tsteps = arg_int(argc, argv, 2), n = arg_int(argc, argv, 3);
    DATA_TYPE (*u)[n] = alloc_array(n, n, sizeof(DATA_TYPE));
    DATA_TYPE (*v)[n] = alloc_array(n, n, sizeof(DATA_TYPE));
    DATA_TYPE (*p)[n] = alloc_array(n, n, sizeof(DATA_TYPE));
    DATA_TYPE (*q)[n] = alloc_array(n, n, sizeof(DATA_TYPE));
    init_array(n, u);
    kernel_adi(tsteps, n, u, v, p, q);
    FILE *f = out_open(argv[1]);
    out_f32(f, &u[0][0], n * n);
    out_f32(f, &v[0][0], n * n);
    out_f32(f, &p[0][0], n * n);
    out_f32(f, &q[0][0], n * n);
    fclose(f);
    return 0;
}
