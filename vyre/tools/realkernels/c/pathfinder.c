/* pathfinder: dynamic programming over a rows x cols grid of weights, the cheapest path
 * from the top row down. Follows Rodinia 3.1 openmp/pathfinder/pathfinder.cpp: init() and
 * run() (the row sweep with MIN over three neighbours). Difference: the weights come from
 * the LCG (lcg_int(10)) instead of rand() % 10.
 * usage: pathfinder OUT cols rows seed */
#include "common.h"

#define MIN(a, b) ((a) <= (b) ? (a) : (b))

int main(int argc, char **argv) {
    int cols = arg_int(argc, argv, 2), rows = arg_int(argc, argv, 3);
    lcg_seed((uint32_t)arg_int(argc, argv, 4));
    int *data = malloc(sizeof(int) * rows * cols), *result = malloc(sizeof(int) * cols);
    int **wall = malloc(sizeof(int *) * rows);
    for (int n = 0; n < rows; n++) wall[n] = data + cols * n;
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) wall[i][j] = lcg_int(10);
    for (int j = 0; j < cols; j++) result[j] = wall[0][j];
    int *src, *dst = result, *temp, min;
    src = malloc(sizeof(int) * cols);
    for (int t = 0; t < rows - 1; t++) {
        temp = src;
        src = dst;
        dst = temp;
        for (int n = 0; n < cols; n++) {
            min = src[n];
            if (n > 0) min = MIN(min, src[n - 1]);
            if (n < cols - 1) min = MIN(min, src[n + 1]);
            dst[n] = wall[t + 1][n] + min;
        }
    }
    FILE *f = out_open(argv[1]);
    out_i32(f, dst, cols);
    fclose(f);
    return 0;
}
