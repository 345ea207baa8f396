/* floyd_warshall: all-pairs shortest paths on an n-node graph, integer weights.
 * Follows PolyBench/C 4.2.1 medley/floyd-warshall/floyd-warshall.c: init_array() and
 * kernel_floyd_warshall() verbatim with its default DATA_TYPE int (DATA_TYPE_IS_INT).
 * Difference: n from the command line (MINI_DATASET is 60).
 * usage: floyd_warshall OUT n */
#include "common.h"

#define DATA_TYPE int

static void init_array(int n, DATA_TYPE path[n][n]) {
    int i, j;
    for (i = 0; i < n; i++)
        for (j = 0; j < n; j++) {
            path[i][j] = i * j % 7 + 1;
            if ((i + j) % 13 == 0 || (i + j) % 7 == 0 || (i + j) % 11 == 0)
                path[i][j] = 999;
        }
}

static void kernel_floyd_warshall(int n, DATA_TYPE path[n][n]) {
    int i, j, k;
    for (k = 0; k < n; k++) {
        for (i = 0; i < n; i++)
            for (j = 0; j < n; j++)
                path[i][j] = path[i][j] < path[i][k] + path[k][j] ?
                    path[i][j] : path[i][k] + path[k][j];
    }
}

int main(int argc, char **argv) {
    int n = arg_int(argc, argv, 2);
    DATA_TYPE (*path)[n] = calloc((size_t)n * n, sizeof(DATA_TYPE));
    if (!path) { perror("calloc"); return 1; }
    init_array(n, path);
    kernel_floyd_warshall(n, path);
    FILE *f = out_open(argv[1]);
    out_i32(f, &path[0][0], n * n);
    fclose(f);
    return 0;
}
