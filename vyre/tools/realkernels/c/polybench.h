/* Shared by the PolyBench/C 4.2.1 drivers of the real-kernel suite: PolyBench's type macros
 * in its f32 configuration (DATA_TYPE_IS_FLOAT in each <kernel>.h), so the kernels read as
 * written there, with the problem sizes taken from the command line instead of the dataset
 * macros (arrays are C99 variable-length arrays, as with POLYBENCH_USE_C99_PROTO). */
#ifndef REALKERNELS_POLYBENCH_H
#define REALKERNELS_POLYBENCH_H
#include <math.h>
#include "common.h"

/* a driver of PolyBench's default double configuration defines these first (DATA_TYPE_IS_DOUBLE) */
#ifndef DATA_TYPE
#define DATA_TYPE float
#define SCALAR_VAL(x) x##f
#define SQRT_FUN(x) sqrtf(x)
#endif

/* a zeroed rows x cols array of DATA_TYPE (as POLYBENCH_2D_ARRAY_DECL) */
static inline void *alloc_array(int rows, int cols, size_t elem) {
    void *p = calloc((size_t)rows * (size_t)cols, elem);
    if (!p) { perror("calloc"); exit(1); }
    return p;
}
#endif
