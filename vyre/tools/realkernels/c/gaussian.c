/* gaussian: Gaussian elimination of a Size x Size system a x = b, then back substitution.
 * Follows Rodinia 3.1 cuda/gaussian/gaussian.cu (Rodinia has no OpenMP gaussian): Fan1()
 * (multipliers), Fan2() (row updates of a and b) as loops over the kernels' thread indices,
 * ForwardSub()'s order (Fan1 then Fan2 for t = 0 .. Size-2) and BackSub(). Difference: the
 * matrix comes from the LCG (entries in [0, 1) plus Size on the diagonal) instead of
 * create_matrix()'s exp() profile or a file.
 * usage: gaussian OUT size seed */
#include "common.h"

static void Fan1(float *m, float *a, int Size, int t) {
    for (int x = 0; x < Size - 1 - t; x++)
        m[Size * (x + t + 1) + t] = a[Size * (x + t + 1) + t] / a[Size * t + t];
}

static void Fan2(float *m, float *a, float *b, int Size, int t) {
    for (int xidx = 0; xidx < Size - 1 - t; xidx++)
        for (int yidx = 0; yidx < Size - t; yidx++) {
            a[Size * (xidx + 1 + t) + (yidx + t)] -= m[Size * (xidx + 1 + t) + t] * a[Size * t + (yidx + t)];
            if (yidx == 0) b[xidx + 1 + t] -= m[Size * (xidx + 1 + t) + (yidx + t)] * b[t];
        }
}

int main(int argc, char **argv) {
    int Size = arg_int(argc, argv, 2);
    lcg_seed((uint32_t)arg_int(argc, argv, 3));
    float *a = malloc(sizeof(float) * Size * Size), *b = malloc(sizeof(float) * Size);
    float *m = calloc(Size * Size, sizeof(float)), *finalVec = malloc(sizeof(float) * Size);
    for (int i = 0; i < Size * Size; i++) a[i] = lcg_unit();
    for (int i = 0; i < Size; i++) a[i * Size + i] = a[i * Size + i] + (float)Size;
    for (int i = 0; i < Size; i++) b[i] = lcg_unit();
    for (int t = 0; t < (Size - 1); t++) {
        Fan1(m, a, Size, t);
        Fan2(m, a, b, Size, t);
    }
    for (int i = 0; i < Size; i++) {
        finalVec[Size - i - 1] = b[Size - i - 1];
        for (int j = 0; j < i; j++)
            finalVec[Size - i - 1] -= *(a + Size * (Size - i - 1) + (Size - j - 1)) * finalVec[Size - j - 1];
        finalVec[Size - i - 1] = finalVec[Size - i - 1] / *(a + Size * (Size - i - 1) + (Size - i - 1));
    }
    FILE *f = out_open(argv[1]);
    out_f32(f, a, Size * Size);
    out_f32(f, b, Size);
    out_f32(f, m, Size * Size);
    out_f32(f, finalVec, Size);
    fclose(f);
    return 0;
}
