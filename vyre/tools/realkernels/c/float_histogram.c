/* float_histogram: a weighted histogram of floats: each sample x in [0, 1) lands in bin
 * (int)(x * bins) and adds its weight +-expf(-8 x) there; every bin holds the sum of its
 * weights. Written for this suite (no published suite has a float histogram whose sums
 * are defined bit for bit): it is what vyre's exact f32 atomic add defines (docs/IR.md,
 * "Order-independent f32 add"), the exact sum of each bin's values rounded once, which
 * gives the same bits whatever order the adds run in. Here the sums are exact in 64-bit
 * integers: every weight is a float in (2^-12, 1], so a multiple of 2^-35, and a bin's sum
 * times 2^35 stays below 2^62 for fewer than 2^27 samples; one conversion to float rounds
 * it (to nearest even), the scaling back by 2^-35 is exact. expf is crmath.h's correctly
 * rounded one; x and the sign come from the LCG.
 * usage: float_histogram OUT samples bins seed */
#include <stdint.h>
#include "common.h"
#include "crmath.h"

int main(int argc, char **argv) {
    int n = arg_int(argc, argv, 2), bins = arg_int(argc, argv, 3);
    lcg_seed((uint32_t)arg_int(argc, argv, 4));
    if (n >= (1 << 27)) { fprintf(stderr, "samples must be below 2^27\n"); return 2; }
    float *x = malloc(n * sizeof(float)), *hist = malloc(bins * sizeof(float));
    int *sign = malloc(n * sizeof(int));
    int64_t *sum = calloc(bins, sizeof(int64_t));
    for (int i = 0; i < n; i++) x[i] = lcg_unit();
    for (int i = 0; i < n; i++) sign[i] = lcg_int(2);
    for (int i = 0; i < n; i++) {
        float w = cr_expf(-8.0f * x[i]);
        if (sign[i]) w = -w;
        int b = (int)(x[i] * (float)bins);
        sum[b] += (int64_t)(w * 0x1p35f); /* exact: w is a multiple of 2^-35 */
    }
    for (int b = 0; b < bins; b++) hist[b] = (float)sum[b] * 0x1p-35f;
    FILE *f = out_open(argv[1]);
    out_f32(f, hist, bins);
    fclose(f);
    return 0;
}
