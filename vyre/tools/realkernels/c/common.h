/* Shared by the C drivers of the real-kernel suite (tests/realkernels/): a deterministic
 * input generator that the Python ports reproduce bit for bit, and the writer of the
 * tagged output file the tests compare against.
 *
 * Inputs: a 32-bit LCG (Numerical Recipes constants); lcg_unit() is (state >> 8) * 2^-24,
 * exactly representable in float, so C and NumPy draw the same floats.
 * Output file: for each array, u32 element count, u32 kind (0 = f32, 1 = i32, 2 = f64), raw
 * data. */
#ifndef REALKERNELS_COMMON_H
#define REALKERNELS_COMMON_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static uint32_t lcg_state;

static inline void lcg_seed(uint32_t s) { lcg_state = s; }

static inline uint32_t lcg_next(void) {
    lcg_state = lcg_state * 1664525u + 1013904223u;
    return lcg_state;
}

/* uniform in [0, 1): 24 random bits, exact in float */
static inline float lcg_unit(void) { return (float)(lcg_next() >> 8) * (1.0f / 16777216.0f); }

/* uniform integer in [0, n) */
static inline int lcg_int(int n) { return (int)((lcg_next() >> 8) % (uint32_t)n); }

static inline FILE *out_open(const char *path) {
    FILE *f = fopen(path, "wb");
    if (!f) { perror(path); exit(1); }
    return f;
}

static inline void out_array(FILE *f, const void *data, uint32_t n, uint32_t kind) {
    fwrite(&n, 4, 1, f);
    fwrite(&kind, 4, 1, f);
    fwrite(data, 4, n, f);
}

static inline void out_f32(FILE *f, const float *a, int n) { out_array(f, a, (uint32_t)n, 0); }
static inline void out_f64(FILE *f, const double *a, int n) {
    uint32_t count = (uint32_t)n, kind = 2;
    fwrite(&count, 4, 1, f);
    fwrite(&kind, 4, 1, f);
    fwrite(a, 8, count, f);
}
static inline void out_i32(FILE *f, const int *a, int n) { out_array(f, a, (uint32_t)n, 1); }

static inline int arg_int(int argc, char **argv, int i) {
    if (i >= argc) { fprintf(stderr, "usage: %s OUT ints...\n", argv[0]); exit(2); }
    return atoi(argv[i]);
}
#endif
