"""cfd (Rodinia openmp/cfd/euler3d_cpu.cpp): per iteration the host driver copies the
variables, dispatches compute_step_factor, then for each of the three Runge-Kutta stages
compute_flux and time_step, one invocation per mesh element each, with the original's
helper functions (velocity, pressure, speed of sound, flux contributions) written once as
Python functions that build the same f32 expressions. C: c/cfd.c."""

from __future__ import annotations

import math
from functools import cache

import numpy as np

from vyre import ProgramBuilder, f32, i32
from vyre.builder import BufferRef, Value, sqrt
from vyre.interface import Backend
from vyre.ir.nodes import Program

from .common import F, Lcg, groups, resident

ARGS = {"nel": 1024, "iterations": 4, "seed": 11}
WG = 64
GAMMA, NNB, RK, NVAR = 1.4, 4, 3, 5
DENSITY, MOMENTUM, DENSITY_ENERGY = 0, 1, 4
#: the far-field state and flux contributions, passed as params
FF = ("ff_mx", "ff_my", "ff_mz", *(f"ff_fc_{c}_{a}" for c in ("mx", "my", "mz", "de")
                                   for a in "xyz"))
Vec = tuple[Value, Value, Value]


def velocity(density: Value, momentum: Vec) -> Vec:
    return (momentum[0] / density, momentum[1] / density, momentum[2] / density)


def speed_sqd(v: Vec) -> Value:
    return v[0] * v[0] + v[1] * v[1] + v[2] * v[2]


def pressure(k: ProgramBuilder, density: Value, density_energy: Value, ssqd: Value) -> Value:
    return (k.lit(GAMMA) - 1.0) * (density_energy - 0.5 * density * ssqd)


def speed_of_sound(density: Value, p: Value) -> Value:
    return sqrt(GAMMA * p / density)


def flux_contribution(k: ProgramBuilder, momentum: Vec, density_energy: Value, p: Value,
                      v: Vec) -> tuple[Vec, Vec, Vec, Vec]:
    """compute_flux_contribution: (fc_momentum_x, _y, _z, fc_density_energy), as locals."""
    mx = (k.let(v[0] * momentum[0] + p), k.let(v[0] * momentum[1]), k.let(v[0] * momentum[2]))
    my = (mx[1], k.let(v[1] * momentum[1] + p), k.let(v[1] * momentum[2]))
    mz = (mx[2], my[2], k.let(v[2] * momentum[2] + p))
    de_p = k.let(density_energy + p)
    return mx, my, mz, (k.let(v[0] * de_p), k.let(v[1] * de_p), k.let(v[2] * de_p))


def load_state(k: ProgramBuilder, variables: BufferRef, i: Value, nelr: Value
               ) -> tuple[Value, Vec, Value]:
    d = k.let(variables[i + DENSITY * nelr])
    m = (k.let(variables[i + MOMENTUM * nelr]), k.let(variables[i + (MOMENTUM + 1) * nelr]),
         k.let(variables[i + (MOMENTUM + 2) * nelr]))
    return d, m, k.let(variables[i + DENSITY_ENERGY * nelr])


@cache
def step_factor_program() -> Program:
    k = ProgramBuilder("rodinia_cfd_step_factor", WG)
    variables, areas = k.buffer("variables", f32), k.buffer("areas", f32)
    step_factors = k.buffer("step_factors", f32, "write")
    nelr = k.param("nelr", i32)
    i = k.let(k.global_id(0).cast(i32))
    with k.if_(i < nelr):
        density, momentum, density_energy = load_state(k, variables, i, nelr)
        v = velocity(density, momentum)
        ssqd = k.let(speed_sqd((k.let(v[0]), k.let(v[1]), k.let(v[2]))))
        p = k.let(pressure(k, density, density_energy, ssqd))
        sos = k.let(speed_of_sound(density, p))
        step_factors[i] = 0.5 / (sqrt(areas[i]) * (sqrt(ssqd) + sos))
    return k.build()


