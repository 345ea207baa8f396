/* cfd: the 3-D Euler equations on an unstructured mesh, explicit 3rd-order Runge-Kutta.
 * Follows Rodinia 3.1 openmp/cfd/euler3d_cpu.cpp: compute_flux_contribution(),
 * compute_velocity(), compute_speed_sqd(), compute_pressure(), compute_speed_of_sound(),
 * compute_step_factor(), compute_flux() (neighbour, wing and far-field cases), time_step()
 * and main()'s far-field set-up and iteration, same operand order, all f32 (float(...) as
 * written there). Differences: C instead of C++ (float3 by pointer); the mesh (areas,
 * neighbours including -1 wing and -2 far-field boundaries, face normals) comes from the
 * LCG instead of a file; block_length is 1; `iterations` is an argument.
 * usage: cfd OUT nel iterations seed */
#include <math.h>
#include "common.h"

typedef struct { float x, y, z; } float3;

#define GAMMA 1.4
#define NDIM 3
#define NNB 4
#define RK 3
#define ff_mach 1.2
#define deg_angle_of_attack 0.0f
#define VAR_DENSITY 0
#define VAR_MOMENTUM 1
#define VAR_DENSITY_ENERGY (VAR_MOMENTUM + NDIM)
#define NVAR (VAR_DENSITY_ENERGY + 1)

static void compute_flux_contribution(float density, float3 momentum, float density_energy,
                                      float pressure, float3 velocity, float3 *fc_momentum_x,
                                      float3 *fc_momentum_y, float3 *fc_momentum_z,
                                      float3 *fc_density_energy) {
    (void)density;
    fc_momentum_x->x = velocity.x * momentum.x + pressure;
    fc_momentum_x->y = velocity.x * momentum.y;
    fc_momentum_x->z = velocity.x * momentum.z;
    fc_momentum_y->x = fc_momentum_x->y;
    fc_momentum_y->y = velocity.y * momentum.y + pressure;
    fc_momentum_y->z = velocity.y * momentum.z;
    fc_momentum_z->x = fc_momentum_x->z;
    fc_momentum_z->y = fc_momentum_y->z;
    fc_momentum_z->z = velocity.z * momentum.z + pressure;
    float de_p = density_energy + pressure;
    fc_density_energy->x = velocity.x * de_p;
    fc_density_energy->y = velocity.y * de_p;
    fc_density_energy->z = velocity.z * de_p;
}

static void compute_velocity(float density, float3 momentum, float3 *velocity) {
    velocity->x = momentum.x / density;
    velocity->y = momentum.y / density;
    velocity->z = momentum.z / density;
}

static float compute_speed_sqd(float3 velocity) {
    return velocity.x * velocity.x + velocity.y * velocity.y + velocity.z * velocity.z;
}

static float compute_pressure(float density, float density_energy, float speed_sqd) {
    return ((float)(GAMMA) - (float)(1.0f)) * (density_energy - (float)(0.5f) * density * speed_sqd);
}

static float compute_speed_of_sound(float density, float pressure) {
    return sqrtf((float)(GAMMA) * pressure / density);
}

static void compute_step_factor(int nelr, float *variables, float *areas, float *step_factors) {
    for (int i = 0; i < nelr; i++) {
        float density = variables[i + VAR_DENSITY * nelr];
        float3 momentum;
        momentum.x = variables[i + (VAR_MOMENTUM + 0) * nelr];
        momentum.y = variables[i + (VAR_MOMENTUM + 1) * nelr];
        momentum.z = variables[i + (VAR_MOMENTUM + 2) * nelr];
        float density_energy = variables[i + VAR_DENSITY_ENERGY * nelr];
        float3 velocity;
        compute_velocity(density, momentum, &velocity);
        float speed_sqd = compute_speed_sqd(velocity);
        float pressure = compute_pressure(density, density_energy, speed_sqd);
        float speed_of_sound = compute_speed_of_sound(density, pressure);
        step_factors[i] = (float)(0.5f) / (sqrtf(areas[i]) * (sqrtf(speed_sqd) + speed_of_sound));
    }
}

