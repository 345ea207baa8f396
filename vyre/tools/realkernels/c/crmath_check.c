/* crmath_check: applies one of crmath.h's functions to the floats of a file, for
 * tests/test_crmath_shim.py (which compares the results with vyre.tools.function_oracle).
 * usage: crmath_check exp|log|pow IN OUT; IN holds raw floats (pow: x0 y0 x1 y1 ...), OUT
 * gets one raw float per call; prints "wide N": the calls that needed long double. */
#include <string.h>
#include "crmath.h"

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: %s exp|log|pow IN OUT\n", argv[0]); return 2; }
    int two = strcmp(argv[1], "pow") == 0;
    if (!two && strcmp(argv[1], "exp") != 0 && strcmp(argv[1], "log") != 0) {
        fprintf(stderr, "unknown function %s\n", argv[1]);
        return 2;
    }
    FILE *in = fopen(argv[2], "rb"), *out = fopen(argv[3], "wb");
    if (!in || !out) { perror("crmath_check"); return 1; }
    float a[2];
    while (fread(a, sizeof(float), two ? 2 : 1, in) == (size_t)(two ? 2 : 1)) {
        float r = two ? cr_powf(a[0], a[1]) : argv[1][0] == 'e' ? cr_expf(a[0]) : cr_logf(a[0]);
        fwrite(&r, sizeof(float), 1, out);
    }
    fclose(in);
    fclose(out);
    printf("wide %lu\n", CR_WIDE_CALLS);
    return 0;
}