@cache
def flux_program() -> Program:
    k = ProgramBuilder("rodinia_cfd_flux", WG)
    neighbours = k.buffer("elements_surrounding_elements", i32)
    normals, variables = k.buffer("normals", f32), k.buffer("variables", f32)
    fluxes = k.buffer("fluxes", f32, "write")
    nelr = k.param("nelr", i32)
    ff = {n: k.param(n, f32) for n in FF}
    i = k.let(k.global_id(0).cast(i32))
    with k.if_(i < nelr):
        density_i, momentum_i, density_energy_i = load_state(k, variables, i, nelr)
        v = velocity(density_i, momentum_i)
        velocity_i = (k.let(v[0]), k.let(v[1]), k.let(v[2]))
        speed_sqd_i = k.let(speed_sqd(velocity_i))
        speed_i = k.let(sqrt(speed_sqd_i))
        pressure_i = k.let(pressure(k, density_i, density_energy_i, speed_sqd_i))
        speed_of_sound_i = k.let(speed_of_sound(density_i, pressure_i))
        fc_i = flux_contribution(k, momentum_i, density_energy_i, pressure_i, velocity_i)
        f_density = k.let(0.0)
        f_mom = (k.let(0.0), k.let(0.0), k.let(0.0))
        f_de = k.let(0.0)
        ff_fc: list[Vec] = [(ff[f"ff_fc_{c}_x"], ff[f"ff_fc_{c}_y"], ff[f"ff_fc_{c}_z"])
                            for c in ("mx", "my", "mz", "de")]
        ff_m = (ff["ff_mx"], ff["ff_my"], ff["ff_mz"])
        with k.for_range(0, NNB, ty=i32) as j:
            nb = k.let(neighbours[i + j * nelr])
            normal = tuple(k.let(normals[i + (j + a * NNB) * nelr]) for a in range(3))
            normal_len = k.let(sqrt(normal[0] * normal[0] + normal[1] * normal[1]
                                    + normal[2] * normal[2]))

            def add_faces(mom_other: Vec, fc_other: list[Vec] | tuple[Vec, ...]) -> None:
                """The three `factor = 0.5 * normal.a` blocks, shared by both cases."""
                for a in range(3):
                    factor = k.let(0.5 * normal[a])
                    f_density.set(f_density + factor * (mom_other[a] + momentum_i[a]))
                    f_de.set(f_de + factor * (fc_other[3][a] + fc_i[3][a]))
                    for c in range(3):
                        f_mom[c].set(f_mom[c] + factor * (fc_other[c][a] + fc_i[c][a]))

            with k.if_(nb >= 0):  # a legitimate neighbour
                density_nb, momentum_nb, density_energy_nb = load_state(k, variables, nb, nelr)
                vn = velocity(density_nb, momentum_nb)
                velocity_nb = (k.let(vn[0]), k.let(vn[1]), k.let(vn[2]))
                speed_sqd_nb = k.let(speed_sqd(velocity_nb))
                pressure_nb = k.let(pressure(k, density_nb, density_energy_nb, speed_sqd_nb))
                speed_of_sound_nb = k.let(speed_of_sound(density_nb, pressure_nb))
                fc_nb = flux_contribution(k, momentum_nb, density_energy_nb, pressure_nb,
                                          velocity_nb)
                factor = k.let(-normal_len * 0.2 * 0.5 * (speed_i + sqrt(speed_sqd_nb)
                                                          + speed_of_sound_i + speed_of_sound_nb))
                f_density.set(f_density + factor * (density_i - density_nb))
                f_de.set(f_de + factor * (density_energy_i - density_energy_nb))
                for c in range(3):
                    f_mom[c].set(f_mom[c] + factor * (momentum_i[c] - momentum_nb[c]))
                add_faces(momentum_nb, fc_nb)
            with k.else_():
                with k.if_(nb == -1):  # a wing boundary
                    for c in range(3):
                        f_mom[c].set(f_mom[c] + normal[c] * pressure_i)
                with k.else_(), k.if_(nb == -2):  # a far-field boundary
                    add_faces(ff_m, ff_fc)
        fluxes[i + DENSITY * nelr] = f_density
        for c in range(3):
            fluxes[i + (MOMENTUM + c) * nelr] = f_mom[c]
        fluxes[i + DENSITY_ENERGY * nelr] = f_de
    return k.build()


