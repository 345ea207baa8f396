/* backprop: one training step of a fully connected two-layer network (sigmoid units):
 * forward through both layers, the output and hidden errors, then both weight updates with
 * momentum.
 * Follows Rodinia 3.1 openmp/backprop: backprop.c's bpnn_layerforward(), squash(),
 * bpnn_output_error(), bpnn_hidden_error() and bpnn_adjust_weights(), called in
 * backprop_kernel.c's bpnn_train_kernel() order on the network facetrain.c builds
 * (bpnn_create(layer_size, 16, 1): weights w[k][j] of (n_in + 1) x (n_hidden + 1), unit 0
 * the threshold unit). Differences: the original mixes in double (squash's
 * 1.0 / (1.0 + exp(-x)), o * (1.0 - o) * (t - o), ETA and MOMENTUM 0.3); here every
 * constant and operation is float, so squash is 1.0f / (1.0f + expf(-x)) with crmath.h's
 * correctly rounded expf. Inputs come from the LCG in the original's order: input weights
 * as dpn1() (in [-1, 1), the original's commented-out alternative: its [0, 1) weights
 * saturate every hidden unit at exactly 1, which makes every hidden delta 0), hidden
 * weights as bpnn_randomize_weights() ([0, 1)), target 0.1 (bpnn_randomize_row), input
 * units as imagenet.c's load() ([0, 1)); arrays are zeroed when allocated.
 * usage: backprop OUT layer_size seed */
#include <math.h>
#include "common.h"
#include "crmath.h"

#define ETA 0.3f
#define MOMENTUM 0.3f
#define ABS(x) (((x) > 0.0) ? (x) : (-(x)))

static float squash(float x) { return 1.0f / (1.0f + cr_expf(-x)); }

static float *alloc_f(int n) {
    float *p = calloc((size_t)n, sizeof(float));
    if (!p) { perror("calloc"); exit(1); }
    return p;
}

/* w[k][j] of rows x cols, stored row-major */
#define W(w, cols, k, j) ((w)[(k) * (cols) + (j)])

static void layerforward(float *l1, float *l2, float *conn, int n1, int n2) {
    float sum;
    int j, k;
    l1[0] = 1.0f;
    for (j = 1; j <= n2; j++) {
        sum = 0.0f;
        for (k = 0; k <= n1; k++) sum += W(conn, n2 + 1, k, j) * l1[k];
        l2[j] = squash(sum);
    }
}

static void output_error(float *delta, float *target, float *output, int nj, float *err) {
    int j;
    float o, t, errsum;
    errsum = 0.0f;
    for (j = 1; j <= nj; j++) {
        o = output[j];
        t = target[j];
        delta[j] = o * (1.0f - o) * (t - o);
        errsum += ABS(delta[j]);
    }
    *err = errsum;
}

static void hidden_error(float *delta_h, int nh, float *delta_o, int no, float *who,
                         float *hidden, float *err) {
    int j, k;
    float h, sum, errsum;
    errsum = 0.0f;
    for (j = 1; j <= nh; j++) {
        h = hidden[j];
        sum = 0.0f;
        for (k = 1; k <= no; k++) sum += delta_o[k] * W(who, no + 1, j, k);
        delta_h[j] = h * (1.0f - h) * sum;
        errsum += ABS(delta_h[j]);
    }
    *err = errsum;
}

static void adjust_weights(float *delta, int ndelta, float *ly, int nly, float *w,
                           float *oldw) {
    float new_dw;
    int k, j;
    ly[0] = 1.0f;
    for (j = 1; j <= ndelta; j++) {
        for (k = 0; k <= nly; k++) {
            new_dw = ((ETA * delta[j] * ly[k]) + (MOMENTUM * W(oldw, ndelta + 1, k, j)));
            W(w, ndelta + 1, k, j) += new_dw;
            W(oldw, ndelta + 1, k, j) = new_dw;
        }
    }
}

int main(int argc, char **argv) {
    int in = arg_int(argc, argv, 2), hid = 16, out = 1;
    lcg_seed((uint32_t)arg_int(argc, argv, 3));
    float *input_units = alloc_f(in + 1), *hidden_units = alloc_f(hid + 1);
    float *output_units = alloc_f(out + 1), *hidden_delta = alloc_f(hid + 1);
    float *output_delta = alloc_f(out + 1), *target = alloc_f(out + 1);
    float *input_weights = alloc_f((in + 1) * (hid + 1));
    float *hidden_weights = alloc_f((hid + 1) * (out + 1));
    float *input_prev = alloc_f((in + 1) * (hid + 1));
    float *hidden_prev = alloc_f((hid + 1) * (out + 1));
    for (int i = 0; i <= in; i++)
        for (int j = 0; j <= hid; j++) W(input_weights, hid + 1, i, j) = lcg_unit() * 2.0f - 1.0f;
    for (int i = 0; i <= hid; i++)
        for (int j = 0; j <= out; j++) W(hidden_weights, out + 1, i, j) = lcg_unit();
    for (int i = 0; i <= out; i++) target[i] = 0.1f;
    for (int k = 1; k <= in; k++) input_units[k] = lcg_unit();

    float err[2];
    layerforward(input_units, hidden_units, input_weights, in, hid);
    layerforward(hidden_units, output_units, hidden_weights, hid, out);
    output_error(output_delta, target, output_units, out, &err[0]);
    hidden_error(hidden_delta, hid, output_delta, out, hidden_weights, hidden_units, &err[1]);
    adjust_weights(output_delta, out, hidden_units, hid, hidden_weights, hidden_prev);
    adjust_weights(hidden_delta, hid, input_units, in, input_weights, input_prev);

    FILE *f = out_open(argv[1]);
    out_f32(f, hidden_units, hid + 1);
    out_f32(f, output_units, out + 1);
    out_f32(f, hidden_delta, hid + 1);
    out_f32(f, output_delta, out + 1);
    out_f32(f, err, 2);
    out_f32(f, hidden_weights, (hid + 1) * (out + 1));
    out_f32(f, hidden_prev, (hid + 1) * (out + 1));
    out_f32(f, input_weights, (in + 1) * (hid + 1));
    out_f32(f, input_prev, (in + 1) * (hid + 1));
    fclose(f);
    return 0;
}
