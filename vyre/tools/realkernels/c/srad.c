/* srad: speckle-reducing anisotropic diffusion of a rows x cols image.
 * Follows Rodinia 3.1 openmp/srad/srad_v2/srad.cpp: main()'s iteration (ROI statistics,
 * the directional derivatives and diffusion coefficient, the divergence and image update),
 * same loop nests and operand order. Differences: the original's double literals
 * (0.5, 1.0/16.0, .25, 1.0, 0.25) are written as float literals so every operation is f32;
 * the image J is drawn in [1, e) from the LCG instead of exp(rand()) (the log/exp prep is
 * not part of the kernel).
 * usage: srad OUT rows cols r1 r2 c1 c2 lambda_milli niter seed */
#include "common.h"

int main(int argc, char **argv) {
    int rows = arg_int(argc, argv, 2), cols = arg_int(argc, argv, 3);
    int r1 = arg_int(argc, argv, 4), r2 = arg_int(argc, argv, 5);
    int c1 = arg_int(argc, argv, 6), c2 = arg_int(argc, argv, 7);
    float lambda = (float)arg_int(argc, argv, 8) / 1000.0f;
    int niter = arg_int(argc, argv, 9);
    lcg_seed((uint32_t)arg_int(argc, argv, 10));
    int size_I = cols * rows, size_R = (r2 - r1 + 1) * (c2 - c1 + 1);
    float *J = malloc(sizeof(float) * size_I), *c = malloc(sizeof(float) * size_I);
    float *dN = malloc(sizeof(float) * size_I), *dS = malloc(sizeof(float) * size_I);
    float *dW = malloc(sizeof(float) * size_I), *dE = malloc(sizeof(float) * size_I);
    int *iN = malloc(sizeof(int) * rows), *iS = malloc(sizeof(int) * rows);
    int *jW = malloc(sizeof(int) * cols), *jE = malloc(sizeof(int) * cols);
    float q0sqr, sum, sum2, tmp, meanROI, varROI, Jc, G2, L, num, den, qsqr, cN, cS, cW, cE, D;
    for (int i = 0; i < rows; i++) { iN[i] = i - 1; iS[i] = i + 1; }
    for (int j = 0; j < cols; j++) { jW[j] = j - 1; jE[j] = j + 1; }
    iN[0] = 0; iS[rows - 1] = rows - 1; jW[0] = 0; jE[cols - 1] = cols - 1;
    for (int k = 0; k < size_I; k++) J[k] = 1.0f + 1.7182817f * lcg_unit();

    for (int iter = 0; iter < niter; iter++) {
        sum = 0; sum2 = 0;
        for (int i = r1; i <= r2; i++) {
            for (int j = c1; j <= c2; j++) {
                tmp = J[i * cols + j];
                sum += tmp;
                sum2 += tmp * tmp;
            }
        }
        meanROI = sum / size_R;
        varROI = (sum2 / size_R) - meanROI * meanROI;
        q0sqr = varROI / (meanROI * meanROI);
        for (int i = 0; i < rows; i++) {
            for (int j = 0; j < cols; j++) {
                int k = i * cols + j;
                Jc = J[k];
                dN[k] = J[iN[i] * cols + j] - Jc;
                dS[k] = J[iS[i] * cols + j] - Jc;
                dW[k] = J[i * cols + jW[j]] - Jc;
                dE[k] = J[i * cols + jE[j]] - Jc;
                G2 = (dN[k] * dN[k] + dS[k] * dS[k] + dW[k] * dW[k] + dE[k] * dE[k]) / (Jc * Jc);
                L = (dN[k] + dS[k] + dW[k] + dE[k]) / Jc;
                num = (0.5f * G2) - ((1.0f / 16.0f) * (L * L));
                den = 1 + (.25f * L);
                qsqr = num / (den * den);
                den = (qsqr - q0sqr) / (q0sqr * (1 + q0sqr));
                c[k] = 1.0f / (1.0f + den);
                if (c[k] < 0) { c[k] = 0; }
                else if (c[k] > 1) { c[k] = 1; }
            }
        }
        for (int i = 0; i < rows; i++) {
            for (int j = 0; j < cols; j++) {
                int k = i * cols + j;
                cN = c[k];
                cS = c[iS[i] * cols + j];
                cW = c[k];
                cE = c[i * cols + jE[j]];
                D = cN * dN[k] + cS * dS[k] + cW * dW[k] + cE * dE[k];
                J[k] = J[k] + 0.25f * lambda * D;
            }
        }
    }
    FILE *f = out_open(argv[1]);
    out_f32(f, J, size_I);
    out_f32(f, c, size_I);
    fclose(f);
    return 0;
}
