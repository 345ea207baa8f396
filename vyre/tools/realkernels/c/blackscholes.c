/* blackscholes: the fair prices of European call and put options by the Black-Scholes
 * formula, with the cumulative normal distribution by its polynomial approximation.
 * Follows the CUDA Samples' Samples/5_Domain_Specific/BlackScholes: BlackScholes_kernel.cuh's
 * BlackScholesBodyGPU() and cndGPU() for one option, on the options BlackScholes.cu's main()
 * generates (RandFloat() over [5, 30] for the stock price, [1, 100] for the strike, [0.25,
 * 10] for the years; RISKFREE 0.02, VOLATILITY 0.30). Differences: the CUDA intrinsics
 * are their accurate forms, which vyre computes exactly (__fdividef(a, b) is a / b, __logf
 * and __expf are crmath.h's correctly rounded logf and expf, 1 / rsqrtf(T) is sqrtf(T));
 * RandFloat's t is lcg_unit() instead of rand() / RAND_MAX, and the options count comes
 * from the command line (OPT_N = 4000000 there).
 * usage: blackscholes OUT options seed */
#include <math.h>
#include "common.h"
#include "crmath.h"

static float cnd(float d) {
    const float A1 = 0.31938153f;
    const float A2 = -0.356563782f;
    const float A3 = 1.781477937f;
    const float A4 = -1.821255978f;
    const float A5 = 1.330274429f;
    const float RSQRT2PI = 0.39894228040143267793994605993438f;
    float K = 1.0f / (1.0f + 0.2316419f * fabsf(d));
    float c = RSQRT2PI * cr_expf(-0.5f * d * d) *
              (K * (A1 + K * (A2 + K * (A3 + K * (A4 + K * A5)))));
    if (d > 0) c = 1.0f - c;
    return c;
}

static void body(float *call, float *put, float S, float X, float T, float R, float V) {
    float sqrtT = sqrtf(T);
    float d1 = (cr_logf(S / X) + (R + 0.5f * V * V) * T) / (V * sqrtT);
    float d2 = d1 - V * sqrtT;
    float CNDD1 = cnd(d1), CNDD2 = cnd(d2);
    float expRT = cr_expf(-R * T);
    *call = S * CNDD1 - X * expRT * CNDD2;
    *put = X * expRT * (1.0f - CNDD2) - S * (1.0f - CNDD1);
}

static float rand_float(float low, float high) {
    float t = lcg_unit();
    return (1.0f - t) * low + t * high;
}

int main(int argc, char **argv) {
    int n = arg_int(argc, argv, 2);
    lcg_seed((uint32_t)arg_int(argc, argv, 3));
    float *S = malloc(n * sizeof(float)), *X = malloc(n * sizeof(float));
    float *T = malloc(n * sizeof(float)), *call = malloc(n * sizeof(float));
    float *put = malloc(n * sizeof(float));
    for (int i = 0; i < n; i++) {
        S[i] = rand_float(5.0f, 30.0f);
        X[i] = rand_float(1.0f, 100.0f);
        T[i] = rand_float(0.25f, 10.0f);
    }
    for (int i = 0; i < n; i++) body(&call[i], &put[i], S[i], X[i], T[i], 0.02f, 0.30f);
    FILE *f = out_open(argv[1]);
    out_f32(f, call, n);
    out_f32(f, put, n);
    fclose(f);
    return 0;
}
