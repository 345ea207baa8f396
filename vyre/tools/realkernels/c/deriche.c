/* deriche: Deriche's recursive edge-detection filter of an image (a causal and an
 * anticausal second-order recursion along each row, their sum, then the same along each
 * column), with coefficients from expf and powf of the filter parameter alpha.
 * Follows PolyBench/C 4.2.1 medley/deriche/deriche.c: init_array() and kernel_deriche()
 * verbatim with DATA_TYPE float, EXP_FUN and POW_FUN being crmath.h's correctly rounded
 * expf and powf (PolyBench's are the C library's expf and powf, which glibc does not round
 * correctly in every case). Differences: w and h from the command line (MINI_DATASET is
 * 64 x 64, SMALL_DATASET 192 x 128), and the coefficients k, a1 .. a4, b1, b2 are written
 * too (kernel_deriche reports them through `coeffs`).
 * usage: deriche OUT w h */
#include "polybench.h"
#include "crmath.h"

#define EXP_FUN(x) cr_expf(x)
#define POW_FUN(x, y) cr_powf(x, y)

static void init_array(int w, int h, DATA_TYPE *alpha, DATA_TYPE imgIn[w][h],
                       DATA_TYPE imgOut[w][h]) {
    int i, j;
    *alpha = 0.25; // parameter of the filter
    // input should be between 0 and 1 (grayscale image pixel)
    for (i = 0; i < w; i++)
        for (j = 0; j < h; j++)
            imgIn[i][j] = (DATA_TYPE)((313 * i + 991 * j) % 65536) / 65535.0f;
}

static void kernel_deriche(int w, int h, DATA_TYPE alpha, DATA_TYPE imgIn[w][h],
                           DATA_TYPE imgOut[w][h], DATA_TYPE y1[w][h], DATA_TYPE y2[w][h],
                           DATA_TYPE coeffs[7]) {
    int i, j;
    DATA_TYPE xm1, tm1, ym1, ym2;
    DATA_TYPE xp1, xp2;
    DATA_TYPE tp1, tp2;
    DATA_TYPE yp1, yp2;
    DATA_TYPE k;
    DATA_TYPE a1, a2, a3, a4, a5, a6, a7, a8;
    DATA_TYPE b1, b2, c1, c2;

    k = (SCALAR_VAL(1.0) - EXP_FUN(-alpha)) * (SCALAR_VAL(1.0) - EXP_FUN(-alpha)) /
        (SCALAR_VAL(1.0) + SCALAR_VAL(2.0) * alpha * EXP_FUN(-alpha) - EXP_FUN(SCALAR_VAL(2.0) * alpha));
    a1 = a5 = k;
    a2 = a6 = k * EXP_FUN(-alpha) * (alpha - SCALAR_VAL(1.0));
    a3 = a7 = k * EXP_FUN(-alpha) * (alpha + SCALAR_VAL(1.0));
    a4 = a8 = -k * EXP_FUN(SCALAR_VAL(-2.0) * alpha);
    b1 = POW_FUN(SCALAR_VAL(2.0), -alpha);
    b2 = -EXP_FUN(SCALAR_VAL(-2.0) * alpha);
    c1 = c2 = 1;
    coeffs[0] = k; coeffs[1] = a1; coeffs[2] = a2; coeffs[3] = a3; coeffs[4] = a4;
    coeffs[5] = b1; coeffs[6] = b2;

    for (i = 0; i < w; i++) {
        ym1 = SCALAR_VAL(0.0);
        ym2 = SCALAR_VAL(0.0);
        xm1 = SCALAR_VAL(0.0);
        for (j = 0; j < h; j++) {
            y1[i][j] = a1 * imgIn[i][j] + a2 * xm1 + b1 * ym1 + b2 * ym2;
            xm1 = imgIn[i][j];
            ym2 = ym1;
            ym1 = y1[i][j];
        }
    }

    for (i = 0; i < w; i++) {
        yp1 = SCALAR_VAL(0.0);
        yp2 = SCALAR_VAL(0.0);
        xp1 = SCALAR_VAL(0.0);
        xp2 = SCALAR_VAL(0.0);
        for (j = h - 1; j >= 0; j--) {
            y2[i][j] = a3 * xp1 + a4 * xp2 + b1 * yp1 + b2 * yp2;
            xp2 = xp1;
            xp1 = imgIn[i][j];
            yp2 = yp1;
            yp1 = y2[i][j];
        }
    }

    for (i = 0; i < w; i++)
        for (j = 0; j < h; j++) {
            imgOut[i][j] = c1 * (y1[i][j] + y2[i][j]);
        }

    for (j = 0; j < h; j++) {
        tm1 = SCALAR_VAL(0.0);
        ym1 = SCALAR_VAL(0.0);
        ym2 = SCALAR_VAL(0.0);
        for (i = 0; i < w; i++) {
            y1[i][j] = a5 * imgOut[i][j] + a6 * tm1 + b1 * ym1 + b2 * ym2;
            tm1 = imgOut[i][j];
            ym2 = ym1;
            ym1 = y1[i][j];
        }
    }

    for (j = 0; j < h; j++) {
        tp1 = SCALAR_VAL(0.0);
        tp2 = SCALAR_VAL(0.0);
        yp1 = SCALAR_VAL(0.0);
        yp2 = SCALAR_VAL(0.0);
        for (i = w - 1; i >= 0; i--) {
            y2[i][j] = a7 * tp1 + a8 * tp2 + b1 * yp1 + b2 * yp2;
            tp2 = tp1;
            tp1 = imgOut[i][j];
            yp2 = yp1;
            yp1 = y2[i][j];
        }
    }

    for (i = 0; i < w; i++)
        for (j = 0; j < h; j++)
            imgOut[i][j] = c2 * (y1[i][j] + y2[i][j]);
}

int main(int argc, char **argv) {
    int w = arg_int(argc, argv, 2), h = arg_int(argc, argv, 3);
    DATA_TYPE alpha, coeffs[7];
    DATA_TYPE (*imgIn)[h] = alloc_array(w, h, sizeof(DATA_TYPE));
    DATA_TYPE (*imgOut)[h] = alloc_array(w, h, sizeof(DATA_TYPE));
    DATA_TYPE (*y1)[h] = alloc_array(w, h, sizeof(DATA_TYPE));
    DATA_TYPE (*y2)[h] = alloc_array(w, h, sizeof(DATA_TYPE));
    init_array(w, h, &alpha, imgIn, imgOut);
    kernel_deriche(w, h, alpha, imgIn, imgOut, y1, y2, coeffs);
    FILE *f = out_open(argv[1]);
    out_f32(f, coeffs, 7);
    out_f32(f, &imgOut[0][0], w * h);
    fclose(f);
    return 0;
}
