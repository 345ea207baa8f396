/* hotspot3D: 3-D thermal stencil on an nx x ny x nz grid.
 * Follows Rodinia 3.1 openmp/hotspot3D/3D.c: computeTempCPU() (the seven-point update in its
 * operand order) and main()'s constants. Differences: power and temperature come from the
 * LCG instead of files; the grid is square in x and y as in the original's command line.
 * usage: hotspot3d OUT n layers iterations seed */
#include "common.h"

#define MAX_PD (3.0e6)
#define PRECISION 0.001
#define SPEC_HEAT_SI 1.75e6
#define K_SI 100
#define FACTOR_CHIP 0.5
static float t_chip = 0.0005;
static float chip_height = 0.016;
static float chip_width = 0.016;
static float amb_temp = 80.0;

static void computeTempCPU(float *pIn, float *tIn, float *tOut, int nx, int ny, int nz, float Cap,
                           float Rx, float Ry, float Rz, float dt, int numiter, float **last) {
    float ce, cw, cn, cs, ct, cb, cc;
    float stepDivCap = dt / Cap;
    ce = cw = stepDivCap / Rx;
    cn = cs = stepDivCap / Ry;
    ct = cb = stepDivCap / Rz;
    cc = 1.0 - (2.0 * ce + 2.0 * cn + 3.0 * ct);
    int c, w, e, n, s, b, t;
    int x, y, z;
    int i = 0;
    do {
        for (z = 0; z < nz; z++)
            for (y = 0; y < ny; y++)
                for (x = 0; x < nx; x++) {
                    c = x + y * nx + z * nx * ny;
                    w = (x == 0) ? c : c - 1;
                    e = (x == nx - 1) ? c : c + 1;
                    n = (y == 0) ? c : c - nx;
                    s = (y == ny - 1) ? c : c + nx;
                    b = (z == 0) ? c : c - nx * ny;
                    t = (z == nz - 1) ? c : c + nx * ny;
                    tOut[c] = tIn[c] * cc + tIn[n] * cn + tIn[s] * cs + tIn[e] * ce + tIn[w] * cw +
                              tIn[t] * ct + tIn[b] * cb + (dt / Cap) * pIn[c] + ct * amb_temp;
                }
        float *temp = tIn;
        tIn = tOut;
        tOut = temp;
        i++;
    } while (i < numiter);
    *last = tIn;
}

int main(int argc, char **argv) {
    int numCols = arg_int(argc, argv, 2), numRows = numCols, layers = arg_int(argc, argv, 3);
    int iterations = arg_int(argc, argv, 4);
    lcg_seed((uint32_t)arg_int(argc, argv, 5));
    float dx = chip_height / numRows;
    float dy = chip_width / numCols;
    float dz = t_chip / layers;
    float Cap = FACTOR_CHIP * SPEC_HEAT_SI * t_chip * dx * dy;
    float Rx = dy / (2.0 * K_SI * t_chip * dx);
    float Ry = dx / (2.0 * K_SI * t_chip * dy);
    float Rz = dz / (K_SI * dx * dy);
    float max_slope = MAX_PD / (FACTOR_CHIP * t_chip * SPEC_HEAT_SI);
    float dt = PRECISION / max_slope;
    int size = numCols * numRows * layers;
    float *powerIn = calloc(size, sizeof(float)), *tempIn = calloc(size, sizeof(float));
    float *tempOut = calloc(size, sizeof(float)), *last;
    for (int i = 0; i < size; i++) powerIn[i] = 0.01f * lcg_unit();
    for (int i = 0; i < size; i++) tempIn[i] = 320.0f + 20.0f * lcg_unit();
    computeTempCPU(powerIn, tempIn, tempOut, numCols, numRows, layers, Cap, Rx, Ry, Rz, dt,
                   iterations, &last);
    FILE *f = out_open(argv[1]);
    out_f32(f, last, size);
    fclose(f);
    return 0;
}
