/* nussinov: RNA secondary-structure folding by dynamic programming (integer table).
 * Follows PolyBench/C 4.2.1 medley/nussinov/nussinov.c: the base type, the match and
 * max_score macros, init_array() and kernel_nussinov() verbatim with its default DATA_TYPE
 * int (DATA_TYPE_IS_INT). Difference: n from the command line (MINI_DATASET is 60), and the
 * whole table is written (print_array prints j >= i).
 * usage: nussinov OUT n */
#include "common.h"

#define DATA_TYPE int

/* RNA bases represented as chars, range is [0,3] */
typedef char base;

#define match(b1, b2) (((b1)+(b2)) == 3 ? 1 : 0)
#define max_score(s1, s2) ((s1 >= s2) ? s1 : s2)

static void init_array(int n, base seq[n], DATA_TYPE table[n][n]) {
    int i, j;
    /* base is AGCT/0..3 */
    for (i = 0; i < n; i++) {
        seq[i] = (base)((i + 1) % 4);
    }
    for (i = 0; i < n; i++)
        for (j = 0; j < n; j++)
            table[i][j] = 0;
}

static void kernel_nussinov(int n, base seq[n], DATA_TYPE table[n][n]) {
    int i, j, k;
    for (i = n - 1; i >= 0; i--) {
        for (j = i + 1; j < n; j++) {
            if (j - 1 >= 0)
                table[i][j] = max_score(table[i][j], table[i][j - 1]);
            if (i + 1 < n)
                table[i][j] = max_score(table[i][j], table[i + 1][j]);
            if (j - 1 >= 0 && i + 1 < n) {
                /* don't allow adjacent elements to bond */
                if (i < j - 1)
                    table[i][j] = max_score(table[i][j], table[i + 1][j - 1] + match(seq[i], seq[j]));
                else
                    table[i][j] = max_score(table[i][j], table[i + 1][j - 1]);
            }
            for (k = i + 1; k < j; k++) {
                table[i][j] = max_score(table[i][j], table[i][k] + table[k + 1][j]);
            }
        }
    }
}

int main(int argc, char **argv) {
    int n = arg_int(argc, argv, 2);
    base *seq = calloc((size_t)n, sizeof(base));
    DATA_TYPE (*table)[n] = calloc((size_t)n * n, sizeof(DATA_TYPE));
    if (!seq || !table) { perror("calloc"); return 1; }
    init_array(n, seq, table);
    kernel_nussinov(n, seq, table);
    FILE *f = out_open(argv[1]);
    out_i32(f, &table[0][0], n * n);
    fclose(f);
    return 0;
}
