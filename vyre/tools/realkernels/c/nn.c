/* nn: the k nearest neighbours of a target location among a set of records.
 * Follows Rodinia 3.1 openmp/nn/nn_openmp.c: main()'s distance loop (z[i] = sqrt of the
 * float sum of squares, in double as written there) and its selection loop (replace the
 * farthest of the k current neighbours when the record is closer). Differences: latitudes
 * and longitudes come from the LCG instead of hurricane_gen's text files, the records are
 * processed as one window, and a neighbour is reported by record index instead of its text.
 * usage: nn OUT nrecords k seed */
#include <math.h>
#include "common.h"

#define OPEN 10000

struct neighbor {
    int entry;
    double dist;
};

int main(int argc, char **argv) {
    int rec_count = arg_int(argc, argv, 2), k = arg_int(argc, argv, 3);
    lcg_seed((uint32_t)arg_int(argc, argv, 4));
    float target_lat = 30.0f, target_long = 90.0f;
    float *lat = malloc(rec_count * sizeof(float)), *lng = malloc(rec_count * sizeof(float));
    for (int i = 0; i < rec_count; i++) {
        lat[i] = 7.0f + 56.0f * lcg_unit();
        lng[i] = 62.0f + 102.0f * lcg_unit();
    }
    struct neighbor *neighbors = malloc(k * sizeof(struct neighbor));
    for (int j = 0; j < k; j++) { neighbors[j].dist = OPEN; neighbors[j].entry = -1; }
    float *z = malloc(rec_count * sizeof(float));
    for (int i = 0; i < rec_count; i++) {
        float tmp_lat = lat[i], tmp_long = lng[i];
        z[i] = sqrt(((tmp_lat - target_lat) * (tmp_lat - target_lat)) +
                    ((tmp_long - target_long) * (tmp_long - target_long)));
    }
    for (int i = 0; i < rec_count; i++) {
        float max_dist = -1;
        int max_idx = 0;
        for (int j = 0; j < k; j++) {
            if (neighbors[j].dist > max_dist) {
                max_dist = neighbors[j].dist;
                max_idx = j;
            }
        }
        if (z[i] < neighbors[max_idx].dist) {
            neighbors[max_idx].entry = i;
            neighbors[max_idx].dist = z[i];
        }
    }
    float *nd = malloc(k * sizeof(float));
    int *ni = malloc(k * sizeof(int));
    for (int j = 0; j < k; j++) { nd[j] = (float)neighbors[j].dist; ni[j] = neighbors[j].entry; }
    FILE *f = out_open(argv[1]);
    out_f32(f, z, rec_count);
    out_f32(f, nd, k);
    out_i32(f, ni, k);
    fclose(f);
    return 0;
}