@cache
def time_step_program() -> Program:
    k = ProgramBuilder("rodinia_cfd_time_step", WG)
    old, step_factors = k.buffer("old_variables", f32), k.buffer("step_factors", f32)
    fluxes = k.buffer("fluxes", f32)
    variables = k.buffer("variables", f32, "write")
    nelr, j = k.param("nelr", i32), k.param("j", i32)
    i = k.let(k.global_id(0).cast(i32))
    with k.if_(i < nelr):
        factor = k.let(step_factors[i] / (RK + 1 - j).cast(f32))
        for v in range(NVAR):
            variables[i + v * nelr] = old[i + v * nelr] + factor * fluxes[i + v * nelr]
    return k.build()


@cache
def copy_program() -> Program:
    k = ProgramBuilder("rodinia_cfd_copy", WG)
    src, dst = k.buffer("src", f32), k.buffer("dst", f32, "write")
    i = k.let(k.global_id(0))
    with k.if_(i < dst.length()):
        dst[i] = src[i]
    return k.build()


def far_field() -> tuple[np.ndarray, dict[str, np.float32]]:
    """main()'s far-field variables and flux contributions (host code, with its doubles)."""
    density, ff_pressure = F(1.4), F(1.0)
    ff_speed = F(1.2) * F(math.sqrt(GAMMA * float(ff_pressure) / float(density)))
    vel = (ff_speed * F(1.0), ff_speed * F(0.0), F(0.0))  # cos(0), sin(0): angle of attack 0
    mom = tuple(density * c for c in vel)
    energy = density * (F(0.5) * (ff_speed * ff_speed)) + (ff_pressure / F(GAMMA - 1.0))
    mx = (vel[0] * mom[0] + ff_pressure, vel[0] * mom[1], vel[0] * mom[2])
    my = (mx[1], vel[1] * mom[1] + ff_pressure, vel[1] * mom[2])
    mz = (mx[2], my[2], vel[2] * mom[2] + ff_pressure)
    de_p = energy + ff_pressure
    de = (vel[0] * de_p, vel[1] * de_p, vel[2] * de_p)
    params = {"ff_mx": mom[0], "ff_my": mom[1], "ff_mz": mom[2]}
    for name, vec in (("mx", mx), ("my", my), ("mz", mz), ("de", de)):
        params.update({f"ff_fc_{name}_{a}": vec[n] for n, a in enumerate("xyz")})
    return np.array([density, *mom, energy], np.float32), params


def run(backend: Backend, nel: int, iterations: int, seed: int) -> list[np.ndarray]:
    lcg = Lcg(seed)
    areas = np.empty(nel, np.float32)
    nbs = np.empty((NNB, nel), np.int32)
    normals = np.empty((3, NNB, nel), np.float32)
    for i in range(nel):  # the C draws element by element, neighbour by neighbour
        areas[i] = F(1.0) + lcg.unit(1)[0]
        for j in range(NNB):
            nbs[j, i] = lcg.ints(1, nel + 2)[0] - 2
            normals[:, j, i] = F(0.1) * lcg.unit(3) - F(0.05)
    ff_variable, ff_params = far_field()
    variables = np.repeat(ff_variable, nel)
    p = {"nelr": nel}
    grid = groups(nel, WG)
    with resident(backend) as dev:
        var = dev.put(variables, "variables")
        old = dev.put(variables, "old_variables")
        flux = dev.put(np.zeros_like(variables), "fluxes")
        sf = dev.put(np.zeros(nel, np.float32), "step_factors")
        mesh = {"elements_surrounding_elements": dev.put(nbs.ravel(), "nbs"),
                "normals": dev.put(normals.ravel(), "normals")}
        ar = dev.put(areas, "areas")
        for _ in range(iterations):
            dev.run(copy_program(), {"src": var}, {"dst": old}, groups(nel * NVAR, WG))
            dev.run(step_factor_program(), {"variables": var, "areas": ar},
                    {"step_factors": sf}, grid, p)
            for j in range(RK):
                dev.run(flux_program(), {**mesh, "variables": var}, {"fluxes": flux}, grid,
                        {**p, **ff_params})
                dev.run(time_step_program(),
                        {"old_variables": old, "step_factors": sf, "fluxes": flux},
                        {"variables": var}, grid, {**p, "j": j})
        return [dev.get(var, np.float32, nel * NVAR), dev.get(sf, np.float32, nel), ff_variable]
