/* kmeans: Lloyd's k-means clustering of npoints points with nfeatures features.
 * Follows Rodinia 3.1 openmp/kmeans/kmeans_serial/kmeans_clustering.c:
 * find_nearest_point(), euclid_dist_2() and kmeans_clustering() (the first nclusters
 * points as initial centres, iterate until delta <= threshold), same loops and float
 * arithmetic. Differences: the features come from the LCG instead of a file; the loop count
 * is capped at 500 as in the OpenMP version (kmeans_openmp/kmeans_clustering.c).
 * usage: kmeans OUT npoints nfeatures nclusters seed */
#include <float.h>
#include "common.h"

static float euclid_dist_2(float *pt1, float *pt2, int numdims) {
    int i;
    float ans = 0.0;
    for (i = 0; i < numdims; i++) ans += (pt1[i] - pt2[i]) * (pt1[i] - pt2[i]);
    return (ans);
}

static int find_nearest_point(float *pt, int nfeatures, float **pts, int npts) {
    int index = 0, i;
    float min_dist = FLT_MAX;
    for (i = 0; i < npts; i++) {
        float dist;
        dist = euclid_dist_2(pt, pts[i], nfeatures);
        if (dist < min_dist) {
            min_dist = dist;
            index = i;
        }
    }
    return (index);
}

int main(int argc, char **argv) {
    int npoints = arg_int(argc, argv, 2), nfeatures = arg_int(argc, argv, 3);
    int nclusters = arg_int(argc, argv, 4);
    lcg_seed((uint32_t)arg_int(argc, argv, 5));
    float threshold = 0.001f;
    float **feature = malloc(npoints * sizeof(float *));
    feature[0] = malloc(npoints * nfeatures * sizeof(float));
    for (int i = 1; i < npoints; i++) feature[i] = feature[i - 1] + nfeatures;
    for (int i = 0; i < npoints * nfeatures; i++) feature[0][i] = 10.0f * lcg_unit();
    int *membership = malloc(npoints * sizeof(int));

    int i, j, n = 0, index, loop = 0;
    float delta;
    float **clusters = malloc(nclusters * sizeof(float *));
    clusters[0] = malloc(nclusters * nfeatures * sizeof(float));
    for (i = 1; i < nclusters; i++) clusters[i] = clusters[i - 1] + nfeatures;
    for (i = 0; i < nclusters; i++) {
        for (j = 0; j < nfeatures; j++) clusters[i][j] = feature[n][j];
        n++;
    }
    for (i = 0; i < npoints; i++) membership[i] = -1;
    int *new_centers_len = calloc(nclusters, sizeof(int));
    float **new_centers = malloc(nclusters * sizeof(float *));
    new_centers[0] = calloc(nclusters * nfeatures, sizeof(float));
    for (i = 1; i < nclusters; i++) new_centers[i] = new_centers[i - 1] + nfeatures;
    do {
        delta = 0.0;
        for (i = 0; i < npoints; i++) {
            index = find_nearest_point(feature[i], nfeatures, clusters, nclusters);
            if (membership[i] != index) delta += 1.0;
            membership[i] = index;
            new_centers_len[index]++;
            for (j = 0; j < nfeatures; j++) new_centers[index][j] += feature[i][j];
        }
        for (i = 0; i < nclusters; i++) {
            for (j = 0; j < nfeatures; j++) {
                if (new_centers_len[i] > 0) clusters[i][j] = new_centers[i][j] / new_centers_len[i];
                new_centers[i][j] = 0.0;
            }
            new_centers_len[i] = 0;
        }
        loop++;
    } while (delta > threshold && loop < 500);
    FILE *f = out_open(argv[1]);
    out_f32(f, clusters[0], nclusters * nfeatures);
    out_i32(f, membership, npoints);
    out_i32(f, &loop, 1);
    fclose(f);
    return 0;
}
