/* fdtd_2d: 2-D finite-difference time-domain kernel (fields ex, ey, hz).
 * Follows PolyBench/C 4.2.1 stencils/fdtd-2d/fdtd-2d.c: init_array() and kernel_fdtd_2d()
 * verbatim with DATA_TYPE float. Difference: tmax, nx and ny from the command line
 * (MINI_DATASET is tmax = 20, nx = 20, ny = 30).
 * usage: fdtd_2d OUT tmax nx ny */
#include "polybench.h"

static void init_array(int tmax, int nx, int ny, DATA_TYPE ex[nx][ny], DATA_TYPE ey[nx][ny],
                       DATA_TYPE hz[nx][ny], DATA_TYPE _fict_[tmax]) {
    int i, j;
    for (i = 0; i < tmax; i++)
        _fict_[i] = (DATA_TYPE)i;
    for (i = 0; i < nx; i++)
        for (j = 0; j < ny; j++) {
            ex[i][j] = ((DATA_TYPE)i * (j + 1)) / nx;
            ey[i][j] = ((DATA_TYPE)i * (j + 2)) / ny;
            hz[i][j] = ((DATA_TYPE)i * (j + 3)) / nx;
        }
}

static void kernel_fdtd_2d(int tmax, int nx, int ny, DATA_TYPE ex[nx][ny], DATA_TYPE ey[nx][ny],
                           DATA_TYPE hz[nx][ny], DATA_TYPE _fict_[tmax]) {
    int t, i, j;
    for (t = 0; t < tmax; t++) {
        for (j = 0; j < ny; j++)
            ey[0][j] = _fict_[t];
        for (i = 1; i < nx; i++)
            for (j = 0; j < ny; j++)
                ey[i][j] = ey[i][j] - SCALAR_VAL(0.5) * (hz[i][j] - hz[i - 1][j]);
        for (i = 0; i < nx; i++)
            for (j = 1; j < ny; j++)
                ex[i][j] = ex[i][j] - SCALAR_VAL(0.5) * (hz[i][j] - hz[i][j - 1]);
        for (i = 0; i < nx - 1; i++)
            for (j = 0; j < ny - 1; j++)
                hz[i][j] = hz[i][j] - SCALAR_VAL(0.7) * (ex[i][j + 1] - ex[i][j] +
                                                         ey[i + 1][j] - ey[i][j]);
    }
}

int main(int argc, char **argv) {
    int tmax = arg_int(argc, argv, 2), nx = arg_int(argc, argv, 3), ny = arg_int(argc, argv, 4);
    DATA_TYPE (*ex)[ny] = alloc_array(nx, ny, sizeof(DATA_TYPE));
    DATA_TYPE (*ey)[ny] = alloc_array(nx, ny, sizeof(DATA_TYPE));
    DATA_TYPE (*hz)[ny] = alloc_array(nx, ny, sizeof(DATA_TYPE));
    DATA_TYPE *fict = alloc_array(1, tmax, sizeof(DATA_TYPE));
    init_array(tmax, nx, ny, ex, ey, hz, fict);
    kernel_fdtd_2d(tmax, nx, ny, ex, ey, hz, fict);
    FILE *f = out_open(argv[1]);
    out_f32(f, &ex[0][0], nx * ny);
    out_f32(f, &ey[0][0], nx * ny);
    out_f32(f, &hz[0][0], nx * ny);
    fclose(f);
    return 0;
}