static void compute_flux(int nelr, int *elements_surrounding_elements, float *normals,
                         float *variables, float *fluxes, float *ff_variable,
                         float3 ff_flux_contribution_momentum_x, float3 ff_flux_contribution_momentum_y,
                         float3 ff_flux_contribution_momentum_z,
                         float3 ff_flux_contribution_density_energy) {
    const float smoothing_coefficient = (float)(0.2f);
    for (int i = 0; i < nelr; ++i) {
        float density_i = variables[i + VAR_DENSITY * nelr];
        float3 momentum_i;
        momentum_i.x = variables[i + (VAR_MOMENTUM + 0) * nelr];
        momentum_i.y = variables[i + (VAR_MOMENTUM + 1) * nelr];
        momentum_i.z = variables[i + (VAR_MOMENTUM + 2) * nelr];
        float density_energy_i = variables[i + VAR_DENSITY_ENERGY * nelr];
        float3 velocity_i;
        compute_velocity(density_i, momentum_i, &velocity_i);
        float speed_sqd_i = compute_speed_sqd(velocity_i);
        float speed_i = sqrtf(speed_sqd_i);
        float pressure_i = compute_pressure(density_i, density_energy_i, speed_sqd_i);
        float speed_of_sound_i = compute_speed_of_sound(density_i, pressure_i);
        float3 fc_i_mx, fc_i_my, fc_i_mz, fc_i_de;
        compute_flux_contribution(density_i, momentum_i, density_energy_i, pressure_i, velocity_i,
                                  &fc_i_mx, &fc_i_my, &fc_i_mz, &fc_i_de);
        float flux_i_density = (float)(0.0f);
        float3 flux_i_momentum;
        flux_i_momentum.x = (float)(0.0f);
        flux_i_momentum.y = (float)(0.0f);
        flux_i_momentum.z = (float)(0.0f);
        float flux_i_density_energy = (float)(0.0f);
        float3 velocity_nb, momentum_nb, fc_nb_mx, fc_nb_my, fc_nb_mz, fc_nb_de;
        float density_nb, density_energy_nb, speed_sqd_nb, speed_of_sound_nb, pressure_nb;
        for (int j = 0; j < NNB; j++) {
            float3 normal;
            float normal_len, factor;
            int nb = elements_surrounding_elements[i + j * nelr];
            normal.x = normals[i + (j + 0 * NNB) * nelr];
            normal.y = normals[i + (j + 1 * NNB) * nelr];
            normal.z = normals[i + (j + 2 * NNB) * nelr];
            normal_len = sqrtf(normal.x * normal.x + normal.y * normal.y + normal.z * normal.z);
            if (nb >= 0) { /* a legitimate neighbor */
                density_nb = variables[nb + VAR_DENSITY * nelr];
                momentum_nb.x = variables[nb + (VAR_MOMENTUM + 0) * nelr];
                momentum_nb.y = variables[nb + (VAR_MOMENTUM + 1) * nelr];
                momentum_nb.z = variables[nb + (VAR_MOMENTUM + 2) * nelr];
                density_energy_nb = variables[nb + VAR_DENSITY_ENERGY * nelr];
                compute_velocity(density_nb, momentum_nb, &velocity_nb);
                speed_sqd_nb = compute_speed_sqd(velocity_nb);
                pressure_nb = compute_pressure(density_nb, density_energy_nb, speed_sqd_nb);
                speed_of_sound_nb = compute_speed_of_sound(density_nb, pressure_nb);
                compute_flux_contribution(density_nb, momentum_nb, density_energy_nb, pressure_nb,
                                          velocity_nb, &fc_nb_mx, &fc_nb_my, &fc_nb_mz, &fc_nb_de);
                factor = -normal_len * smoothing_coefficient * (float)(0.5f) *
                         (speed_i + sqrtf(speed_sqd_nb) + speed_of_sound_i + speed_of_sound_nb);
                flux_i_density += factor * (density_i - density_nb);
                flux_i_density_energy += factor * (density_energy_i - density_energy_nb);
                flux_i_momentum.x += factor * (momentum_i.x - momentum_nb.x);
                flux_i_momentum.y += factor * (momentum_i.y - momentum_nb.y);
                flux_i_momentum.z += factor * (momentum_i.z - momentum_nb.z);
                factor = (float)(0.5f) * normal.x;
                flux_i_density += factor * (momentum_nb.x + momentum_i.x);
                flux_i_density_energy += factor * (fc_nb_de.x + fc_i_de.x);
                flux_i_momentum.x += factor * (fc_nb_mx.x + fc_i_mx.x);
                flux_i_momentum.y += factor * (fc_nb_my.x + fc_i_my.x);
                flux_i_momentum.z += factor * (fc_nb_mz.x + fc_i_mz.x);
                factor = (float)(0.5f) * normal.y;
                flux_i_density += factor * (momentum_nb.y + momentum_i.y);
                flux_i_density_energy += factor * (fc_nb_de.y + fc_i_de.y);
                flux_i_momentum.x += factor * (fc_nb_mx.y + fc_i_mx.y);
                flux_i_momentum.y += factor * (fc_nb_my.y + fc_i_my.y);
                flux_i_momentum.z += factor * (fc_nb_mz.y + fc_i_mz.y);
                factor = (float)(0.5f) * normal.z;
                flux_i_density += factor * (momentum_nb.z + momentum_i.z);
                flux_i_density_energy += factor * (fc_nb_de.z + fc_i_de.z);
                flux_i_momentum.x += factor * (fc_nb_mx.z + fc_i_mx.z);
                flux_i_momentum.y += factor * (fc_nb_my.z + fc_i_my.z);
                flux_i_momentum.z += factor * (fc_nb_mz.z + fc_i_mz.z);
            } else if (nb == -1) { /* a wing boundary */
                flux_i_momentum.x += normal.x * pressure_i;
                flux_i_momentum.y += normal.y * pressure_i;
                flux_i_momentum.z += normal.z * pressure_i;
            } else if (nb == -2) { /* a far field boundary */
                factor = (float)(0.5f) * normal.x;
                flux_i_density += factor * (ff_variable[VAR_MOMENTUM + 0] + momentum_i.x);
                flux_i_density_energy += factor * (ff_flux_contribution_density_energy.x + fc_i_de.x);
                flux_i_momentum.x += factor * (ff_flux_contribution_momentum_x.x + fc_i_mx.x);
                flux_i_momentum.y += factor * (ff_flux_contribution_momentum_y.x + fc_i_my.x);
                flux_i_momentum.z += factor * (ff_flux_contribution_momentum_z.x + fc_i_mz.x);
                factor = (float)(0.5f) * normal.y;
                flux_i_density += factor * (ff_variable[VAR_MOMENTUM + 1] + momentum_i.y);
                flux_i_density_energy += factor * (ff_flux_contribution_density_energy.y + fc_i_de.y);
                flux_i_momentum.x += factor * (ff_flux_contribution_momentum_x.y + fc_i_mx.y);
                flux_i_momentum.y += factor * (ff_flux_contribution_momentum_y.y + fc_i_my.y);
                flux_i_momentum.z += factor * (ff_flux_contribution_momentum_z.y + fc_i_mz.y);
                factor = (float)(0.5f) * normal.z;
                flux_i_density += factor * (ff_variable[VAR_MOMENTUM + 2] + momentum_i.z);
                flux_i_density_energy += factor * (ff_flux_contribution_density_energy.z + fc_i_de.z);
                flux_i_momentum.x += factor * (ff_flux_contribution_momentum_x.z + fc_i_mx.z);
                flux_i_momentum.y += factor * (ff_flux_contribution_momentum_y.z + fc_i_my.z);
                flux_i_momentum.z += factor * (ff_flux_contribution_momentum_z.z + fc_i_mz.z);
            }
        }
        fluxes[i + VAR_DENSITY * nelr] = flux_i_density;
        fluxes[i + (VAR_MOMENTUM + 0) * nelr] = flux_i_momentum.x;
        fluxes[i + (VAR_MOMENTUM + 1) * nelr] = flux_i_momentum.y;
        fluxes[i + (VAR_MOMENTUM + 2) * nelr] = flux_i_momentum.z;
        fluxes[i + VAR_DENSITY_ENERGY * nelr] = flux_i_density_energy;
    }
}

