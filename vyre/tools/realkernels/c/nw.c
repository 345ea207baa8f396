/* nw: Needleman-Wunsch global sequence alignment, scored with BLOSUM62, over an
 * (n+1) x (n+1) matrix processed in 16 x 16 blocks along anti-diagonals.
 * Follows Rodinia 3.1 openmp/nw/needle.cpp: maximum(), blosum62, runTest()'s set-up and
 * nw_optimized() (top-left then bottom-right block sweeps, each block computed row by row).
 * Differences: the sequences come from the LCG (lcg_int(10) + 1) instead of rand() % 10 + 1;
 * a block works on the matrix in place rather than through local copies (the same reads
 * and writes, since a block only reads its own cells and the row / column before it).
 * usage: nw OUT n penalty seed   (n a multiple of 16) */
#include "common.h"

#define BLOCK_SIZE 16

static int maximum(int a, int b, int c) {
    int k;
    if (a <= b) k = b;
    else k = a;
    if (k <= c) return (c);
    else return (k);
}

static int blosum62[24][24] = {
{ 4, -1, -2, -2,  0, -1, -1,  0, -2, -1, -1, -1, -1, -2, -1,  1,  0, -3, -2,  0, -2, -1,  0, -4},
{-1,  5,  0, -2, -3,  1,  0, -2,  0, -3, -2,  2, -1, -3, -2, -1, -1, -3, -2, -3, -1,  0, -1, -4},
{-2,  0,  6,  1, -3,  0,  0,  0,  1, -3, -3,  0, -2, -3, -2,  1,  0, -4, -2, -3,  3,  0, -1, -4},
{-2, -2,  1,  6, -3,  0,  2, -1, -1, -3, -4, -1, -3, -3, -1,  0, -1, -4, -3, -3,  4,  1, -1, -4},
{ 0, -3, -3, -3,  9, -3, -4, -3, -3, -1, -1, -3, -1, -2, -3, -1, -1, -2, -2, -1, -3, -3, -2, -4},
{-1,  1,  0,  0, -3,  5,  2, -2,  0, -3, -2,  1,  0, -3, -1,  0, -1, -2, -1, -2,  0,  3, -1, -4},
{-1,  0,  0,  2, -4,  2,  5, -2,  0, -3, -3,  1, -2, -3, -1,  0, -1, -3, -2, -2,  1,  4, -1, -4},
{ 0, -2,  0, -1, -3, -2, -2,  6, -2, -4, -4, -2, -3, -3, -2,  0, -2, -2, -3, -3, -1, -2, -1, -4},
{-2,  0,  1, -1, -3,  0,  0, -2,  8, -3, -3, -1, -2, -1, -2, -1, -2, -2,  2, -3,  0,  0, -1, -4},
{-1, -3, -3, -3, -1, -3, -3, -4, -3,  4,  2, -3,  1,  0, -3, -2, -1, -3, -1,  3, -3, -3, -1, -4},
{-1, -2, -3, -4, -1, -2, -3, -4, -3,  2,  4, -2,  2,  0, -3, -2, -1, -2, -1,  1, -4, -3, -1, -4},
{-1,  2,  0, -1, -3,  1,  1, -2, -1, -3, -2,  5, -1, -3, -1,  0, -1, -3, -2, -2,  0,  1, -1, -4},
{-1, -1, -2, -3, -1,  0, -2, -3, -2,  1,  2, -1,  5,  0, -2, -1, -1, -1, -1,  1, -3, -1, -1, -4},
{-2, -3, -3, -3, -2, -3, -3, -3, -1,  0,  0, -3,  0,  6, -4, -2, -2,  1,  3, -1, -3, -3, -1, -4},
{-1, -2, -2, -1, -3, -1, -1, -2, -2, -3, -3, -1, -2, -4,  7, -1, -1, -4, -3, -2, -2, -1, -2, -4},
{ 1, -1,  1,  0, -1,  0,  0,  0, -1, -2, -2,  0, -1, -2, -1,  4,  1, -3, -2, -2,  0,  0,  0, -4},
{ 0, -1,  0, -1, -1, -1, -1, -2, -2, -1, -1, -1, -1, -2, -1,  1,  5, -2, -2,  0, -1, -1,  0, -4},
{-3, -3, -4, -4, -2, -2, -3, -2, -2, -3, -2, -3, -1,  1, -4, -3, -2, 11,  2, -3, -4, -3, -2, -4},
{-2, -2, -2, -3, -2, -1, -2, -3,  2, -1, -1, -2, -1,  3, -3, -2, -2,  2,  7, -1, -3, -2, -1, -4},
{ 0, -3, -3, -3, -1, -2, -2, -3, -3,  3,  1, -2,  1, -1, -2, -2,  0, -3, -1,  4, -3, -2, -1, -4},
{-2, -1,  3,  4, -3,  0,  1, -1,  0, -3, -4,  0, -3, -3, -2,  0, -1, -4, -3, -3,  4,  1, -1, -4},
{-1,  0,  0,  1, -3,  3,  4, -2,  0, -3, -3,  1, -1, -3, -1,  0, -1, -3, -2, -2,  1,  4, -1, -4},
{ 0, -1, -1, -1, -2, -1, -1, -1, -1, -1, -1, -1, -1, -1, -2,  0,  0, -2, -1, -1, -1, -1, -1, -4},
{-4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4,  1}
};

