/* hotspot: transient thermal simulation on a row x col grid.
 * Follows Rodinia 3.1 openmp/hotspot/hotspot_openmp.cpp: single_iteration() (the corner,
 * edge and interior formulas, same operand order) and compute_tran_temp() (the constants).
 * Differences, all deliberate: the grid is swept row by row rather than in 16x16 chunks (each
 * cell is independent, so the order does not change any result); a border chunk's interior
 * cells use the interior formula (the original leaves `delta` stale there, undefined
 * behaviour); the edge formulas' `2.0` is written 2.0f as in the interior one, so every
 * operation is f32; temp and power come from the LCG instead of files.
 * usage: hotspot OUT rows cols iterations seed */
#include "common.h"

#define MAX_PD (3.0e6)
#define PRECISION 0.001
#define SPEC_HEAT_SI 1.75e6
#define K_SI 100
#define FACTOR_CHIP 0.5
typedef float FLOAT;
static const FLOAT t_chip = 0.0005;
static const FLOAT chip_height = 0.016;
static const FLOAT chip_width = 0.016;
static const FLOAT amb_temp = 80.0;

static void single_iteration(FLOAT *result, FLOAT *temp, FLOAT *power, int row, int col,
                             FLOAT Cap_1, FLOAT Rx_1, FLOAT Ry_1, FLOAT Rz_1) {
    FLOAT delta;
    for (int r = 0; r < row; ++r) {
        for (int c = 0; c < col; ++c) {
            if ((r == 0) && (c == 0)) { /* Corner 1 */
                delta = (Cap_1) * (power[0] + (temp[1] - temp[0]) * Rx_1 +
                                   (temp[col] - temp[0]) * Ry_1 + (amb_temp - temp[0]) * Rz_1);
            } else if ((r == 0) && (c == col - 1)) { /* Corner 2 */
                delta = (Cap_1) * (power[c] + (temp[c - 1] - temp[c]) * Rx_1 +
                                   (temp[c + col] - temp[c]) * Ry_1 + (amb_temp - temp[c]) * Rz_1);
            } else if ((r == row - 1) && (c == col - 1)) { /* Corner 3 */
                delta = (Cap_1) * (power[r * col + c] +
                                   (temp[r * col + c - 1] - temp[r * col + c]) * Rx_1 +
                                   (temp[(r - 1) * col + c] - temp[r * col + c]) * Ry_1 +
                                   (amb_temp - temp[r * col + c]) * Rz_1);
            } else if ((r == row - 1) && (c == 0)) { /* Corner 4 */
                delta = (Cap_1) * (power[r * col] + (temp[r * col + 1] - temp[r * col]) * Rx_1 +
                                   (temp[(r - 1) * col] - temp[r * col]) * Ry_1 +
                                   (amb_temp - temp[r * col]) * Rz_1);
            } else if (r == 0) { /* Edge 1 */
                delta = (Cap_1) * (power[c] + (temp[c + 1] + temp[c - 1] - 2.0f * temp[c]) * Rx_1 +
                                   (temp[col + c] - temp[c]) * Ry_1 + (amb_temp - temp[c]) * Rz_1);
            } else if (c == col - 1) { /* Edge 2 */
                delta = (Cap_1) * (power[r * col + c] +
                                   (temp[(r + 1) * col + c] + temp[(r - 1) * col + c] -
                                    2.0f * temp[r * col + c]) * Ry_1 +
                                   (temp[r * col + c - 1] - temp[r * col + c]) * Rx_1 +
                                   (amb_temp - temp[r * col + c]) * Rz_1);
            } else if (r == row - 1) { /* Edge 3 */
                delta = (Cap_1) * (power[r * col + c] +
                                   (temp[r * col + c + 1] + temp[r * col + c - 1] -
                                    2.0f * temp[r * col + c]) * Rx_1 +
                                   (temp[(r - 1) * col + c] - temp[r * col + c]) * Ry_1 +
                                   (amb_temp - temp[r * col + c]) * Rz_1);
            } else if (c == 0) { /* Edge 4 */
                delta = (Cap_1) * (power[r * col] +
                                   (temp[(r + 1) * col] + temp[(r - 1) * col] - 2.0f * temp[r * col]) * Ry_1 +
                                   (temp[r * col + 1] - temp[r * col]) * Rx_1 +
                                   (amb_temp - temp[r * col]) * Rz_1);
            } else { /* interior: the chunked loop's formula */
                delta = (Cap_1 * (power[r * col + c] +
                                  (temp[(r + 1) * col + c] + temp[(r - 1) * col + c] - 2.f * temp[r * col + c]) * Ry_1 +
                                  (temp[r * col + c + 1] + temp[r * col + c - 1] - 2.f * temp[r * col + c]) * Rx_1 +
                                  (amb_temp - temp[r * col + c]) * Rz_1));
            }
            result[r * col + c] = temp[r * col + c] + delta;
        }
    }
}

int main(int argc, char **argv) {
    int row = arg_int(argc, argv, 2), col = arg_int(argc, argv, 3);
    int num_iterations = arg_int(argc, argv, 4);
    lcg_seed((uint32_t)arg_int(argc, argv, 5));
    FLOAT *temp = malloc(sizeof(FLOAT) * row * col), *power = malloc(sizeof(FLOAT) * row * col);
    FLOAT *result = malloc(sizeof(FLOAT) * row * col);
    for (int i = 0; i < row * col; i++) temp[i] = 320.0f + 20.0f * lcg_unit();
    for (int i = 0; i < row * col; i++) power[i] = 0.5f * lcg_unit();

    /* compute_tran_temp */
    FLOAT grid_height = chip_height / row;
    FLOAT grid_width = chip_width / col;
    FLOAT Cap = FACTOR_CHIP * SPEC_HEAT_SI * t_chip * grid_width * grid_height;
    FLOAT Rx = grid_width / (2.0 * K_SI * t_chip * grid_height);
    FLOAT Ry = grid_height / (2.0 * K_SI * t_chip * grid_width);
    FLOAT Rz = t_chip / (K_SI * grid_height * grid_width);
    FLOAT max_slope = MAX_PD / (FACTOR_CHIP * t_chip * SPEC_HEAT_SI);
    FLOAT step = PRECISION / max_slope / 1000.0;
    FLOAT Rx_1 = 1.f / Rx;
    FLOAT Ry_1 = 1.f / Ry;
    FLOAT Rz_1 = 1.f / Rz;
    FLOAT Cap_1 = step / Cap;
    FLOAT *r = result, *t = temp;
    for (int i = 0; i < num_iterations; i++) {
        single_iteration(r, t, power, row, col, Cap_1, Rx_1, Ry_1, Rz_1);
        FLOAT *tmp = t;
        t = r;
        r = tmp;
    }
    FILE *f = out_open(argv[1]);
    out_f32(f, t, row * col);
    fclose(f);
    return 0;
}
