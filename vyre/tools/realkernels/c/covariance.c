/* covariance: the m x m covariance matrix of n observations of m variables.
 * Follows PolyBench/C 4.2.1 datamining/covariance/covariance.c: init_array() and
 * kernel_covariance() verbatim with DATA_TYPE float. Differences: m and n from the command
 * line (MINI_DATASET is m = 28, n = 32), and mean is written too.
 * usage: covariance OUT m n */
#include "polybench.h"

static void init_array(int m, int n, DATA_TYPE *float_n, DATA_TYPE data[n][m]) {
    int i, j;
    *float_n = (DATA_TYPE)n;
    for (i = 0; i < n; i++)
        for (j = 0; j < m; j++)
            data[i][j] = ((DATA_TYPE)i * j) / m;
}

static void kernel_covariance(int m, int n, DATA_TYPE float_n, DATA_TYPE data[n][m],
                              DATA_TYPE cov[m][m], DATA_TYPE mean[m]) {
    int i, j, k;
    for (j = 0; j < m; j++) {
        mean[j] = SCALAR_VAL(0.0);
        for (i = 0; i < n; i++)
            mean[j] += data[i][j];
        mean[j] /= float_n;
    }
    for (i = 0; i < n; i++)
        for (j = 0; j < m; j++)
            data[i][j] -= mean[j];
    for (i = 0; i < m; i++)
        for (j = i; j < m; j++) {
            cov[i][j] = SCALAR_VAL(0.0);
            for (k = 0; k < n; k++)
                cov[i][j] += data[k][i] * data[k][j];
            cov[i][j] /= (float_n - SCALAR_VAL(1.0));
            cov[j][i] = cov[i][j];
        }
}

int main(int argc, char **argv) {
    int m = arg_int(argc, argv, 2), n = arg_int(argc, argv, 3);
    DATA_TYPE float_n;
    DATA_TYPE (*data)[m] = alloc_array(n, m, sizeof(DATA_TYPE));
    DATA_TYPE (*cov)[m] = alloc_array(m, m, sizeof(DATA_TYPE));
    DATA_TYPE *mean = alloc_array(1, m, sizeof(DATA_TYPE));
    init_array(m, n, &float_n, data);
    kernel_covariance(m, n, float_n, data, cov, mean);
    FILE *f = out_open(argv[1]);
    out_f32(f, &cov[0][0], m * m);
    out_f32(f, mean, m);
    fclose(f);
    return 0;
}