static void block(int *input_itemsets, const int *referrence, int max_cols, int penalty,
                  int b_index_x, int b_index_y) {
    for (int i = 1; i < BLOCK_SIZE + 1; ++i)
        for (int j = 1; j < BLOCK_SIZE + 1; ++j) {
            int row = b_index_y * BLOCK_SIZE + i, col = b_index_x * BLOCK_SIZE + j;
            input_itemsets[max_cols * row + col] =
                maximum(input_itemsets[max_cols * (row - 1) + col - 1] + referrence[max_cols * row + col],
                        input_itemsets[max_cols * row + col - 1] - penalty,
                        input_itemsets[max_cols * (row - 1) + col] - penalty);
        }
}

static void nw_optimized(int *input_itemsets, int *referrence, int max_cols, int penalty) {
    for (int blk = 1; blk <= (max_cols - 1) / BLOCK_SIZE; blk++)
        for (int b_index_x = 0; b_index_x < blk; ++b_index_x)
            block(input_itemsets, referrence, max_cols, penalty, b_index_x, blk - 1 - b_index_x);
    for (int blk = 2; blk <= (max_cols - 1) / BLOCK_SIZE; blk++)
        for (int b_index_x = blk - 1; b_index_x < (max_cols - 1) / BLOCK_SIZE; ++b_index_x)
            block(input_itemsets, referrence, max_cols, penalty, b_index_x,
                  (max_cols - 1) / BLOCK_SIZE + blk - 2 - b_index_x);
}

int main(int argc, char **argv) {
    int max_rows = arg_int(argc, argv, 2) + 1, max_cols = max_rows;
    int penalty = arg_int(argc, argv, 3);
    lcg_seed((uint32_t)arg_int(argc, argv, 4));
    int *referrence = calloc(max_rows * max_cols, sizeof(int));
    int *input_itemsets = calloc(max_rows * max_cols, sizeof(int));
    for (int i = 1; i < max_rows; i++) input_itemsets[i * max_cols] = lcg_int(10) + 1;
    for (int j = 1; j < max_cols; j++) input_itemsets[j] = lcg_int(10) + 1;
    for (int i = 1; i < max_cols; i++)
        for (int j = 1; j < max_rows; j++)
            referrence[i * max_cols + j] = blosum62[input_itemsets[i * max_cols]][input_itemsets[j]];
    for (int i = 1; i < max_rows; i++) input_itemsets[i * max_cols] = -i * penalty;
    for (int j = 1; j < max_cols; j++) input_itemsets[j] = -j * penalty;
    nw_optimized(input_itemsets, referrence, max_cols, penalty);
    FILE *f = out_open(argv[1]);
    out_i32(f, input_itemsets, max_rows * max_cols);
    fclose(f);
    return 0;
}
