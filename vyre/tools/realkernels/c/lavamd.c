/* lavamd: the potential and relocation forces on particles from every particle of their
 * own box and of the neighbouring boxes, in a 3-D grid of boxes (a Gaussian interaction
 * exp(-2 alpha^2 r^2)).
 * Follows Rodinia 3.1 openmp/lavaMD: kernel/kernel_cpu.c's kernel_cpu() (per home box l,
 * per box k of the home box and then its neighbours, per particle i of l, per particle j
 * of k: r2, u2, vij = exp(-u2), fs, d, the four sums into fv[i]) on the box and neighbour
 * lists main.c builds (boxes in z, y, x order, neighbours in dz, dy, dx order from -1 to
 * 1), alpha = 0.5. Differences: fp is float (main.h defines it
 * as double), so exp is crmath.h's correctly rounded expf and the double literals
 * (2.0*alpha*alpha, 2.*vij, / 10.0) are float; the inputs come from the LCG, in the
 * original's order ((lcg_int(10) + 1) / 10.0f for (rand()%10 + 1) / 10.0); the particles
 * per box come from the command line (NUMBER_PAR_PER_BOX is 100 in the original).
 * usage: lavamd OUT boxes1d par_per_box seed */
#include <math.h>
#include "common.h"
#include "crmath.h"

#define DOT(A, B) ((A.x) * (B.x) + (A.y) * (B.y) + (A.z) * (B.z))

typedef struct { float x, y, z; } THREE_VECTOR;
typedef struct { float v, x, y, z; } FOUR_VECTOR;
typedef struct { int nn, offset, nei[26]; } box_str;

int main(int argc, char **argv) {
    int boxes1d = arg_int(argc, argv, 2), NUMBER_PAR_PER_BOX = arg_int(argc, argv, 3);
    lcg_seed((uint32_t)arg_int(argc, argv, 4));
    int number_boxes = boxes1d * boxes1d * boxes1d, space_elem = number_boxes * NUMBER_PAR_PER_BOX;
    box_str *box = malloc(number_boxes * sizeof(box_str));
    int nh = 0;
    for (int i = 0; i < boxes1d; i++)
        for (int j = 0; j < boxes1d; j++)
            for (int k = 0; k < boxes1d; k++) {
                box[nh].offset = nh * NUMBER_PAR_PER_BOX;
                box[nh].nn = 0;
                for (int l = -1; l < 2; l++)
                    for (int m = -1; m < 2; m++)
                        for (int n = -1; n < 2; n++) {
                            if (i + l >= 0 && j + m >= 0 && k + n >= 0 && i + l < boxes1d &&
                                j + m < boxes1d && k + n < boxes1d && !(l == 0 && m == 0 && n == 0))
                                box[nh].nei[box[nh].nn++] =
                                    (i + l) * boxes1d * boxes1d + (j + m) * boxes1d + (k + n);
                        }
                nh++;
            }
    FOUR_VECTOR *rv = malloc(space_elem * sizeof(FOUR_VECTOR));
    float *qv = malloc(space_elem * sizeof(float));
    FOUR_VECTOR *fv = calloc(space_elem, sizeof(FOUR_VECTOR));
    for (int i = 0; i < space_elem; i++) {
        rv[i].v = (float)(lcg_int(10) + 1) / 10.0f;
        rv[i].x = (float)(lcg_int(10) + 1) / 10.0f;
        rv[i].y = (float)(lcg_int(10) + 1) / 10.0f;
        rv[i].z = (float)(lcg_int(10) + 1) / 10.0f;
    }
    for (int i = 0; i < space_elem; i++) qv[i] = (float)(lcg_int(10) + 1) / 10.0f;

    float alpha = 0.5f, a2 = 2.0f * alpha * alpha;
    for (int l = 0; l < number_boxes; l++) {
        FOUR_VECTOR *rA = &rv[box[l].offset], *fA = &fv[box[l].offset];
        for (int k = 0; k < 1 + box[l].nn; k++) {
            int pointer = k == 0 ? l : box[l].nei[k - 1];
            FOUR_VECTOR *rB = &rv[box[pointer].offset];
            float *qB = &qv[box[pointer].offset];
            for (int i = 0; i < NUMBER_PAR_PER_BOX; i++) {
                for (int j = 0; j < NUMBER_PAR_PER_BOX; j++) {
                    float r2 = rA[i].v + rB[j].v - DOT(rA[i], rB[j]);
                    float u2 = a2 * r2;
                    float vij = cr_expf(-u2);
                    float fs = 2.0f * vij;
                    THREE_VECTOR d;
                    d.x = rA[i].x - rB[j].x;
                    d.y = rA[i].y - rB[j].y;
                    d.z = rA[i].z - rB[j].z;
                    float fxij = fs * d.x, fyij = fs * d.y, fzij = fs * d.z;
                    fA[i].v += qB[j] * vij;
                    fA[i].x += qB[j] * fxij;
                    fA[i].y += qB[j] * fyij;
                    fA[i].z += qB[j] * fzij;
                }
            }
        }
    }
    FILE *f = out_open(argv[1]);
    out_f32(f, &fv[0].v, 4 * space_elem);
    fclose(f);
    return 0;
}
