/* correlation: the m x m correlation matrix of n observations of m variables.
 * Follows PolyBench/C 4.2.1 datamining/correlation/correlation.c: init_array() and
 * kernel_correlation() verbatim with DATA_TYPE float. Differences: m and n from the command
 * line (MINI_DATASET is m = 28, n = 32; init_array's `*float_n = (DATA_TYPE)N` and loop
 * bounds N, M read the runtime sizes), and mean, stddev and the centred data are written
 * too.
 * usage: correlation OUT m n */
#include "polybench.h"

static void init_array(int m, int n, DATA_TYPE *float_n, DATA_TYPE data[n][m]) {
    int i, j;
    *float_n = (DATA_TYPE)n;
    for (i = 0; i < n; i++)
        for (j = 0; j < m; j++)
            data[i][j] = (DATA_TYPE)(i * j) / m + i;
}

static void kernel_correlation(int m, int n, DATA_TYPE float_n, DATA_TYPE data[n][m],
                               DATA_TYPE corr[m][m], DATA_TYPE mean[m], DATA_TYPE stddev[m]) {
    int i, j, k;
    DATA_TYPE eps = SCALAR_VAL(0.1);
    for (j = 0; j < m; j++) {
        mean[j] = SCALAR_VAL(0.0);
        for (i = 0; i < n; i++)
            mean[j] += data[i][j];
        mean[j] /= float_n;
    }
    for (j = 0; j < m; j++) {
        stddev[j] = SCALAR_VAL(0.0);
        for (i = 0; i < n; i++)
            stddev[j] += (data[i][j] - mean[j]) * (data[i][j] - mean[j]);
        stddev[j] /= float_n;
        stddev[j] = SQRT_FUN(stddev[j]);
        /* The following in an inelegant but usual way to handle
           near-zero std. dev. values, which below would cause a zero-
           divide. */
        stddev[j] = stddev[j] <= eps ? SCALAR_VAL(1.0) : stddev[j];
    }
    /* Center and reduce the column vectors. */
    for (i = 0; i < n; i++)
        for (j = 0; j < m; j++) {
            data[i][j] -= mean[j];
            data[i][j] /= SQRT_FUN(float_n) * stddev[j];
        }
    /* Calculate the m * m correlation matrix. */
    for (i = 0; i < m - 1; i++) {
        corr[i][i] = SCALAR_VAL(1.0);
        for (j = i + 1; j < m; j++) {
            corr[i][j] = SCALAR_VAL(0.0);
            for (k = 0; k < n; k++)
                corr[i][j] += (data[k][i] * data[k][j]);
            corr[j][i] = corr[i][j];
        }
    }
    corr[m - 1][m - 1] = SCALAR_VAL(1.0);
}

int main(int argc, char **argv) {
    int m = arg_int(argc, argv, 2), n = arg_int(argc, argv, 3);
    DATA_TYPE float_n;
    DATA_TYPE (*data)[m] = alloc_array(n, m, sizeof(DATA_TYPE));
    DATA_TYPE (*corr)[m] = alloc_array(m, m, sizeof(DATA_TYPE));
    DATA_TYPE *mean = alloc_array(1, m, sizeof(DATA_TYPE)), *stddev = alloc_array(1, m, sizeof(DATA_TYPE));
    init_array(m, n, &float_n, data);
    kernel_correlation(m, n, float_n, data, corr, mean, stddev);
    FILE *f = out_open(argv[1]);
    out_f32(f, &corr[0][0], m * m);
    out_f32(f, mean, m);
    out_f32(f, stddev, m);
    out_f32(f, &data[0][0], n * m);
    fclose(f);
    return 0;
}