static void time_step(int j, int nelr, float *old_variables, float *variables, float *step_factors,
                      float *fluxes) {
    for (int i = 0; i < nelr; ++i) {
        float factor = step_factors[i] / (float)(RK + 1 - j);
        for (int v = 0; v < NVAR; v++)
            variables[i + v * nelr] = old_variables[i + v * nelr] + factor * fluxes[i + v * nelr];
    }
}

int main(int argc, char **argv) {
    int nel = arg_int(argc, argv, 2), iterations = arg_int(argc, argv, 3), nelr = nel;
    lcg_seed((uint32_t)arg_int(argc, argv, 4));
    float ff_variable[NVAR];
    float3 ff_fc_mx, ff_fc_my, ff_fc_mz, ff_fc_de;
    {
        const float angle_of_attack = (float)(3.1415926535897931 / 180.0f) * (float)(deg_angle_of_attack);
        ff_variable[VAR_DENSITY] = (float)(1.4);
        float ff_pressure = (float)(1.0f);
        float ff_speed_of_sound = sqrt(GAMMA * ff_pressure / ff_variable[VAR_DENSITY]);
        float ff_speed = (float)(ff_mach)*ff_speed_of_sound;
        float3 ff_velocity;
        ff_velocity.x = ff_speed * (float)(cos((float)angle_of_attack));
        ff_velocity.y = ff_speed * (float)(sin((float)angle_of_attack));
        ff_velocity.z = 0.0f;
        ff_variable[VAR_MOMENTUM + 0] = ff_variable[VAR_DENSITY] * ff_velocity.x;
        ff_variable[VAR_MOMENTUM + 1] = ff_variable[VAR_DENSITY] * ff_velocity.y;
        ff_variable[VAR_MOMENTUM + 2] = ff_variable[VAR_DENSITY] * ff_velocity.z;
        ff_variable[VAR_DENSITY_ENERGY] = ff_variable[VAR_DENSITY] * ((float)(0.5f) * (ff_speed * ff_speed)) +
                                          (ff_pressure / (float)(GAMMA - 1.0f));
        float3 ff_momentum = {ff_variable[VAR_MOMENTUM + 0], ff_variable[VAR_MOMENTUM + 1],
                              ff_variable[VAR_MOMENTUM + 2]};
        compute_flux_contribution(ff_variable[VAR_DENSITY], ff_momentum, ff_variable[VAR_DENSITY_ENERGY],
                                  ff_pressure, ff_velocity, &ff_fc_mx, &ff_fc_my, &ff_fc_mz, &ff_fc_de);
    }
    float *areas = malloc(sizeof(float) * nelr);
    int *elements_surrounding_elements = malloc(sizeof(int) * nelr * NNB);
    float *normals = malloc(sizeof(float) * NDIM * NNB * nelr);
    for (int i = 0; i < nel; i++) {
        areas[i] = 1.0f + lcg_unit();
        for (int j = 0; j < NNB; j++) {
            elements_surrounding_elements[i + j * nelr] = lcg_int(nel + 2) - 2;
            for (int k = 0; k < NDIM; k++)
                normals[i + (j + k * NNB) * nelr] = 0.1f * lcg_unit() - 0.05f;
        }
    }
    float *variables = malloc(sizeof(float) * nelr * NVAR);
    for (int i = 0; i < nelr; i++)
        for (int j = 0; j < NVAR; j++) variables[i + j * nelr] = ff_variable[j];
    float *old_variables = malloc(sizeof(float) * nelr * NVAR);
    float *fluxes = malloc(sizeof(float) * nelr * NVAR);
    float *step_factors = malloc(sizeof(float) * nelr);
    for (int i = 0; i < iterations; i++) {
        for (int v = 0; v < nelr * NVAR; v++) old_variables[v] = variables[v];
        compute_step_factor(nelr, variables, areas, step_factors);
        for (int j = 0; j < RK; j++) {
            compute_flux(nelr, elements_surrounding_elements, normals, variables, fluxes, ff_variable,
                         ff_fc_mx, ff_fc_my, ff_fc_mz, ff_fc_de);
            time_step(j, nelr, old_variables, variables, step_factors, fluxes);
        }
    }
    FILE *f = out_open(argv[1]);
    out_f32(f, variables, nelr * NVAR);
    out_f32(f, step_factors, nelr);
    out_f32(f, ff_variable, NVAR);
    fclose(f);
    return 0;
}
