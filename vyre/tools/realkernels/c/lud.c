/* lud: in-place LU decomposition (Doolittle, no pivoting) of a size x size matrix.
 * Follows Rodinia 3.1 openmp/lud/base/lud_base.c: lud_base() verbatim. Difference: the
 * matrix comes from the LCG (entries in [0, 1) plus `size` on the diagonal, so no pivoting
 * is needed) instead of a file.
 * usage: lud OUT size seed */
#include "common.h"

static void lud_base(float *a, int size) {
    int i, j, k;
    float sum;
    for (i = 0; i < size; i++) {
        for (j = i; j < size; j++) {
            sum = a[i * size + j];
            for (k = 0; k < i; k++) sum -= a[i * size + k] * a[k * size + j];
            a[i * size + j] = sum;
        }
        for (j = i + 1; j < size; j++) {
            sum = a[j * size + i];
            for (k = 0; k < i; k++) sum -= a[j * size + k] * a[k * size + i];
            a[j * size + i] = sum / a[i * size + i];
        }
    }
}

int main(int argc, char **argv) {
    int size = arg_int(argc, argv, 2);
    lcg_seed((uint32_t)arg_int(argc, argv, 3));
    float *a = malloc(sizeof(float) * size * size);
    for (int i = 0; i < size * size; i++) a[i] = lcg_unit();
    for (int i = 0; i < size; i++) a[i * size + i] = a[i * size + i] + (float)size;
    lud_base(a, size);
    FILE *f = out_open(argv[1]);
    out_f32(f, a, size * size);
    fclose(f);
    return 0;
}
