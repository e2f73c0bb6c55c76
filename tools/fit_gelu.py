#!/usr/bin/env python3
"""Fits kernels/cpu/vmath512.c's tables for gelu on |x| < 4.

gelu(x) = x F(x), F = Phi (the erf form: erfc(-x / sqrt 2) / 2) or
sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3) (the tanh form). F on the 16
intervals [j/2, j/2 + 1/2), j = -8..7, as a degree-7 polynomial in u = x -
j/2 each: from the left end, so that where F is steep (x < -2) the constant
term is the smallest and every term adds. Least squares of the relative
error on Chebyshev nodes, one coefficient rounded to float32 at a time from
the constant term up, the rest refitted around it (so the higher terms
absorb the rounding of the lower). Prints each table as vmath512.c holds
it: row k is the u^k coefficient, column j mod 16.
Run: .venv/bin/python tools/fit_gelu.py
"""
import math

import numpy as np

DEG, LO, HI = 7, -0.0002, 0.5002  # a little past [0, 1/2]: 2x - 1/2 rounded to an integer can land on either side
K0, K1 = math.sqrt(2.0 / math.pi), 0.044715


def phi(x):
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def sigmoid_2u(x):
    return 1.0 / (1.0 + math.exp(-2.0 * K0 * (x + K1 * x**3)))


def fit(f, a):
    u = LO + (HI - LO) * (1 + np.cos(np.pi * (np.arange(400) + 0.5) / 400)) / 2
    y = np.array([f(a + t) for t in u])
    coef = []
    for k in range(DEG + 1):
        r = y - sum(ck * u**i for i, ck in enumerate(coef))
        v = np.vstack([u**i for i in range(k, DEG + 1)]).T / y[:, None]
        sol, *_ = np.linalg.lstsq(v, r / y, rcond=None)
        coef.append(float(np.float32(sol[0])))
    ut = np.linspace(LO, HI, 4001)
    yt = np.array([f(a + t) for t in ut])
    err = np.max(np.abs(sum(ck * ut**i for i, ck in enumerate(coef)) / yt - 1))
    return coef, err


def table(name, f):
    rows = [[0.0] * 16 for _ in range(DEG + 1)]
    worst = 0.0
    for j in range(-8, 8):
        coef, err = fit(f, j / 2)
        worst = max(worst, err)
        for k in range(DEG + 1):
            rows[k][j % 16] = coef[k]
    print("/* %s: fit error at most %.2f x 2^-24 */" % (name, worst / 2**-24))
    for row in rows:
        print("{" + ", ".join("%.9g" % v for v in row) + "},")


def main():
    table("Phi(x)", phi)
    table("sigmoid(2u)", sigmoid_2u)


if __name__ == "__main__":
    main()
